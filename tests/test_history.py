"""`hpcnet history`: the change-point rule on series (a step, one bad
session, no change, too short, the newest nights, a change the period's
start cut short), the series read from sessions (busy-host nights kept,
series that stop, accepted changes), and the command's contract (usage
errors, "not decided") on real stored sessions."""
import copy
import functools
import json
import math
import platform
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from helpers import run_hpcnet

from hpcnet.acceptance.history import history, history_text, levels, pooled_outliers, stored_series
from hpcnet.acceptance.references import accepted_changes as accepted, baseline, spread
from hpcnet.acceptance.references.references import PROVENANCE, Basis
from hpcnet.exitcodes import Exit


def _noisy(n: int, level: float = 112.0, spread: float = 0.01, seed: int = 7) -> list:
    '''Session values with the session-to-session spread of a quiet link:
    log-normal, ``spread`` (1 %) standard deviation.'''
    rng = np.random.default_rng(seed)
    return list(level * np.exp(spread * rng.standard_normal(n)))


def _positions(found: levels.Finding) -> list:
    return [c.position for c in found.changes]


def test_a_step_is_one_change_at_its_session_with_its_size_and_confidence():
    values = _noisy(12)
    values[7:] = [v * 0.9 for v in values[7:]]
    found = levels.find_changes(values)
    assert not found.too_short
    (change,) = found.changes
    assert change.position == 7
    assert change.size == pytest.approx(-0.1, abs=0.02)
    assert change.p_value < levels.ALPHA
    assert (change.n_before, change.n_after) == (7, 5)
    assert [level[:2] for level in found.levels] == [(0, 7), (7, 12)]
    assert found.outliers == ()


def test_one_bad_session_is_an_outlier_not_a_change():
    values = _noisy(12)
    values[3] *= 0.6
    found = levels.find_changes(values)
    assert found.changes == ()
    (outlier,) = found.outliers
    assert outlier.position == 3 and outlier.value == values[3]


def test_bad_sessions_shorter_than_a_level_are_outliers_even_in_a_row():
    values = _noisy(16)
    for i in range(6, 6 + levels.MIN_SEGMENT - 1):
        values[i] *= 0.7
    found = levels.find_changes(values)
    assert found.changes == ()
    assert [o.position for o in found.outliers] == list(range(6, 6 + levels.MIN_SEGMENT - 1))


def test_a_step_with_an_outlier_before_it_is_still_found():
    values = _noisy(12)
    values[7:] = [v * 0.9 for v in values[7:]]
    values[3] *= 0.6
    found = levels.find_changes(values)
    assert _positions(found) == [7]
    assert [o.position for o in found.outliers] == [3]


def test_a_level_keeps_its_bad_nights_that_stay_on_its_side():
    """A level's outliers on its own side of the midpoint between two levels
    are bad nights of it, not nights of the other level: left out of the
    test, they do not make the level too short to be one. The first level is
    the testbed's unshaped 1 Gbit/s link (the host's spread, 4 of 7 nights
    outliers of the pooled spread), then the link cut to 69 MB/s
    (tests/test_history_testbed.py with a 1 Gbit/s first level)."""
    values = [93.9, 103.0, 104.4, 47.0, 101.2, 96.3, 97.0, 69.0, 69.4, 68.7, 69.2, 68.9]
    found = levels.find_changes(values)
    (change,) = found.changes
    assert change.position == 7 and change.p_value < levels.ALPHA
    assert change.size == pytest.approx(69.0 / 96.3 - 1)


def test_a_step_beside_a_level_of_bad_nights_on_both_sides_is_still_found():
    """The shape of tests/test_history_testbed.py: a 700 Mbit/s level with
    a 250 Mbit/s night (past the new level) and a slow night (between the
    levels), two nights a little high, then the cut to 450 Mbit/s: 3 of the
    old level's 7 nights are left out of the test, 4 are outliers, and it is
    one change at the cut."""
    values = [80.72, 80.36, 83.26, 29.36, 83.43, 82.69, 69.05, 53.04, 53.63, 53.50, 53.25, 53.07]
    found = levels.find_changes(values)
    (change,) = found.changes
    assert change.position == 7 and change.p_value < levels.ALPHA
    assert {o.position for o in found.outliers} >= {3, 6}


