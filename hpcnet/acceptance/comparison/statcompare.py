"""Is "after" worse than "before" by more than a healthy system moves? The
statistics of comparing two sets of benchmark samples of one metric.

The tests are scipy.stats'; the decision rule is ours. It is one-sided:
the question a site asks after an upgrade is "is anything worse than it
may be", so improvements never block and a small wobble is decided.

* **Worse** is lower values for a higher-is-better metric (bandwidth,
  message rate) and higher values otherwise (latency). ``worse_by`` of a
  ratio after/before is ``1 - ratio`` when higher is better, else
  ``ratio - 1``. The ratio shown is that of the medians (one disturbed
  repeat does not move it).
* **Tolerance** (tolerance_of): how far a metric may move without being a
  change, from the before side's sessions: ``max(floor, SPREAD_FACTOR x
  between-session spread)``, capped at TOLERANCE_CAP. The spread is the
  standard deviation of log(median) over the before side's per-session
  medians: how much a healthy system moves from one session to the next
  (machine state, placement, clocks), which the repeats of one session never
  show. The floor is compare.THRESHOLD (3 %, ``--floor``); a before side
  of one session has only the floor. Above the cap a metric would accept a
  halved bandwidth, so the cap bounds it.
* **The plausible slowdowns** (shift_bounds): the Hodges-Lehmann shift of
  log(after) - log(before) and its distribution-free one-sided (1 - alpha)
  bounds (Moses: order statistics of the n1 x n2 pairwise differences at
  the critical value of the Mann-Whitney U). "Worst" and "best plausible
  worse_by" are worse_by at those bounds. The bounds exist only when the
  sample counts can reach alpha at all: without ties the smallest one-sided
  p is ``1 / C(n1 + n2, n1)`` (0.05 for 3+3, 1/6 for 2+2).
* **Slow modes** (slow_mode): after samples worse than the before side's
  worst sample by more than the tolerance form a slower mode the before
  side never visited, whatever the medians say: an intermittent fault (a
  flapping link, a bad node in some allocations) hits a minority of the
  repeats. MODE_MIN_SAMPLES or more such samples are a regression naming
  the mode ("3 of 15 samples at 0.50 of before"). A single one is a glitch
  or the first sample of a mode: not decided until the after side has
  LONE_SAMPLE_RUNS samples (a mode met in one run in three shows at least
  twice in 15 runs with probability 0.98); then it is named beside the
  verdict of the medians. One the caller found a glitch of one measurement
  (``glitch``: hpcnet.acceptance.comparison.glitches) is left out, named,
  and the other samples decide at once.
* **A slow mode that grew** (shares.mode_boundary): samples beyond the
  tolerance past the worse edge of the before side's main mode are in a
  slow mode; where the before side visited it too, a larger share after
  (Fisher's exact test, one-sided, at alpha) is a regression, though no
  sample after is slower than the before side's slowest.
* The verdicts, with at least MIN_SAMPLES samples on each side:
  REGRESSED when the best plausible worse_by is beyond the tolerance (even
  the optimistic bound is too slow), or a slow mode; IMPROVED when the worst
  plausible worse_by is an improvement beyond the tolerance; UNCHANGED when
  the worst plausible worse_by is inside the tolerance; INCONCLUSIVE ("not
  decided") only between, with ``more_samples``: how many more samples of
  the after side (the before side as it is, as `hpcnet accept` adds them)
  would decide it, None where after samples alone cannot.
"""
from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
from scipy import special, stats
# The exact null distribution scipy.stats.mannwhitneyu(method='exact') reads its p from.
from scipy.stats._mannwhitneyu import _MWU

from hpcnet.acceptance.comparison import shares
from hpcnet.constants import TOLERANCE_CAP


class Verdict:
    """The outcomes of a comparison, as plain strings (they go into tables
    and JSON as they are).  SHOWN: compared and shown, but another metric of
    the same case decides (the absolute figure of a case judged over iperf3
    on its own link)."""
    REGRESSED = 'regressed'
    IMPROVED = 'improved'
    UNCHANGED = 'unchanged'
    INCONCLUSIVE = 'inconclusive'
    SHOWN = 'shown'


