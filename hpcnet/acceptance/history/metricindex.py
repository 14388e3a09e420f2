"""The metrics index: every value of every stored session, one row each, in
an SQLite file beside ReFrame's results database (``<db>.index.sqlite``).

ReFrame's database (``RFM_SQLITE_DB_FILE``, default reports/results.db)
stays the source of truth: it keeps each session as one JSON document, so
reading a metric's series there decodes every session whole.  The index
holds what the readers need, in rows they select with an index:

- ``sessions``: uuid, start and end, the session's ``session_info`` (JSON);
- ``cases``: per session x test x partition x environment, why it has no
  value (``outcome``, NULL when a repeat measured it) and its provenance
  (MPI library, transport, nodes, link; hpcnet.acceptance.comparison.compare.provenance)
  as JSON; its ``id`` is the provenance key the samples name;
- ``samples``: per session x case x metric x repeat the value, its unit and
  basis: ``judged``, ``not asserted`` (the reference file asserts no
  bound), or ``withheld`` with the reason (a testbed host too busy to
  emulate the wire: shown, never judged).

Rows are what hpcnet.acceptance.comparison.compare.samples reads from a session: every
passed repeat (and the known-issue retries that passed).  A session is
indexed in one transaction, so an interrupted build leaves whole sessions and
resumes where it stopped.  The index follows the database: a session the
database lacks (deleted) leaves the index, one it gained is indexed
(sync()), on `hpcnet index build`, after each session hpcnet stores, and on
each command that reads the index.  Delete the file and it is rebuilt.
"""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from hpcnet import metrics
from hpcnet.acceptance.comparison import compare, sides, storedsessions
from hpcnet.acceptance.references import accepted
from hpcnet.acceptance.references.baseline import measured_cases
from hpcnet.acceptance.references.casevalues import recorded_values
from hpcnet.acceptance.references.references import reference_dir, withheld, withheld_reason
from hpcnet.constants import CONFIG_DIR, DEFAULT_REPORTS_DIR
from hpcnet.paths import reframe_executable
from hpcnet.longwork.progress import progress_line

#: The index's schema; an index of another version is rebuilt.
SCHEMA_VERSION = '1'
SUFFIX = '.index.sqlite'
#: Seconds between two progress lines.
PROGRESS_EVERY = 5.0
JUDGED, NOT_ASSERTED, WITHHELD = 'judged', 'not asserted', 'withheld'

_SCHEMA = (
    'CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT)',
    'CREATE TABLE IF NOT EXISTS sessions(uuid TEXT PRIMARY KEY, start_unix REAL, '
    'end_unix REAL, info TEXT)',
    'CREATE TABLE IF NOT EXISTS cases(id INTEGER PRIMARY KEY, session_uuid TEXT, '
    'start_unix REAL, system TEXT, partition TEXT, environ TEXT, test TEXT, outcome TEXT, '
    'provenance TEXT)',
    'CREATE TABLE IF NOT EXISTS samples(session_uuid TEXT, start_unix REAL, system TEXT, '
    'partition TEXT, environ TEXT, test TEXT, metric TEXT, repeat INTEGER, value REAL, '
    'unit TEXT, basis TEXT, reason TEXT, case_id INTEGER)',
    # A series per metric over a period; history's selection (system, tests,
    # period); the rows of given sessions (a baseline, a pruned session).
    'CREATE INDEX IF NOT EXISTS samples_series ON samples(test, metric, start_unix)',
    'CREATE INDEX IF NOT EXISTS samples_system ON samples(system, test, start_unix)',
    'CREATE INDEX IF NOT EXISTS samples_session ON samples(session_uuid)',
    'CREATE INDEX IF NOT EXISTS cases_system ON cases(system, test, start_unix)',
    'CREATE INDEX IF NOT EXISTS cases_session ON cases(session_uuid)',
    'CREATE INDEX IF NOT EXISTS sessions_start ON sessions(start_unix)',
)


class MetricIndexError(ValueError):
    """A results database that is missing or cannot be read, or an index
    that cannot be written: a usage error (exit 2)."""


def results_db(db: Path | str | None = None) -> Path:
    """The absolute path of ReFrame's results database: ``db``, else
    RFM_SQLITE_DB_FILE, else reports/results.db.  Absolute because ReFrame
    places its lock file beside the path's directory part, which a bare
    file name lacks.  An error when no such file exists."""
    named = db if db is not None else os.environ.get('RFM_SQLITE_DB_FILE')
    path = Path(named if named else DEFAULT_REPORTS_DIR / 'results.db').absolute()
    option = f'--db {db}' if db is not None else f'results database {path}'
    if not path.is_file():
        raise MetricIndexError(f'{option}: no such results database (a file ReFrame wrote; '
                               'RFM_SQLITE_DB_FILE or reports/results.db)')
    if not os.access(path, os.R_OK):
        raise MetricIndexError(f'{option}: cannot read the results database (permission denied)')
    return path


