"""hpcnet.acceptance.comparison.statcompare: exact and approximate Mann-Whitney p-values, the
before/after verdict and its reasons, and rejection of bad input."""
import itertools
import json
import math
import random
import statistics
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from hpcnet.acceptance.comparison import statcompare
from hpcnet.acceptance.comparison.statcompare import (LONE_SAMPLE_RUNS, TOLERANCE_CAP, Comparison,
                                                      Tolerance, Verdict, compare_samples,
                                                      mann_whitney_p, shift_bounds,
                                                      tolerance_of, u_critical)
from hpcnet.acceptance.comparison.shares import modes
from hpcnet.acceptance.history import stored_series
from hpcnet.acceptance.references.spread import robust_sigma


def _noisy(center: float, relative_sd: float, n: int, seed: int) -> list:
    """n benchmark-like samples: Gaussian noise of relative_sd around center."""
    rng = random.Random(seed)
    return [rng.gauss(center, center * relative_sd) for _ in range(n)]


# --- Mann-Whitney p-values ---------------------------------------------------

def test_exact_p_of_complete_separation_is_one_over_the_number_of_orderings():
    assert mann_whitney_p([1, 2, 3], [4, 5, 6], 'greater') == pytest.approx(1 / 20)
    assert mann_whitney_p([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], 'greater') == pytest.approx(1 / 252)
    assert mann_whitney_p([6, 7, 8, 9, 10], [1, 2, 3, 4, 5], 'less') == pytest.approx(1 / 252)
    # the other tail includes every ordering
    assert mann_whitney_p([1, 2, 3], [4, 5, 6], 'less') == pytest.approx(1.0)


def test_exact_p_matches_brute_force_enumeration_of_orderings():
    before, after = [3.1, 7.2, 1.5, 9.9], [4.4, 8.8, 2.2]
    pooled = before + after
    observed_u = sum(a > b for a in after for b in before)
    greater = less = total = 0
    for chosen in itertools.combinations(range(len(pooled)), len(after)):
        fake_after = [pooled[i] for i in chosen]
        fake_before = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        u = sum(a > b for a in fake_after for b in fake_before)
        greater += u >= observed_u
        less += u <= observed_u
        total += 1
    assert mann_whitney_p(before, after, 'greater') == pytest.approx(greater / total)
    assert mann_whitney_p(before, after, 'less') == pytest.approx(less / total)


def test_ties_use_the_normal_approximation_with_tie_and_continuity_correction():
    before, after = [1, 2, 2, 3, 4], [3, 4, 4, 5, 6]
    # By hand (what scipy.stats.mannwhitneyu(after, before, alternative='greater',
    # method='asymptotic') computes): mean ranks 1, 2.5, 2.5, 4.5 | 4.5, 7, 7, 7, 9, 10;
    # rank sum of after 37.5, U = 37.5 - 15 = 22.5, mean U = 12.5; tie groups of
    # sizes 2, 2, 3 give sum(t^3 - t) = 36, so var = 25/12 * (11 - 36/90) = 22.0833;
    # z = (22.5 - 12.5 - 0.5) / sqrt(22.0833) = 2.0216; p = 1 - Phi(z) = 0.02161.
    p_greater = mann_whitney_p(before, after, 'greater')
    assert p_greater == pytest.approx(0.02161, abs=5e-5)
    # the other tail: z = (12.5 - 22.5 - 0.5) / 4.6993 = -2.2344, p = 0.98727
    assert mann_whitney_p(before, after, 'less') == pytest.approx(0.98727, abs=5e-5)
    # moving after further up can only make "greater" more certain
    assert mann_whitney_p(before, [3, 4, 5, 5, 6], 'greater') < p_greater
    assert mann_whitney_p([5.0] * 4, [5.0] * 4, 'greater') == 1.0


def test_large_samples_use_the_normal_approximation_and_stay_in_range():
    before, after = _noisy(100, 0.02, 30, 1), _noisy(101, 0.02, 30, 2)   # 900 pairs > exact limit
    p_greater = mann_whitney_p(before, after, 'greater')
    p_less = mann_whitney_p(before, after, 'less')
    assert 0 < p_greater < 1 and 0 < p_less < 1
    assert p_greater < p_less        # after was drawn around a higher center


@pytest.mark.parametrize('before, after, alternative', [
    ([], [1.0], 'greater'), ([1.0], [], 'less'), ([1.0, math.nan], [2.0], 'less'),
    ([1.0], [2.0], 'two-sided')])
