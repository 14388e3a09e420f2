"""What `hpcnet history` prints (hpcnet.acceptance.history.history judges): the
sessions and the method, then one line per finding, the ones that decide
the verdict first."""
from __future__ import annotations

import math

from hpcnet.acceptance.history.history import History
from hpcnet.acceptance.history.levels import MAX_CANDIDATES, Change, Outlier, relative_change
from hpcnet.acceptance.history.recovery import Recovery
from hpcnet.acceptance.history.stored_series import Series
from hpcnet.acceptance.references.spread import OUTLIER_Z
from hpcnet.constants import MEASUREMENT_WITHHELD

#: Names listed at most on one line of many metrics.
SHOWN = 5


def level_text(value: float) -> str:
    return f'{value:.4g}'


def size_text(change) -> str:
    return f'{change.size:+.1%}' if math.isfinite(change.size) else 'from 0'


def what_changed(series: Series, position: int) -> str:
    return '; '.join(series.changed.get(position) or ['no recorded change'])


def changed_near(series: Series, change: Change) -> str:
    '''What the change's session recorded differently from the one before,
    and what the sessions either side of it did (the border is uncertain by one).'''
    beside = [f'{series.sessions[q].label()}: {"; ".join(series.changed[q])}'
              for q in (change.position - 1, change.position + 1) if series.changed.get(q)]
    return what_changed(series, change.position) + (
        f' (beside it, {" / ".join(beside)})' if beside else '')


def levels_text(change: Change) -> str:
    return f'{level_text(change.before)} -> {level_text(change.after)} ({size_text(change)})'


def outlier_text(outlier: Outlier) -> str:
    off = f'{outlier.value / outlier.level - 1:+.1%}' if outlier.level else 'from 0'
    return f'{level_text(outlier.value)} against a level of {level_text(outlier.level)} ({off})'


def method(history: History) -> str:
    return (f'change points: ruptures Binseg, L1 cost on log(value), levels of at least '
            f'{history.min_segment} sessions, up to {MAX_CANDIDATES} candidates, each kept where '
            f'the two-sided Mann-Whitney U p x the borders searched < {history.alpha:g} and the '
            f'level moved by more than {history.threshold:.0%}; outliers and the newest nights '
            f'that stand apart: more '
            f'than {OUTLIER_Z:g} robust sd and {history.threshold:.0%} from their level')


def change_line(series: Series, change: Change) -> str:
    word = 'WORSE' if series.worse(change) else 'BETTER'
    return (f'CHANGED {word:6} {series.name()}: from {series.sessions[change.position].label()}: '
            f'{levels_text(change)}, '
            f'p={change.p_value:.2g} ({change.n_before}+{change.n_after} sessions); '
            f'what changed that session: {changed_near(series, change)}')


def accepted_line(series: Series, what, min_segment: int) -> str:
    acceptance = series.accepted['tail' if what is series.finding.tail else what.position]
    found = change_line(series, what) if isinstance(what, Change) \
        else tail_line(series, what, min_segment)
    return f'ACCEPTED       {found.split(" ", 1)[1].strip()}; accepted: {acceptance.why}'


def sessions_text(nights: int) -> str:
    """'session' for one, 'N sessions' for more: the newest/first ..."""
    return 'session' if nights == 1 else f'{nights} sessions'


def tail_line(series: Series, tail, min_segment: int) -> str:
    """The newest nights that stand apart from the level."""
    since = series.sessions[tail.start].label()
    if not series.worse(tail):
        word, verdict = 'BETTER LATELY', 'not a failure'
    elif tail.nights >= min_segment:
        word, verdict = 'WORSE LATELY', 'as many as a level: a regression'
    else:
        word, verdict = 'WORSE LATELY', (f'fewer than a level ({min_segment}): not '
                                         'decided, a regression if it holds')
    return (f'{word:14} {series.name()}: the newest {sessions_text(tail.nights)}, since {since}: '
            f'{level_text(tail.median)} against a level of {level_text(tail.level)} '
            f'({size_text(tail)}), {verdict}; what changed that session: '
            f'{what_changed(series, tail.start)}')


def outlier_line(series: Series, outlier: Outlier) -> str:
    return (f'OUTLIER        {series.name()}: {series.sessions[outlier.position].label()}: '
            f'{outlier_text(outlier)}, not a change; what changed that session: '
            f'{what_changed(series, outlier.position)}')


def head_line(series: Series, head) -> str:
    stand, them = ('stands', 'it') if head.nights == 1 else ('stand', 'them')
    return (f'CUT SHORT      {series.name()}: the first {sessions_text(head.nights)} {stand} at '
            f'{level_text(head.median)}, the level after {them} at {level_text(head.level)} '
            f'({head.level / head.median - 1:+.1%}): the level before a change that the '
            'period\'s start cut short; not decided (a period that starts earlier judges it)')


