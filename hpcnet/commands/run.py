"""`hpcnet run [reframe args]`: the suite with ReFrame, its report kept."""
from __future__ import annotations

from hpcnet import argtypes, runner


def run(args) -> int:
    return runner.run_suite(args.report_name,
                            [*args.reframe_args, *runner.repeats_args(args.repeats)]).code


def add_parser(sub) -> None:
    p = sub.add_parser('run', help='run the suite with ReFrame')
    p.add_argument('--report-name', default='run',
                   help='report name (reports/<name>-latest.json); ReFrame\'s -n/--name select checks')
    p.add_argument('--repeats', type=argtypes.positive_int, default=1,
                   help='samples of every metric (ReFrame --reruns K-1; default 1)')
    p.set_defaults(func=run, takes_reframe_args=True)