MIN_SAMPLES = 3          # below this per side, neither a median nor a rank test means anything
EXACT_MAX_PAIRS = 400    # n1*n2 up to which the exact U distribution is used (20+20)
#: The tolerance is this many between-session standard deviations (about
#: 95 % of a healthy system's sessions fall within two).
SPREAD_FACTOR = 2.0
#: Samples of a slower mode that make it a regression: one is a glitch or
#: the first sign of a mode, two in the same slow place are a mode.
MODE_MIN_SAMPLES = 2
#: After samples at which a lone slow sample is a glitch, not a mode.
LONE_SAMPLE_RUNS = 15


def _finite_sample(values: Sequence[float], side: str) -> list:
    """The values as floats; an empty side or a NaN/inf is an error."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError(f'{side} has no samples')
    if not all(map(math.isfinite, values)):
        index = next(i for i, value in enumerate(values) if not math.isfinite(value))
        raise ValueError(f'{side} sample #{index} is {values[index]!r}: samples must be finite '
                         'numbers')
    return values


def mann_whitney_p(before: Sequence[float], after: Sequence[float], alternative: str) -> float:
    """One-sided Mann-Whitney U test p-value (scipy.stats.mannwhitneyu).

    ``alternative='greater'``: H1 is that after tends to be larger than
    before; ``'less'``: that after tends to be smaller. The exact null
    distribution without ties up to EXACT_MAX_PAIRS pairs (the normal
    approximation is poor for a handful of repeats), otherwise the normal
    approximation with tie correction and continuity correction (exact
    counting does not hold with ties). All values equal gives p = 1."""
    if alternative not in ('less', 'greater'):
        raise ValueError(f'alternative must be "less" or "greater", not {alternative!r}')
    before = _finite_sample(before, 'before')
    after = _finite_sample(after, 'after')
    return mann_whitney_p_sorted(np.sort(before), np.sort(after), alternative)


def mann_whitney_p_sorted(before: np.ndarray, after: np.ndarray, alternative: str, *,
                          distinct: bool = False) -> float:
    """mann_whitney_p of two finite samples, each a sorted float array
    (`hpcnet history` tests many pairs of levels it keeps sorted);
    ``distinct``: no value of either is equal to another (no ties)."""
    if distinct:
        count, ties = len(before) + len(after), 0
    else:
        count, ties = _ties(np.sort(np.concatenate((before, after))))
        if count == 1:
            return 1.0
    has_ties = count < len(before) + len(after)
    method = ('exact' if not has_ties and len(before) * len(after) <= EXACT_MAX_PAIRS
              else 'asymptotic')
    # scipy's p is a function of U, the sample counts and the ties' term
    # sum(t^3 - t) alone (all exact in floating point): the normal one is
    # computed from them here, and the exact one is kept by them, since
    # `hpcnet history` tests many pairs that agree on them.
    u = _u_of_after(before, after, distinct)
    if method == 'asymptotic':
        return _normal_p(u, len(after), len(before), ties, alternative)
    key = (alternative, len(after), len(before), u)
    if key not in _MANN_WHITNEY_P:
        if len(_MANN_WHITNEY_P) >= _MANN_WHITNEY_KEPT:
            _MANN_WHITNEY_P.clear()
        _MANN_WHITNEY_P[key] = _exact_p(u, len(after), len(before), alternative)
    return _MANN_WHITNEY_P[key]


def _ties(merged: np.ndarray) -> tuple:
    """(the distinct values, sum(t^3 - t) over each run of t equal values)
    of a sorted array."""
    starts = np.flatnonzero(merged[1:] != merged[:-1]) + 1
    runs = np.diff(starts, prepend=0, append=len(merged))
    return len(runs), int((runs ** 3 - runs).sum())


def _exact_p(u_after: float, n_after: int, n_before: int, alternative: str) -> float:
    """scipy.stats.mannwhitneyu(after, before, method='exact')'s p, from the
    null distribution it reads it from (its _MWU), without its per-call
    argument handling: the same operations, so the same float.  Its survival
    function is taken once per pair of sample counts, at every U (elementwise
    the same operations as at one: its frequencies are built the same way up
    to any U, and summed in order)."""
    u = u_after if alternative == 'greater' else n_after * n_before - u_after
    shape = (min(n_after, n_before), max(n_after, n_before))
    if shape not in _NULL_DISTRIBUTIONS:
        if len(_NULL_DISTRIBUTIONS) >= _NULL_DISTRIBUTIONS_KEPT:
            _NULL_DISTRIBUTIONS.clear()
        _NULL_DISTRIBUTIONS[shape] = np.asarray(
            _MWU(*shape).sf(np.arange(shape[0] * shape[1] + 1, dtype=np.int64)), dtype=float)
    return float(np.clip(_NULL_DISTRIBUTIONS[shape][int(u)], 0., 1.))


def _normal_p(u_after: float, n_after: int, n_before: int, ties: int, alternative: str) -> float:
    """scipy.stats.mannwhitneyu(after, before, method='asymptotic',
    use_continuity=True)'s p, by its formula in its order of operations (so
    the same float), without its per-call argument handling: the normal
    approximation with tie correction (``ties``: sum(t^3 - t) over the tied
    groups) and continuity correction."""
    u = u_after if alternative == 'greater' else n_after * n_before - u_after
    n = n_after + n_before
    s = math.sqrt(n_after * n_before / 12 * ((n + 1) - float(ties) / (n * (n - 1))))
    z = (u - n_after * n_before / 2 - 0.5) / s
    return float(min(1.0, max(0.0, special.ndtr(-z))))


def _u_of_after(ranked: np.ndarray, after: np.ndarray, distinct: bool = False) -> float:
    """The U statistic of ``after``: the pairs it wins over the sorted
    ``ranked``, a tie counted half (every term a multiple of 1/2: exact);
    ``distinct``: no value of after is one of ranked's."""
    below = np.searchsorted(ranked, after, 'left').sum()
    if distinct:
        return float(below)
    return float(below + np.searchsorted(ranked, after, 'right').sum()) / 2


