"""ReFrame configuration of hpcnet.

Loading it does more than build a dictionary (as `reframe -C` users may not
expect):
- it creates the reports directory (the debug log's, which ReFrame does not
  create);
- it runs every site file (config/systems/, HPCNET_SYSTEMS_DIRS), which may
  register fabrics of its own;
- it discovers the MPI stacks (hpcnet.stacks): surveys the module tree where
  there is one, builds and runs a probe program per MPI and compiler, and
  writes its caches in the state directory; a cache that still holds makes
  this a file read, and the probe says on stderr when it runs;
- where environments load modules, it sets LMOD_CMD in this process (for
  ReFrame's Lmod backend and the jobs) if it is unset;
- for a session that runs or lists checks, it reads ReFrame's command line
  and stops it (exit 2, one line) where the host matches no site file, a
  system whose ranks share a host lacks --exec-policy=serial, a reference
  file is broken, or -p matches no environment.

Systems are files: every `config/systems/<name>.py` defines one (`local`, the
fallback for any host, comes last).  Each partition tests one fabric, declared
in its extras (hpcnet.model.partition_extras) and validated here, when the
configuration loads.  The environments are not written here but come from the
stack model (hpcnet.stacks); a partition that lists no `environs` gets every
one its site file's `stacks` admits (all, without it).
"""
import os
import socket
import sys

from hpcnet import stacks
from hpcnet.stacks import modules
from hpcnet.acceptance import references
from hpcnet.constants import CHECKS_DIR, DEFAULT_REPORTS_DIR, PERFLOG_DIR, REFRAME_PREFIX
from hpcnet.model import ConfigError
from hpcnet.reframeargs import is_option, named_system, option_values, unmatched_prgenv
from hpcnet.sites import (load_site_files, selected_site, shares_host_cores, system_directories,
                          unmatched_host)

REPORTS = str(DEFAULT_REPORTS_DIR)
# The debug log and the reports are written here; ReFrame does not create it.
os.makedirs(REPORTS, exist_ok=True)


def _discovery():
    # Each MPI is probed on every fabric one host can carry, whatever the
    # systems declare: an environment's fabric gaps are its own.
    try:
        return stacks.discover(site=selected_site(_sites, _named, socket.gethostname()))
    except stacks.StackError as err:
        # The configuration must still load so that `reframe --list` etc.
        # show the problem instead of a traceback.
        print(f'hpcnet: {err}', file=sys.stderr)
        return stacks.Discovery()


def _stop(message):
    print(f'hpcnet: error: {message}', file=sys.stderr)
    sys.exit(2)


try:
    _sites = load_site_files(*system_directories())
except ConfigError as _err:
    _stop(_err)
_systems = [_site.system for _site in _sites]
# A host that no site file names does not fall back to `local` (nor to
# ReFrame's `generic`) where site files exist: a session that would select
# or run checks stops here, unless --system (or RFM_SYSTEM) names one.
_SELECTING = ('-r', '--run', '--dry-run', '-l', '-L', '--list', '--list-detailed', '--describe',
              '--ci-generate')


_unmatched = unmatched_host(_systems, socket.gethostname())
_named = named_system(sys.argv, os.environ)
if _unmatched and not _named and any(is_option(a, _SELECTING) for a in sys.argv):
    _stop(_unmatched)

# What decides verdicts lives here, so that `reframe -C config/settings.py
# -c checks -r` judges as `hpcnet run` does (README, "hpcnet run and reframe -r").
if any(a in ('-r', '--run') for a in sys.argv):
    _chosen = selected_site(_sites, _named, socket.gethostname())
    # Timed jobs of one partition never overlap: its links are under test
    # (max_jobs below).  Where the ranks share one host's cores, jobs of
    # other partitions and builds disturb them too, and only the serial
    # policy keeps those apart: ReFrame 4.10 has no configuration key for it.
    if (_chosen and shares_host_cores(_chosen.system)
            and (option_values(sys.argv, '--exec-policy') or ['async'])[-1] != 'serial'):
        _stop(f"system {_chosen.system['name']} ({_chosen.path}): its ranks share the "
              'cores of one host, so timed runs must run one at a time: add '
              '--exec-policy=serial (ReFrame cannot set it in a configuration; `hpcnet run` '
              'adds it)')
    # A broken reference file stops the session before anything runs (else
    # every case of its system fails on it, one by one).
    if references.reference_dir().is_dir():
        try:
            references.validate_directory()
        except references.ReferenceFileError as err:
            _stop(err)
