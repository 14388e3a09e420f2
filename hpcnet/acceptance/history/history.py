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
  up to stored_series.LOOKBACK sessions before START (numbered 0, -1, ...),
  so a change a few sessions after START has its earlier level; changes
  before START are not the period's;
- what the site accepted (hpcnet.acceptance.references.accepted_changes): a
  change, or a tail, that starts at most one session after a session the
  site accepted (its baseline, or an acknowledgement) is ACCEPTED, not a
  failure; a baseline accepts only the series it measured (a value in one
  of its sessions; where none of them is read, a series of a check its
  provenance lists); a stop is accepted by an acknowledgement alone (a
  baseline measured no stopped series), and is then shown acknowledged, not
  failed, for as long as the series has no value;
- its recovered bad periods (hpcnet.acceptance.history.recovery): a change
  for the worse and a later change back to the level before it are
  RECOVERED, not a failure;
- its changes placed where the data allow at the session whose provenance
  changed (hpcnet.acceptance.history.placement).

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

import datetime
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

from hpcnet.acceptance.comparison import compare, sides
from hpcnet.acceptance.history.levels import (ALPHA, MIN_SEGMENT, THRESHOLD, Apart, find_all,
                                              sessions_needed)
from hpcnet.acceptance.history.placement import changed_at, placed
from hpcnet.acceptance.history.recovery import recoveries
from hpcnet.acceptance.history.stored_series import (HistoryError, Series, Session, check_of,
                                                     facts, series_of, session_facts)
from hpcnet.acceptance.references import accepted_changes as accepted_mod
from hpcnet.exitcodes import Exit

_PERIOD = re.compile(r'([^:?]+):([^:?]+)')


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
        recorded = (session_facts(before), session_facts(session))
        counted: dict = {}
        for case in sorted(set(now_cases) & set(before_cases) & self._selected_cases):
            # A case's record is one object per distinct text (history_index
            # decodes each once): nights that recorded the same compare once.
            key = (id(before_cases.get(case)), id(now_cases.get(case)), recorded)
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
                and (accepted or c.position not in s.recovered_at())
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
        """The series with no value the newest nights, the site not told."""
        return [s for s in self.series if s.stop and 'stop' not in s.accepted]

    def stopped_acknowledged(self) -> list:
        """The stopped series an acknowledgement covers (a stack removed on purpose)."""
        return [s for s in self.series if s.stop and 'stop' in s.accepted]

    def recovered(self) -> list:
        """(series, Recovery) of every bad period a series came back from."""
        return [(s, r) for s in self.series for r in s.recovered]

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
                  (len({id(s) for s in self.busy_newest()}), 'measurement withheld the newest nights'),
                  (len(self.heads()), "cut short by the period's start"),
                  (len(self.too_short()), f'with too short a history (fewer than {self.needed} '
                                          'sessions)'),
                  (len(self.recovered()), 'recovered from a bad period'),
                  (len(self.stopped_acknowledged()), 'stopped, acknowledged'),
                  (len(self.changes(worse=False)), 'changed for the better'),
                  (len(self.changes(accepted=True)) + len(self.tails(accepted=True)), 'accepted'),
                  (len(self.busy()), 'values withheld, not decided'),
                  (len(self.outliers()), 'outlier sessions'),
                  (len(self.unchanged()), 'unchanged')]
        return ', '.join(f'{n} {what}' for i, (n, what) in enumerate(counts) if n or not i)


def _measured(acceptance: accepted_mod.Acceptance, series: Series, read: set) -> bool:
    """Whether a baseline measured ``series``: a value (or a busy night) of
    it in one of the baseline's sessions; where none of them is among the
    sessions ``read``, a check the baseline's provenance lists (every check
    of its system for a block that lists none).  An acknowledgement names
    its series by its regex: True."""
    if acceptance.system is None:
        return True
    if read & set(acceptance.sessions):
        return any(s.uuid in acceptance.sessions
                   for s in [*series.sessions, *(b for b, _ in series.busy)])
    return acceptance.checks is None or check_of(series.key[0]) in acceptance.checks


def _accept(series: Series, acceptances: list, read: set) -> None:
    """Mark the changes, the tail and the stop of ``series`` that start at
    most one session after a session the site accepted (a border is
    uncertain by one), by an acceptance that covers the series; a stop by
    an acknowledgement only."""
    starts = {c.position: series.session_of(c.position).index for c in series.finding.changes}
    if series.finding.tail:
        starts['tail'] = series.session_of(series.finding.tail.start).index
    if series.stop:
        starts['stop'] = series.stop.since.index
    for what, first in starts.items():
        for acceptance, point in acceptances:
            if (point is not None and point >= first - 1
                    and not (what == 'stop' and acceptance.system is not None)
                    and acceptance.covers(series.name(), series.key[1])
                    and _measured(acceptance, series, read)):
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
        provenance = {s.uuid: compare.provenance(sides.Side(s.uuid, [s.report]))
                      for s in sessions}
    points = [(a, _point(a, sessions)) for a in acceptances]
    read = {s.uuid for s in sessions}
    findings = find_all([s.values for s in series], min_segment=min_segment, alpha=alpha,
                        threshold=threshold)
    for s, finding in zip(series, findings):
        s.finding = placed(s, finding, provenance, min_segment=min_segment, alpha=alpha,
                           threshold=threshold) if finding.changes else finding
        _accept(s, points, read)
        s.recovered = recoveries(s, threshold)
        # A level's border is uncertain by a session: a change also reads
        # what the sessions either side of it recorded differently.
        borders = {q for c in s.finding.changes for q in (c.position - 1, c.position, c.position + 1)}
        ends = {e.start for e in (s.finding.tail, s.finding.head) if e}
        for position in sorted(borders | ends | {o.position for o in s.finding.outliers}):
            if 0 < position < len(s.sessions):
                s.changed[position] = changed_at(s, position, provenance)
    return History(sessions, series, min_segment, alpha, threshold, provenance)


def earlier_period(period: str) -> str | None:
    """The sessions before a ``START:END`` period (ReFrame's syntax): from
    the first stored to START; None for another query or the whole store."""
    match = _PERIOD.fullmatch(period)
    start = sides.ALL_TIME.split(':')[0]
    return f'{start}:{match.group(1)}' if match and match.group(1) != start else None


def load(period: str = sides.ALL_TIME, *, db: Path | None = None, system: str | None = None,
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
        reports = sides.stored_sessions(period, db)
        earlier = sides.stored_sessions(earlier_period(period), db) \
            if earlier_period(period) else []
    except sides.CompareError as err:
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