@pytest.mark.parametrize('spread,most', [(0.01, 0), (0.02, levels.ALPHA), (0.03, 1.5 * levels.ALPHA)])
def test_flat_series_rarely_show_a_change(spread, most):
    """A change found in a flat series is a false alarm: none where the
    sessions scatter by 1 %, fewer than ALPHA of the series at 2 %, about
    ALPHA at 3 %, as wide as the practical threshold (150 series of 12 and
    150 of 30 sessions; docs/acceptance.md quotes the counts printed)."""
    false = [(n, seed) for n in (12, 30) for seed in range(150)
             if levels.find_changes(_noisy(n, spread=spread, seed=seed)).changes]
    print(f'\n{spread:.0%} spread: {len(false)} of 300 flat series show a change')
    assert len(false) <= most * 300, false


def test_series_judged_over_several_processes_as_in_one():
    """find_all gives each series the finding find_changes gives it, in
    order, whether the series are judged in worker processes or here: steps,
    outliers and flat series alike."""
    many = []
    for seed in range(3 * levels.SERIES_PER_WORKER):
        values = _noisy(30, seed=seed)
        if seed % 3 == 0:
            values[15:] = [v * 0.9 for v in values[15:]]
        if seed % 5 == 0:
            values[7] *= 1.4
        many.append(values)
    alone = [levels.find_changes(values) for values in many]
    assert levels.find_all(many, workers=2) == alone
    assert levels.find_all(many, workers=1) == alone
    assert sum(bool(f.changes) for f in alone) == levels.SERIES_PER_WORKER
    assert sum(bool(f.outliers) for f in alone) >= 2 * levels.SERIES_PER_WORKER // 5


def test_a_change_smaller_than_the_threshold_is_no_change():
    values = _noisy(20, spread=0.002)
    values[10:] = [v * 0.99 for v in values[10:]]
    assert levels.find_changes(values).changes == ()


def test_two_changes_are_both_found():
    values = _noisy(18)
    values[6:] = [v * 0.85 for v in values[6:]]
    values[12:] = [v * 1.3 for v in values[12:]]
    assert _positions(levels.find_changes(values)) == [6, 12]


@pytest.mark.parametrize('relative', [True, False])
def test_the_outliers_kept_through_the_search_are_those_of_the_residuals_at_each_step(
        relative, monkeypatch):
    # A series with a step and bad nights, its levels merged one at a time
    # as the search merges them: at every step the outliers kept up to date
    # are spread.outliers of the residuals then, whether judged again in
    # part or computed whole (both happen).
    values = _noisy(60, seed=3) + list(0.9 * np.array(_noisy(60, seed=4)))
    for bad in (7, 30, 31, 77, 100):
        values[bad] *= 0.7
    if not relative:
        values = [round(v) for v in values]
    bounds = list(range(0, 121, 4))
    floor = levels.THRESHOLD if relative else 0.0
    median_of = levels._LevelMedians(values)
    residuals = levels._residuals(values, bounds, relative, median_of)
    pooled = pooled_outliers.PooledOutliers(residuals, floor)
    whole = []
    monkeypatch.setattr(pooled, '_whole', functools.partial(
        lambda compute: whole.append(1) or compute(), pooled._whole))
    rng = np.random.default_rng(5)
    while len(bounds) > 2:
        assert pooled.outliers() == set(spread.outliers(residuals, floor))
        i = int(rng.integers(1, len(bounds) - 1))
        start, end = bounds[i - 1], bounds[i + 1]
        pooled.changed(start, end)
        level = median_of(start, end)
        part = median_of.array[start:end]
        residuals[start:end] = part / level if relative else part - level
        del bounds[i]
    assert pooled.outliers() == set(spread.outliers(residuals, floor))
    assert 1 < len(whole) < 29


def test_a_level_that_is_all_outliers_still_has_a_median(monkeypatch):
    '''Under load every session of a short level can be an outlier (a CI run
    beside stress-ng): the level is then no level, and its median is of all
    its sessions, not an error.'''
    values = [100.0] * 6 + [80.0, 120.0, 60.0, 140.0] + [100.0] * 6
    first = levels._candidates(values, True, levels.MIN_SEGMENT)[0]
    monkeypatch.setattr(levels, '_outliers', lambda v, bounds, *a: list(range(bounds[1])))
    found = levels.find_changes(values)
    assert found.changes == ()
    assert found.levels[0][:2] == (0, first if len(found.levels) > 1 else len(values))
    assert all(not math.isnan(median) for _, _, median in found.levels)


