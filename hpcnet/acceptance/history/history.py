"""`hpcnet history`: the trend of every metric over the stored sessions, the
session it changed, and what the newest nights say.

The sessions are ReFrame's (its results database, read through
`reframe --describe-stored-sessions` as `hpcnet compare` reads a period),
in the order they started.  Per test x partition x environment x metric the
series is one value per session: the median of that session's samples
(every passed repeat, as hpcnet.acceptance.comparison.compare.samples collects them).
hpcnet.acceptance.history.levels judges each series (changes, outliers, the newest
nights that stand apart from the level: its tail).

What a series holds besides its values:

- busy nights: the values of a session whose case the host was too busy to
  judge are shown as "not decided" points; they are not judged, and the
  session keeps its number, so no change is named a session off;
- its stop: the sessions after its last value in which its check ran on its
  partition but it has none (the case failed, was not run, or ran without
  the metric);
- the earlier level: a period of ReFrame's ``START:END`` form is judged with
  up to LOOKBACK sessions before START (numbered 0, -1, ...), so a change a
  few sessions after START has its earlier level; changes before START are
  not the period's;
- what the site accepted (hpcnet.acceptance.references.accepted_changes): a change, or a tail,
  that starts at most one session after a session the site accepted (its
  baseline, or an acknowledgement) is ACCEPTED, not a failure.

Worse is by the metric catalogue's better side (hpcnet.metrics); a value with
no better side (an MTU) counts as worse when it changes, as `hpcnet compare`
judges it.

Exit code (hpcnet.exitcodes): FAILED for a change for the worse in the
period, a worse tail of MIN_SEGMENT nights or more (a level), or a stopped
series; else UNDECIDED for a worse tail shorter than that, newest nights
measured on a busy host, a head (the level before a change the period's
start cut short, when no earlier session holds it), or a series too short;
else OK.
"""
from __future__ import annotations

import bisect
import datetime
import functools
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from hpcnet import metrics
from hpcnet.acceptance.comparison import compare
from hpcnet.acceptance.history import metricindex
from hpcnet.acceptance.history.levels import (ALPHA, MIN_SEGMENT, THRESHOLD, Apart, Change, Finding,
                                              find_all, sessions_needed)
from hpcnet.acceptance.references import accepted_changes as accepted_mod
from hpcnet.acceptance.references.baseline import OS_KERNEL_TAG, SUITE_COMMIT_TAG
from hpcnet.exitcodes import Exit

#: Sessions before a ``START:END`` period read to judge the level at START:
#: enough to decide a level of their own.
LOOKBACK = sessions_needed()
_PERIOD = re.compile(r'([^:?]+):([^:?]+)')


class HistoryError(ValueError):
    """A selection that holds nothing, or options that cannot work: a usage
    error (exit 2)."""


@dataclass(frozen=True)
class Session:
    """One stored session, numbered from 1 in the order the sessions of the
    period started (0, -1, ... before the period)."""
    index: int
    uuid: str
    start: float
    report: dict = field(repr=False, compare=False)

    @property
    def when(self) -> str:
        return datetime.datetime.fromtimestamp(self.start, datetime.timezone.utc) \
            .strftime('%Y-%m-%d %H:%M:%S UTC')

    def label(self) -> str:
        before = ', before the period' if self.index < 1 else ''
        return f'session {self.index} ({self.when}, {self.uuid[:8]}{before})'


@dataclass(frozen=True)
class Stop:
    """A series with no value in the newest sessions its partition ran."""
    sessions: tuple         #: (Session, why) of each, oldest first

    @property
    def since(self) -> Session:
        return self.sessions[0][0]


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
    #: (Session, median) of the sessions whose case the host was too busy to judge.
    busy: list = field(default_factory=list)
    stop: Stop | None = None
    #: Acceptance of each change / of the tail, where the site accepted it.
    accepted: dict = field(default_factory=dict)

    @property
    def case(self) -> tuple:
        return self.key[:3]

    def name(self) -> str:
        test, partition, environ, metric = self.key
        return f'{test} @{partition} +{environ} {metric} [{self.unit}]'

    def worse(self, change: Change | Apart) -> bool:
        """A lower level of a higher-is-better metric, a higher of a
        lower-is-better one; any change of a value with no better side."""
        higher = metrics.higher_is_better(self.key[0], self.key[3])
        after, before = (change.after, change.before) if isinstance(change, Change) \
            else (change.median, change.level)
        return True if higher is None else (after < before) == higher

    def session_of(self, position: int) -> Session:
        return self.sessions[position]

    def newest_busy(self) -> list:
        """The busy nights after the series' last judged value."""
        last = self.sessions[-1].index if self.sessions else -10 ** 9
        return [(s, v) for s, v in self.busy if s.index > last]