#: The exact mann_whitney_p by (alternative, n after, n before, U of after)
#: (no ties); emptied at _MANN_WHITNEY_KEPT entries, to bound its memory.
_MANN_WHITNEY_P: dict = {}
_MANN_WHITNEY_KEPT = 1 << 16
#: The exact p at every U of each (smaller, larger) sample count (at most
#: EXACT_MAX_PAIRS pairs); emptied at _NULL_DISTRIBUTIONS_KEPT, to bound its memory.
_NULL_DISTRIBUTIONS: dict = {}
_NULL_DISTRIBUTIONS_KEPT = 1 << 10


def min_exact_p(n_before: int, n_after: int) -> float:
    """The smallest one-sided p the exact test can give for these sample
    counts (complete separation): 1 / C(n1 + n2, n1)."""
    return 1 / math.comb(n_before + n_after, n_before)


@dataclass(frozen=True)
class Comparison:
    """The outcome of compare_samples; ``reason`` is the one line to show a
    person. ``ci_low``/``ci_high`` are the one-sided (1 - alpha) bounds of
    the ratio after/before; ``more_samples`` how many more samples of the
    after side would decide an inconclusive one (None: they would not)."""
    verdict: str
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    n_before: int
    n_after: int
    reason: str
    more_samples: int | None
    tolerance: float = float('nan')
    #: The indices of the after samples in a slower mode (slow_mode) of a
    #: comparison by compare_samples; None for any other kind of comparison.
    slow_after: tuple | None = None
    #: The after sample left out as a glitch of one measurement, and why ('': none).
    left_out_after: str = ''

    @property
    def held_on_lone_sample(self) -> bool:
        '''Not decided only for one slow sample: a glitch or the first of a
        slower mode (module docstring, "Slow modes").'''
        return (self.verdict == Verdict.INCONCLUSIVE and self.slow_after is not None
                and len(self.slow_after) == 1 and self.n_after < LONE_SAMPLE_RUNS)


@dataclass(frozen=True)
class Tolerance:
    """How far a metric may move without being a change, and what set it."""
    fraction: float
    basis: str


