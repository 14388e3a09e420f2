"""hpcnet.acceptance.statcompare: exact and approximate Mann-Whitney p-values, the
before/after verdict and its reasons, and rejection of bad input."""
import itertools
import math
import random

import pytest

from hpcnet.acceptance.statcompare import Comparison, Verdict, compare_samples, mann_whitney_p


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


def test_three_noisy_samples_are_inconclusive_and_say_how_many_more():
    result = compare_samples(_noisy(500, 0.2, 3, 9), _noisy(500, 0.2, 3, 10), higher_better=True)
    assert result.verdict == Verdict.INCONCLUSIVE, result.reason
    assert isinstance(result.more_samples, int) and result.more_samples >= 1
    # 3+3 can never get below p = 1/C(6,3) = 0.05
    assert 'cannot reach p < 0.05' in result.reason and '0.05' in result.reason
    assert 'more per side' in result.reason


def test_clean_three_sample_drop_is_still_inconclusive_because_p_cannot_reach_alpha():
    result = compare_samples([100, 101, 102], [80, 81, 82], higher_better=True)
    assert result.verdict == Verdict.INCONCLUSIVE
    assert result.p_value == pytest.approx(0.05)
    assert result.more_samples == 1       # 4+4: smallest p = 1/70 < 0.05


def test_fewer_than_three_samples_are_inconclusive_whatever_the_numbers():
    result = compare_samples([117.0, 116.0], [80.0, 81.0], higher_better=True)
    assert result.verdict == Verdict.INCONCLUSIVE
    assert 'fewer than 3' in result.reason
    assert result.more_samples >= 1


def test_a_significant_shift_below_the_threshold_is_not_a_regression():
    before, after = _noisy(1000, 0.005, 40, 11), _noisy(990, 0.005, 40, 12)   # 1 % drop
    result = compare_samples(before, after, higher_better=True, resamples=500)
    assert result.p_value < 0.05                        # real, but too small to matter
    assert result.verdict in (Verdict.UNCHANGED, Verdict.INCONCLUSIVE), result.reason


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


def test_a_median_that_held_while_the_spread_grew_is_not_unchanged():
    before = [100.0 + 0.1 * i for i in range(-10, 11)]
    after = [100.0 + (2.5 if i % 2 else -2.5) + 0.05 * i for i in range(-10, 11)]
    result = compare_samples(before, after, higher_better=True)
    assert result.verdict == Verdict.INCONCLUSIVE
    assert 'distribution changed' in result.reason
