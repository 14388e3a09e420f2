"""`hpcnet paper [--report R]`: the Rocks cluster paper's tables beside a testbed session."""
from __future__ import annotations

from pathlib import Path

from hpcnet.session import runner
from hpcnet.acceptance.references import references
from hpcnet.testbed import paper


def run(args) -> int:
    report = Path(args.report) if args.report else runner.reports_dir() / 'testbed-latest.json'
    try:
        print(paper.tables(references.load_report(report)))
    except paper.PaperError as err:
        raise runner.SelectionError(f'{report}: {err}') from None
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser('paper', help="the Rocks cluster paper's Tables I-IV beside a testbed session")
    p.add_argument('--report', help='ReFrame JSON report (default reports/testbed-latest.json)')
    p.set_defaults(func=run, needs_work_dir=False)
