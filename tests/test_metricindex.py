"""The metrics index (hpcnet.acceptance.history.metricindex) over a scratch results
database of sessions crafted from recorded ones (tests/data): one row per
value, a resumable build that follows the database, history's series read
from it as from the sessions' JSON, retention that keeps the accepted
baseline, the NDJSON export, and paths as users type them."""
import json
import os
import sqlite3
import time
from contextlib import closing
from pathlib import Path

from helpers import results_db, run_hpcnet
from test_history import _noisy, nights

from hpcnet.acceptance.comparison import compare, sides
from hpcnet.acceptance.history import (history, history_index, history_text, metricindex,
                                       stored_series)
from hpcnet.acceptance.references.references import PROVENANCE
from hpcnet.acceptance.report import report
from hpcnet.exitcodes import Exit

LOCAL_RUN = Path(__file__).parent / 'data' / 'reports' / 'local-run.json'
DAY = 86400.0


def _db(tmp_path, values: list) -> tuple:
    """(results database, its reports): one night per value, the newest
    last night."""
    reports = nights(values, start=time.time() - (len(values) + 1) * DAY)
    return results_db(tmp_path / 'results.db', reports), reports


def _rows(db: Path, query: str) -> list:
    with closing(sqlite3.connect(metricindex.index_path(db))) as conn:
        return conn.execute(query).fetchall()


def test_a_recorded_session_is_one_row_per_value_with_its_basis_and_provenance(tmp_path):
    report = json.loads(LOCAL_RUN.read_text())
    db = results_db(tmp_path / 'results.db', [report])
    assert metricindex.sync(db).indexed == 1
    values = [(k, v) for k, (_, vs) in
              compare.samples(sides.Side('x', [report])).values.items()
              for v in vs]
    rows = _rows(db, 'SELECT test, partition, environ, metric, value, basis FROM samples')
    assert sorted((r[:4], r[4]) for r in rows) == sorted(values)
    assert {r[5] for r in rows} <= {metricindex.JUDGED, metricindex.NOT_ASSERTED}
    # Each sample names its case, with the provenance compare reads (that
    # of the cases in the session's runs; a known-issue retry has none).
    assert _rows(db, 'SELECT count(*) FROM samples s LEFT JOIN cases c ON c.id = s.case_id '
                     'WHERE c.id IS NULL') == [(0,)]
    assert _rows(db, 'SELECT count(DISTINCT case_id) FROM samples s JOIN cases c ON c.id = '
                     's.case_id WHERE c.provenance IS NOT NULL') == [(len(compare.provenance(
                         sides.Side('x', [report]))),)]


def test_busy_nights_are_withheld_with_their_reason(tmp_path):
    db, _ = _db(tmp_path, _noisy(3) + [('busy', 80.0)])
    metricindex.sync(db)
    assert _rows(db, "SELECT value, basis, reason FROM samples WHERE metric = 'bandwidth_4MiB' "
                     "AND basis != 'judged'") == [(80.0, 'withheld', 'host overloaded')]


def test_the_build_resumes_and_follows_the_database(tmp_path):
    db, reports = _db(tmp_path, _noisy(6))
    first = reports[0]['session_info']['uuid']
    with closing(metricindex.connect(db)) as conn:
        metricindex.write_session(conn, metricindex.session_rows(reports[0]))
    said = []
    done = metricindex.sync(db, progress=said.append)
    assert (done.indexed, done.total) == (5, 6)
    assert said[0].endswith('indexing 5 of 6 stored sessions') and said[-1].endswith('5/5 '
                                                                                     'sessions indexed')
    assert metricindex.sync(db, progress=said.append).indexed == 0
    with sqlite3.connect(db) as conn:
        conn.execute('DELETE FROM sessions WHERE uuid = ?', (first,))
    assert metricindex.sync(db).forgotten == 1
    assert first not in {u for (u,) in _rows(db, 'SELECT session_uuid FROM samples')}


def test_history_from_the_index_is_history_from_the_sessions(tmp_path):
    values = _noisy(10) + [('busy', 80.0)] + [v * 0.8 for v in _noisy(12, seed=4)] + ['crash'] * 2
    db, reports = _db(tmp_path, values)
    acknowledged = tmp_path / 'none.yaml'
    indexed = history_index.load('now-60d:now', db=db, system='testbed', acknowledged=acknowledged)
    sessions, series = stored_series.series_of(reports, system='testbed')
    whole = history.judge(sessions, series, acceptances=history.acceptances_of(series,
                                                                                acknowledged))
    assert history_text.text(indexed) == history_text.text(whole)
    assert indexed.exit_code == whole.exit_code == Exit.FAILED
    # A period that starts after the change reads the sessions before it.
    later = history_index.load(f'now-{int(14.5 * 24)}h:now', db=db, system='testbed',
                               acknowledged=acknowledged)
    assert [s.index for s in later.sessions][0] < 1