def store_reports(db: Path, reports) -> Path:
    """Write ``reports`` (run reports, each with its ``session_info``) into a
    new results database at ``db``, in the tables of ReFrame 4's sqlite
    storage this module reads (reframe/frontend/reporting/storage.py, schema
    1.0): a history made from recorded sessions (the tests,
    ci/benchmarks/history_year.py).  Each report is serialised as it comes,
    so a generator may yield one report changed between nights.  Returns ``db``."""
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute('CREATE TABLE sessions(uuid TEXT PRIMARY KEY, session_start_unix REAL, '
                     'session_end_unix REAL, json_blob TEXT, report_file TEXT)')
        conn.execute('CREATE TABLE testcases(name TEXT, system TEXT, partition TEXT, '
                     'environ TEXT, job_completion_time_unix REAL, session_uuid TEXT, uuid TEXT)')
        conn.execute('CREATE TABLE metadata(schema_version TEXT)')
        conn.execute("INSERT INTO metadata VALUES('1.0')")
        for report in reports:
            info = report['session_info']
            conn.execute('INSERT INTO sessions VALUES(?, ?, ?, ?, NULL)',
                         (info['uuid'], info['time_start_unix'], info['time_end_unix'],
                          json.dumps(report)))
            conn.executemany('INSERT INTO testcases VALUES(?, ?, ?, ?, ?, ?, ?)', [
                (tc['name'], tc['system'], tc['partition'], tc['environ'],
                 info['time_end_unix'], info['uuid'], f'{info["uuid"]}:{run_index}:{case_index}')
                for run_index, run in enumerate(report['runs'])
                for case_index, tc in enumerate(run['testcases'])])
    return db


def index_path(db: Path) -> Path:
    return db.with_name(db.name + SUFFIX)


def _reframe_db(db: Path) -> sqlite3.Connection:
    """ReFrame's database, read only."""
    return sqlite3.connect(f'{db.as_uri()}?mode=ro', uri=True)


def stored_starts(db: Path) -> dict:
    """{uuid: start time} of every session ReFrame's database holds, without
    decoding a session."""
    try:
        with closing(_reframe_db(db)) as conn:
            return dict(conn.execute('SELECT uuid, session_start_unix FROM sessions'))
    except sqlite3.DatabaseError as err:
        raise MetricIndexError(f'{db}: not a readable ReFrame results database ({err})') from None


def stored_report(db: Path, uuid: str) -> dict:
    """One session's whole report, as ReFrame stored it."""
    with closing(_reframe_db(db)) as conn:
        row = conn.execute('SELECT json_blob FROM sessions WHERE uuid = ?', (uuid,)).fetchone()
    if row is None:
        raise MetricIndexError(f'{db}: holds no session {uuid}')
    return json.loads(row[0])


def connect(db: Path) -> sqlite3.Connection:
    """The index of ``db``, created (or recreated, when of another schema)
    as needed."""
    path = index_path(db)
    try:
        conn = sqlite3.connect(path)
        version = None
        if conn.execute("SELECT name FROM sqlite_master WHERE name = 'meta'").fetchone():
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            version = row[0] if row else None
        if version not in (None, SCHEMA_VERSION):
            conn.close()
            path.unlink()
            conn = sqlite3.connect(path)
        for statement in _SCHEMA:
            conn.execute(statement)
        conn.execute("INSERT OR REPLACE INTO meta VALUES('schema', ?)", (SCHEMA_VERSION,))
        conn.commit()
    except (sqlite3.DatabaseError, OSError) as err:
        raise MetricIndexError(f'{path}: cannot open the metrics index ({err}); delete it and '
                               'it is rebuilt from the results database') from None
    return conn


def case_outcomes(report: dict) -> dict:
    """{case key: why it has no value, or None when a repeat measured it} of
    every case a session ran (fixtures left out)."""
    out: dict = {}
    for run in report.get('runs', []):
        for tc in run.get('testcases', []):
            if not tc.get('fixture'):
                reason = ' '.join(str(tc.get('fail_reason') or '').split())[:120]
                out[sides.case_key(tc)] = (
                    f'{tc.get("result") or "?"}'
                    + (f' in {tc["fail_phase"]}' if tc.get('fail_phase') else '')
                    + (f': {reason}' if reason else ''))
    for tc in measured(report):
        out[sides.case_key(tc)] = None
    return out


def measured(report: dict) -> list:
    """The cases of a session with values: measured_cases, and the
    known-issue retries that passed."""
    return list(measured_cases([report])) + [
        tc for tc in report.get('hpcnet_retried') or [] if tc.get('result') == 'pass']


