"""One slow sample after: a glitch of one measurement, or the first sample
of a slower mode? A mode is a property of runs (a bad node in one
allocation, a flapping link slows every figure of its case the fault
reaches): glitches.lone_glitches calls it a glitch only where its run
measured other figures of the case, none of them slow in it, and
statcompare then leaves it out, named."""
from hpcnet.acceptance.comparison import glitches, statcompare
from hpcnet.acceptance.comparison.statcompare import Verdict, compare_samples

CASE = ('hpcnet_p2p %scale=2_nodes %mode=bw', 'testbed:eth', 'gcc12-openmpi4')
BEFORE = [100.0, 101.0, 99.5, 100.5, 100.2]
#: One sample 7 % low in run 3, the other four at the before side's level.
GLITCHED = [100.3, 99.8, 93.0, 100.6, 100.1]
RUNS = [(0, n) for n in range(1, 6)]


def _judged(after: list, glitch: str = '') -> statcompare.Comparison:
    return compare_samples(BEFORE, after, higher_better=True, glitch=glitch)


def _results(**metrics) -> tuple:
    '''({key: Comparison}, {key: runs}) of the named metrics' after samples.'''
    results = {(*CASE, name): _judged(after) for name, after in metrics.items()}
    return results, {key: RUNS for key in results}


def test_a_lone_slow_sample_is_held_for_more_runs():
    result = _judged(GLITCHED)
    assert result.held_on_lone_sample and result.slow_after == (2,)
    assert result.more_samples == statcompare.LONE_SAMPLE_RUNS - 5


def test_held_where_its_run_measured_no_other_figure():
    # the ratio over iperf3 and the efficiency are the same figure as the bandwidth
    results, runs = _results(bandwidth_1MiB=GLITCHED, bandwidth_1MiB_over_iperf3=GLITCHED,
                             efficiency_1MiB=[v / 125 for v in GLITCHED])
    assert glitches.lone_glitches(results, runs) == {}


def test_held_where_another_figure_was_slow_in_the_same_run():
    slow_run = list(GLITCHED)
    results, runs = _results(bandwidth_1MiB=GLITCHED, bandwidth_4MiB=slow_run)
    assert glitches.lone_glitches(results, runs) == {}


def test_a_glitch_where_the_runs_other_figures_were_at_their_level():
    other_run_slow = [100.3, 93.5, 100.0, 100.6, 100.1]
    results, runs = _results(bandwidth_1MiB=GLITCHED, bandwidth_4MiB=other_run_slow,
                             latency_8B=[30.1, 30.0, 29.9, 30.2, 30.0])
    found = glitches.lone_glitches(results, runs)
    assert set(found) == {(*CASE, 'bandwidth_1MiB'), (*CASE, 'bandwidth_4MiB')}
    assert 'beside it (bandwidth_4MiB, latency_8B) were at their level' in \
        found[(*CASE, 'bandwidth_1MiB')]


def test_a_glitch_is_left_out_and_named_and_the_rest_decide():
    result = _judged(GLITCHED, glitch='its run was otherwise at its level')
    assert result.verdict == Verdict.UNCHANGED and result.n_after == 4
    assert result.reason.endswith('left out: one lone slow sample in 5 (93), its run was '
                                  'otherwise at its level')


def test_a_glitch_does_not_hide_a_shift_of_the_other_samples():
    shifted = [v * 0.9 for v in GLITCHED[:2]] + [80.0] + [v * 0.9 for v in GLITCHED[3:]]
    result = _judged(shifted, glitch='its run was otherwise at its level')
    assert result.verdict == Verdict.REGRESSED, result.reason


def test_two_slow_samples_are_a_mode_whatever_is_said_of_glitches():
    two = [100.3, 93.0, 99.8, 93.5, 100.1]
    assert _judged(two, glitch='said').verdict == Verdict.REGRESSED