def test_prune_keeps_the_accepted_baseline_and_leaves_both_stores_in_step(tmp_path):
    db, reports = _db(tmp_path, _noisy(10))
    uuids = [r['session_info']['uuid'] for r in reports]
    refdir = tmp_path / 'refs'
    refdir.mkdir()
    (refdir / 'testbed.yaml').write_text(f"'{PROVENANCE}':\n  sessions: {json.dumps(uuids[1:3])}\n")
    metricindex.sync(db)
    # The 10 nights started 10 to 1 days ago: older than 5.5 days are the first 5.
    pruned = metricindex.prune(db, 5.5, refdir=refdir)
    assert sorted(pruned.deleted) == sorted([uuids[0], *uuids[3:5]])
    assert sorted(pruned.kept) == sorted(uuids[1:3])
    left = set(metricindex.stored_starts(db))
    assert left == set(uuids) - set(pruned.deleted)
    assert {u for (u,) in _rows(db, 'SELECT uuid FROM sessions')} == left


def test_export_writes_every_row_with_the_catalogues_unit_and_direction(tmp_path):
    db, _ = _db(tmp_path, _noisy(4))
    res = run_hpcnet('index', 'export', '--format', 'ndjson', '--db', 'results.db', cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    bw = [r for r in rows if r['metric'] == 'bandwidth_4MiB']
    assert len(bw) == 4 and len(rows) == len(_rows(db, 'SELECT * FROM samples'))
    assert {(r['better'], r['catalogue_unit'], r['basis']) for r in bw} == {('higher', 'MB/s',
                                                                              'judged')}
    assert all(r['provenance'] is not None for r in rows)


def test_a_relative_database_path_works_where_reframe_needs_it_absolute(tmp_path):
    db, _ = _db(tmp_path, _noisy(9))
    res = run_hpcnet('history', '--db', 'results.db', '--system', 'testbed', cwd=tmp_path)
    assert res.returncode == Exit.OK, res.stdout + res.stderr
    assert 'indexing 9 of 9 stored sessions' in res.stderr
    assert metricindex.index_path(db).is_file()
    # The period's other syntax: a session filter, answered by ReFrame.
    res = run_hpcnet('history', '--db', 'results.db', '--system', 'testbed', '--period',
                     'now-30d:now?num_failures==0', cwd=tmp_path)
    assert res.returncode == Exit.OK, res.stdout + res.stderr


def test_a_missing_or_unreadable_database_is_one_line(tmp_path):
    (tmp_path / 'junk.db').write_text('not a database')
    for args, says in ((['index', 'build', '--db', 'missing.db'],
                        f'--db {tmp_path / "missing.db"}: no such results database'),
                       (['index', 'export', '--db', 'junk.db'], 'not a readable ReFrame results '
                                                                 'database'),
                       (['history', '--db', 'junk.db'], 'not a readable ReFrame results database')):
        res = run_hpcnet(*args, cwd=tmp_path)
        assert res.returncode == Exit.USAGE, res.stderr
        assert says in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    if os.geteuid() != 0:
        (tmp_path / 'locked.db').write_text('')
        (tmp_path / 'locked.db').chmod(0)
        res = run_hpcnet('index', 'build', '--db', 'locked.db', cwd=tmp_path)
        assert res.returncode == Exit.USAGE and 'cannot read' in res.stderr


def test_the_trend_page_draws_the_latest_session_beside_the_search(tmp_path):
    '''`hpcnet history --output` draws the latest session's evidence in a forked
    process while the series are judged: its page holds what drawing it in
    this process gives (the same sections, as many figures), read from the
    index and from the sessions' JSON (a session filter) alike.'''
    db, reports = _db(tmp_path, _noisy(10) + [v * 0.8 for v in _noisy(10, seed=4)])
    found = history_index.load('now-60d:now', db=db, system='testbed',
                               acknowledged=tmp_path / 'none.yaml')
    drawn_here = report.evidence([reports[-1]])
    assert found.sessions[-1].uuid == reports[-1]['session_info']['uuid']
    assert [heading for heading, _, _ in drawn_here][-1] == 'Provenance'
    for period in ('now-60d:now', 'now-60d:now?num_failures>=0'):
        page = tmp_path / 'trend.html'
        res = run_hpcnet('history', '--db', 'results.db', '--system', 'testbed', '--period', period,
                         '--output', str(page), cwd=tmp_path)
        assert res.returncode == Exit.FAILED, res.stdout + res.stderr
        text = page.read_text()
        assert 'id="trend"' in text
        for heading, anchor, html in drawn_here:
            assert f'<section id="{anchor}"><h2>{heading}</h2>' in text
        # The trend's own plots (one changed metric) and the latest session's figures.
        assert text.count('data:image/svg+xml') == 1 + sum(
            html.count('data:image/svg+xml') for _, _, html in drawn_here)
