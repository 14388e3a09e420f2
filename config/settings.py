"""ReFrame configuration of hpcnet.

Systems, one partition per fabric; the environments are not written here but
come from the stack model (hpcnet.stacks), so every system sees the same
compiler x MPI matrix.  Partition extras name the fabric and the interface or
RDMA device; the fabric table (config/fabrics.yaml) turns those into MPI
settings.
"""
import os

from hpcnet import sites
from hpcnet.constants import PROJECT_ROOT

# The debug log and the reports are written here; ReFrame does not create it.
os.makedirs(os.path.join(str(PROJECT_ROOT), 'reports'), exist_ok=True)

site_configuration = {
    'systems': sites.systems(),
    'environments': sites.environments(),
    'general': [{
        'report_file': os.path.join(str(PROJECT_ROOT), 'reports', 'run-report-{sessionid}.json'),
        'check_search_path': [os.path.join(str(PROJECT_ROOT), 'checks')],
    }],
    # ReFrame's results database: every session's performance values, for
    # `reframe --performance-compare` (RFM_SQLITE_DB_FILE moves it to storage
    # that outlives a CI job).
    'storage': [{
        'enable': True,
        'sqlite_db_file': os.path.join(str(PROJECT_ROOT), 'reports', 'results.db'),
    }],
    'logging': [{
        'handlers': [{
            'type': 'stream', 'name': 'stdout', 'level': 'info',
            'format': '%(message)s',
        }, {
            'type': 'file', 'name': os.path.join(str(PROJECT_ROOT), 'reports', 'reframe.log'),
            'level': 'debug',
            'format': '[%(asctime)s] %(levelname)s: %(check_info)s: %(message)s',
            'append': False,
        }],
        'handlers_perflog': [{
            # One file per system/partition/test, every performance variable
            # of every run with its reference and verdict.
            'type': 'filelog',
            'prefix': '%(check_system)s/%(check_partition)s',
            'basedir': os.path.join(str(PROJECT_ROOT), 'perflogs'),
            'level': 'info',
            'format': ('%(check_job_completion_time)s|%(check_name)s|%(check_environ)s|'
                       '%(check_perf_var)s=%(check_perf_value)s|%(check_perf_unit)s|'
                       'ref=%(check_perf_ref)s (l=%(check_perf_lower_thres)s, '
                       'u=%(check_perf_upper_thres)s)|%(check_perf_result)s|'
                       '%(check_mpi_library)s'),
            'format_perfvars': '',
            'append': True,
        }],
    }],
}