def test_mann_whitney_rejects_bad_input(before, after, alternative):
    with pytest.raises(ValueError):
        mann_whitney_p(before, after, alternative)


# --- verdicts ----------------------------------------------------------------

def test_a_ten_percent_bandwidth_drop_is_a_regression():
    result = compare_samples(_noisy(1000, 0.02, 5, 1), _noisy(900, 0.02, 5, 2), higher_better=True)
    assert isinstance(result, Comparison)
    assert result.verdict == Verdict.REGRESSED, result.reason
    assert 0.85 < result.ratio < 0.95 and result.ci_low < result.ratio < result.ci_high
    assert result.p_value < 0.05 and result.more_samples is None
    assert (result.n_before, result.n_after) == (5, 5)
    assert '% worse' in result.reason and '5+5 samples' in result.reason


def test_a_ten_percent_latency_rise_is_a_regression():
    result = compare_samples(_noisy(2.0, 0.02, 5, 3), _noisy(2.2, 0.02, 5, 4), higher_better=False)
    assert result.verdict == Verdict.REGRESSED, result.reason
    assert 1.05 < result.ratio < 1.15


def test_an_improvement_is_improved_with_p_reported_in_the_worse_direction():
    result = compare_samples(_noisy(1000, 0.02, 5, 5), _noisy(1100, 0.02, 5, 6), higher_better=True)
    assert result.verdict == Verdict.IMPROVED, result.reason
    assert result.p_value > 0.5          # p_value is for "worse", which this is not
    assert '% better' in result.reason


def test_same_distribution_with_little_noise_is_unchanged():
    result = compare_samples(_noisy(500, 0.01, 10, 7), _noisy(500, 0.01, 10, 8), higher_better=True)
    assert result.verdict == Verdict.UNCHANGED, result.reason
    assert 0.97 <= result.ci_low <= result.ci_high <= 1.03


def test_three_noisy_samples_are_not_decided_and_more_after_samples_alone_would_not_do():
    result = compare_samples(_noisy(500, 0.2, 3, 9), _noisy(500, 0.2, 3, 10), higher_better=True)
    assert result.verdict == Verdict.INCONCLUSIVE, result.reason
    # 3 noisy samples before bound the shift no tighter than their own scatter
    assert result.more_samples is None
    assert 'a baseline of more samples would narrow it' in result.reason


def test_counts_that_cannot_reach_alpha_say_so_and_how_many_more_would():
    result = compare_samples([100, 101, 102], [80, 81, 82], higher_better=True, alpha=0.01)
    assert result.verdict == Verdict.INCONCLUSIVE
    # 3+3 can never get below p = 1/C(6,3) = 0.05; 3+6 not either (1/84), 3+7 can (1/120)
    assert 'cannot reach p < 0.01' in result.reason and '0.05' in result.reason
    assert result.more_samples == 4
    assert math.isnan(result.ci_low) and math.isnan(result.ci_high)


def test_clean_three_sample_drop_is_a_regression_at_the_exact_five_percent_bound():
    # complete separation of 3+3 has p = 1/20 = 0.05: the one-sided 95 %
    # bounds exist, and even the best of them is 18 % worse
    result = compare_samples([100, 101, 102], [80, 81, 82], higher_better=True)
    assert result.verdict == Verdict.REGRESSED, result.reason
    assert result.p_value == pytest.approx(0.05)
    assert result.ci_high == pytest.approx(82 / 100)


def test_fewer_than_three_samples_are_not_decided_whatever_the_numbers():
    result = compare_samples([117.0, 116.0], [80.0, 81.0], higher_better=True)
    assert result.verdict == Verdict.INCONCLUSIVE
    assert 'fewer than 3 samples before' in result.reason
    assert result.more_samples is None       # more after samples cannot fix the before side
    result = compare_samples([117.0, 116.0, 118.0, 117.5, 116.5], [80.0, 81.0], higher_better=True)
    assert result.verdict == Verdict.INCONCLUSIVE
    assert 'fewer than 3 samples after' in result.reason and result.more_samples == 1


def test_a_significant_shift_inside_the_tolerance_is_unchanged():
    before, after = _noisy(1000, 0.005, 40, 11), _noisy(990, 0.005, 40, 12)   # 1 % drop
    result = compare_samples(before, after, higher_better=True)
    assert result.p_value < 0.05                        # real, but too small to matter
    assert result.verdict == Verdict.UNCHANGED, result.reason