def _session_facts(session: Session) -> tuple:
    """((what, [value]), ...) the session recorded for all its cases: its
    ReFrame version and host."""
    info = session.report.get('session_info', {})
    return tuple((what, (str(info[key]),))
                 for what, key in (('ReFrame', 'version'), ('host running ReFrame', 'hostname'),
                                   ('kernel of the host running ReFrame', OS_KERNEL_TAG),
                                   ('suite commit', SUITE_COMMIT_TAG))
                 if info.get(key))


def facts(session: Session, provenance: dict, case: tuple) -> dict:
    """What a case recorded in a session ({what: [values]}), with the
    session's ReFrame version and host."""
    facts = dict(provenance.get(case, {}))
    facts.update((what, list(value)) for what, value in _session_facts(session))
    return facts


def _ran(report: dict) -> dict:
    """{case key: why it has no value, or None when a repeat measured it} of
    every case a session ran."""
    return metricindex.case_outcomes(report)


def _sessions(reports: list, before: int) -> list:
    ordered = sorted(reports, key=lambda r: r.get('session_info', {}).get('time_start_unix', 0))
    return [Session(i + 1 - before, r.get('session_info', {}).get('uuid', f'report {i + 1}'),
                    float(r.get('session_info', {}).get('time_start_unix', 0)), r)
            for i, r in enumerate(ordered)]


def _check_of(test: str) -> str:
    '''The check (test class) of a case's name: 'hpcnet_p2p %mode=bw' -> 'hpcnet_p2p'.'''
    return test.split()[0]


def _stop(series: Series, read: list, checks_ran: list, indices: list) -> Stop | None:
    """The sessions after the series' last value or busy night that ran its
    check on its partition, with why each has no value of it; ``checks_ran``:
    the (check, partition) pairs each session of ``read`` ran, ``indices``:
    the number of each, ascending.  A session that selected other checks
    only (a nightly preflight beside the suite) says nothing of this series."""
    last = max([s.index for s in series.sessions] + [s.index for s, _ in series.busy])
    nights = []
    for at in range(bisect.bisect_right(indices, last), len(read)):
        session, ran, ran_checks = read[at][0], read[at][3], checks_ran[at]
        if (_check_of(series.key[0]), series.key[1]) not in ran_checks:
            continue
        why = ran.get(series.case, 'not run')
        nights.append((session, why or 'ran without this metric'))
    return Stop(tuple(nights)) if nights else None


def _read(reports: list, earlier: list, selected) -> list:
    """(Session, values, busy, ran) of each session that ran a selected case:
    the last LOOKBACK of ``earlier`` numbered up to 0, then ``reports`` from 1."""
    def read(some: list, before: int) -> list:
        out = []
        for session in _sessions(some, before):
            got = compare.samples(compare.Side(session.uuid, [session.report]))
            values = {k: v for k, v in got.values.items() if selected(k)}
            busy = {k: v for k, v in got.withheld.items() if selected(k)}
            ran = {k: why for k, why in _ran(session.report).items() if selected((*k, ''))}
            if values or busy or ran:
                out.append((session, values, busy, ran))
        return out
    before = read(earlier, 0)[-LOOKBACK:]
    renumbered = [(Session(i + 1 - len(before), s.uuid, s.start, s.report), *rest)
                  for i, (s, *rest) in enumerate(before)]
    return renumbered + read(reports, 0)


