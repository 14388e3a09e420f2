"""Stored sessions read in-process (hpcnet.acceptance.comparison.storedsessions): what
`reframe --describe-stored-sessions` prints for the same query, from a
results database of nights made from the recorded testbed sessions
(test_history.nights)."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from helpers import results_db
from test_history import nights

from hpcnet.acceptance.comparison import sides, storedsessions
from hpcnet.constants import CONFIG_DIR
from hpcnet.paths import reframe_executable

DAY = 86400.0


def _db(tmp_path) -> tuple:
    """(database, its reports): five nights, the newest half a day old."""
    reports = nights([112.0, 113.0, 111.0, 112.5, 90.0], start=time.time() - 5.5 * DAY)
    return results_db(tmp_path / 'results.db', reports), reports


def _reframe(db: Path, query: str) -> list:
    res = subprocess.run([reframe_executable(), '-C', str(CONFIG_DIR / 'settings.py'),
                          '--describe-stored-sessions', query], text=True, check=True,
                         env={**os.environ, 'RFM_SQLITE_DB_FILE': str(db)},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    return json.loads(res.stdout)


def test_a_uuid_and_a_period_read_what_reframe_prints(tmp_path):
    db, reports = _db(tmp_path)
    uuid = reports[2]['session_info']['uuid']
    for query in (uuid, 'now-1d:now', 'now-3d:now', f'{uuid}:0:1'):
        assert storedsessions.read(query, db) == _reframe(db, query), query
    assert storedsessions.read(uuid, db) == [reports[2]]
    assert [r['session_info']['uuid'] for r in storedsessions.read('now-1d:now', db)] == \
        [reports[-1]['session_info']['uuid']]


def test_a_session_filter_is_left_to_reframe_and_compare_asks_it(tmp_path):
    db, reports = _db(tmp_path)
    assert storedsessions.read('now-3d:now?True', db) is None
    assert sides.stored_sessions('now-3d:now?True', db) == _reframe(db, 'now-3d:now')


def test_a_missing_database_holds_nothing_and_a_bad_one_is_one_line(tmp_path):
    assert storedsessions.read('now-1d:now', tmp_path / 'none.db') == []
    bad = tmp_path / 'bad.db'
    bad.write_text('not a database\n' * 100)
    with pytest.raises(sides.CompareError) as err:
        sides.stored_sessions('now-1d:now', bad)
    assert str(bad) in str(err.value) and '\n' not in str(err.value)
    with pytest.raises(sides.CompareError) as err:
        sides.stored_sessions('yesterday:now', bad)
    assert 'yesterday:now' in str(err.value) and 'START:END' in str(err.value)