def recovered_line(series: Series, recovery: Recovery) -> str:
    """A bad period the series came back from: the period, its level, and
    the level it came back to."""
    start, end = recovery.start, recovery.end
    first, last = series.sessions[start.position], series.sessions[end.position - 1]
    low = min((c.after for c in recovery.changes[:-1]),
              key=lambda v: abs(relative_change(v, recovery.level)))
    off = relative_change(low, recovery.level)
    return (f'RECOVERED      {series.name()}: back at {level_text(end.after)} from '
            f'{series.sessions[end.position].label()}, the level before the bad period '
            f'{level_text(recovery.level)}; the bad period: {first.label()} to {last.label()}, at '
            f'{level_text(low)} ({f"{off:+.1%}" if abs(off) != float("inf") else "from 0"}), '
            f'p={start.p_value:.2g}; what changed when it began: {changed_near(series, start)}; '
            f'when it ended: {changed_near(series, end)}')


def stopped_lines(history: History, acknowledged: bool = False) -> list:
    """One line per case (and first session without a value) whose series
    stopped; of those an acknowledgement covers, with ``acknowledged``."""
    by_case: dict = {}
    for s in history.stopped_acknowledged() if acknowledged else history.stopped():
        by_case.setdefault((s.case, s.stop.since.index), []).append(s)
    lines = []
    for (case, _), series in by_case.items():
        stop = series[0].stop
        whys: dict = {}
        for _, why in stop.sessions:
            whys[why] = whys.get(why, 0) + 1
        test, partition, environ = case
        word = 'ACKNOWLEDGED STOPPED' if acknowledged else 'STOPPED       '
        told = f'; acknowledged: {series[0].accepted["stop"].why}' if acknowledged else ''
        lines.append(f'{word} {test} @{partition} +{environ}: no value since '
                     f'{stop.since.label()}, {len(stop.sessions)} sessions: '
                     + '; '.join(f'{why} (x{n})' for why, n in whys.items())
                     + f'; {len(series)} metrics: ' + ', '.join(s.key[3] for s in series[:SHOWN])
                     + (' ...' if len(series) > SHOWN else '') + told)
    return lines


def busy_lines(history: History) -> list:
    """One line per session with values whose measurement was withheld."""
    by_session: dict = {}
    for series, session, value in history.busy():
        by_session.setdefault(session.index, (session, []))[1].append((series, value))
    newest = {id(s) for s in history.busy_newest()}
    lines = []
    for session, found in by_session.values():
        decides = any(id(s) in newest and any(x is session for x, _ in s.newest_busy())
                      for s, _ in found)
        lines.append(f'WITHHELD       {session.label()}: {len(found)} values not decided '
                     f'({MEASUREMENT_WITHHELD}: the host was busy)'
                     + (', the newest of their series' if decides else ', kept in the series')
                     + ': ' + ', '.join(f'{s.key[3]} {level_text(v)}' for s, v in found[:SHOWN])
                     + (' ...' if len(found) > SHOWN else ''))
    return lines


def text(history: History) -> str:
    """What `hpcnet history` prints: the sessions and the method, one line
    per finding (failures first), and the metrics too short."""
    first, last = history.sessions[0], history.sessions[-1]
    lines = [f'{len(history.sessions)} sessions: {first.label()} … {last.label()}',
             method(history)]
    lines += [change_line(s, c) for s, c in history.changes(worse=True)]
    lines += [tail_line(s, t, history.min_segment) for s, t in history.tails()]
    lines += stopped_lines(history)
    lines += busy_lines(history)
    lines += [head_line(s, h) for s, h in history.heads()]
    lines += [recovered_line(s, r) for s, r in history.recovered()]
    lines += stopped_lines(history, acknowledged=True)
    lines += [change_line(s, c) for s, c in history.changes(worse=False)]
    lines += [tail_line(s, t, history.min_segment) for s, t in history.tails(worse=False)]
    lines += [accepted_line(s, x, history.min_segment)
              for s, x in history.changes(accepted=True) + history.tails(accepted=True)]
    lines += [outlier_line(s, o) for s, o in history.outliers()]
    short = history.too_short()
    if short:
        shown = ', '.join(f'{s.name()} ({len(s.values)})' for s in short[:SHOWN])
        lines.append(f'TOO SHORT      {len(short)} metrics have fewer than {history.needed} '
                     f'sessions, too few to tell a change: {shown}'
                     + (' ...' if len(short) > SHOWN else ''))
    return '\n'.join(lines)