def tolerance_of(session_medians: Sequence[float], floor: float) -> Tolerance:
    """The tolerance of a metric from the before side's per-session medians
    (module docstring): max(floor, SPREAD_FACTOR x the standard deviation of
    their logs, as a fraction), at most TOLERANCE_CAP; the floor alone for
    one session (or for non-positive medians: counts, with no ratio)."""
    if not 0 < floor < 1:
        raise ValueError(f'the tolerance floor must be between 0 and 1 (exclusive), not {floor!r}')
    medians = [float(m) for m in session_medians]
    floor_words = f'the {floor * 100:g} % floor'
    if len(medians) < 2 or min(medians) <= 0:
        return Tolerance(floor, f'{floor_words}; one session before, no between-session spread'
                                if len(medians) < 2 else floor_words)
    spread = float(np.std(np.log(medians), ddof=1))
    moved = math.expm1(SPREAD_FACTOR * spread)
    sessions = f'{len(medians)} sessions before moved {spread * 100:.1f} % from session to session'
    if moved <= floor:
        return Tolerance(floor, f'{floor_words}; {sessions}')
    if moved >= TOLERANCE_CAP:
        return Tolerance(TOLERANCE_CAP, f'the {TOLERANCE_CAP * 100:g} % cap; {sessions}')
    return Tolerance(moved, f'{SPREAD_FACTOR:g} x the spread: {sessions}')


def _benchmark_sample(values: Sequence[float], side: str) -> list:
    """The values as floats; benchmark figures are positive and finite, and a
    ratio of medians needs a non-zero denominator."""
    values = _finite_sample(values, side)
    for index, value in enumerate(values):
        if value <= 0:
            raise ValueError(f'{side} sample #{index} is {value!r}: benchmark figures must be positive')
    return values


@functools.lru_cache(maxsize=256)
def _u_counts(n1: int, n2: int) -> tuple:
    """Orderings of n1 + n2 distinct values giving each U = 0 .. n1 x n2:
    the coefficients of the Gaussian binomial [n1 + n2 choose n1] in q,
    built as prod_i (1 - q^(n2 + i)) / (1 - q^i)."""
    counts = [1] + [0] * (n1 * n2)
    for i in range(1, n1 + 1):
        for u in range(len(counts) - 1, n2 + i - 1, -1):
            counts[u] -= counts[u - n2 - i]
        for u in range(i, len(counts)):
            counts[u] += counts[u - i]
    return tuple(counts)


def u_critical(n1: int, n2: int, alpha: float) -> int | None:
    """The largest u with P(U <= u) <= alpha under no difference, or None
    where even U = 0 is likelier than alpha (the counts cannot reach it):
    exact up to EXACT_MAX_PAIRS pairs, the normal approximation with
    continuity correction beyond."""
    if n1 * n2 <= EXACT_MAX_PAIRS:
        counts, total, below, critical = _u_counts(n1, n2), math.comb(n1 + n2, n1), 0, None
        for u, count in enumerate(counts):
            below += count
            if below / total > alpha:
                return critical
            critical = u
        return critical
    mean, sd = n1 * n2 / 2, math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12)
    critical = math.floor(mean - 0.5 + float(stats.norm.ppf(alpha)) * sd)
    return critical if critical >= 0 else None


def shift_bounds(before: Sequence[float], after: Sequence[float], alpha: float) -> tuple:
    """(Hodges-Lehmann estimate, lower, upper) of the ratio after/before:
    exp of the median of the pairwise log(a) - log(b), and of the order
    statistics of those differences that are one-sided (1 - alpha) bounds
    (Moses). Bounds (nan, nan) where the counts cannot reach alpha."""
    diffs = np.sort(np.subtract.outer(np.log(np.asarray(after, dtype=float)),
                                      np.log(np.asarray(before, dtype=float))).ravel())
    estimate = math.exp(float(np.median(diffs)))
    critical = u_critical(len(before), len(after), alpha)
    if critical is None:
        return estimate, float('nan'), float('nan')
    return (estimate, math.exp(float(diffs[critical])),
            math.exp(float(diffs[len(diffs) - 1 - critical])))


def worse_by(ratio: float, higher_better: bool) -> float:
    """How much worse a ratio after/before is, as a fraction (negative: better)."""
    return 1 - ratio if higher_better else ratio - 1


def slow_mode(before: list, after: list, higher_better: bool, tolerance: float) -> list:
    """The after samples outside the after side's main mode (its largest;
    of two as large, the better) that are worse than every before sample by
    more than the tolerance: a slower mode the before side never visited.
    A shift of the whole after side is the medians' to judge, not a mode."""
    groups = shares.modes(after, tolerance)
    main = shares.main_mode(groups, higher_better)
    if higher_better:
        limit = min(before) * (1 - tolerance)
        return sorted(a for g in groups if g is not main for a in g if a < limit)
    limit = max(before) * (1 + tolerance)
    return sorted((a for g in groups if g is not main for a in g if a > limit), reverse=True)


