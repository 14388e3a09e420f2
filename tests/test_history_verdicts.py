"""Fault-matrix rows for issue 32 item 7: `hpcnet history` over a scratch
results database of crafted nightly sessions (tests/test_history.py makes
them from a recorded testbed session) gives its named non-zero verdict when
the newest nights are bad, a case stopped, or the change came a few
sessions after the period start."""
import subprocess
import time

from helpers import fault_row, results_db, run_hpcnet
from test_history import DAY, _noisy, nights

from hpcnet.exitcodes import Exit


def _history(tmp_path, values: list, *args) -> subprocess.CompletedProcess:
    """`hpcnet history` over one night per value, the newest last night."""
    start = time.time() - (len(values) + 1) * DAY
    db = results_db(tmp_path / 'results.db', nights(values, start=start))
    return run_hpcnet('history', '--db', str(db), '--system', 'testbed', *args,
                      env={'HPCNET_REFERENCE_DIR': str(tmp_path / 'refs')}, timeout=300)


def test_the_last_three_nights_at_half_are_not_decided(tmp_path):
    res = _history(tmp_path, _noisy(20) + [56.0, 56.3, 55.9])
    fault_row('verdict #7: last 3 nights at 50 %', res, Exit.UNDECIDED, 'WORSE LATELY   ')
    assert 'OUTLIER' not in res.stdout


def test_a_case_that_crashed_the_last_six_nights_fails_naming_it(tmp_path):
    res = _history(tmp_path, _noisy(14) + ['crash'] * 6)
    fault_row('verdict #7: a case crashed the last 6 nights', res, Exit.FAILED,
              'STOPPED        hpcnet_p2p %scale=2_nodes %mode=bw @testbed:eth +gcc12-openmpi4: '
              'no value since session 15')


def test_a_change_three_sessions_after_the_period_start_fails(tmp_path):
    values = _noisy(11) + [v * 0.5 for v in _noisy(20, seed=5)]
    # The period holds the last 23 nights: 3 before the change, 20 after it.
    res = _history(tmp_path, values, '--period', f'now-{int(23.5 * 24)}h:now')
    fault_row('verdict #7: change 3 sessions after period start', res, Exit.FAILED, 'CHANGED WORSE  ')
    assert 'from session 4 (' in res.stdout and 'OUTLIER' not in res.stdout


def test_acknowledging_the_change_turns_the_nights_after_it_green(tmp_path):
    values = _noisy(10) + [v * 0.8 for v in _noisy(12, seed=4)]
    assert _history(tmp_path, values).returncode == Exit.FAILED
    changed = '00000011-0000-4000-8000-000000000000'
    (tmp_path / 'results.db').unlink()
    res = _history(tmp_path, values, '--acknowledge', f'{changed}:bandwidth', '--why',
                   'the new switch firmware caps the link')
    assert res.returncode == Exit.OK, res.stdout + res.stderr
    assert 'ACCEPTED       ' in res.stdout
    assert changed in (tmp_path / 'refs' / 'acknowledged' / 'history.yaml').read_text()
    (tmp_path / 'results.db').unlink()
    res = _history(tmp_path, values, '--acknowledge', changed)
    assert res.returncode == Exit.USAGE and 'go together' in res.stderr, res.stderr
