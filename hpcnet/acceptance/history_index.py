"""`hpcnet history` read from the metrics index (hpcnet.acceptance.metricindex):
the rows of the selected system, tests and period only, never a session's
whole JSON.  The series, their numbering and their judgement are those of
hpcnet.acceptance.history, which states the rule.

A period ReFrame's way (``START:END``, a session UUID) is read from the
index; any other query (a session filter, ``?expr``) is ReFrame's to answer,
and history then reads the sessions it selects whole (history.load).
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from contextlib import closing
from pathlib import Path

from hpcnet.acceptance import accepted, history, levels, metricindex


def _period(period: str) -> tuple | None:
    """('uuid', UUID) or (start, end) in seconds of ``period``; None for a
    query the index does not answer."""
    if accepted.SESSION_UUID.fullmatch(period):
        return ('uuid', period)
    if '?' in period:
        return None
    try:
        return metricindex.period_bounds(period)
    except metricindex.MetricIndexError as err:
        raise history.HistoryError(f'{err}; or a session UUID') from None


def _selection(conn, system: str | None, name: str | None) -> tuple:
    """(SQL condition, its parameters) of the cases of ``system`` whose test
    name ``name`` finds."""
    try:
        pattern = re.compile(name) if name else None
    except re.error as err:
        raise history.HistoryError(f'-n/--name {name!r}: not a regular expression ({err})') \
            from None
    where, params = ['1'], []
    if system is not None:
        where.append('system = ?')
        params.append(system)
    if pattern is not None:
        tests = [t for (t,) in conn.execute(f'SELECT DISTINCT test FROM cases WHERE '
                                            f'{" AND ".join(where)}', params)
                 if pattern.search(t)]
        where.append(f'test IN ({",".join("?" * len(tests))})')
        params += tests
    return ' AND '.join(where), params


def _sessions(conn, period: str, selector: tuple, condition: str, params: list) -> tuple:
    """(every session of the period, numbered from 1, and the sessions
    before it that ran a selected case: the last history.LOOKBACK of them,
    numbered up to 0)."""
    if selector[0] == 'uuid':
        rows = conn.execute('SELECT uuid, start_unix, info FROM sessions WHERE uuid = ?',
                            (selector[1],)).fetchall()
        earlier = []
    else:
        start, end = selector
        rows = conn.execute('SELECT uuid, start_unix, info FROM sessions WHERE start_unix >= ? '
                            'AND start_unix < ? ORDER BY start_unix, rowid', (start, end)).fetchall()
        earlier = []
        if history.earlier_period(period) is not None:
            earlier = conn.execute(
                'SELECT s.uuid, s.start_unix, s.info FROM sessions s WHERE s.start_unix < ? '
                f'AND EXISTS (SELECT 1 FROM cases WHERE session_uuid = s.uuid AND {condition}) '
                'ORDER BY s.start_unix DESC, s.rowid DESC LIMIT ?',
                (start, *params, history.LOOKBACK)).fetchall()[::-1]
    selected = [history.Session(i + 1, uuid, start, {'session_info': json.loads(info)})
                for i, (uuid, start, info) in enumerate(rows)]
    before = [history.Session(i + 1 - len(earlier), uuid, start,
                              {'session_info': json.loads(info)})
              for i, (uuid, start, info) in enumerate(earlier)]
    return selected, before


class _Provenance(Mapping):
    """{case: provenance} of one session, each decoded when first asked:
    history reads the provenance of the few sessions beside a change or an
    outlier, and the nights of a case mostly record the same (one decoded
    copy of each distinct text, in ``decoded``)."""

    def __init__(self, texts: dict, decoded: dict):
        self.texts, self.decoded = texts, decoded

    def __getitem__(self, case: tuple) -> dict:
        text = self.texts[case]
        if text not in self.decoded:
            self.decoded[text] = json.loads(text)
        return self.decoded[text]

    def __iter__(self):
        return iter(self.texts)

    def __len__(self) -> int:
        return len(self.texts)


def _read(conn, sessions: list, condition: str, params: list) -> tuple:
    """([(Session, values, busy, ran)] of the sessions that ran a selected
    case, {session uuid: provenance of its selected cases})."""
    by_uuid = {s.uuid: s for s in sessions}
    where = f'{condition} AND session_uuid IN (SELECT value FROM json_each(?))'
    chosen = [*params, json.dumps(list(by_uuid))]
    values = {u: ({}, {}, {}) for u in by_uuid}
    texts: dict = {u: {} for u in by_uuid}
    # One object per distinct key and text, not one per row: a year of nights repeats them.
    shared: dict = {}
    for uuid, partition, environ, test, outcome, facts in conn.execute(
            f'SELECT session_uuid, partition, environ, test, outcome, provenance FROM cases '
            f'WHERE {where}', chosen):
        case = shared.setdefault((test, partition, environ), (test, partition, environ))
        values[uuid][2][case] = outcome
        if facts is not None:
            texts[uuid][case] = shared.setdefault(facts, facts)
    for uuid, partition, environ, test, metric, value, unit, basis in conn.execute(
            f'SELECT session_uuid, partition, environ, test, metric, value, unit, basis '
            f'FROM samples WHERE {where}', chosen):
        if value is None or not math.isfinite(value):
            raise history.HistoryError(
                f'{uuid}: session {uuid}: {test} @{partition} +{environ}: {metric} is '
                f'{float("nan") if value is None else value}: not a measurement (a benchmark '
                'figure must be a finite number)')
        into = values[uuid][1 if basis == metricindex.WITHHELD else 0]
        key = shared.setdefault((test, partition, environ, metric),
                                (test, partition, environ, metric))
        into.setdefault(key, (shared.setdefault(unit, unit), []))[1].append(value)
    read = [(s, *values[s.uuid]) for s in sessions if any(values[s.uuid])]
    decoded: dict = {}
    return read, {u: _Provenance(t, decoded) for u, t in texts.items()}


def load(period: str, *, db: Path | None = None, system: str | None = None,
         name: str | None = None, min_segment: int = levels.MIN_SEGMENT,
         alpha: float = levels.ALPHA, threshold: float = levels.THRESHOLD,
         acknowledged: Path | None = None) -> history.History:
    """history.load, from the metrics index of ReFrame's results database
    (``db``, else the configured one), synced with it first."""
    try:
        path = metricindex.results_db(db)
    except metricindex.MetricIndexError as err:
        raise history.HistoryError(str(err)) from None
    selector = _period(period)
    if selector is None:
        return history.load(period, db=path, system=system, name=name, min_segment=min_segment,
                            alpha=alpha, threshold=threshold, acknowledged=acknowledged)
    try:
        metricindex.sync(path)
        with closing(metricindex.connect(path)) as conn:
            condition, params = _selection(conn, system, name)
            in_period, before = _sessions(conn, period, selector, condition, params)
            read, provenance = _read(conn, before + in_period, condition, params)
    except metricindex.MetricIndexError as err:
        raise history.HistoryError(str(err)) from None
    sessions, series = history.series_from(read)
    if not series:
        raise history.nothing_measured(period, len(in_period), system, name)
    return history.judge(sessions, series, min_segment=min_segment, alpha=alpha,
                         threshold=threshold, provenance=provenance,
                         acceptances=history.acceptances_of(series, acknowledged))