def series_of(reports: list, *, system: str | None = None, name: str | None = None,
              earlier: list = ()) -> tuple:
    """(sessions, [Series]) of the reports, in session order, the cases of
    ``system`` whose test name ``name`` (a regex) finds only; sessions that
    ran none of them are left out and not numbered; ``earlier``: the
    sessions before the period, read to judge its first level."""
    try:
        pattern = re.compile(name) if name else None
    except re.error as err:
        raise HistoryError(f'-n/--name {name!r}: not a regular expression ({err})') from None

    def selected(key: tuple) -> bool:
        return ((system is None or key[1].split(':')[0] == system)
                and (pattern is None or pattern.search(key[0]) is not None))
    return series_from(_read(reports, list(earlier), selected))


def series_from(read: list) -> tuple:
    """(sessions, [Series]) of what was read: (Session, values, busy, ran)
    of each session that ran a selected case, in session order."""
    by_key: dict = {}
    for session, values, busy, _ in read:
        for key, (unit, samples) in values.items():
            series = by_key.setdefault(key, Series(key, unit, [], []))
            series.sessions.append(session)
            series.values.append(statistics.median(samples))
        for key, (unit, samples) in busy.items():
            by_key.setdefault(key, Series(key, unit, [], [])).busy.append(
                (session, statistics.median(samples)))
    return with_stops(read, by_key)


def with_stops(read: list, by_key: dict) -> tuple:
    """(sessions, [Series] in key order) of ``read`` (series_from) and the
    series of each key, each given its stop."""
    checks_ran = [{(_check_of(k[0]), k[1]) for k in ran} for *_, ran in read]
    indices = [s.index for s, *_ in read]
    for series in by_key.values():
        series.stop = _stop(series, read, checks_ran, indices)
    return [s for s, *_ in read], [by_key[k] for k in sorted(by_key)]


def _point(acceptance: accepted_mod.Acceptance, sessions: list) -> int | None:
    """The index of the newest session an acceptance accepts, among ``sessions``."""
    named = [s.index for s in sessions if s.uuid in acceptance.sessions]
    if named:
        return max(named)
    if acceptance.date:
        written = datetime.datetime.fromisoformat(acceptance.date).timestamp()
        before = [s.index for s in sessions if s.start <= written]
        return max(before) if before else None
    return None