def test_results_are_reproducible():
    before, after = _noisy(1000, 0.05, 6, 13), _noisy(970, 0.05, 6, 14)
    assert (compare_samples(before, after, higher_better=True)
            == compare_samples(before, after, higher_better=True))


@pytest.mark.parametrize('before, after, word', [
    ([], [1.0, 2.0, 3.0], 'no samples'), ([1.0, 2.0, 0.0], [1.0, 2.0, 3.0], '0.0'),
    ([1.0, 2.0, 3.0], [1.0, math.nan, 3.0], 'nan'), ([1.0, -2.0, 3.0], [1.0, 2.0, 3.0], '-2.0'),
    ([1.0, 2.0, math.inf], [1.0, 2.0, 3.0], 'inf')])
def test_compare_rejects_empty_non_finite_and_non_positive_samples(before, after, word):
    with pytest.raises(ValueError, match=word):
        compare_samples(before, after, higher_better=True)


def test_mann_whitney_matches_the_published_example():
    '''Conover, Practical Nonparametric Statistics, as worked in the
    scipy.stats.mannwhitneyu documentation: ages of male and female
    subjects, U = 17 for the males, exact two-sided p = 0.1111, so the
    one-sided tail is half of it (7 of the C(9, 4) = 126 orderings).'''
    males, females = [19, 22, 16, 29, 24], [20, 11, 17, 12]
    assert mann_whitney_p(females, males, 'greater') == pytest.approx(0.1111 / 2, abs=1e-4)
    assert mann_whitney_p(males, females, 'less') == pytest.approx(0.1111 / 2, abs=1e-4)


def test_a_spread_that_grew_inside_the_tolerance_is_unchanged_and_beyond_it_a_mode():
    before = [100.0 + 0.1 * i for i in range(-10, 11)]
    after = [100.0 + (2.5 if i % 2 else -2.5) + 0.05 * i for i in range(-10, 11)]
    result = compare_samples(before, after, higher_better=True)
    assert result.verdict == Verdict.UNCHANGED, result.reason
    wider = [100.0 + (20 if i % 2 else 0) + 0.05 * i for i in range(-10, 11)]
    result = compare_samples(before, sorted(wider)[::-1], higher_better=False)
    assert result.verdict == Verdict.REGRESSED and 'slower mode: 10 of 21' in result.reason, \
        result.reason


# --- the one-sided rule against a tolerance (issue 32, items 4 and 11) ------

def _wobble(center: float, n: int, seed: int, spread: float = 0.01) -> list:
    """n samples within +-spread of center (a healthy metric's wobble)."""
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


@pytest.mark.parametrize('seed', range(20))
def test_a_clean_one_percent_wobble_is_decided_unchanged_with_five_and_five(seed):
    before, after = _wobble(117.0, 5, seed), _wobble(117.0 * 0.99, 5, seed + 1000)
    result = compare_samples(before, after, higher_better=True)
    assert result.verdict == Verdict.UNCHANGED, result.reason
    latency = compare_samples(_wobble(7.5, 5, seed), _wobble(7.5 * 1.01, 5, seed + 2000),
                              higher_better=False)
    assert latency.verdict == Verdict.UNCHANGED, latency.reason


def test_ten_percent_slower_with_five_and_five_is_regressed():
    result = compare_samples(_wobble(117.0, 5, 1), _wobble(105.3, 5, 2), higher_better=True)
    assert result.verdict == Verdict.REGRESSED, result.reason
    assert 'even the best plausible slowdown is beyond the 3.0 % tolerance' in result.reason


def test_three_of_fifteen_at_half_the_bandwidth_is_a_regression_naming_the_mode():
    after = _wobble(117.0, 12, 2) + [58.6, 58.4, 58.9]
    result = compare_samples(_wobble(117.0, 5, 1), after, higher_better=True)
    assert result.verdict == Verdict.REGRESSED, result.reason
    assert result.reason.startswith('a slower mode: 3 of 15 samples at 0.50 of before'), result.reason
    # the medians alone see nothing: that is the shape the old rule called unchanged
    assert 0.97 < result.ratio < 1.03