def _mode_words(slow: list, n_after: int, median_before: float) -> str:
    at = statistics.median(slow) / median_before
    return (f'{len(slow)} of {n_after} samples at {at:.2f} of before '
            f'({", ".join(f"{v:g}" for v in slow[:5])}{" ..." if len(slow) > 5 else ""} against '
            f'a median of {median_before:g})')


def _grown_mode(before: list, after: list, higher_better: bool, tolerance: float,
                alpha: float) -> str:
    """What says a slow mode the before side visited grew after (Fisher's
    exact test on the shares of samples beyond shares.mode_boundary), or ''."""
    boundary = shares.mode_boundary(before, higher_better, tolerance)
    slow_before = shares.beyond(before, boundary, higher_better)
    slow_after = shares.beyond(after, boundary, higher_better)
    if not slow_before or len(slow_after) < MODE_MIN_SAMPLES:
        return ''
    was, now = shares.Share(len(slow_before), len(before)), shares.Share(len(slow_after), len(after))
    p = shares.share_rose_p(was, now)
    if p >= alpha:
        return ''
    side = 'below' if higher_better else 'above'
    return (f'a slow mode grew: {now.words()} samples after {side} {boundary:g} (the tolerance '
            f"{side} the before side's main mode), {was.words()} before, Fisher's exact "
            f'p={p:.3g}')


def _after_samples_to_decide(n_before: int, n_after: int, estimate: float, bound: float,
                             edge: float) -> int | None:
    """More after samples that bring the bound's distance from the estimate
    (log scale) below the estimate's distance from the tolerance edge, the
    distance shrinking as sqrt(1/n_before + 1/n_after) with the before side
    as it is; None where no number of after samples gets there."""
    width = abs(math.log(bound) - math.log(estimate))
    room = abs(math.log(edge) - math.log(estimate))
    if width <= 0 or room <= 0:
        return None
    target = (room / width) ** 2 * (1 / n_before + 1 / n_after) - 1 / n_before
    if target <= 0:
        return None
    return max(1, math.ceil(1 / target) - n_after)


def _shift_words(worse: float) -> str:
    if worse > 0:
        return f'{worse * 100:.1f} % worse'
    if worse < 0:
        return f'{-worse * 100:.1f} % better'
    return 'no different'


