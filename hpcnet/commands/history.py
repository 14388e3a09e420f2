"""`hpcnet history`: every metric's trend over the stored sessions, the
session each changed, and the verdict (hpcnet.acceptance.history.history states the
rule); ``--output FILE`` writes the trend page."""
from __future__ import annotations

import re
from pathlib import Path

from hpcnet import argtypes, exitcodes
from hpcnet.longwork import forked
from hpcnet.session import runner
from hpcnet.acceptance.comparison import sides
from hpcnet.acceptance.history import (history, history_index, history_text, levels, metricindex,
                                       stored_series)
from hpcnet.acceptance.references import accepted_changes as accepted
from hpcnet.acceptance.report import report as hpcnet_report
from hpcnet.commands.parser import add_option, add_results_db_option, write_output
from hpcnet.longwork.progress import phase


def run(args) -> int:
    if args.min_segment < 2:
        raise runner.SelectionError(f'--min-segment {args.min_segment}: a level of one session '
                                    'is one bad night, not a change (valid: 2 or more)')
    if bool(args.acknowledge) != bool(args.why):
        raise runner.SelectionError('--acknowledge and --why go together (valid: --acknowledge '
                                    'SESSION_UUID[:REGEX] --why TEXT)')
    try:
        # With --acknowledge the history is judged again: the page is drawn then.
        found, drawing = _load(args, draw=bool(args.output) and not args.acknowledge)
        if args.acknowledge:
            found, drawing = _acknowledge(args, found)
    except (stored_series.HistoryError, accepted.AcceptedError) as err:
        raise runner.SelectionError(str(err)) from None
    print(history_text.text(found))
    code = found.exit_code
    verdict = f'{exitcodes.WORDS[code]}: history: {found.summary()}'
    if code == exitcodes.Exit.UNDECIDED:
        verdict += f'; {found.needed} sessions of a metric decide it'
    if args.output:
        from hpcnet.acceptance.history import trend   # matplotlib: only where a page is drawn
        latest = found.sessions[-1]
        report, drawn = drawing.result()
        page = hpcnet_report.render(
            [report], verdict=verdict,
            title=f'hpcnet history {args.period} ({len(found.sessions)} sessions; the cases '
                  f'below are those of the latest, {latest.label()})',
            trend=trend.section(found), drawn=drawn)
        output = Path(args.output)
        write_output(page, output, '--output', 'page')
        runner.say(f'trend page: {output}')
    runner.say(verdict)
    return code


def _latest_evidence(latest: stored_series.Session, db: Path | None) -> tuple:
    """(the latest session's report, its evidence sections): the page's
    figures, drawn while the series are judged."""
    report = latest.report if 'runs' in latest.report else \
        metricindex.stored_report(metricindex.results_db(db), latest.uuid)
    return report, hpcnet_report.evidence([report])


def _load(args, *, draw: bool) -> tuple:
    """(the history, and where ``draw`` the latest session's evidence being
    drawn beside the search: forked.Beside of _latest_evidence, else None)."""
    db = Path(args.db) if args.db else None
    drawing = []

    def start_drawing(sessions: list) -> None:
        drawing.append(forked.Beside(_latest_evidence, sessions[-1], db))

    # Reading and judging every series of the period: said on stderr.
    with phase(f'loading the sessions of {args.period}') as done:
        found = history_index.load(args.period, db=db, system=args.system, name=args.name,
                                   min_segment=args.min_segment, alpha=args.alpha,
                                   threshold=args.floor,
                                   before_judging=start_drawing if draw else None)
        done.outcome = f'{len(found.sessions)} session(s), {len(found.series)} series'
    return found, (drawing[0] if drawing else None)


def _acknowledge(args, found: history.History) -> tuple:
    """Record that the site accepts the change at a session of the history
    read, then judge the history again with it (_load's answer)."""
    session, metrics = accepted.parse_spec(args.acknowledge)
    if session not in {s.uuid for s in found.sessions}:
        raise accepted.AcceptedError(f'--acknowledge {args.acknowledge}: session {session} is '
                                     'not among the sessions read (valid: a session '
                                     '`hpcnet history` names for this --period)')
    if metrics and not any(re.search(metrics, s.name()) for s in found.series):
        raise accepted.AcceptedError(f'--acknowledge {args.acknowledge}: {metrics!r} finds no '
                                     "series (valid: a regex on 'test @partition +environment "
                                     "metric', as the lines name them)")
    path = accepted.acknowledged_path()
    accepted.acknowledge(path, session, metrics, args.why)
    runner.say(f'acknowledged in {path}: {args.acknowledge}: {args.why}')
    return _load(args, draw=bool(args.output))


def add_parser(sub) -> None:
    p = sub.add_parser('history', help="every metric's trend over the stored sessions, "
                                       'and the session it changed')
    p.add_argument('--period', default=sides.ALL_TIME,
                   help='the sessions, as ReFrame selects stored sessions (now-30d:now, '
                        'a session UUID; default: every stored session)')
    add_results_db_option(p)
    p.add_argument('--system', metavar='NAME', help='only the cases of this system')
    p.add_argument('-n', '--name', metavar='REGEX',
                   help='only the tests whose name (with its parameters) this finds')
    p.add_argument('--min-segment', type=argtypes.positive_int, default=levels.MIN_SEGMENT,
                   help='the fewest sessions of one level: fewer bad sessions in a row are '
                        'outliers, not a change (default %(default)s)')
    p.add_argument('--alpha', type=argtypes.fraction, default=levels.ALPHA,
                   help='significance level of a change, corrected for the search '
                        '(default %(default)s)')
    add_option(p, '--floor', type=argtypes.fraction, default=levels.THRESHOLD,
               formerly=('--threshold',),
               help='tightest tolerance: the smallest relative change of level that counts '
                    '(default %(default)s)')
    add_option(p, '-o', '--output', metavar='FILE', formerly=('--html',),
               help='also write the trend page (HTML) here')
    p.add_argument('--acknowledge', metavar='SESSION_UUID[:REGEX]',
                   help='record that the site accepts the change (or the newest nights) '
                        'at this session, for the series REGEX finds (default: all), in '
                        f'<reference dir>/{accepted.ACKNOWLEDGED}; needs --why')
    p.add_argument('--why', metavar='TEXT', help='why the change is accepted (the record keeps it)')
    p.set_defaults(func=run)

