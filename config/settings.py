"""ReFrame configuration of hpcnet (`reframe -C config/settings.py`).

Loading it calls hpcnet.siteconfig.reframeconfig.configuration(): that runs the site
files (config/systems/, HPCNET_SYSTEMS_DIRS), discovers the MPI stacks (a
file read while its cache holds; the probe says on stderr when it runs),
creates the reports directory, and stops a session that could not judge
(one line, exit 2).  Its docstring says all it does.
"""
import os

from hpcnet.siteconfig import reframeconfig
from hpcnet.constants import CHECKS_DIR, DEFAULT_REPORTS_DIR, PERFLOG_DIR

_hpcnet = reframeconfig.configuration()
_REPORTS = str(DEFAULT_REPORTS_DIR)
_GENERAL = {
    'report_file': os.path.join(_REPORTS, 'run-report-{sessionid}.json'),
    'check_search_path': [str(CHECKS_DIR)],
    'check_search_recursive': True,     # as `hpcnet run -R`
    # A value per line for every variable of every case buries the verdict:
    # `-v` shows them; the perflogs and the report always hold them.
    'perf_info_level': 'verbose',
    # Module loads are the job's (Lmod resolves its own conflicts there): a
    # load inside ReFrame takes a module's path away again after it, which
    # closes the hierarchy level a compiler module opened (hpcnet.stacks.modules).
    'resolve_module_conflicts': False,
}

site_configuration = {
    'systems': _hpcnet.systems,
    'environments': _hpcnet.environments,
    # A site file's own settings (its scheduler's poll rates) before the
    # common ones: ReFrame takes the first entry that names the system.
    'general': [*({**_GENERAL, **own} for own in _hpcnet.system_general), _GENERAL],
    # ReFrame's results database, for `reframe --performance-compare`
    # (RFM_SQLITE_DB_FILE moves it to storage that outlives a CI job).
    'storage': [{'enable': True, 'sqlite_db_file': os.path.join(_REPORTS, 'results.db')}],
    'logging': [{
        # One perflog line per performance variable: the per-variable fields
        # of the format below are filled only in this mode.
        'perflog_multiline': True,
        'handlers': [{
            'type': 'stream', 'name': 'stdout', 'level': 'info', 'format': '%(message)s',
        }, {
            # A listing keeps its own log: the last run's survives it.
            'type': 'file', 'name': os.path.join(_REPORTS, _hpcnet.log_file),
            'level': 'debug', 'append': False,
            'format': '[%(asctime)s] %(levelname)s: %(check_info)s: %(message)s',
        }],
        'handlers_perflog': [{
            # One file per system/partition/test: every performance variable
            # of every run with its reference, bounds and verdict.
            'type': 'filelog', 'prefix': '%(check_system)s/%(check_partition)s',
            'basedir': str(PERFLOG_DIR), 'level': 'info', 'append': True,
            'format': ('%(check_job_completion_time)s|%(check_name)s|%(check_environ)s|'
                       '%(check_perf_var)s=%(check_perf_value)s|%(check_perf_unit)s|'
                       'ref=%(check_perf_ref)s (l=%(check_perf_lower_thres)s, '
                       'u=%(check_perf_upper_thres)s)|%(check_perf_result)s|%(check_judgement)s|'
                       '%(check_mpi_library)s|%(check_mpi_spec)s'),
        }],
    }],
}
