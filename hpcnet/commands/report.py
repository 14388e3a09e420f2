"""`hpcnet report [SESSIONS]`: one self-contained HTML page (also written by every run)."""
from __future__ import annotations

import json
from pathlib import Path

from hpcnet import exitcodes
from hpcnet.session import runner, verdict
from hpcnet.acceptance.comparison import compare, sides
from hpcnet.acceptance.report import report as hpcnet_report
from hpcnet.commands.compare import compare_sides
from hpcnet.commands.parser import add_results_db_option, write_output


def run(args) -> int:
    '''One HTML page of sessions (reports or stored sessions), or of a
    comparison, with the verdict `hpcnet run` or `hpcnet compare` gives
    them.  Without -o it goes beside the reports under a name of its own, so
    no page overwrites another: latest.html for the latest run (the page
    that run wrote), report-<first session>.html, compare-<before>-<after>.html.
    It exits with the verdict it prints (hpcnet.exitcodes): a page that says
    FAILED is a failed command, so a job that only renders still sees it.'''
    latest = runner.reports_dir() / 'latest.json'
    try:
        if args.compare:
            before, after, outcome = compare_sides(*args.compare, alpha=compare.ALPHA,
                                                   threshold=compare.THRESHOLD)
            page = hpcnet_report.render(
                before.reports + after.reports,
                title=f'hpcnet compare {args.compare[0]} {args.compare[1]}',
                verdict=f'{exitcodes.WORDS[outcome.exit_code]}: {outcome.summary()}',
                comparison_of=(outcome, before, after))
            code = outcome.exit_code
            name = f'compare-{before.sessions[0][:8]}-{after.sessions[0][:8]}.html'
        else:
            specs = args.sessions or [str(latest)]
            loaded = [sides.load_side(x) for x in specs]
            reports = [r for side in loaded for r in side.reports]
            retried = set().union(*(hpcnet_report.retried_keys(r) for r in reports))
            lines, code = verdict.reports_summary(reports)
            page = hpcnet_report.render(reports, retried, verdict=lines[-1],
                                        title='hpcnet ' + ' '.join(s.spec for s in loaded))
            name = ('latest.html' if [Path(s).resolve() for s in specs] == [latest.resolve()]
                    else f'report-{loaded[0].sessions[0][:8]}.html')
            # A stored session (of hpcnet run or plain reframe -r) gets its run report too.
            stored = [r for side in loaded if not Path(side.spec).is_file() for r in side.reports]
            for data in stored:
                path = runner.reports_dir() / f'report-{data["session_info"]["uuid"][:8]}.json'
                path.write_text(json.dumps(data, indent=1))
                runner.say(f'run report: {path}')
            for line in lines:
                runner.say(line)
    except sides.CompareError as err:
        raise runner.SelectionError(str(err)) from None
    output = Path(args.output) if args.output else runner.reports_dir() / name
    write_output(page, output, '-o', 'report')
    runner.say(f'HTML report: {output}')
    runner.say(f'{exitcodes.WORDS[code]}: exit code {int(code)}')
    return code


def add_parser(sub) -> None:
    p = sub.add_parser('report', help='one self-contained HTML page of sessions or a comparison; '
                                      'exits with the verdict it prints (0 PASSED, 1 FAILED, '
                                      '3 NOT DECIDED)')
    p.add_argument('sessions', nargs='*', help='reports or stored sessions (default: the latest run)')
    p.add_argument('--compare', nargs=2, metavar=('BEFORE', 'AFTER'),
                   help='a before/after page of two sides, as `hpcnet compare` takes them')
    p.add_argument('-o', '--output', metavar='FILE',
                   help='HTML file (default in <reports>: latest.html for the latest run, '
                        'report-<first session uuid, 8 characters>.html for other sessions, '
                        'compare-<before>-<after>.html for --compare)')
    add_results_db_option(p)
    p.set_defaults(func=run)
