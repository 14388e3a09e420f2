"""`hpcnet run [reframe args]`: the suite with ReFrame, its report kept."""
from __future__ import annotations

import contextlib
import os
import socket

from hpcnet import argtypes
from hpcnet.session import runner
from hpcnet.commands.parser import add_results_db_option, pass_through
from hpcnet.paths import WORK_DIR
from hpcnet.siteconfig.reframeargs import is_option, named_system

#: The system of the testbed's site file (config/systems/testbed.py).
TESTBED_SYSTEM = 'testbed'


def _inside_the_head_node() -> bool:
    '''Whether this process runs on a testbed's head node with its Slurm
    configuration (as a pipeline's wrapper starts hpcnet there): its Slurm
    clients reach the testbed's controller from here.'''
    from hpcnet.testbed.config import HEAD
    return socket.gethostname() == HEAD and bool(os.environ.get('SLURM_CONF'))


@contextlib.contextmanager
def on_the_testbed_named(reframe_args: list):
    '''With --system testbed (or RFM_SYSTEM=testbed), the sessions inside
    run as `hpcnet testbed run` runs them: inside the head node of the
    testbed that is up, with its SLURM_CONF and its node count.  Only there
    is the testbed's slurmctld reachable (the host's namespace has no route
    to it: sbatch fails every case).  A listing or dry run submits nothing
    and runs on the host where no testbed is up; a session that submits
    jobs without a testbed up is the user's error, said before ReFrame runs.'''
    if runner.launched() or _inside_the_head_node() or \
            named_system(reframe_args, os.environ).split(':')[0] != TESTBED_SYSTEM:
        yield
        return
    from hpcnet import testbed
    try:
        tb = testbed.Testbed()
        up = tb.is_up()
    except testbed.TestbedError as err:
        raise runner.SelectionError(f'--system {TESTBED_SYSTEM}: {err}') from None
    submits = not any(is_option(a, (*runner.LISTING_OPTIONS, '--dry-run')) for a in reframe_args)
    if not up and submits:
        raise runner.SelectionError(
            f'--system {TESTBED_SYSTEM}: testbed {tb.name} is not up (no complete '
            f'{tb.state_file}): run `hpcnet testbed run ...` (up, the suite, down), or '
            '`hpcnet testbed up` first')
    if not up:
        yield
        return
    if os.geteuid() != 0:
        raise runner.SelectionError(
            f'--system {TESTBED_SYSTEM}: the sessions run inside the head node of testbed '
            f'{tb.name}, which needs root (nsenter), as `hpcnet testbed run` does')
    runner.say(f'testbed {tb.name} is up: ReFrame runs inside its head node '
               f'(SLURM_CONF={tb.slurm_conf})')
    with runner.launched_through(tb.head_prefix(cwd=str(WORK_DIR)), tb.env):
        yield


def run(args) -> int:
    with on_the_testbed_named(args.reframe_args):
        return runner.run_suite(args.report_name,
                                [*args.reframe_args, *runner.repeats_args(args.repeats)]).code


def add_options(p) -> None:
    '''The options of `hpcnet run` (also of `hpcnet testbed run`).'''
    p.add_argument('--report-name', default='run',
                   help='report name: reports/<name>-latest.json and .html (the default, run, '
                        'writes reports/latest.json); ReFrame\'s -n/--name select checks')
    p.add_argument('--repeats', type=argtypes.positive_int, default=1,
                   help='samples of every metric (ReFrame --reruns K-1; default 1)')
    add_results_db_option(p)
    pass_through(p, 'run')
    p.set_defaults(func=run)


def add_parser(sub) -> None:
    add_options(sub.add_parser('run', help='run the suite with ReFrame'))