def test_too_short_says_how_many_sessions_decide():
    needed = levels.sessions_needed()
    # Two levels of MIN_SEGMENT whose rank test, corrected for the places
    # searched, can reach ALPHA at complete separation.
    assert needed >= 2 * levels.MIN_SEGMENT
    n1 = needed // 2
    assert 2 * (needed - 2 * levels.MIN_SEGMENT + 1) / math.comb(needed, n1) < levels.ALPHA
    values = _noisy(needed - 1)
    values[needed // 2:] = [v * 0.5 for v in values[needed // 2:]]
    found = levels.find_changes(values)
    assert found.too_short and found.changes == ()
    assert not levels.find_changes(_noisy(needed)).too_short


def test_counts_that_are_zero_when_healthy_change_on_any_lasting_rise():
    values = [0.0] * 6 + [3.0] * 6
    (change,) = levels.find_changes(values).changes
    assert change.position == 6 and math.isinf(change.size)
    found = levels.find_changes([0.0] * 5 + [1.0] + [0.0] * 6)
    assert found.changes == () and [o.position for o in found.outliers] == [5]


def test_worse_comes_from_the_metric_catalogue():
    change = levels.Change(position=4, before=100.0, after=90.0, p_value=0.01, n_before=4,
                            n_after=4)
    rise = levels.Change(position=4, before=1.05, after=3.1, p_value=0.01, n_before=4, n_after=4)
    p2p, pairs = 'hpcnet_p2p %mode=bw', 'hpcnet_pairs %scale=all_nodes'
    assert stored_series.Series((p2p, 's:p', 'e', 'bandwidth_4MiB'), 'MB/s', [], []).worse(change)
    assert not stored_series.Series((p2p, 's:p', 'e', 'latency_8B'), 'us', [], []).worse(change)
    # Two ratios, better on opposite sides: the unit's spelling says nothing.
    assert stored_series.Series((pairs, 's:p', 'e', 'latency_worst_over_median'), 'ratio', [],
                                []).worse(rise)
    assert not stored_series.Series((pairs, 's:p', 'e', 'bandwidth_worst_over_median'), 'ratio', [],
                                    []).worse(rise)
    # No better side (an MTU), or not in the catalogue: any change counts,
    # as `hpcnet compare` judges it.
    mtu = stored_series.Series(('hpcnet_preflight', 's:p', 'e', 'mtu'), 'bytes', [], [])
    assert mtu.worse(change)
    assert stored_series.Series(('t', 's:p', 'e', 'bandwidth_4MiB'), 'MB/s', [], []).worse(rise)


def test_a_change_reads_what_the_sessions_beside_its_border_recorded():
    sessions = [stored_series.Session(i + 1, f'{i:08d}-uuid', 1.8e9 + 86400 * i, {})
                for i in range(8)]
    series = stored_series.Series(('t', 's:p', 'e', 'bandwidth_4MiB'), 'MB/s', sessions, [1.0] * 8,
                                  changed={4: [], 5: ['link rate: 1000000000 -> 900000000']})
    change = levels.Change(position=4, before=100.0, after=90.0, p_value=0.01, n_before=4,
                            n_after=4)
    assert history_text.changed_near(series, change) == (
        'no recorded change (beside it, session 6 (2027-01-20 08:00:00 UTC, 00000005): '
        'link rate: 1000000000 -> 900000000)')
    assert 'beside it, session 6' in history_text.change_line(series, change)


@pytest.mark.parametrize('args,says', [
    (['--db', '/nonexistent/results.db'],
     "--db: '/nonexistent/results.db': not a file in an existing directory"),
    (['--db', '/tmp/hpcnet-no-such-results.db'],
     '--db /tmp/hpcnet-no-such-results.db: no such results database'),
    (['--min-segment', '1'], '--min-segment 1: a level of one session is one bad night'),
    (['--alpha', '2'], "argument --alpha: '2' is not a fraction between 0 and 1"),
])
def test_a_usage_error_is_one_line_and_exit_2(args, says):
    res = run_hpcnet('history', *args)
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
        run = run_hpcnet('run', '--system', 'local:shm', '-n',
                         'hpcnet_p2p.*scale=1_node.*mode=pingpong', '-p',
                         f'^{one_env_per_stack[0]}$', '-S', 'time_per_size_ms=5', env=scratch,
                         stderr=subprocess.STDOUT)
        assert run.returncode == Exit.OK, run.stdout[-3000:]
    res = run_hpcnet('history', '--db', scratch['RFM_SQLITE_DB_FILE'], '--system', 'local')
    assert res.returncode == Exit.UNDECIDED, res.stdout + res.stderr
    needed = levels.sessions_needed()
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


# -- Sessions crafted from a recorded one (tests/data/history): one night each.

RECORDED = Path(__file__).parent / 'data' / 'history' / 'testbed-12-sessions.json'
DAY = 86400.0
#: The recorded streaming case, and a ping-pong case beside it every night.
BW, PINGPONG = 'hpcnet_p2p %scale=2_nodes %mode=bw', 'hpcnet_p2p %scale=2_nodes %mode=pingpong'


@functools.lru_cache(maxsize=1)
def _recorded() -> str:
    return RECORDED.read_text()


def night(number: int, bandwidth: float | None, *, start: float = 1.8e9, busy: bool = False,
          crashed: bool = False) -> dict:
    """Session ``number`` of a nightly series: the recorded session with
    the streaming case's bandwidth_4MiB at ``bandwidth`` (the case absent
    when None), measured on a busy host or crashed, and a ping-pong case."""
    report = copy.deepcopy(json.loads(_recorded())[0])
    uuid = f'{number:08d}-0000-4000-8000-000000000000'
    report['session_info'].update(uuid=uuid, time_start_unix=start + number * DAY,
                                  time_end_unix=start + number * DAY + 60)
    template = report['runs'][0]['testcases'][0]
    pingpong = {**copy.deepcopy(template), 'name': PINGPONG, 'not_asserted': {},
                'perfvalues': {'testbed:eth:latency_8B': [30.0, None, None, None, 'us', 'pass']}}
    cases = [pingpong]
    if bandwidth is not None:
        case = {**template, 'name': BW, 'not_asserted': {},
                'perfvalues': {'testbed:eth:bandwidth_4MiB': [bandwidth, None, None, None,
                                                              'MB/s', 'pass']}}
        if busy:
            case['judgement_basis'] = Basis.WITHHELD
        if crashed:
            case.update(result='fail', fail_phase='run', perfvalues={},
                        fail_reason='the job failed: signal 11 (SIGSEGV) on cn1')
        cases.append(case)
    report['runs'][0]['testcases'] = cases
    return report


def nights(values: list, first: int = 1, **kw) -> list:
    """One night per value (None: the case absent, 'crash': it crashed,
    ('busy', v): v measured on a busy host)."""
    out = []
    for number, value in enumerate(values, first):
        if value == 'crash':
            out.append(night(number, 0.0, crashed=True, **kw))
        elif isinstance(value, tuple):
            out.append(night(number, value[1], busy=True, **kw))
        else:
            out.append(night(number, value, **kw))
    return out


def judged(reports: list, earlier: list = (), acceptances: tuple = ()) -> history.History:
    sessions, series = stored_series.series_of(reports, system='testbed', earlier=earlier)
    return history.judge(sessions, series, acceptances=acceptances)


def bandwidth(found: history.History) -> stored_series.Series:
    (series,) = [s for s in found.series if s.key[3] == 'bandwidth_4MiB']
    return series


def test_the_newest_bad_nights_are_not_decided_never_outliers():
    found = judged(nights(_noisy(20) + [56.0, 56.3, 55.9]))
    series = bandwidth(found)
    assert series.finding.outliers == ()
    tail = series.finding.tail
    assert (tail.start, tail.nights) == (20, 3) and tail.size == pytest.approx(-0.5, abs=0.02)
    assert found.exit_code == Exit.UNDECIDED
    text = history_text.text(found)
    assert 'WORSE LATELY   hpcnet_p2p %scale=2_nodes %mode=bw @testbed:eth +gcc12-openmpi4 ' \
        'bandwidth_4MiB [MB/s]: the newest 3 sessions, since session 21' in text
    assert 'OUTLIER' not in text


def test_as_many_bad_nights_as_a_level_are_a_regression_even_when_the_test_cannot_tell():
    found = judged(nights(_noisy(20) + [56.0, 56.3, 55.9, 56.1]))
    assert found.exit_code == Exit.FAILED
    # At an alpha no 12 sessions can reach, the series is too short for a
    # change, and its newest 4 nights still decide.
    sessions, series = stored_series.series_of(nights(_noisy(8) + [56.0, 56.3, 55.9, 56.1]),
                                               system='testbed')
    strict = history.judge(sessions, series, alpha=1e-6)
    tail = bandwidth(strict).finding.tail
    assert bandwidth(strict).finding.too_short and tail.nights == levels.MIN_SEGMENT
    assert strict.regressed_tails() and strict.exit_code == Exit.FAILED


def test_a_case_that_crashed_the_newest_nights_stopped_since_the_first():
    found = judged(nights(_noisy(14) + ['crash'] * 6))
    series = bandwidth(found)
    assert series.stop.since.index == 15 and len(series.stop.sessions) == 6
    assert found.exit_code == Exit.FAILED
    (line,) = history_text.stopped_lines(found)
    assert line.startswith('STOPPED        hpcnet_p2p %scale=2_nodes %mode=bw @testbed:eth '
                           '+gcc12-openmpi4: no value since session 15 (')
    assert 'fail in run: the job failed: signal 11 (SIGSEGV) on cn1 (x6)' in line


def test_a_case_missing_from_the_newest_sessions_stopped():
    found = judged(nights(_noisy(12) + [None] * 2))
    assert bandwidth(found).stop.since.index == 13
    assert 'not run (x2)' in history_text.stopped_lines(found)[0]
    assert found.exit_code == Exit.FAILED
    # Missing in the middle only: no stop.
    assert not bandwidth(judged(nights(_noisy(6) + [None] + _noisy(6, seed=3)))).stop


def test_a_change_a_few_sessions_after_the_period_start_is_judged_with_the_sessions_before():
    good, bad = _noisy(11), [v * 0.5 for v in _noisy(20, seed=5)]
    reports = nights(good + bad)
    # The period starts 3 sessions before the change.
    found = judged(reports[8:], earlier=reports[:8])
    series = bandwidth(found)
    (change,) = [c for c in series.finding.changes]
    assert series.session_of(change.position).index == 4 and series.worse(change)
    assert series.finding.outliers == () and found.exit_code == Exit.FAILED
    assert [s.index for s in found.sessions][:9] == list(range(-7, 2))
    # With no session before the period, the level before is cut short: not decided.
    alone = judged(reports[8:])
    (head,) = [h for _, h in alone.heads()]
    assert (head.start, head.nights) == (0, 3) and bandwidth(alone).finding.outliers == ()
    assert alone.exit_code == Exit.UNDECIDED
    assert 'CUT SHORT      ' in history_text.text(alone)


def test_busy_host_nights_are_shown_not_decided_and_keep_the_session_numbers():
    values = _noisy(7) + [('busy', 80.0)] + [v * 0.9 for v in _noisy(6, seed=2)]
    found = judged(nights(values))
    series = bandwidth(found)
    assert [s.index for s, _ in series.busy] == [8] and len(found.sessions) == 14
    (change,) = series.finding.changes
    assert series.session_of(change.position).index == 9
    assert 'WITHHELD       session 8 (' in history_text.text(found)
    assert found.exit_code == Exit.FAILED
    # The newest nights' measurements withheld: not decided, never a silent pass.
    newest = judged(nights(_noisy(20) + [('busy', 80.0)] * 5))
    assert newest.exit_code == Exit.UNDECIDED and len(bandwidth(newest).newest_busy()) == 5
    assert 'values not decided (measurement withheld: the host was busy), the newest' \
        in history_text.text(newest)


def test_an_acknowledged_change_starts_a_new_level(tmp_path):
    reports = nights(_noisy(10) + [v * 0.8 for v in _noisy(12, seed=4)])
    assert judged(reports).exit_code == Exit.FAILED
    path = tmp_path / 'acknowledged' / 'history.yaml'
    accepted.acknowledge(path, reports[12]['session_info']['uuid'], 'bandwidth_4MiB',
                         'the new switch firmware caps the link at 80 %')
    found = judged(reports, acceptances=tuple(accepted.acknowledgements(path)))
    assert found.exit_code == Exit.OK, history_text.text(found)
    assert 'ACCEPTED       ' in history_text.text(found) and 'switch firmware' in path.read_text()
    # An acknowledgement of an earlier session, or of other series, accepts nothing.
    for session, pattern in ((reports[5], None), (reports[12], 'latency')):
        other = accepted.Acceptance((session['session_info']['uuid'],), pattern, 'x')
        assert judged(reports, acceptances=(other,)).exit_code == Exit.FAILED
    # Bad nights after the accepted change are judged against the new level.
    later = judged(reports + nights([40.0, 40.2, 39.9], first=23),
                   acceptances=tuple(accepted.acknowledgements(path)))
    assert later.exit_code == Exit.UNDECIDED and later.tails()


def test_a_baseline_written_after_a_change_accepts_it(tmp_path):
    reports = nights(_noisy(10) + [v * 0.8 for v in _noisy(12, seed=4)])
    uuids = [r['session_info']['uuid'] for r in reports[14:17]]
    (tmp_path / 'testbed.yaml').write_text(
        f"'{PROVENANCE}':\n  date: '2027-01-01T00:00:00+00:00'\n  sessions: {json.dumps(uuids)}\n")
    found = judged(reports, acceptances=tuple(accepted.baselines({'testbed'}, tmp_path)))
    assert found.exit_code == Exit.OK, history_text.text(found)


@pytest.mark.parametrize('spec,says', [
    ('not-a-uuid', "'not-a-uuid' is not a session UUID"),
    ('00000001-0000-4000-8000-000000000000:(', "'(' is not a regular expression"),
])
def test_an_acknowledgement_that_cannot_be_one_is_a_usage_error(spec, says):
    with pytest.raises(accepted.AcceptedError, match=re.escape(says)):
        accepted.parse_spec(spec)


def test_an_unreadable_acknowledgements_file_names_the_entry(tmp_path):
    path = tmp_path / 'history.yaml'
    path.write_text('- session: 00000001-0000-4000-8000-000000000000\n')
    with pytest.raises(accepted.AcceptedError, match=r'entry 1: why: missing'):
        accepted.acknowledgements(path)


def test_a_session_of_other_checks_only_does_not_stop_a_series():
    '''A nightly pipeline stores its preflight (hpcnet_preflight only) beside
    its suite: the preflight session after the newest suite says nothing of
    the suite's series, and the suite's session nothing of the preflight's.'''
    reports = nights(_noisy(12))
    preflight = night(13, None)
    preflight['runs'][0]['testcases'] = [
        {**preflight['runs'][0]['testcases'][0], 'name': 'hpcnet_preflight %scale=all_nodes',
         'perfvalues': {'testbed:eth:mtu': [1500, None, None, None, 'bytes', 'pass']}}]
    found = judged(reports + [preflight])
    assert not bandwidth(found).stop and not found.stopped()
    # Its own check ran that night without it: stopped.
    assert bandwidth(judged(reports + [night(13, None)])).stop.since.index == 13


def test_a_long_series_gets_at_most_max_candidates_and_a_short_one_all_that_fit():
    '''A year has more places to split than real changes: the search tries
    MAX_CANDIDATES of them; a series of up to (MAX_CANDIDATES + 1) x
    MIN_SEGMENT sessions gets every candidate that fits, as before the cap.'''
    year = _noisy(365)
    assert len(levels._candidates(year, True, levels.MIN_SEGMENT)) == levels.MAX_CANDIDATES
    short = year[:(levels.MAX_CANDIDATES + 1) * levels.MIN_SEGMENT]
    assert levels._candidates(short, True, levels.MIN_SEGMENT) == \
        levels._candidates(short, True, levels.MIN_SEGMENT, max_candidates=10 ** 6)


def test_the_candidate_cap_keeps_every_step_of_a_year_of_upgrades():
    '''Twelve upgrades in a year, each moving the level 8 % up or down over
    the night-to-night 1 % noise: each found, at its night or the next (a
    noisy night at a border belongs with either level).'''
    rng = np.random.default_rng(11)
    steps = sorted(int(p) for p in rng.choice(np.arange(2, 30), size=12, replace=False) * 12)
    level = np.ones(365)
    for i, position in enumerate(steps):
        level[position:] *= 1.08 if i % 2 else 1 / 1.08
    values = list(112.0 * level * np.exp(rng.normal(0, 0.01, 365)))
    found = [c.position for c in levels.find_changes(values).changes]
    assert len(found) == len(steps)
    assert all(0 <= position - step <= 1 for position, step in zip(found, steps)), found