@dataclass(frozen=True)
class SessionRows:
    """What the index holds of one session."""
    uuid: str
    start: float
    end: float
    info: dict
    cases: list         #: (test, partition, environ, outcome, provenance JSON or None)
    samples: list       #: (test, partition, environ, metric, repeat, value, unit, basis, reason)


def session_rows(report: dict) -> SessionRows:
    """The rows of one session's report (module docstring)."""
    info = report.get('session_info', {})
    uuid = info.get('uuid', '?')
    facts = compare.provenance(sides.Side(uuid, [report]))
    cases = [(*key, why, json.dumps(facts[key]) if key in facts else None)
             for key, why in case_outcomes(report).items()]
    samples, repeats = [], {}
    for tc in measured(report):
        key = sides.case_key(tc)
        basis, reason = (WITHHELD, withheld_reason(tc)) if withheld(tc) else (None, None)
        for var, value, unit, unasserted in recorded_values(tc):
            repeat = repeats[(*key, var)] = repeats.get((*key, var), 0) + 1
            samples.append((*key, var, repeat, value, unit,
                            basis or (NOT_ASSERTED if unasserted else JUDGED), reason))
    return SessionRows(uuid, float(info.get('time_start_unix') or 0),
                       float(info.get('time_end_unix') or 0), info, cases, samples)


def write_session(conn: sqlite3.Connection, rows: SessionRows) -> None:
    """One session into the index, in one transaction (replacing what it held)."""
    with conn:
        forget(conn, [rows.uuid])
        conn.execute('INSERT INTO sessions VALUES(?, ?, ?, ?)',
                     (rows.uuid, rows.start, rows.end, json.dumps(rows.info)))
        ids = {}
        for test, partition, environ, outcome, provenance in rows.cases:
            cursor = conn.execute(
                'INSERT INTO cases(session_uuid, start_unix, system, partition, environ, test, '
                'outcome, provenance) VALUES(?, ?, ?, ?, ?, ?, ?, ?)',
                (rows.uuid, rows.start, partition.split(':')[0], partition, environ, test,
                 outcome, provenance))
            ids[(test, partition, environ)] = cursor.lastrowid
        conn.executemany(
            'INSERT INTO samples VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
            [(rows.uuid, rows.start, partition.split(':')[0], partition, environ, test, metric,
              repeat, value, unit, basis, reason, ids.get((test, partition, environ)))
             for test, partition, environ, metric, repeat, value, unit, basis, reason
             in rows.samples])


def forget(conn: sqlite3.Connection, uuids: list) -> None:
    """Remove sessions from the index (the caller commits)."""
    for table, column in (('samples', 'session_uuid'), ('cases', 'session_uuid'),
                          ('sessions', 'uuid')):
        conn.executemany(f'DELETE FROM {table} WHERE {column} = ?', [(u,) for u in uuids])


@dataclass(frozen=True)
class Synced:
    indexed: int        #: sessions added
    forgotten: int      #: sessions the database no longer holds, removed
    total: int          #: sessions in the database


def sync(db: Path, progress=progress_line) -> Synced:
    """Make the index of ``db`` hold exactly the sessions ``db`` holds:
    index those it lacks (oldest first, one transaction each, a progress
    line every PROGRESS_EVERY seconds) and forget those ``db`` lost."""
    stored = stored_starts(db)
    with closing(connect(db)) as conn:
        indexed = dict(conn.execute('SELECT uuid, start_unix FROM sessions'))
        # A session replaced under the same uuid (a database recreated) is indexed again.
        gone = [u for u, start in indexed.items() if stored.get(u) != start]
        if gone:
            with conn:
                forget(conn, gone)
        todo = sorted((start or 0, uuid) for uuid, start in stored.items()
                      if uuid not in indexed or uuid in gone)
        if todo:
            progress(f'metrics index {index_path(db)}: indexing {len(todo)} of {len(stored)} '
                     'stored sessions')
        last = time.monotonic()
        with closing(_reframe_db(db)) as source:
            for done, (_, uuid) in enumerate(todo, 1):
                row = source.execute('SELECT json_blob FROM sessions WHERE uuid = ?',
                                     (uuid,)).fetchone()
                if row is None:
                    continue    # deleted since it was listed
                write_session(conn, session_rows(json.loads(row[0])))
                if time.monotonic() - last >= PROGRESS_EVERY or done == len(todo):
                    progress(f'metrics index: {done}/{len(todo)} sessions indexed')
                    last = time.monotonic()
    return Synced(len(todo), len(gone), len(stored))


