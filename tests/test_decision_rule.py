"""Issue 32, items 4 and 11: a decision rule that decides. Each metric is
judged one-sided against its own tolerance, a slow minority of repeats is a
regression naming its mode, and a healthy upgrade is decided: through
`hpcnet compare A.json B.json` (fault-matrix rows), through `hpcnet accept`'s
loop, and on the testbed sessions recorded in tests/data/history."""
import copy
import json
from pathlib import Path

from helpers import fault_row, report_case, run_hpcnet, wobble, write_report
from hpcnet.acceptance.comparison import compare, sides, statcompare
from hpcnet.commands import accept
from hpcnet.exitcodes import Exit

RECORDED = Path(__file__).parent / 'data' / 'history' / 'testbed-12-sessions.json'
#: Sessions of the recording at 1 Gbit/s (1-3, 5-7) and at 900 Mbit/s (8-12).
GBIT, MBIT_900 = (0, 1, 2, 4, 5, 6), (7, 8, 9, 10, 11)
#: The issue's clean upgrade: four metrics of p2p bw, one environment.
_HEALTHY = {'bandwidth_4MiB': 117.0, 'bandwidth_1MiB': 115.0, 'latency_8B': 30.0,
            'latency_0B': 29.5}


def _p2p_report(path: Path, uuid: str, runs: list) -> str:
    '''A run report of one session; ``runs`` is a list of {metric: value}.'''
    return write_report(path, [report_case(metrics) for metrics in runs], uuid)


def _runs(n: int, seed: int, scale: dict | None = None) -> list:
    '''n passes of the four metrics, each wobbling 1 %, ``scale`` moving a metric.'''
    columns = {m: wobble(v * (scale or {}).get(m, 1.0), n, seed + i)
               for i, (m, v) in enumerate(_HEALTHY.items())}
    return [{m: columns[m][i] for m in columns} for i in range(n)]


def test_verdict_4_a_minority_slow_mode_is_a_regression_naming_it(tmp_path):
    before = _p2p_report(tmp_path / 'base.json', 'base', _runs(5, 1))
    after_runs = _runs(15, 20)
    for run in after_runs[4:13:4]:          # 3 of the 15 repeats at half the bandwidth
        run['bandwidth_4MiB'] /= 2
    res = run_hpcnet('compare', before, _p2p_report(tmp_path / 'flap.json', 'flap', after_runs))
    fault_row('verdict #4: 3 of 15 repeats at 50 % of the bandwidth (an intermittent fault)', res,
              Exit.FAILED, shown='a slower mode: 3 of 15 samples at 0.50 of before')
    assert res.stdout.count('REGRESSED') == 1


def test_verdict_11_a_healthy_upgrade_is_decided(tmp_path):
    '''The issue's numbers: bandwidth_4MiB at 0.990 and latency_8B at 1.003
    of the baseline, every metric wobbling 1 %: 5 + 5 samples decide it.'''
    before = _p2p_report(tmp_path / 'base.json', 'base', _runs(5, 1))
    after = _p2p_report(tmp_path / 'upgrade.json', 'upgrade',
                        _runs(5, 40, {'bandwidth_4MiB': 0.990, 'latency_8B': 1.003}))
    res = run_hpcnet('compare', before, after)
    fault_row('verdict #11: healthy upgrade decided (1 % wobble, 5 + 5 samples)', res, Exit.OK)
    assert 'hpcnet: 0 regressed, 0 missing after, 0 not decided, 0 only after, 4 unchanged' \
        in res.stdout, res.stdout


def test_verdict_4_and_11_minimal_shapes_through_compare(tmp_path):
    before = _p2p_report(tmp_path / 'base.json', 'base', _runs(5, 1))
    slower = _p2p_report(tmp_path / 'slow.json', 'slow', _runs(5, 60, {'bandwidth_4MiB': 0.90}))
    res = run_hpcnet('compare', before, slower)
    fault_row('verdict #11: 10 % slower bandwidth, 5 + 5 samples', res, Exit.FAILED,
              shown='even the best plausible slowdown is beyond')
    faster = _p2p_report(tmp_path / 'fast.json', 'fast',
                         _runs(5, 70, {'bandwidth_4MiB': 1.2, 'latency_8B': 0.8}))
    res = run_hpcnet('compare', before, faster)
    fault_row('verdict #11: 20 % faster (improvements never block)', res, Exit.OK)
    assert res.stdout.count('IMPROVED') == 2
    two = _p2p_report(tmp_path / 'two.json', 'two', _runs(2, 80))
    res = run_hpcnet('compare', _p2p_report(tmp_path / 'base2.json', 'base2', _runs(2, 2)), two)
    fault_row('verdict #11: 2 + 2 samples', res, Exit.UNDECIDED,
              shown='fewer than 3 samples before')


