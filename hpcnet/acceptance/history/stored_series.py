"""The series `hpcnet history` judges, read from stored sessions: per test x
partition x environment x metric one value per session (the median of its
samples), its busy nights and its stop, numbered in the order the sessions
started, with up to LOOKBACK sessions before a period
(hpcnet.acceptance.history.history states the rule and judges them).
"""
from __future__ import annotations

import bisect
import datetime
import re
import statistics
from dataclasses import dataclass, field

from hpcnet import metrics
from hpcnet.acceptance.comparison import compare, sides
from hpcnet.acceptance.history import metricindex
from hpcnet.acceptance.history.levels import Apart, Change, Finding, sessions_needed
from hpcnet.acceptance.references.baseline import OS_KERNEL_TAG, SUITE_COMMIT_TAG

#: Sessions before a ``START:END`` period read to judge the level at START:
#: enough to decide a level of their own.
LOOKBACK = sessions_needed()


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
    #: Acceptance of each change / of the tail / of the stop ('stop'), where
    #: the site accepted it.
    accepted: dict = field(default_factory=dict)
    #: hpcnet.acceptance.history.recovery.Recovery of each bad period it came back from.
    recovered: list = field(default_factory=list)

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

    def recovered_at(self) -> set:
        """The positions of the changes of its recovered bad periods."""
        return {c.position for r in self.recovered for c in r.changes}

    def session_of(self, position: int) -> Session:
        return self.sessions[position]

    def newest_busy(self) -> list:
        """The busy nights after the series' last judged value."""
        last = self.sessions[-1].index if self.sessions else -10 ** 9
        return [(s, v) for s, v in self.busy if s.index > last]


def session_facts(session: Session) -> tuple:
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
    facts.update((what, list(value)) for what, value in session_facts(session))
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


def check_of(test: str) -> str:
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
        if (check_of(series.key[0]), series.key[1]) not in ran_checks:
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
            got = compare.samples(sides.Side(session.uuid, [session.report]))
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
    checks_ran = [{(check_of(k[0]), k[1]) for k in ran} for *_, ran in read]
    indices = [s.index for s, *_ in read]
    for series in by_key.values():
        series.stop = _stop(series, read, checks_ran, indices)
    return [s for s, *_ in read], [by_key[k] for k in sorted(by_key)]