def period_bounds(period: str | None) -> tuple:
    """(start, end) in seconds of a ``START:END`` period as ReFrame reads it
    (now-30d:now, 20260101:now); every time for None."""
    if period is None:
        return (float('-inf'), float('inf'))
    try:
        return storedsessions.period_bounds(period)
    except ValueError as err:
        raise MetricIndexError(f'--period {period}: {err}') from None


# -- Retention: old sessions leave ReFrame's database and the index together.

def protected_sessions(refdir: Path | None = None) -> set:
    """The sessions the provenance of a reference file names (every block):
    the accepted baselines, which no pruning deletes."""
    found: set = set()
    for path in sorted((refdir or reference_dir()).glob('*.yaml')):
        try:
            blocks = accepted.provenance_sessions(path)
        except accepted.NoAcceptedBaseline as err:
            raise MetricIndexError(f'cannot tell the baseline sessions apart, so nothing is '
                                   f'deleted: {err}') from None
        found.update(uuid for block in blocks for uuid in block)
    return found


def reframe_delete(db: Path, uuids: list) -> None:
    """Delete sessions from ReFrame's database the way ReFrame does
    (`reframe --delete-stored-sessions`, the suite's configuration): one
    call, a session filter naming exactly ``uuids``."""
    until = time.strftime('%Y%m%dT%H%M%S+0000', time.gmtime(time.time() + 86400))
    query = f'19700101T000000+0000:{until}?uuid in {json.dumps(sorted(uuids))}'
    res = subprocess.run([reframe_executable(), '-C', str(CONFIG_DIR / 'settings.py'),
                          '--delete-stored-sessions', query], text=True,
                         env={**os.environ, 'RFM_SQLITE_DB_FILE': str(db)},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if res.returncode != 0:
        raise MetricIndexError(f'{db}: reframe --delete-stored-sessions failed: '
                               f'{(res.stderr or res.stdout).strip()[-500:]}')


@dataclass(frozen=True)
class Pruned:
    deleted: list       #: uuids deleted from both stores
    kept: list          #: uuids old enough, kept: a reference file's provenance names them


def prune(db: Path, older_than_days: float, *, refdir: Path | None = None,
          delete=reframe_delete) -> Pruned:
    """Delete the sessions that started more than ``older_than_days`` ago
    from ReFrame's database (``delete``) and then from the index, except the
    sessions a reference file's provenance names (protected_sessions)."""
    keep = protected_sessions(refdir)
    cutoff = time.time() - older_than_days * 86400
    old = sorted(u for u, start in stored_starts(db).items() if (start or 0) < cutoff)
    doomed = [u for u in old if u not in keep]
    if doomed:
        delete(db, doomed)
    left = set(doomed) & set(stored_starts(db))
    if left:
        raise MetricIndexError(f'{db}: {len(left)} of {len(doomed)} sessions were not deleted '
                               f'(e.g. {min(left)}); the index keeps them too')
    sync(db, progress=lambda _: None)
    return Pruned(doomed, [u for u in old if u in keep])


# -- Export: the rows, with the metric catalogue's unit and better side.

def export_ndjson(db: Path, out: TextIO, period: str | None = None) -> int:
    """Write the index's samples of ``period`` as NDJSON, one object a
    line; returns how many.  Each carries the recorded unit, and the
    catalogue's unit, better side and value in its unit (None where the
    catalogue does not know the metric or the unit does not convert)."""
    start, end = period_bounds(period)
    sync(db)
    count = 0
    with closing(connect(db)) as conn:
        for (uuid, when, system, partition, environ, test, metric, repeat, value, unit, basis,
             reason, facts) in conn.execute(
                'SELECT s.session_uuid, s.start_unix, s.system, s.partition, s.environ, s.test, '
                's.metric, s.repeat, s.value, s.unit, s.basis, s.reason, c.provenance '
                'FROM samples s LEFT JOIN cases c ON c.id = s.case_id '
                'WHERE s.start_unix >= ? AND s.start_unix < ? '
                'ORDER BY s.start_unix, s.rowid', (start, end)):
            entry = metrics.lookup(test, metric)
            factor = None
            if entry is not None and value is not None:
                try:
                    factor = metrics.conversion(unit, entry.unit)
                except metrics.UnitError:
                    factor = None   # the row says so: catalogue_value null beside its unit
            out.write(json.dumps({
                'session': uuid, 'time_start_unix': when,
                'time_start': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(when)),
                'system': system, 'partition': partition, 'environ': environ, 'test': test,
                'metric': metric, 'repeat': repeat, 'value': value, 'unit': unit,
                'catalogue_unit': entry.unit if entry else None,
                'catalogue_value': value * factor if factor is not None else None,
                'better': entry.better if entry else None, 'basis': basis, 'reason': reason,
                'provenance': json.loads(facts) if facts else None}) + '\n')
            count += 1
    return count