def test_one_slow_sample_is_not_decided_until_enough_runs_tell_a_glitch_from_a_mode():
    before = _wobble(117.0, 5, 1)
    result = compare_samples(before, _wobble(117.0, 4, 2) + [58.5], higher_better=True)
    assert result.verdict == Verdict.INCONCLUSIVE, result.reason
    assert 'more runs needed: 1 of 5 samples at 0.50' in result.reason
    assert result.more_samples == LONE_SAMPLE_RUNS - 5
    result = compare_samples(before, _wobble(117.0, 14, 2) + [58.5], higher_better=True)
    assert result.verdict == Verdict.UNCHANGED and 'one lone slow sample in 15' in result.reason
    result = compare_samples(before, _wobble(117.0, 13, 2) + [58.5, 70.0], higher_better=True)
    assert result.verdict == Verdict.REGRESSED and '2 of 15 samples' in result.reason


def test_a_whole_side_four_percent_slower_is_no_mode_but_the_medians_to_judge():
    result = compare_samples(_wobble(100.0, 5, 1), _wobble(96.0, 5, 2), higher_better=True)
    assert 'mode' not in result.reason
    assert result.verdict == Verdict.INCONCLUSIVE and result.more_samples, result.reason
    result = compare_samples(_wobble(100.0, 5, 1), _wobble(96.0, 15, 2), higher_better=True)
    assert result.verdict == Verdict.REGRESSED, result.reason


def test_twenty_percent_faster_is_improved():
    result = compare_samples(_wobble(117.0, 5, 1), _wobble(140.4, 5, 2), higher_better=True)
    assert result.verdict == Verdict.IMPROVED, result.reason
    result = compare_samples(_wobble(30.0, 5, 1), _wobble(24.0, 5, 2), higher_better=False)
    assert result.verdict == Verdict.IMPROVED, result.reason


def test_two_and_two_samples_are_not_decided():
    result = compare_samples([117.0, 116.0], [116.5, 117.2], higher_better=True)
    assert result.verdict == Verdict.INCONCLUSIVE, result.reason


def test_a_wider_tolerance_passes_what_the_floor_does_not_decide():
    before, after = _wobble(100.0, 5, 1), _wobble(96.0, 5, 2)
    result = compare_samples(before, after, higher_better=True, tolerance=Tolerance(0.08, 'given'))
    assert result.verdict == Verdict.UNCHANGED and '8.0 % tolerance (given)' in result.reason
    assert result.tolerance == 0.08


# --- the pieces ---------------------------------------------------------------

@pytest.mark.parametrize('n1, n2', [(3, 3), (4, 5), (5, 5), (2, 7), (6, 4)])
def test_the_critical_u_matches_brute_force_enumeration(n1, n2):
    us = []
    for chosen in itertools.combinations(range(n1 + n2), n2):
        after = set(chosen)
        us.append(sum(a > b for a in after for b in range(n1 + n2) if b not in after))
    for alpha in (0.01, 0.05, 0.1):
        expected = max((u for u in range(n1 * n2 + 1)
                        if sum(x <= u for x in us) / len(us) <= alpha), default=None)
        assert u_critical(n1, n2, alpha) == expected, (alpha, n1, n2)


def test_the_critical_u_of_large_counts_is_the_normal_approximation():
    # 30+30: mean 450, sd sqrt(900 * 61 / 12) = 67.64; 450 - 0.5 - 1.6449 * 67.64 = 338.2
    assert u_critical(30, 30, 0.05) == 338
    assert u_critical(2, 2, 0.05) is None


def test_shift_bounds_are_the_order_statistics_of_the_pairwise_ratios():
    before, after = [100.0, 101.0, 102.0], [80.0, 81.0, 82.0]
    estimate, low, high = shift_bounds(before, after, 0.05)
    assert low == pytest.approx(80 / 102) and high == pytest.approx(82 / 100)
    assert estimate == pytest.approx(81 / 101)
    assert all(math.isnan(x) for x in shift_bounds([1.0, 2.0], [1.0, 2.0], 0.05)[1:])


def test_modes_split_where_a_gap_exceeds_the_tolerance():
    assert modes([100, 58, 101, 59, 99.5], 0.03) == [[58, 59], [99.5, 100, 101]]
    assert modes([100, 102, 104, 106], 0.03) == [[100, 102, 104, 106]]