@dataclass
class History:
    """Every series of a period, judged, and the exit code."""
    sessions: list
    series: list
    min_segment: int = MIN_SEGMENT
    alpha: float = ALPHA
    threshold: float = THRESHOLD
    #: {session uuid: hpcnet.acceptance.comparison.compare.provenance of the session}
    provenance: dict = field(default_factory=dict)
    #: what_changed of a case's two records and their sessions' facts, by
    #: (id of each record, the sessions' facts): the records stay in provenance.
    _lines_of: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @functools.cached_property
    def _selected_cases(self) -> set:
        return {s.case for s in self.series}

    def session_changes(self, session: Session) -> list:
        """What the cases of ``session`` recorded differently from the
        session before, over the selected cases both ran ('what: a -> b (N
        cases)')."""
        at = self.sessions.index(session)
        if at == 0:
            return []
        before = self.sessions[at - 1]
        now_cases, before_cases = self.provenance[session.uuid], self.provenance[before.uuid]
        sides = (_session_facts(before), _session_facts(session))
        counted: dict = {}
        for case in sorted(set(now_cases) & set(before_cases) & self._selected_cases):
            # A case's record is one object per distinct text (history_index
            # decodes each once): nights that recorded the same compare once.
            key = (id(before_cases.get(case)), id(now_cases.get(case)), sides)
            if key not in self._lines_of:
                self._lines_of[key] = compare.what_changed(facts(before, before_cases, case),
                                                           facts(session, now_cases, case))
            for line in self._lines_of[key]:
                counted[line] = counted.get(line, 0) + 1
        return [f'{line} ({n} case{"s" if n > 1 else ""})' for line, n in counted.items()]

    def changes(self, worse: bool | None = None, accepted: bool = False) -> list:
        """(series, change) of every change in the period that the site did
        not accept (that it did, with ``accepted``), of the worse or better ones."""
        return [(s, c) for s in self.series for c in s.finding.changes
                if s.session_of(c.position).index >= 1
                and (c.position in s.accepted) == accepted
                and (worse is None or s.worse(c) == worse)]

    def tails(self, worse: bool = True, accepted: bool = False) -> list:
        """(series, tail) of the newest nights that stand apart, worse (better)."""
        return [(s, s.finding.tail) for s in self.series
                if s.finding.tail and s.worse(s.finding.tail) == worse
                and ('tail' in s.accepted) == accepted]

    def regressed_tails(self) -> list:
        """Worse newest nights enough to be a level: a regression."""
        return [(s, t) for s, t in self.tails() if t.nights >= self.min_segment]

    def heads(self) -> list:
        """(series, head) where the period's first sessions stand apart and
        the level after them is worse: the level before a change that the
        period's start cut short, with no earlier session to judge it by."""
        return [(s, s.finding.head) for s in self.series
                if s.finding.head and s.session_of(s.finding.head.start).index >= 1
                and s.worse(Apart(0, 0, s.finding.head.level, s.finding.head.median))]

    def stopped(self) -> list:
        return [s for s in self.series if s.stop]

    def busy_newest(self) -> list:
        return [s for s in self.series if s.newest_busy()]

    def busy(self) -> list:
        """(series, Session, value) of every night measured on a busy host."""
        return [(s, session, v) for s in self.series for session, v in s.busy]

    def outliers(self) -> list:
        return [(s, o) for s in self.series for o in s.finding.outliers]

    def too_short(self) -> list:
        return [s for s in self.series if s.finding.too_short]

    def unchanged(self) -> list:
        return [s for s in self.series if not s.finding.too_short and not s.finding.changes
                and not s.finding.tail and not s.stop]

    @property
    def needed(self) -> int:
        return sessions_needed(self.min_segment, self.alpha)

    @property
    def exit_code(self) -> Exit:
        if self.changes(worse=True) or self.regressed_tails() or self.stopped():
            return Exit.FAILED
        if (self.tails() or self.heads() or self.busy_newest() or self.too_short()
                or not self.series):
            return Exit.UNDECIDED
        return Exit.OK

    def summary(self) -> str:
        """The counts, those that decide the verdict first; zeros left out
        after the first."""
        counts = [(len(self.changes(worse=True)), 'changed for the worse'),
                  (len(self.regressed_tails()), f'worse the newest {self.min_segment}+ nights'),
                  (len(self.stopped()), 'stopped'),
                  (len(self.tails()) - len(self.regressed_tails()),
                   f'worse the newest nights (fewer than {self.min_segment})'),
                  (len({id(s) for s in self.busy_newest()}), 'measured on a busy host the newest nights'),
                  (len(self.heads()), "cut short by the period's start"),
                  (len(self.too_short()), f'with too short a history (fewer than {self.needed} '
                                          'sessions)'),
                  (len(self.changes(worse=False)), 'changed for the better'),
                  (len(self.changes(accepted=True)) + len(self.tails(accepted=True)), 'accepted'),
                  (len(self.busy()), 'values of a busy host not decided'),
                  (len(self.outliers()), 'outlier sessions'),
                  (len(self.unchanged()), 'unchanged')]
        return ', '.join(f'{n} {what}' for i, (n, what) in enumerate(counts) if n or not i)


def _accept(series: Series, acceptances: list) -> None:
    """Mark the changes and the tail of ``series`` that start at most one
    session after a session the site accepted (a border is uncertain by one)."""
    starts = {c.position: c.position for c in series.finding.changes}
    if series.finding.tail:
        starts['tail'] = series.finding.tail.start
    for what, position in starts.items():
        first = series.session_of(position).index
        for acceptance, point in acceptances:
            if (point is not None and point >= first - 1
                    and acceptance.covers(series.name(), series.key[1])):
                series.accepted[what] = acceptance
                break


