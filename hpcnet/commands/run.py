"""`hpcnet run [reframe args]`: the suite with ReFrame, its report kept."""
from __future__ import annotations

from hpcnet import argtypes, runner
from hpcnet.commands.parser import pass_through


def run(args) -> int:
    return runner.run_suite(args.report_name,
                            [*args.reframe_args, *runner.repeats_args(args.repeats)]).code


def add_options(p) -> None:
    '''The options of `hpcnet run` (also of `hpcnet testbed run`).'''
    p.add_argument('--report-name', default='run',
                   help='report name: reports/<name>-latest.json and .html (the default, run, '
                        'writes reports/latest.json); ReFrame\'s -n/--name select checks')
    p.add_argument('--repeats', type=argtypes.positive_int, default=1,
                   help='samples of every metric (ReFrame --reruns K-1; default 1)')
    pass_through(p, 'run')
    p.set_defaults(func=run)


def add_parser(sub) -> None:
    add_options(sub.add_parser('run', help='run the suite with ReFrame'))
