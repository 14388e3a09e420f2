"""Stored sessions read from ReFrame's results database in this process:
the reports `reframe --describe-stored-sessions QUERY` prints, by the same
SQL, without starting ReFrame (about a second a query, the cost of reading a
baseline of several sessions one UUID at a time).

A session UUID and a ``START:END`` period are answered here, from the table
ReFrame's sqlite storage keeps each session in as its JSON document
(reframe/frontend/reporting/storage.py, schema 1.0); a query with a session
filter (``?expr``, which ReFrame evaluates as Python over each session's
information) stays ReFrame's to answer (None).
"""
from __future__ import annotations

import json
import os
import re
import sqlite3
from contextlib import closing
from pathlib import Path

from hpcnet.constants import DEFAULT_REPORTS_DIR

#: What ReFrame takes for a UUID (reframe.frontend.reporting.utility.is_uuid):
#: a session's, or a run's or case's (``UUID:run[:case]``), which names no session.
_REFRAME_UUID = re.compile(r'^\w{8}-\w{4}-\w{4}-\w{4}-\w{12}(:\d+)?(:\d+)?$')


class StoredSessionsError(ValueError):
    """A query or database that cannot be read: a usage error (exit 2)."""


def database(db: Path | None = None) -> Path:
    """ReFrame's results database: ``db``, else RFM_SQLITE_DB_FILE, else
    the suite configuration's reports/results.db."""
    named = db if db is not None else os.environ.get('RFM_SQLITE_DB_FILE')
    return Path(named if named else DEFAULT_REPORTS_DIR / 'results.db').absolute()


def _selection(query: str) -> tuple | None:
    """(SQL condition, parameters) of ``query`` as ReFrame's fetch_sessions
    builds it; None for a session filter."""
    if _REFRAME_UUID.match(query):
        return 'uuid == ?', (query,)
    if '?' in query:
        return None
    try:
        start, end = period_bounds(query)
    except ValueError as err:
        raise StoredSessionsError(f'{query}: {err}; or a session UUID') from None
    return '(session_start_unix >= ? AND session_start_unix < ?)', (start, end)


def period_bounds(period: str) -> tuple:
    """(start, end) in seconds of a ``START:END`` period as ReFrame reads it
    (now-30d:now, 20260101:now); ValueError saying what is valid."""
    from reframe.frontend.reporting.utility import parse_time_period   # ReFrame's reading, when asked
    try:
        start, end = parse_time_period(period)
    except ValueError as err:
        raise ValueError(f'{err} (valid: START:END as ReFrame takes it, e.g. now-30d:now or '
                         '20260101:now)') from None
    if start >= end:
        raise ValueError('ends before it starts (valid: START:END, START the earlier, e.g. '
                         'now-30d:now or 20260101:now)')
    return (float(start), float(end))


def read(query: str, db: Path | None = None) -> list | None:
    """The reports of the sessions ``query`` selects, in the order ReFrame
    gives them; [] when the database does not exist (ReFrame would create it
    empty); None for a query ReFrame must answer (a session filter)."""
    selection = _selection(query)
    if selection is None:
        return None
    path = database(db)
    if not path.is_file():
        return []
    condition, params = selection
    try:
        with closing(sqlite3.connect(f'{path.as_uri()}?mode=ro', uri=True)) as conn:
            rows = conn.execute(f'SELECT uuid, json_blob FROM sessions WHERE {condition}',
                                params).fetchall()
    except sqlite3.DatabaseError as err:
        raise StoredSessionsError(f'{path}: not a readable ReFrame results database '
                                  f'({err})') from None
    reports: dict = {}
    for uuid, blob in rows:
        if uuid not in reports:
            try:
                reports[uuid] = json.loads(blob)
            except ValueError as err:
                raise StoredSessionsError(f'{path}: session {uuid} is not JSON ({err})') from None
    return list(reports.values())