def compare_samples(before: Sequence[float], after: Sequence[float], *, higher_better: bool,
                    tolerance: Tolerance | None = None, alpha: float = 0.05,
                    glitch: str = '') -> Comparison:
    """The verdict on after versus before by the rule in the module docstring.

    ``tolerance`` is how far the metric may move (tolerance_of; default the
    3 % floor alone); ``alpha`` the one-sided level of the bounds;
    ``glitch``: why one slow sample after is a glitch of one measurement,
    not the first of a slower mode (its run's other figures were measured
    at their level), '' where nothing says so: such a sample is left out."""
    tolerance = tolerance or Tolerance(0.03, 'the 3 % floor')
    for name, value in (('alpha', alpha), ('tolerance', tolerance.fraction)):
        if not 0 < value < 1:
            raise ValueError(f'{name} must be between 0 and 1 (exclusive), not {value!r}')
    before = _benchmark_sample(before, 'before')
    after = _benchmark_sample(after, 'after')
    n_before, n_after, tol = len(before), len(after), tolerance.fraction
    median_before = statistics.median(before)
    ratio = statistics.median(after) / median_before
    estimate, low, high = shift_bounds(before, after, alpha)
    p_worse = mann_whitney_p(before, after, 'less' if higher_better else 'greater')
    worst_ratio, best_ratio = (low, high) if higher_better else (high, low)
    worst, best = worse_by(worst_ratio, higher_better), worse_by(best_ratio, higher_better)
    edge = 1 - tol if higher_better else 1 + tol

    counts = f'{n_before}+{n_after} samples'
    plausible = (f'worse by {worst * 100:.1f} % at most and {best * 100:.1f} % at least '
                 f'({(1 - alpha) * 100:g} % one-sided)' if math.isfinite(worst) else 'no bounds')
    told = f'the {tol * 100:.1f} % tolerance ({tolerance.basis})'
    shift = f'after is {_shift_words(worse_by(ratio, higher_better))} (ratio {ratio:.3f}), {plausible}'

    slow_at: tuple | None = None

    def result(verdict: str, reason: str, more: int | None = None) -> Comparison:
        return Comparison(verdict, ratio, low, high, p_worse, n_before, n_after, reason, more, tol,
                          slow_at)

    if min(n_before, n_after) < MIN_SAMPLES or not math.isfinite(worst):
        return _too_few(result, n_before, n_after, alpha, shift, counts)
    slow = slow_mode(before, after, higher_better, tol)
    in_slow_mode = set(slow)
    slow_at = tuple(i for i, value in enumerate(after) if value in in_slow_mode)
    if glitch and len(slow) == 1 and n_after < LONE_SAMPLE_RUNS:
        kept = [value for i, value in enumerate(after) if i not in slow_at]
        rest = compare_samples(before, kept, higher_better=higher_better, tolerance=tolerance,
                               alpha=alpha)
        words = f'one lone slow sample in {n_after} ({slow[0]:g}), {glitch}'
        return replace(rest, reason=f'{rest.reason}; left out: {words}', left_out_after=words)
    if best > tol:
        return result(Verdict.REGRESSED, f'{shift}: even the best plausible slowdown is beyond '
                                         f'{told}, with {counts}, p={p_worse:.3g}')
    if len(slow) >= MODE_MIN_SAMPLES:
        return result(Verdict.REGRESSED, f'a slower mode: {_mode_words(slow, n_after, median_before)}'
                                         f', each worse than every sample before by more than {told}'
                                         f'; overall {shift}, with {counts}')
    grown = _grown_mode(before, after, higher_better, tol, alpha)
    if grown:
        return result(Verdict.REGRESSED, f'{grown}; {told}; overall {shift}, with {counts}')
    if slow and n_after < LONE_SAMPLE_RUNS:
        return result(Verdict.INCONCLUSIVE,
                      f'one slow sample, a glitch or a slower mode, more runs needed: '
                      f'{_mode_words(slow, n_after, median_before)}, worse than every sample '
                      f'before by more than {told}; {LONE_SAMPLE_RUNS} samples after tell which',
                      LONE_SAMPLE_RUNS - n_after)
    lone = (f'; one lone slow sample in {n_after} ({slow[0]:g}), no mode: a mode met in one run in '
            'three would have shown twice' if slow else '')
    if worst < -tol:
        return result(Verdict.IMPROVED, f'{shift}: better beyond {told}, with {counts}{lone}')
    if worst <= tol:
        return result(Verdict.UNCHANGED, f'{shift}: inside {told}, with {counts}{lone}')
    # The bound that has to cross the edge: the best one where the estimate
    # is beyond the tolerance (towards a regression), else the worst one.
    bound = best_ratio if worse_by(estimate, higher_better) > tol else worst_ratio
    more = _after_samples_to_decide(n_before, n_after, estimate, bound, edge)
    return result(Verdict.INCONCLUSIVE,
                  f'{shift} with {counts}: the worst plausible slowdown is beyond {told} and the '
                  f'best is not{lone}; ' + (f'about {more} more samples after would decide it' if more
                                      else 'more samples after alone would not decide it (a '
                                           'baseline of more samples would narrow it)'), more)


def _too_few(result, n_before: int, n_after: int, alpha: float, shift: str,
             counts: str) -> Comparison:
    '''Not decided: the counts cannot bound the shift at ``alpha``; how many
    more after samples would (None when the before side is what is short).'''
    if n_before < MIN_SAMPLES:
        return result(Verdict.INCONCLUSIVE,
                      f'{shift} with {counts}: fewer than {MIN_SAMPLES} samples before cannot be '
                      'judged; a before side of more repeats or sessions would decide it')
    more = MIN_SAMPLES - n_after if n_after < MIN_SAMPLES else 0
    while u_critical(n_before, n_after + more, alpha) is None:
        more += 1
    why = (f'fewer than {MIN_SAMPLES} samples after cannot be judged' if n_after < MIN_SAMPLES
           else f'{counts} cannot reach p < {alpha:g} at all (smallest possible p = '
                f'1/C({n_before + n_after},{n_before}) = {min_exact_p(n_before, n_after):.3g})')
    return result(Verdict.INCONCLUSIVE,
                  f'{shift} with {counts}: {why}; about {more} more samples after would decide it',
                  more)
