"""Fault-matrix rows for what a site tells `hpcnet history` (issue 47 item 7),
each over a scratch results database of nightly sessions made from a
recorded testbed session (tests/test_history.py): an acknowledged stop, a
bad period the system came back from, a baseline of some checks, and a
change placed at the session that changed the MPI; beside each, the
healthy or still-failing counterpart."""
import datetime
import json
import subprocess
import time

from helpers import fault_row, results_db, run_hpcnet
from test_history import DAY, _noisy, judged, nights

from hpcnet.acceptance.history import history_text, levels, placement
from hpcnet.acceptance.references import accepted_changes as accepted
from hpcnet.acceptance.references.references import PROVENANCE
from hpcnet.exitcodes import Exit

BW_CASE = 'hpcnet_p2p %scale=2_nodes %mode=bw @testbed:eth +gcc12-openmpi4'
BW = f'{BW_CASE} bandwidth_4MiB [MB/s]'
NEW_MPI = 'Open MPI v4.1.5'


def _uuid(number: int) -> str:
    return f'{number:08d}-0000-4000-8000-000000000000'


def _reports(values: list, mpi: range = range(0)) -> list:
    """One night per value, the newest last night; the sessions numbered in
    ``mpi`` ran NEW_MPI."""
    reports = nights(values, start=time.time() - (len(values) + 1) * DAY)
    for number, report in enumerate(reports, 1):
        if number in mpi:
            for case in report['runs'][0]['testcases']:
                case['mpi_library'] = NEW_MPI
    return reports


def _history(tmp_path, reports: list, *args) -> subprocess.CompletedProcess:
    db = tmp_path / 'results.db'
    if not db.exists():
        results_db(db, reports)
    return run_hpcnet('history', '--db', str(db), '--system', 'testbed', *args,
                      env={'HPCNET_REFERENCE_DIR': str(tmp_path / 'refs')}, timeout=300)