for _site in _sites:
    # Stage and output under the work directory, not wherever ReFrame was
    # started (`hpcnet run` gives each session its own --prefix).
    _site.system.setdefault('prefix', str(REFRAME_PREFIX))
    for _part in _site.system['partitions']:
        _part.setdefault('max_jobs', 1)
# Each system gets the environments its site file's `stacks` admits.
_environments = stacks.site_environments(_discovery(), _sites)
# A -p that matches no environment would select nothing, and ReFrame pass.
if any(is_option(a, _SELECTING) for a in sys.argv):
    _unmatched_prgenv = unmatched_prgenv(sys.argv, [e['name'] for e in _environments])
    if _unmatched_prgenv:
        _stop(_unmatched_prgenv)
# Environments that load modules need ReFrame's Lmod backend (hpcnet.stacks.modules).
modules.configure_reframe(_systems, _environments)

_GENERAL = {
    'report_file': os.path.join(REPORTS, 'run-report-{sessionid}.json'),
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
# A listing keeps its own log: the last run's reports/reframe.log survives it.
_LISTING = ('-l', '-L', '--list', '--list-detailed', '--describe', '--list-tags')
_LOG_FILE = ('reframe-listing.log'
             if any(a.split('=', 1)[0] in _LISTING for a in sys.argv)
             and not any(a in ('-r', '--run', '--dry-run') for a in sys.argv) else 'reframe.log')

site_configuration = {
    'systems': _systems,
    'environments': _environments,
    # How often ReFrame looks whether a job ended.  Its default decays from
    # 10 Hz to 0.1 Hz, so a case ends up to 10 s late.  A local job's status
    # is a waitpid(): 10-50 Hz (faster, ReFrame takes the ranks' cores).  A
    # Slurm job's is an sacct call: 10 Hz down to 4 Hz.  Measurements:
    # docs/measurements.md, "Where the time goes".
    'general': [{
        **_GENERAL, 'target_systems': ['local'],
        'poll_rate_max': 50, 'poll_rate_min': 10, 'poll_rate_decay': 0.1,
    }, {
        **_GENERAL, 'target_systems': ['testbed'],
        'poll_rate_max': 10, 'poll_rate_min': 4, 'poll_rate_decay': 0.1,
    }, _GENERAL],
    # ReFrame's results database: every session's performance values, for
    # `reframe --performance-compare` (RFM_SQLITE_DB_FILE moves it to storage
    # that outlives a CI job).
    'storage': [{
        'enable': True,
        'sqlite_db_file': os.path.join(REPORTS, 'results.db'),
    }],
    'logging': [{
        # One perflog line per performance variable: the per-variable fields
        # of the format below are filled only in this mode (otherwise every
        # line reads 'null=null').
        'perflog_multiline': True,
        'handlers': [{
            'type': 'stream', 'name': 'stdout', 'level': 'info',
            'format': '%(message)s',
        }, {
            'type': 'file', 'name': os.path.join(REPORTS, _LOG_FILE),
            'level': 'debug',
            'format': '[%(asctime)s] %(levelname)s: %(check_info)s: %(message)s',
            'append': False,
        }],
        'handlers_perflog': [{
            # One file per system/partition/test: every performance variable
            # of every run, one per line, with its reference, bounds and
            # verdict (perflog_multiline below).
            'type': 'filelog',
            'prefix': '%(check_system)s/%(check_partition)s',
            'basedir': str(PERFLOG_DIR),
            'level': 'info',
            'format': ('%(check_job_completion_time)s|%(check_name)s|%(check_environ)s|'
                       '%(check_perf_var)s=%(check_perf_value)s|%(check_perf_unit)s|'
                       'ref=%(check_perf_ref)s (l=%(check_perf_lower_thres)s, '
                       'u=%(check_perf_upper_thres)s)|%(check_perf_result)s|%(check_judgement)s|'
                       '%(check_mpi_library)s|%(check_mpi_spec)s'),
            'append': True,
        }],
    }],
}