def _accept_with(tmp_path, monkeypatch, baseline: str, after_runs) -> tuple:
    '''(exit code, repeats per round) of `hpcnet accept` whose rounds return
    ``after_runs(round, repeats)`` instead of running ReFrame.'''
    rounds = []

    def one_round(reframe_args, repeats):
        rounds.append(repeats)
        path = _p2p_report(tmp_path / f'round{len(rounds)}.json', f'round{len(rounds)}',
                           after_runs(len(rounds), repeats))
        return Exit.OK, json.loads(Path(path).read_text())
    monkeypatch.setattr(accept, '_round', one_round)
    monkeypatch.setenv('HPCNET_REPORTS_DIR', str(tmp_path))
    return accept.accept([], accept.Budget(5, 15, 600), baseline_spec=baseline), rounds


def test_accept_passes_a_healthy_upgrade_after_its_first_round(tmp_path, monkeypatch):
    baseline = _p2p_report(tmp_path / 'base.json', 'base', _runs(5, 1))
    code, rounds = _accept_with(tmp_path, monkeypatch, baseline,
                                lambda number, n: _runs(n, 100 * number,
                                                        {'bandwidth_4MiB': 0.990}))
    assert (code, rounds) == (Exit.OK, [5])


def test_accept_fails_an_intermittent_fault_and_re_tests_a_lone_slow_sample(tmp_path, monkeypatch):
    baseline = _p2p_report(tmp_path / 'base.json', 'base', _runs(5, 1))

    def one_slow_per_round(number, n):
        runs = _runs(n, 100 * number)
        for metric in ('bandwidth_4MiB', 'bandwidth_1MiB'):
            runs[0][metric] *= 0.7             # one repeat in each round slow, both sizes
        return runs
    code, rounds = _accept_with(tmp_path, monkeypatch, baseline, one_slow_per_round)
    # one slow run in 5 is not decided: re-tested, the second one makes it a mode
    assert (code, rounds) == (Exit.FAILED, [5, statcompare.LONE_SAMPLE_RUNS - 5])


def test_accept_passes_a_glitch_of_one_figure_in_its_first_round(tmp_path, monkeypatch):
    '''One size's figure 7 % low in one repeat, the repeat's other figures
    at their level (a host's phase in one window): no slow run, so the
    healthy upgrade is decided at once, the glitch named.'''
    baseline = _p2p_report(tmp_path / 'base.json', 'base', _runs(5, 1))

    def one_glitch(number, n):
        runs = _runs(n, 100 * number)
        runs[2]['bandwidth_1MiB'] *= 0.93
        return runs
    code, rounds = _accept_with(tmp_path, monkeypatch, baseline, one_glitch)
    assert (code, rounds) == (Exit.OK, [5])
    before, after = (sides.load_side(str(path)) for path in (baseline, tmp_path / 'round1.json'))
    row = next(r for r in compare.compare(before, after).rows if r.metric == 'bandwidth_1MiB')
    assert row.result.verdict == statcompare.Verdict.UNCHANGED, row.result.reason
    assert ('one lone slow sample in 5' in row.result.reason
            and 'bandwidth_4MiB, latency_0B, latency_8B) were at their level' in row.result.reason)


def test_accept_runs_no_further_round_once_a_metric_regressed(tmp_path, monkeypatch):
    '''bandwidth_4MiB 20 % lower in every repeat is decided in the first
    round; one repeat slow in bandwidth_1MiB and latency_8B (a slow run, not
    decided in 5) does not buy a second round: the acceptance has failed.'''
    baseline = _p2p_report(tmp_path / 'base.json', 'base', _runs(5, 1))

    def regressed(number, n):
        runs = _runs(n, 100 * number, {'bandwidth_4MiB': 0.8})
        runs[0]['bandwidth_1MiB'] *= 0.85
        runs[0]['latency_8B'] *= 1.3
        return runs
    code, rounds = _accept_with(tmp_path, monkeypatch, baseline, regressed)
    assert (code, rounds) == (Exit.FAILED, [5])


def test_accept_runs_no_further_round_of_a_case_that_failed_a_repeat(tmp_path, monkeypatch):
    '''A repeat that failed (the link found shaped below its declared rate
    while the flapping path was slow) fails the acceptance: the case's
    metrics left undecided are not measured again.'''
    baseline = _p2p_report(tmp_path / 'base.json', 'base', _runs(5, 1))
    rounds = []

    def flapping_round(reframe_args, repeats):
        rounds.append(repeats)
        runs = _runs(repeats, 100 * len(rounds))
        runs[0]['bandwidth_4MiB'] *= 0.7
        report = json.loads(Path(_p2p_report(tmp_path / f'round{len(rounds)}.json',
                                             f'round{len(rounds)}', runs)).read_text())
        report['runs'][0]['testcases'][0].update(
            result='fail', fail_phase='performance',
            fail_reason='performance error: the link is slower than declared')
        return Exit.FAILED, report
    monkeypatch.setattr(accept, '_round', flapping_round)
    monkeypatch.setenv('HPCNET_REPORTS_DIR', str(tmp_path))
    code = accept.accept([], accept.Budget(5, 15, 600), baseline_spec=baseline)
    assert (code, rounds) == (Exit.FAILED, [5])


