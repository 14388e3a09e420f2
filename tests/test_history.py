"""`hpcnet history`: the change-point rule on series (a step, one bad
session, no change, too short), and the command's contract (usage errors,
"not decided") on real stored sessions."""
import math
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hpcnet.acceptance import baseline, history
from hpcnet.exitcodes import Exit

HPCNET = Path(sys.executable).with_name('hpcnet')


def _noisy(n: int, level: float = 112.0, spread: float = 0.01, seed: int = 7) -> list:
    '''Session values with the session-to-session spread of a quiet link:
    log-normal, ``spread`` (1 %) standard deviation.'''
    rng = np.random.default_rng(seed)
    return list(level * np.exp(spread * rng.standard_normal(n)))


def _positions(found: history.Finding) -> list:
    return [c.position for c in found.changes]


def test_a_step_is_one_change_at_its_session_with_its_size_and_confidence():
    values = _noisy(12)
    values[7:] = [v * 0.9 for v in values[7:]]
    found = history.find_changes(values)
    assert not found.too_short
    (change,) = found.changes
    assert change.position == 7
    assert change.size == pytest.approx(-0.1, abs=0.02)
    assert change.p_value < history.ALPHA
    assert (change.n_before, change.n_after) == (7, 5)
    assert [level[:2] for level in found.levels] == [(0, 7), (7, 12)]
    assert found.outliers == ()


def test_one_bad_session_is_an_outlier_not_a_change():
    values = _noisy(12)
    values[3] *= 0.6
    found = history.find_changes(values)
    assert found.changes == ()
    (outlier,) = found.outliers
    assert outlier.position == 3 and outlier.value == values[3]


def test_bad_sessions_shorter_than_a_level_are_outliers_even_in_a_row():
    values = _noisy(16)
    for i in range(6, 6 + history.MIN_SEGMENT - 1):
        values[i] *= 0.7
    found = history.find_changes(values)
    assert found.changes == ()
    assert [o.position for o in found.outliers] == list(range(6, 6 + history.MIN_SEGMENT - 1))


def test_a_step_with_an_outlier_before_it_is_still_found():
    values = _noisy(12)
    values[7:] = [v * 0.9 for v in values[7:]]
    values[3] *= 0.6
    found = history.find_changes(values)
    assert _positions(found) == [7]
    assert [o.position for o in found.outliers] == [3]


@pytest.mark.parametrize('spread,most', [(0.01, 0), (0.02, history.ALPHA), (0.03, 1.5 * history.ALPHA)])
def test_flat_series_rarely_show_a_change(spread, most):
    """A change found in a flat series is a false alarm: none where the
    sessions scatter by 1 %, fewer than ALPHA of the series at 2 %, about
    ALPHA at 3 %, as wide as the practical threshold (150 series of 12 and
    150 of 30 sessions; docs/acceptance.md quotes the counts printed)."""
    false = [(n, seed) for n in (12, 30) for seed in range(150)
             if history.find_changes(_noisy(n, spread=spread, seed=seed)).changes]
    print(f'\n{spread:.0%} spread: {len(false)} of 300 flat series show a change')
    assert len(false) <= most * 300, false


def test_a_change_smaller_than_the_threshold_is_no_change():
    values = _noisy(20, spread=0.002)
    values[10:] = [v * 0.99 for v in values[10:]]
    assert history.find_changes(values).changes == ()


def test_two_changes_are_both_found():
    values = _noisy(18)
    values[6:] = [v * 0.85 for v in values[6:]]
    values[12:] = [v * 1.3 for v in values[12:]]
    assert _positions(history.find_changes(values)) == [6, 12]


def test_a_level_that_is_all_outliers_still_has_a_median(monkeypatch):
    '''Under load every session of a short level can be an outlier (a CI run
    beside stress-ng): the level is then no level, and its median is of all
    its sessions, not an error.'''
    values = [100.0] * 6 + [80.0, 120.0, 60.0, 140.0] + [100.0] * 6
    first = history._candidates(values, True, history.MIN_SEGMENT)[0]
    monkeypatch.setattr(history, '_outliers', lambda v, bounds, *a: list(range(bounds[1])))
    found = history.find_changes(values)
    assert found.changes == ()
    assert found.levels[0][:2] == (0, first if len(found.levels) > 1 else len(values))
    assert all(not math.isnan(median) for _, _, median in found.levels)