def test_the_tolerance_is_the_floor_or_twice_the_between_session_spread():
    assert tolerance_of([117.0], 0.03).fraction == 0.03
    assert 'one session before' in tolerance_of([117.0], 0.03).basis
    assert tolerance_of([117.0, 117.5, 116.8, 117.2, 117.1], 0.03).fraction == 0.03
    medians = [100.0, 104.0, 96.0, 102.0, 98.0]
    spread = statistics.stdev(math.log(m) for m in medians)
    wide = tolerance_of(medians, 0.03)
    assert wide.fraction == pytest.approx(math.expm1(2 * spread))
    assert 0.06 < wide.fraction < 0.07 and 'from session to session' in wide.basis
    assert tolerance_of([100.0, 50.0, 150.0], 0.03).fraction == TOLERANCE_CAP
    with pytest.raises(ValueError, match='floor'):
        tolerance_of([1.0, 2.0], 3)


def _recorded_series() -> list:
    """Every series of the recorded twelve-session testbed history
    (tests/data/history), and each rounded to 2 significant digits (ties)."""
    reports = json.loads((Path(__file__).resolve().parent / 'data' / 'history'
                          / 'testbed-12-sessions.json').read_text())
    _, series = stored_series.series_of(reports)
    values = [[float(v) for v in s.values] for s in series]
    return values + [[float(f'{v:.2g}') for v in s] for s in values]


def test_the_normal_approximation_is_scipys_p_to_the_last_bit():
    """mann_whitney_p computes scipy's asymptotic p itself: equal, not close,
    at every split of every recorded series (with ties and without)."""
    checked = 0
    for values in _recorded_series():
        for cut in range(2, len(values) - 1):
            before, after = values[:cut], values[cut:]
            has_ties = len(set(values)) < len(values)
            if len(set(values)) == 1 or (not has_ties and cut * (len(values) - cut)
                                         <= statcompare.EXACT_MAX_PAIRS):
                continue
            for alternative in ('less', 'greater'):
                assert mann_whitney_p(before, after, alternative) == float(stats.mannwhitneyu(
                    after, before, alternative=alternative, method='asymptotic',
                    use_continuity=True).pvalue), (before, after, alternative)
                checked += 1
    assert checked > 100


def test_the_exact_p_is_scipys_to_the_last_bit():
    """mann_whitney_p reads the exact p from scipy's own null distribution:
    equal, not close, to scipy.stats.mannwhitneyu(method='exact') at every U
    of several pairs of sample counts (after's values placed among before's
    so that it wins u pairs), in an order that moves between counts."""
    checked = 0
    for n_after, n_before in [(4, 4), (4, 9), (9, 4), (5, 17), (20, 20), (1, 30), (8, 50)]:
        for u in range(n_after * n_before + 1):
            before, after, rest = list(range(n_before)), [], u
            for i in range(n_after):
                wins = min(n_before, rest)
                after.append(wins - 0.5 + i * 1e-3)
                rest -= wins
            assert statcompare._u_of_after(before, after) == u
            for alternative in ('less', 'greater'):
                statcompare._MANN_WHITNEY_P.clear()
                assert mann_whitney_p(before, after, alternative) == float(stats.mannwhitneyu(
                    after, before, alternative=alternative, method='exact').pvalue)
                checked += 1
    assert checked == 2 * (17 + 37 + 37 + 86 + 401 + 31 + 401)


def test_the_p_of_sorted_samples_without_ties_is_mann_whitney_p():
    """`hpcnet history` reads the p of two sorted levels, told that no value
    repeats: the same float as mann_whitney_p, at every split of every
    recorded series without ties, both ways."""
    checked = 0
    for values in _recorded_series():
        if len(set(values)) < len(values):
            continue
        for cut in range(1, len(values)):
            before, after = np.sort(values[:cut]), np.sort(values[cut:])
            for alternative in ('less', 'greater'):
                assert statcompare.mann_whitney_p_sorted(
                    before, after, alternative, distinct=True) == mann_whitney_p(
                    values[:cut], values[cut:], alternative), (values, cut, alternative)
                checked += 1
    assert checked > 100


def test_the_robust_sigma_is_scipys_mad_to_the_last_bit():
    """spread.robust_sigma, which the history search asks at every step, is
    scipy.stats.median_abs_deviation(scale='normal'): equal, not close, on
    every recorded series and every prefix of it."""
    checked = 0
    for values in _recorded_series():
        for end in range(1, len(values) + 1):
            assert robust_sigma(values[:end]) == float(
                stats.median_abs_deviation(values[:end], scale='normal')), (values, end)
            checked += 1
    assert checked > 100
