"""`hpcnet history` read from the metrics index (hpcnet.acceptance.history.metricindex):
the rows of the selected system, tests and period only, never a session's
whole JSON.  The series, their numbering and their judgement are those of
hpcnet.acceptance.history.history, which states the rule.

A period ReFrame's way (``START:END``, a session UUID) is read from the
index; any other query (a session filter, ``?expr``) is ReFrame's to answer,
and history then reads the sessions it selects whole (history.load).
"""
from __future__ import annotations

import json
import re
import statistics
from collections.abc import Mapping
from contextlib import closing
from pathlib import Path

import numpy as np

from hpcnet.acceptance.history import history, levels, metricindex, stored_series
from hpcnet.acceptance.references import accepted


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
        raise stored_series.HistoryError(f'{err}; or a session UUID') from None


def _selection(conn, system: str | None, name: str | None) -> tuple:
    """(SQL condition, its parameters) of the cases of ``system`` whose test
    name ``name`` finds."""
    try:
        pattern = re.compile(name) if name else None
    except re.error as err:
        raise stored_series.HistoryError(f'-n/--name {name!r}: not a regular expression ({err})') \
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
    before it that ran a selected case: the last stored_series.LOOKBACK of them,
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
                (start, *params, stored_series.LOOKBACK)).fetchall()[::-1]
    selected = [stored_series.Session(i + 1, uuid, start, {'session_info': json.loads(info)})
                for i, (uuid, start, info) in enumerate(rows)]
    before = [stored_series.Session(i + 1 - len(earlier), uuid, start,
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


_OF_SESSIONS = 'session_uuid IN (SELECT value FROM json_each(?))'
#: Sample rows read from the database at a time, then kept as arrays.
_CHUNK = 65536


def _provenance_texts(conn, where: str, chosen: list) -> dict:
    """{case row id: its provenance JSON} of the selected cases: the
    database groups the rows by text, so each distinct text (the nights of
    a case mostly record the same) reaches Python once."""
    texts: dict = {}
    for text, ids in conn.execute(f'SELECT provenance, group_concat(id) FROM cases WHERE '
                                  f'{where} AND provenance IS NOT NULL GROUP BY provenance',
                                  chosen):
        texts.update(dict.fromkeys(map(int, ids.split(',')), text))
    return texts


def _cases(conn, sessions: list, where: str, chosen: list) -> tuple:
    """(the case keys, and per selected case row its id, session position
    and key number; per session {case: outcome} and {case: provenance JSON})."""
    position = {s.uuid: i for i, s in enumerate(sessions)}
    texts_of = _provenance_texts(conn, where, chosen)
    ran: list = [{} for _ in sessions]
    texts: list = [{} for _ in sessions]
    numbers: dict = {}
    keys, row_ids, row_positions, row_keys = [], [], [], []
    for row_id, uuid, partition, environ, test, outcome in conn.execute(
            f'SELECT id, session_uuid, partition, environ, test, outcome FROM cases '
            f'WHERE {where}', chosen):
        key = (test, partition, environ)
        number = numbers.get(key)
        if number is None:
            number = numbers[key] = len(keys)
            keys.append(key)
        at = position[uuid]
        ran[at][keys[number]] = outcome
        if row_id in texts_of:
            texts[at][keys[number]] = texts_of[row_id]
        row_ids.append(row_id)
        row_positions.append(at)
        row_keys.append(number)
    rows = (np.array(row_ids, dtype=np.int64), np.array(row_positions, dtype=np.intp),
            np.array(row_keys, dtype=np.intp))
    return keys, rows, ran, texts


def _samples(conn, where: str, chosen: list) -> tuple:
    """(case row id, kind number and value of each selected sample, as
    arrays; [(metric, unit, basis)] of each kind number).  The database
    numbers the kinds, so no row's text reaches Python."""
    conn.execute('DROP TABLE IF EXISTS temp.history_kinds')
    conn.execute(f'CREATE TEMP TABLE history_kinds AS SELECT DISTINCT metric, unit, basis '
                 f'FROM samples WHERE {where}', chosen)
    conn.execute('CREATE UNIQUE INDEX temp.history_kinds_all ON history_kinds(metric, unit, basis)')
    kinds = conn.execute('SELECT rowid, metric, unit, basis FROM temp.history_kinds').fetchall()
    cursor = conn.execute(
        f'SELECT s.case_id, k.rowid, s.value FROM samples s JOIN temp.history_kinds k '
        f'ON k.metric = s.metric AND k.unit IS s.unit AND k.basis IS s.basis WHERE {where}',
        chosen)
    chunks = [np.empty((0, 3))]
    while rows := cursor.fetchmany(_CHUNK):
        chunks.append(np.array(rows, dtype=float))
    conn.execute('DROP TABLE temp.history_kinds')
    table = np.concatenate(chunks)
    rowids = np.array([k[0] for k in kinds], dtype=np.int64)
    order = np.argsort(rowids)
    kind = order[np.searchsorted(rowids, table[:, 1].astype(np.int64), sorter=order)]
    return table[:, 0], kind, table[:, 2], [k[1:] for k in kinds]


def _case_rows(case_rows: tuple, case_ids) -> np.ndarray:
    """The case row of each sample's ``case_ids``; an error for a sample
    whose case the index lacks."""
    ids = case_rows[0]
    order = np.argsort(ids, kind='stable')
    found = order[np.searchsorted(ids, case_ids, sorter=order).clip(max=max(len(ids) - 1, 0))] \
        if len(ids) else np.zeros(len(case_ids), dtype=np.intp)
    if len(case_ids) and (not len(ids) or not (ids[found] == case_ids).all()):
        raise metricindex.MetricIndexError('the metrics index holds samples without their '
                                           'case; delete it and it is rebuilt')
    return found


def _not_finite(sessions, keys, kinds, case_rows, found, kind, values) -> None:
    """The error of the first sample that is not a finite number, if any."""
    bad = np.flatnonzero(~np.isfinite(values))
    if len(bad):
        first = bad[0]
        uuid = sessions[case_rows[1][found[first]]].uuid
        test, partition, environ = keys[case_rows[2][found[first]]]
        raise stored_series.HistoryError(
            f'{uuid}: session {uuid}: {test} @{partition} +{environ}: {kinds[kind[first]][0]} '
            f'is {float(values[first])}: not a measurement (a benchmark figure must be a '
            'finite number)')


def _groups(series_of, withheld, positions, values) -> tuple:
    """The samples grouped by series, basis (judged first) and session, in
    that order: (series, withheld, session position, first sample, median)
    of each group (the first two as arrays).  A session's value is the median of its
    samples, as stored_series.series_from takes it."""
    order = np.lexsort((positions, withheld, series_of))
    series_of, withheld, positions = series_of[order], withheld[order], positions[order]
    starts = np.flatnonzero(np.concatenate((
        [True], (series_of[1:] != series_of[:-1]) | (withheld[1:] != withheld[:-1])
        | (positions[1:] != positions[:-1])))) if len(order) else np.empty(0, dtype=np.intp)
    ordered = values[order]
    medians = ordered[starts].tolist()
    ends = np.append(starts[1:], len(order))
    for group in np.flatnonzero(ends - starts > 1):
        medians[group] = statistics.median(ordered[starts[group]:ends[group]].tolist())
    return (series_of[starts], withheld[starts], positions[starts].tolist(),
            order[starts].tolist(), medians)


def _series(conn, sessions: list, condition: str, params: list, before_judging=None) -> tuple:
    """(the sessions that ran a selected case, [Series] in key order,
    {session uuid: provenance of its selected cases}): stored_series.series_from
    of the selected rows, read as columns.  ``before_judging`` (load's) is
    called as soon as the sessions are known, before the samples are read."""
    where = f'{condition} AND {_OF_SESSIONS}'
    chosen = [*params, json.dumps([s.uuid for s in sessions])]
    keys, case_rows, ran, texts = _cases(conn, sessions, where, chosen)
    if before_judging is not None and any(ran):
        before_judging([session for i, session in enumerate(sessions) if ran[i]])
    case_ids, kind, values, kinds = _samples(conn, where, chosen)
    found = _case_rows(case_rows, case_ids)
    _not_finite(sessions, keys, kinds, case_rows, found, kind, values)
    metric_names = sorted({metric for metric, _, _ in kinds})
    metric_of = np.array([metric_names.index(metric) for metric, _, _ in kinds] or [0])
    withheld_kind = np.array([basis == metricindex.WITHHELD for _, _, basis in kinds] or [False])
    positions = case_rows[1][found]
    groups = _groups(case_rows[2][found] * len(metric_names) + metric_of[kind],
                     withheld_kind[kind], positions, values)
    by_key: dict = {}
    series_of, withheld, positions, first, medians = groups
    judged_before = np.concatenate(([0], np.cumsum(~withheld))).tolist()
    starts = np.flatnonzero(np.concatenate(([True], series_of[1:] != series_of[:-1]))) \
        if len(series_of) else np.empty(0, dtype=np.intp)
    numbers = series_of[starts].tolist()
    ends = starts[1:].tolist() + [len(series_of)]
    for number, start, end in zip(numbers, starts.tolist(), ends):
        busy = start + judged_before[end] - judged_before[start]
        key = (*keys[number // len(metric_names)], metric_names[number % len(metric_names)])
        # The unit is that of the first session's samples, judged before busy.
        earliest = start if start < busy and (busy == end or positions[start] <= positions[busy]) \
            else busy
        series = by_key[key] = stored_series.Series(
            key, kinds[kind[first[earliest]]][1], list(map(sessions.__getitem__,
                                                           positions[start:busy])),
            medians[start:busy])
        series.busy = list(zip(map(sessions.__getitem__, positions[busy:end]), medians[busy:end]))
    read = [(session, None, None, ran[i]) for i, session in enumerate(sessions) if ran[i]]
    decoded: dict = {}
    return (*stored_series.with_stops(read, by_key),
            {s.uuid: _Provenance(texts[i], decoded) for i, s in enumerate(sessions)})


def load(period: str, *, db: Path | None = None, system: str | None = None,
         name: str | None = None, min_segment: int = levels.MIN_SEGMENT,
         alpha: float = levels.ALPHA, threshold: float = levels.THRESHOLD,
         acknowledged: Path | None = None, before_judging=None) -> history.History:
    """history.load, from the metrics index of ReFrame's results database
    (``db``, else the configured one), synced with it first; it calls
    ``before_judging`` before it reads the samples, as soon as it knows the
    sessions."""
    selector = _period(period)
    try:
        path = metricindex.results_db(db)
    except metricindex.MetricIndexError as err:
        raise stored_series.HistoryError(str(err)) from None
    if selector is None:
        return history.load(period, db=path, system=system, name=name, min_segment=min_segment,
                            alpha=alpha, threshold=threshold, acknowledged=acknowledged,
                            before_judging=before_judging)
    try:
        metricindex.sync(path)
        with closing(metricindex.connect(path)) as conn:
            condition, params = _selection(conn, system, name)
            in_period, before = _sessions(conn, period, selector, condition, params)
            sessions, series, provenance = _series(conn, before + in_period, condition, params,
                                                   before_judging)
    except metricindex.MetricIndexError as err:
        raise stored_series.HistoryError(str(err)) from None
    if not series:
        raise history.nothing_measured(period, len(in_period), system, name)
    return history.judge(sessions, series, min_segment=min_segment, alpha=alpha,
                         threshold=threshold, provenance=provenance,
                         acceptances=history.acceptances_of(series, acknowledged))
