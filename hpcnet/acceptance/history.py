"""`hpcnet history`: the trend of every metric over the stored sessions, and
the session it changed.

The sessions are ReFrame's (its results database, read through
`reframe --describe-stored-sessions` as `hpcnet compare` reads a period),
in the order they started.  Per test x partition x environment x metric the
series is one value per session: the median of that session's samples
(every passed repeat, as hpcnet.acceptance.compare.samples collects them).

The rule, per series (find_changes):

1. Too short: fewer than sessions_needed() sessions cannot show a change
   at all (two levels of MIN_SEGMENT sessions each whose rank test can reach
   ALPHA), so the series is "not decided".
2. Candidates: ruptures' binary segmentation (Binseg) with the L1 cost
   (the median of each level, so one far value does not pull a level) on
   log(value) (a relative change is the same size at any scale; raw values
   for a series with a zero or a negative value, such as error counts), no
   level shorter than MIN_SEGMENT sessions: one bad night, or a few, cannot
   be a level of its own.
3. Each candidate is tested against the levels on both sides of it, up to
   the neighbouring change points, each level without its outliers (4.):
   the two-sided Mann-Whitney U p (scipy.stats) times the number of places
   the border between the two levels could have been (Bonferroni: the
   search chose the place that separates them best, so the plain p would
   flatter it) below ALPHA, and the medians moved by more than THRESHOLD
   (both as in `hpcnet compare`).  The weakest candidate that fails goes,
   its neighbours' levels grow and are tested again, until every one left
   passes.
4. Outliers: a session's value more than 3.5 robust standard deviations
   and more than THRESHOLD from its level's median (each value over its
   level's median, pooled over the series, judged by
   hpcnet.acceptance.spread.outliers, the rule baselines leave repeats out
   by) is an outlier: reported, never a change, and left out of the levels
   step 3 tests.  A level needs MIN_SEGMENT sessions without its outliers.

Each change says its session, the levels before and after, its size
(after / before - 1), its p, whether it is worse (by the metric catalogue's
better side, hpcnet.metrics; a value with no better side, an MTU, counts as
worse when it changes, as `hpcnet compare` judges it) and
what the session's cases recorded differently from the session before
(hpcnet.acceptance.compare.provenance; ReFrame's version and host, and the
suite's commit and the host's kernel that `hpcnet run` stores with the session).

Exit code (hpcnet.exitcodes): a change for the worse in the period is
FAILED; otherwise a series too short to judge is UNDECIDED; else OK.
"""
from __future__ import annotations

import datetime
import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import ruptures

from hpcnet import metrics
from hpcnet.acceptance import compare, statcompare
from hpcnet.acceptance.baseline import OS_KERNEL_TAG, SUITE_COMMIT_TAG
from hpcnet.acceptance.spread import OUTLIER_Z, outliers as spread_outliers
from hpcnet.exitcodes import Exit

#: The fewest sessions of one level: a change needs this many nights on each
#: side, so up to MIN_SEGMENT - 1 bad nights in a row are outliers.
MIN_SEGMENT = 4
#: Significance level of each change point's rank test, corrected for the
#: search (as `hpcnet compare`'s).
ALPHA = compare.ALPHA
#: Smallest relative change of level that is a change (as `hpcnet compare`).
THRESHOLD = compare.THRESHOLD




class HistoryError(ValueError):
    """A selection that holds nothing, or options that cannot work: a usage
    error (exit 2)."""