def judge(sessions: list, series: list, *, min_segment: int = MIN_SEGMENT, alpha: float = ALPHA,
          threshold: float = THRESHOLD, acceptances: tuple = (),
          provenance: dict | None = None) -> History:
    """Every series judged; beside each change and outlier, what its
    session's cases recorded differently from the session before (the
    ``provenance`` given, {session uuid: compare.provenance}, else read from
    each session's report)."""
    if provenance is None:
        provenance = {s.uuid: compare.provenance(compare.Side(s.uuid, [s.report]))
                      for s in sessions}
    points = [(a, _point(a, sessions)) for a in acceptances]
    findings = find_all([s.values for s in series], min_segment=min_segment, alpha=alpha,
                        threshold=threshold)
    for s, finding in zip(series, findings):
        s.finding = finding
        _accept(s, points)
        # A level's border is uncertain by a session: a change also reads
        # what the sessions either side of it recorded differently.
        borders = {q for c in s.finding.changes for q in (c.position - 1, c.position, c.position + 1)}
        ends = {e.start for e in (s.finding.tail, s.finding.head) if e}
        for position in sorted(borders | ends | {o.position for o in s.finding.outliers}):
            if not 0 < position < len(s.sessions):
                continue
            now, before = s.sessions[position], s.sessions[position - 1]
            s.changed[position] = compare.what_changed(
                facts(before, provenance[before.uuid], s.case),
                facts(now, provenance[now.uuid], s.case))
    return History(sessions, series, min_segment, alpha, threshold, provenance)


def earlier_period(period: str) -> str | None:
    """The sessions before a ``START:END`` period (ReFrame's syntax): from
    the first stored to START; None for another query or the whole store."""
    match = _PERIOD.fullmatch(period)
    start = compare.ALL_TIME.split(':')[0]
    return f'{start}:{match.group(1)}' if match and match.group(1) != start else None


def load(period: str = compare.ALL_TIME, *, db: Path | None = None, system: str | None = None,
         name: str | None = None, min_segment: int = MIN_SEGMENT, alpha: float = ALPHA,
         threshold: float = THRESHOLD, acknowledged: Path | None = None,
         before_judging=None) -> History:
    """The history of the sessions ``period`` selects (ReFrame's syntax, as
    `hpcnet compare` takes it) in ReFrame's results database or ``db``,
    with the changes the site accepted (its baselines' provenance and the
    acknowledgements in ``acknowledged``, default under the reference directory).
    ``before_judging(sessions)``, where given, is called with the sessions
    read before their series are judged (work to start beside the search)."""
    if db is not None and not db.is_file():
        raise HistoryError(f'--db {db}: no such results database (a file ReFrame wrote; '
                           'RFM_SQLITE_DB_FILE or reports/results.db)')
    try:
        reports = compare.stored_sessions(period, db)
        earlier = compare.stored_sessions(earlier_period(period), db) \
            if earlier_period(period) else []
    except compare.CompareError as err:
        raise HistoryError(str(err)) from None
    in_period = {r.get('session_info', {}).get('uuid') for r in reports}
    earlier = [r for r in earlier if r.get('session_info', {}).get('uuid') not in in_period]
    sessions, series = series_of(reports, system=system, name=name, earlier=earlier)
    if not series:
        raise nothing_measured(period, len(reports), system, name)
    if before_judging is not None:
        before_judging(sessions)
    return judge(sessions, series, min_segment=min_segment, alpha=alpha, threshold=threshold,
                 acceptances=acceptances_of(series, acknowledged))


def nothing_measured(period: str, stored: int, system: str | None, name: str | None) -> HistoryError:
    """The error of a selection with no value."""
    what = ', '.join(x for x in (f'system {system}' if system else '',
                                 f'tests matching {name!r}' if name else '') if x)
    return HistoryError(f'{period}: {stored} stored sessions, none with a measured '
                        f'value{" of " + what if what else ""} (see reframe '
                        '--list-stored-sessions)')


def acceptances_of(series: list, acknowledged: Path | None = None) -> tuple:
    """What the site accepted for the systems of ``series``: its baselines'
    provenance and the acknowledgements in ``acknowledged`` (default under
    the reference directory)."""
    try:
        return tuple(accepted_mod.baselines({s.key[1].split(':')[0] for s in series})
                     + accepted_mod.acknowledgements(acknowledged
                                                     or accepted_mod.acknowledged_path()))
    except accepted_mod.AcceptedError as err:
        raise HistoryError(str(err)) from None