def _baseline(tmp_path, sessions: list, updated: dict | None = None) -> None:
    """A reference file written now whose provenance names ``sessions``
    (and the checks it ``updated``)."""
    refs = tmp_path / 'refs'
    refs.mkdir(exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')
    block = {'date': now, 'sessions': sessions,
             **({'updated': updated} if updated else {})}
    (refs / 'testbed.yaml').write_text(json.dumps({PROVENANCE: block}))


def test_an_acknowledged_stop_is_shown_acknowledged_and_passes(tmp_path):
    reports = _reports(_noisy(14) + [None] * 6)
    res = _history(tmp_path, reports)
    assert res.returncode == Exit.FAILED and 'STOPPED        ' in res.stdout, res.stdout
    res = _history(tmp_path, reports, '--acknowledge', f'{_uuid(15)}:bandwidth', '--why',
                   'the bandwidth case left the nightly selection on purpose')
    fault_row('history: a case removed on purpose, acknowledged at its first missing night', res,
              Exit.OK, 'ACKNOWLEDGED STOPPED')
    assert 'STOPPED        ' not in res.stdout and 'left the nightly selection' in res.stdout
    # The record stands for every later run over the window.
    res = _history(tmp_path, reports)
    assert res.returncode == Exit.OK and 'ACKNOWLEDGED STOPPED' in res.stdout, res.stdout


def test_an_acknowledgement_of_other_series_leaves_the_stop_failed(tmp_path):
    reports = _reports(_noisy(14) + [None] * 6)
    res = _history(tmp_path, reports, '--acknowledge', f'{_uuid(15)}:latency', '--why',
                   'the ping-pong latency is accepted')
    fault_row('history: a case stopped, the acknowledgement names other series', res,
              Exit.FAILED, 'STOPPED        ')
    # An acknowledgement older than the stop accepts nothing of it.
    found = judged(reports, acceptances=(accepted.Acceptance((_uuid(5),), None, 'x'),))
    assert found.stopped() and found.exit_code == Exit.FAILED


def test_a_system_back_at_its_level_after_a_bad_period_is_recovered(tmp_path):
    values = _noisy(10) + [v * 0.8 for v in _noisy(8, seed=4)] + _noisy(10, seed=9)
    res = _history(tmp_path, _reports(values, mpi=range(11, 19)))
    reason = fault_row('history: 8 nights at -20 % (an MPI update), then back at the level',
                       res, Exit.OK, 'RECOVERED      ')
    assert reason.startswith(f'RECOVERED      {BW}: back at ') and 'from session 19 (' in reason
    assert 'the bad period: session 11 (' in reason and 'to session 18 (' in reason
    assert 'CHANGED WORSE' not in res.stdout, res.stdout


def test_a_system_only_half_way_back_still_fails(tmp_path):
    values = _noisy(10) + [v * 0.7 for v in _noisy(8, seed=4)] + \
        [v * 0.85 for v in _noisy(10, seed=9)]
    res = _history(tmp_path, _reports(values))
    fault_row('history: 8 nights at -30 %, then back at -15 % only', res, Exit.FAILED,
              'CHANGED WORSE  ')
    assert 'RECOVERED' not in res.stdout


def test_a_baseline_of_other_cases_does_not_accept_a_change(tmp_path):
    # Session 14 is a baseline that ran the ping-pong case only.
    values = _noisy(10) + [v * 0.8 for v in _noisy(12, seed=4)]
    values[13] = None
    reports = _reports(values)
    _baseline(tmp_path, [_uuid(14)])
    res = _history(tmp_path, reports)
    fault_row('history: bandwidth -20 % from session 11, a ping-pong-only baseline at 14', res,
              Exit.FAILED, 'CHANGED WORSE  ')
    assert 'ACCEPTED' not in res.stdout


def test_a_baseline_that_measured_the_change_accepts_it(tmp_path):
    values = _noisy(10) + [v * 0.8 for v in _noisy(12, seed=4)]
    _baseline(tmp_path, [_uuid(14)])
    res = _history(tmp_path, _reports(values))
    fault_row('history (healthy): bandwidth -20 % from session 11, a baseline that measured it '
              'at 14', res, Exit.OK, 'ACCEPTED       ')


def test_a_baseline_none_of_whose_sessions_is_read_accepts_the_checks_it_lists(tmp_path):
    reports = _reports(_noisy(10) + [v * 0.8 for v in _noisy(12, seed=4)])
    elsewhere = ['ffffffff-0000-4000-8000-000000000000']
    for updated, code in (({'hpcnet_sockets': {}}, Exit.FAILED), ({'hpcnet_p2p': {}}, Exit.OK)):
        _baseline(tmp_path, elsewhere, updated)
        found = judged(reports, acceptances=tuple(accepted.baselines({'testbed'},
                                                                     tmp_path / 'refs')))
        assert found.exit_code == code, (updated, history_text.text(found))


def test_a_there_and_back_change_is_placed_at_the_sessions_that_changed_the_mpi(tmp_path):
    values = _noisy(10) + [v * 0.8 for v in _noisy(8, seed=4)] + _noisy(10, seed=9)
    # Without the record, the search puts the way back three sessions late
    # and shows the nights between as outliers of the bad level.
    plain = judged(_reports(values))
    (series,) = [s for s in plain.series if s.key[3] == 'bandwidth_4MiB']
    assert [c.position for c in series.finding.changes] == [10, 21]
    res = _history(tmp_path, _reports(values, mpi=range(11, 19)))
    reason = fault_row('history: MPI changed at session 11 and back at 19, the way back placed '
                       'by the record', res, Exit.OK, 'RECOVERED      ')
    assert 'from session 19 (' in reason and f'{NEW_MPI} -> ' in reason.split('when it ended')[1]
    assert 'OUTLIER' not in res.stdout and 'no recorded change' not in reason, res.stdout


def test_a_recorded_change_too_far_from_the_found_border_does_not_move_it():
    values = _noisy(10) + [v * 0.8 for v in _noisy(8, seed=4)] + _noisy(10, seed=9)
    far = levels.MIN_SEGMENT + 1
    # The MPI came back well before the level did: the data say the level moved later.
    found = judged(_reports(values, mpi=range(11, 22 - far)))
    (series,) = [s for s in found.series if s.key[3] == 'bandwidth_4MiB']
    assert [c.position for c in series.finding.changes] == [10, 21]
    assert placement.near() < far


def test_an_mpi_update_that_changed_nothing_is_no_change(tmp_path):
    res = _history(tmp_path, _reports(_noisy(22), mpi=range(11, 23)))
    fault_row('history (healthy): an MPI update at session 11 that changed no level', res,
              Exit.OK)
    assert 'CHANGED' not in res.stdout and 'RECOVERED' not in res.stdout