def sessions_needed(min_segment: int = MIN_SEGMENT, alpha: float = ALPHA) -> int:
    """The fewest sessions in which a change can be found: two levels of at
    least ``min_segment`` sessions whose test (_levels_differ) can reach
    ``alpha``; its smallest p, at complete separation, is
    2 x borders / C(n, n1), smallest where the levels are equally long."""
    n = 2 * min_segment
    while 2 * (n - 2 * min_segment + 1) * statcompare.min_exact_p(n // 2, n - n // 2) >= alpha:
        n += 1
    return n


@dataclass(frozen=True)
class Change:
    """A change of level at ``position`` (the first value of the new level)."""
    position: int
    before: float           #: median of the level before
    after: float            #: median of the level after
    p_value: float          #: two-sided Mann-Whitney U p x the borders searched
    n_before: int
    n_after: int

    @property
    def size(self) -> float:
        """Relative change of the level, after / before - 1."""
        return self.after / self.before - 1 if self.before else math.copysign(math.inf, self.after)


@dataclass(frozen=True)
class Outlier:
    position: int
    value: float
    level: float            #: median of the level it stands in


@dataclass(frozen=True)
class Finding:
    """What find_changes found in one series."""
    changes: tuple
    outliers: tuple
    #: (start, end, median) of each level, end exclusive, its outliers left
    #: out of the median (the level Change and Outlier give).
    levels: tuple
    too_short: bool


def _relative(values) -> bool:
    return min(values) > 0


def _level_median(kept: list, segment: list) -> float:
    """A level's median, its outliers left out; of all its values when every
    one of them is an outlier (a level of a few disagreeing sessions)."""
    return statistics.median(kept or segment)


def _levels_differ(before: list, after: list, *, segments: tuple, relative: bool,
                   min_segment: int, alpha: float, threshold: float) -> tuple:
    """(whether the two levels differ, p, median before, after): the
    two-sided Mann-Whitney U p times the number of places the levels' border
    could have been put (Bonferroni: the search tried them all); levels of
    fewer than ``min_segment`` values (outliers taken out) never differ.
    ``segments``: the two levels' values, outliers included."""
    low, high = _level_median(before, segments[0]), _level_median(after, segments[1])
    if min(len(before), len(after)) < min_segment:
        # A level whose sessions disagree (outliers taken out) is no level.
        return False, 1.0, low, high
    direction = 'greater' if high > low else 'less'
    borders = max(1, len(before) + len(after) - 2 * min_segment + 1)
    p = min(1.0, 2 * borders * statcompare.mann_whitney_p(before, after, direction))
    moved = abs(high / low - 1) > threshold if relative else high != low
    return p < alpha and moved, p, low, high


def _outliers(values: list, bounds: list, relative: bool, threshold: float) -> list:
    """Positions of the values far from their level: each value over its
    level's median (minus it, for counts) pooled over the series, by the
    rule baselines leave repeats out by (spread.outliers: OUTLIER_Z robust sd and
    ``threshold``); pooled, because a level of a few sessions says little
    about its own spread."""
    residuals = []
    for start, end in zip(bounds, bounds[1:]):
        level = statistics.median(values[start:end])
        residuals += [v / level if relative else v - level for v in values[start:end]]
    return spread_outliers(residuals, threshold if relative else 0.0)


def _candidates(values: list, relative: bool, min_segment: int) -> list:
    """Positions where ruptures' Binseg (L1 cost) splits the series into
    levels of at least ``min_segment`` values, as many as fit."""
    signal = np.log(values) if relative else np.asarray(values, dtype=float)
    algo = ruptures.Binseg(model='l1', min_size=min_segment, jump=1).fit(signal.reshape(-1, 1))
    return [b for b in algo.predict(n_bkps=max(1, len(values) // min_segment - 1))
            if b < len(values)]


def find_changes(values: list, *, min_segment: int = MIN_SEGMENT, alpha: float = ALPHA,
                 threshold: float = THRESHOLD) -> Finding:
    """The change points and outliers of one series by the module's rule."""
    values = [float(v) for v in values]
    n = len(values)
    if n < sessions_needed(min_segment, alpha):
        return Finding((), (), ((0, n, statistics.median(values) if values else math.nan),),
                       True)
    relative = _relative(values)
    kept = _candidates(values, relative, min_segment)
    while True:
        bounds = [0, *kept, n]
        # One bad night says nothing about the level it stands in.
        out = set(_outliers(values, bounds, relative, threshold))
        segments = [values[start:end] for start, end in zip(bounds, bounds[1:])]
        levels = [[values[j] for j in range(start, end) if j not in out]
                  for start, end in zip(bounds, bounds[1:])]
        tests = [_levels_differ(levels[i], levels[i + 1], segments=segments[i:i + 2],
                                relative=relative, min_segment=min_segment, alpha=alpha,
                                threshold=threshold)
                 for i in range(len(kept))]
        weak = [i for i, t in enumerate(tests) if not t[0]]
        if not weak:
            break
        # The weakest goes first: its neighbours' levels grow and are tested again.
        del kept[max(weak, key=lambda i: (tests[i][1], -abs(tests[i][3] - tests[i][2])))]
    changes = tuple(Change(b, tests[i][2], tests[i][3], tests[i][1], len(levels[i]),
                           len(levels[i + 1])) for i, b in enumerate(kept))
    medians = [_level_median(level, segment) for level, segment in zip(levels, segments)]
    found = [Outlier(i, values[i], median)
             for (start, end), median in zip(zip(bounds, bounds[1:]), medians)
             for i in sorted(out) if start <= i < end]
    return Finding(changes, tuple(found),
                   tuple((start, end, median)
                         for (start, end), median in zip(zip(bounds, bounds[1:]), medians)),
                   False)


@dataclass(frozen=True)
class Session:
    """One stored session, numbered from 1 in the order the sessions started."""
    index: int
    uuid: str
    start: float
    report: dict = field(repr=False, compare=False)

    @property
    def when(self) -> str:
        return datetime.datetime.fromtimestamp(self.start, datetime.timezone.utc) \
            .strftime('%Y-%m-%d %H:%M:%S UTC')

    def label(self) -> str:
        return f'session {self.index} ({self.when}, {self.uuid[:8]})'


@dataclass
class Series:
    """One metric's value in each session that measured it."""
    key: tuple              #: (test, partition, environment, metric)
    unit: str
    sessions: list          #: Session of each value
    values: list            #: the median of each session's samples
    finding: Finding | None = None
    #: {position: ['what: before -> after', ...]} at each change and outlier.
    changed: dict = field(default_factory=dict)

    @property
    def case(self) -> tuple:
        return self.key[:3]

    def name(self) -> str:
        test, partition, environ, metric = self.key
        return f'{test} @{partition} +{environ} {metric} [{self.unit}]'

    def worse(self, change: Change) -> bool:
        higher = metrics.higher_is_better(self.key[0], self.key[3])
        if higher is None:
            return True
        return (change.after < change.before) == higher


def facts(session: Session, provenance: dict, case: tuple) -> dict:
    """What a case recorded in a session ({what: [values]}), with the
    session's ReFrame version and host."""
    info = session.report.get('session_info', {})
    facts = dict(provenance.get(case, {}))
    for what, key in (('ReFrame', 'version'), ('host running ReFrame', 'hostname'),
                      ('kernel of the host running ReFrame', OS_KERNEL_TAG),
                      ('suite commit', SUITE_COMMIT_TAG)):
        if info.get(key):
            facts[what] = [str(info[key])]
    return facts


def _sessions(reports: list) -> list:
    ordered = sorted(reports, key=lambda r: r.get('session_info', {}).get('time_start_unix', 0))
    return [Session(i + 1, r.get('session_info', {}).get('uuid', f'report {i + 1}'),
                    float(r.get('session_info', {}).get('time_start_unix', 0)), r)
            for i, r in enumerate(ordered)]


def series_of(reports: list, *, system: str | None = None, name: str | None = None) -> tuple:
    """(sessions, [Series]) of the reports, in session order, the cases of
    ``system`` whose test name ``name`` (a regex) finds only; sessions that
    measured none of them are left out and not numbered."""
    try:
        pattern = re.compile(name) if name else None
    except re.error as err:
        raise HistoryError(f'-n/--name {name!r}: not a regular expression ({err})') from None

    def selected(key: tuple) -> bool:
        return ((system is None or key[1].split(':')[0] == system)
                and (pattern is None or pattern.search(key[0]) is not None))
    measured = []
    for session in _sessions(reports):
        got = compare.samples(compare.Side(session.uuid, [session.report]))
        values = {k: v for k, v in got.values.items() if selected(k)}
        if values:
            measured.append((session, values))
    sessions = [Session(i + 1, s.uuid, s.start, s.report) for i, (s, _) in enumerate(measured)]
    by_key: dict = {}
    for session, (_, values) in zip(sessions, measured):
        for key, (unit, samples) in values.items():
            series = by_key.setdefault(key, Series(key, unit, [], []))
            series.sessions.append(session)
            series.values.append(statistics.median(samples))
    return sessions, [by_key[k] for k in sorted(by_key)]


@dataclass
class History:
    """Every series of a period, judged, and the exit code."""
    sessions: list
    series: list
    min_segment: int = MIN_SEGMENT
    alpha: float = ALPHA
    threshold: float = THRESHOLD
    #: {session uuid: hpcnet.acceptance.compare.provenance of the session}
    provenance: dict = field(default_factory=dict)

    def session_changes(self, session: Session) -> list:
        """What the cases of ``session`` recorded differently from the
        session before, over the selected cases both ran ('what: a -> b (N
        cases)')."""
        if session.index == 1:
            return []
        before = self.sessions[session.index - 2]
        now_cases, before_cases = self.provenance[session.uuid], self.provenance[before.uuid]
        selected = {s.case for s in self.series}
        counted: dict = {}
        for case in sorted(set(now_cases) & set(before_cases) & selected):
            for line in compare.what_changed(facts(before, before_cases, case),
                                             facts(session, now_cases, case)):
                counted[line] = counted.get(line, 0) + 1
        return [f'{line} ({n} case{"s" if n > 1 else ""})' for line, n in counted.items()]

    def changes(self, worse: bool | None = None) -> list:
        """(series, change) of every change (of the worse or better ones)."""
        return [(s, c) for s in self.series for c in s.finding.changes
                if worse is None or s.worse(c) == worse]

    def outliers(self) -> list:
        return [(s, o) for s in self.series for o in s.finding.outliers]

    def too_short(self) -> list:
        return [s for s in self.series if s.finding.too_short]

    def unchanged(self) -> list:
        return [s for s in self.series if not s.finding.too_short and not s.finding.changes]

    @property
    def needed(self) -> int:
        return sessions_needed(self.min_segment, self.alpha)

    @property
    def exit_code(self) -> Exit:
        if self.changes(worse=True):
            return Exit.FAILED
        if self.too_short() or not self.series:
            return Exit.UNDECIDED
        return Exit.OK

    def summary(self) -> str:
        return (f'{len(self.changes(worse=True))} changed for the worse, '
                f'{len(self.changes(worse=False))} for the better, {len(self.outliers())} '
                f'outlier sessions, {len(self.unchanged())} unchanged, {len(self.too_short())} '
                f'with too short a history (fewer than {self.needed} sessions)')

    def method(self) -> str:
        return (f'change points: ruptures Binseg, L1 cost on log(value), levels of at least '
                f'{self.min_segment} sessions, each kept where the two-sided Mann-Whitney U p '
                f'x the borders searched < {self.alpha:g} and the level moved by more than '
                f'{self.threshold:.0%}; '
                f'outliers: more than {OUTLIER_Z:g} robust sd and {self.threshold:.0%} from their level')


def judge(sessions: list, series: list, *, min_segment: int = MIN_SEGMENT, alpha: float = ALPHA,
          threshold: float = THRESHOLD) -> History:
    """Every series judged; beside each change and outlier, what its
    session's cases recorded differently from the session before."""
    provenance = {s.uuid: compare.provenance(compare.Side(s.uuid, [s.report])) for s in sessions}
    for s in series:
        s.finding = find_changes(s.values, min_segment=min_segment, alpha=alpha,
                                 threshold=threshold)
        # A level's border is uncertain by a session: a change also reads
        # what the sessions either side of it recorded differently.
        borders = {q for c in s.finding.changes for q in (c.position - 1, c.position, c.position + 1)}
        for position in sorted(borders | {o.position for o in s.finding.outliers}):
            if not 0 < position < len(s.sessions):
                continue
            now, before = s.sessions[position], s.sessions[position - 1]
            s.changed[position] = compare.what_changed(
                facts(before, provenance[before.uuid], s.case),
                facts(now, provenance[now.uuid], s.case))
    return History(sessions, series, min_segment, alpha, threshold, provenance)


def load(period: str = compare.ALL_TIME, *, db: Path | None = None, system: str | None = None,
         name: str | None = None, min_segment: int = MIN_SEGMENT, alpha: float = ALPHA,
         threshold: float = THRESHOLD) -> History:
    """The history of the sessions ``period`` selects (ReFrame's syntax, as
    `hpcnet compare` takes it) in ReFrame's results database or ``db``."""
    if db is not None and not db.is_file():
        raise HistoryError(f'--db {db}: no such results database (a file ReFrame wrote; '
                           'RFM_SQLITE_DB_FILE or reports/results.db)')
    try:
        reports = compare.stored_sessions(period, db)
    except compare.CompareError as err:
        raise HistoryError(str(err)) from None
    sessions, series = series_of(reports, system=system, name=name)
    if not series:
        what = ', '.join(x for x in (f'system {system}' if system else '',
                                     f'tests matching {name!r}' if name else '') if x)
        raise HistoryError(f'{period}: {len(reports)} stored sessions, none with a measured '
                           f'value{" of " + what if what else ""} (see reframe '
                           '--list-stored-sessions)')
    return judge(sessions, series, min_segment=min_segment, alpha=alpha, threshold=threshold)


def level_text(value: float) -> str:
    return f'{value:.4g}'


def size_text(change: Change) -> str:
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


def change_line(series: Series, change: Change) -> str:
    word = 'WORSE' if series.worse(change) else 'BETTER'
    return (f'CHANGED {word:6} {series.name()}: from {series.sessions[change.position].label()}: '
            f'{levels_text(change)}, '
            f'p={change.p_value:.2g} ({change.n_before}+{change.n_after} sessions); '
            f'what changed that session: {changed_near(series, change)}')


def outlier_line(series: Series, outlier: Outlier) -> str:
    return (f'OUTLIER        {series.name()}: {series.sessions[outlier.position].label()}: '
            f'{outlier_text(outlier)}, not a change; what changed that session: '
            f'{what_changed(series, outlier.position)}')


def text(history: History) -> str:
    """What `hpcnet history` prints: the sessions and the method, one line
    per change (worse first) and per outlier, and the metrics too short."""
    first, last = history.sessions[0], history.sessions[-1]
    lines = [f'{len(history.sessions)} sessions: {first.label()} … {last.label()}',
             history.method()]
    lines += [change_line(s, c) for s, c in history.changes(worse=True)]
    lines += [change_line(s, c) for s, c in history.changes(worse=False)]
    lines += [outlier_line(s, o) for s, o in history.outliers()]
    short = history.too_short()
    if short:
        shown = ', '.join(f'{s.name()} ({len(s.values)})' for s in short[:5])
        lines.append(f'TOO SHORT      {len(short)} metrics have fewer than {history.needed} '
                     f'sessions, too few to tell a change: {shown}'
                     + (' ...' if len(short) > 5 else ''))
    return '\n'.join(lines)