# --- the recorded testbed sessions -------------------------------------------

def _recorded(indices, rescale: float = 1.0, halve: tuple = ()) -> list:
    '''The recorded sessions ``indices``, each its own session; MB/s values
    times ``rescale`` (the 900 Mbit/s sessions times 1000/900 are the same
    link healthy), bandwidth_4MiB halved in the sessions numbered in ``halve``.'''
    sessions = json.loads(RECORDED.read_text())
    out = []
    for index in indices:
        session = copy.deepcopy(sessions[index])
        session['session_info']['uuid'] += '-perturbed' if rescale != 1.0 or halve else ''
        for tc in (tc for run in session['runs'] for tc in run['testcases']):
            tc['link_rate_bps'] = 1000000000
            for metric, kept in tc['not_asserted'].items():
                if kept['unit'] == 'MB/s':
                    kept['value'] *= rescale / (2 if metric == 'bandwidth_4MiB' and index in halve
                                                else 1)
        out.append(session)
    return out


def _row_of(outcome, metric: str):
    (row,) = [r for r in outcome.rows if r.metric == metric]
    return row.result


def test_the_recorded_testbed_decides_a_healthy_link_and_a_slower_one():
    before = sides.Side('1 Gbit/s sessions', _recorded(GBIT))
    healthy = sides.Side('900 Mbit/s sessions rescaled', _recorded(MBIT_900, 1000 / 900))
    outcome = compare.compare(before, healthy)
    for metric in ('bandwidth_4MiB', 'bandwidth_1MiB', 'bandwidth_64KiB', 'latency_8B'):
        assert _row_of(outcome, metric).verdict in (statcompare.Verdict.UNCHANGED,
                                                    statcompare.Verdict.IMPROVED), \
            _row_of(outcome, metric).reason
    # session 10's latency_0B (8.91 us against at most 7.91 before) is one
    # slow sample, and its latency_8B and bandwidths were at their level: a
    # glitch of one measurement, left out, named; no slow run to wait for
    lone = _row_of(outcome, 'latency_0B')
    assert lone.verdict == statcompare.Verdict.UNCHANGED and lone.n_after == 4, lone.reason
    assert 'left out: one lone slow sample in 5 (8.9134)' in lone.reason
    assert 'a glitch of one measurement' in lone.reason
    assert outcome.count(statcompare.Verdict.REGRESSED) == 0
    slower = compare.compare(before, sides.Side('900 Mbit/s', _recorded(MBIT_900)))
    result = _row_of(slower, 'bandwidth_4MiB')
    assert result.verdict == statcompare.Verdict.REGRESSED and 0.88 < result.ratio < 0.93, \
        result.reason


def test_the_recorded_testbed_with_two_of_five_sessions_at_half_bandwidth_names_the_mode():
    before = sides.Side('1 Gbit/s sessions', _recorded(GBIT))
    flapping = sides.Side('two sessions halved', _recorded(MBIT_900, 1000 / 900, halve=(8, 10)))
    result = _row_of(compare.compare(before, flapping), 'bandwidth_4MiB')
    assert result.verdict == statcompare.Verdict.REGRESSED, result.reason
    assert 'a slower mode: 2 of 5 samples at 0.5' in result.reason


def test_a_glitch_passes_and_a_lone_slow_run_waits_through_compare(tmp_path):
    '''The healthy counterpart of an intermittent fault: one size 7 % low in
    one repeat of five, the repeat's other figures at their level, passes
    (left out, named); the same repeat slow in both bandwidths is a slow run,
    not decided until 15 samples tell a glitch from a mode.'''
    before = _p2p_report(tmp_path / 'base.json', 'base', _runs(5, 1))
    glitched = _runs(5, 90)
    glitched[1]['bandwidth_1MiB'] *= 0.93
    res = run_hpcnet('compare', before, _p2p_report(tmp_path / 'glitch.json', 'glitch', glitched))
    fault_row('verdict #11: one size 7 % low in one repeat of 5, its other figures at their '
              'level (a glitch)', res, Exit.OK, shown='a glitch of one measurement')
    slow_run = _runs(5, 90)
    for metric in ('bandwidth_1MiB', 'bandwidth_4MiB'):
        slow_run[1][metric] *= 0.85
    res = run_hpcnet('compare', before, _p2p_report(tmp_path / 'run.json', 'run', slow_run))
    fault_row('verdict #4: one repeat of 5 slow in both bandwidths (a slow run, a mode\'s first?)',
              res, Exit.UNDECIDED, shown='more runs needed')