def test_too_short_says_how_many_sessions_decide():
    needed = history.sessions_needed()
    # Two levels of MIN_SEGMENT whose rank test, corrected for the places
    # searched, can reach ALPHA at complete separation.
    assert needed >= 2 * history.MIN_SEGMENT
    n1 = needed // 2
    assert 2 * (needed - 2 * history.MIN_SEGMENT + 1) / math.comb(needed, n1) < history.ALPHA
    values = _noisy(needed - 1)
    values[needed // 2:] = [v * 0.5 for v in values[needed // 2:]]
    found = history.find_changes(values)
    assert found.too_short and found.changes == ()
    assert not history.find_changes(_noisy(needed)).too_short


def test_counts_that_are_zero_when_healthy_change_on_any_lasting_rise():
    values = [0.0] * 6 + [3.0] * 6
    (change,) = history.find_changes(values).changes
    assert change.position == 6 and math.isinf(change.size)
    found = history.find_changes([0.0] * 5 + [1.0] + [0.0] * 6)
    assert found.changes == () and [o.position for o in found.outliers] == [5]


def test_worse_comes_from_the_metric_catalogue():
    change = history.Change(position=4, before=100.0, after=90.0, p_value=0.01, n_before=4,
                            n_after=4)
    rise = history.Change(position=4, before=1.05, after=3.1, p_value=0.01, n_before=4, n_after=4)
    p2p, pairs = 'hpcnet_p2p %mode=bw', 'hpcnet_pairs %scale=all_nodes'
    assert history.Series((p2p, 's:p', 'e', 'bandwidth_4MiB'), 'MB/s', [], []).worse(change)
    assert not history.Series((p2p, 's:p', 'e', 'latency_8B'), 'us', [], []).worse(change)
    # Two ratios, better on opposite sides: the unit's spelling says nothing.
    assert history.Series((pairs, 's:p', 'e', 'latency_worst_over_median'), 'ratio', [],
                          []).worse(rise)
    assert not history.Series((pairs, 's:p', 'e', 'bandwidth_worst_over_median'), 'ratio', [],
                              []).worse(rise)
    # No better side (an MTU), or not in the catalogue: any change counts,
    # as `hpcnet compare` judges it.
    assert history.Series(('hpcnet_preflight', 's:p', 'e', 'mtu'), 'bytes', [], []).worse(change)
    assert history.Series(('t', 's:p', 'e', 'bandwidth_4MiB'), 'MB/s', [], []).worse(rise)


def test_a_change_reads_what_the_sessions_beside_its_border_recorded():
    sessions = [history.Session(i + 1, f'{i:08d}-uuid', 1.8e9 + 86400 * i, {}) for i in range(8)]
    series = history.Series(('t', 's:p', 'e', 'bandwidth_4MiB'), 'MB/s', sessions, [1.0] * 8,
                            changed={4: [], 5: ['link rate: 1000000000 -> 900000000']})
    change = history.Change(position=4, before=100.0, after=90.0, p_value=0.01, n_before=4,
                            n_after=4)
    assert history.changed_near(series, change) == (
        'no recorded change (beside it, session 6 (2027-01-20 08:00:00 UTC, 00000005): '
        'link rate: 1000000000 -> 900000000)')
    assert 'beside it, session 6' in history.change_line(series, change)


def _hpcnet(*args):
    return subprocess.run([str(HPCNET), 'history', *args], text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.parametrize('args,says', [
    (['--db', '/nonexistent/results.db'], '--db /nonexistent/results.db: no such results database'),
    (['--min-segment', '1'], '--min-segment 1: a level of one session is one bad night'),
    (['--alpha', '2'], "argument --alpha: '2' is not a fraction between 0 and 1"),
])
def test_a_usage_error_is_one_line_and_exit_2(args, says):
    res = _hpcnet(*args)
    assert res.returncode == Exit.USAGE, res.stderr
    assert says in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr


@pytest.mark.integration
def test_two_real_sessions_are_too_short_to_say_and_carry_commit_and_kernel(tmp_path,
                                                                          one_env_per_stack):
    '''Two `hpcnet run` sessions of one small case in a scratch database:
    "not decided" (exit 3), saying how many sessions decide; each session
    keeps the suite's commit and the kernel of the host running ReFrame.'''
    scratch = {'RFM_SQLITE_DB_FILE': str(tmp_path / 'results.db'),
               'HPCNET_REPORTS_DIR': str(tmp_path / 'reports'),
               'RFM_PERFLOG_DIR': str(tmp_path / 'perflogs')}
    for _ in range(2):
        run = subprocess.run([str(HPCNET), 'run', '--system', 'local:shm', '-n',
                              'hpcnet_p2p.*scale=1_node.*mode=pingpong', '-p',
                              f'^{one_env_per_stack[0]}$', '-S', 'time_per_size_ms=5'],
                             text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             env={**os.environ, **scratch})
        assert run.returncode == Exit.OK, run.stdout[-3000:]
    res = _hpcnet('--db', scratch['RFM_SQLITE_DB_FILE'], '--system', 'local')
    assert res.returncode == Exit.UNDECIDED, res.stdout + res.stderr
    needed = history.sessions_needed()
    assert 'TOO SHORT ' in res.stdout and f'fewer than {needed} sessions' in res.stdout
    assert res.stdout.splitlines()[-1].startswith(
        'hpcnet: NOT DECIDED: history: 0 changed for the worse'), res.stdout
    assert res.stdout.splitlines()[-1].endswith(f'{needed} sessions of a metric decide it')
    found = history.load(db=Path(scratch['RFM_SQLITE_DB_FILE']), system='local')
    assert len(found.sessions) == 2
    for session in found.sessions:
        info = session.report['session_info']
        assert re.fullmatch('[0-9a-f]{40}', info[baseline.SUITE_COMMIT_TAG])
        assert info[baseline.OS_KERNEL_TAG] == platform.release()
