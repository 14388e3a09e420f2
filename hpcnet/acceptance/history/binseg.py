"""Binary segmentation with the L1 cost: the breakpoints ruptures'
``Binseg(model='l1', jump=1)`` predicts, found in O(n log n) steps per
segment instead of two ``np.median`` calls per place tried.

The rule is ruptures' own: split the segment whose best split gains the
most (the first such segment), a segment at the place of largest gain (the
last such place), until ``n_bkps`` breakpoints or no segment can be split;
gain = cost(segment) - cost(left) - cost(right), cost = sum of |value -
median| (ruptures.costs.CostL1).

Every place's gain is first computed from the running sums of the lower and
upper half of each prefix and suffix (exact up to rounding); the places within TIE of the best are then computed again by
ruptures' CostL1's operations (its sum, in its order, of the distances to
np.median's median), and so is the gain returned, so where rounding could
decide between two places ruptures' own figures decide, as they do in
Binseg: the breakpoints are the same.
"""
from __future__ import annotations

import heapq

import numpy as np
from ruptures.costs import CostL1

from hpcnet.acceptance.references.spread import median_of

#: Places whose fast gain is within this fraction of the segment's cost of
#: the best are decided by ruptures' CostL1 figures: far above the rounding
#: of either way of summing (n x machine epsilon of the cost).
TIE = 1e-9
#: A bound of the rounding of one sum of floats, per value summed, in
#: machine epsilons: 3 roundings a value, and a margin.
_ROUNDING = 8 * float(np.finfo(float).eps)


def _prefix_costs(deviations: np.ndarray) -> np.ndarray:
    """cost[k - 1] = L1 cost of the first k values, for every k: the sum of
    the upper floor(k/2) values minus that of the lower floor(k/2) (the
    median cancels), the values added one at a time to two heaps (the lower
    ceil(k/2), the upper floor(k/2)) and their running sums."""
    lower: list = []        # negated: a max-heap
    upper: list = []
    sum_lower = sum_upper = 0.0
    costs: list = []
    # Local names: this loop runs for every value of every segment searched.
    push, pushpop, append = heapq.heappush, heapq.heappushpop, costs.append
    for count, value in enumerate(deviations.tolist(), 1):
        if count % 2:
            # Lower gains one: the smallest of upper and the value.
            moved = pushpop(upper, value) if upper else value
            push(lower, -moved)
            sum_upper += value - moved
            sum_lower += moved
            # The median, lower's largest, is in neither half.
            append(sum_upper - sum_lower - lower[0])
        else:
            # Upper gains one: the largest of lower and the value.
            moved = -pushpop(lower, -value)
            push(upper, moved)
            sum_lower += value - moved
            sum_upper += moved
            append(sum_upper - sum_lower)
    return np.asarray(costs)


class _Segmenter:
    def __init__(self, signal: np.ndarray, min_size: int):
        self.signal = np.asarray(signal, dtype=float)
        #: The signal as ruptures' CostL1 holds it (a column): its sums in its order.
        self.column = self.signal.reshape(-1, 1)
        self.min_size = max(min_size, CostL1().min_size)
        self.best: dict = {}
        self.costs: dict = {}
        #: The fast L1 costs of the prefixes from a start, of the suffixes to
        #: an end: (costs, the median the deviations were taken from).  A
        #: split's left side starts where its segment starts and its right
        #: side ends where it ends: each reads one of them from its segment.
        self.prefixes: dict = {}
        self.suffixes: dict = {}

    def error(self, start: int, end: int) -> float:
        """CostL1().fit(signal).error(start, end), the same float: the sum of
        |value - median| of the segment (each segment once: a split's two
        sides are the segments the search splits next)."""
        key = (start, end)
        if key not in self.costs:
            sub = self.column[start:end]
            self.costs[key] = abs(sub - median_of(self.signal[start:end])).sum()
        return self.costs[key]

    def single_bkp(self, start: int, end: int) -> tuple:
        """(place, gain) of the segment's best split; (None, 0) for none."""
        key = (start, end)
        if key not in self.best:
            self.best[key] = self._single_bkp(start, end)
        return self.best[key]

    def _fast_costs(self, start: int, end: int, segment_cost: float, *, prefixes: bool):
        """The fast L1 cost of every prefix (else suffix) of [start, end),
        the k-th that of k values: the enclosing segment's, where their
        rounding is far below TIE x the segment's cost; else from this
        segment's own median."""
        known, key = (self.prefixes, start) if prefixes else (self.suffixes, end)
        values = self.signal[start:end]
        if key in known:
            costs, centre = known[key]
            # Each fast cost is at most 3k roundings of sums no larger than
            # the sum of |deviation| of the k values.
            bound = _ROUNDING * len(values) * float(np.abs(values - centre).sum())
            if bound < TIE * segment_cost / 1000:
                return costs
        centre = median_of(values)
        deviations = values - centre
        known[key] = _prefix_costs(deviations if prefixes else deviations[::-1]), centre
        return known[key][0]

    def _single_bkp(self, start: int, end: int) -> tuple:
        if end - start < 2 * self.min_size:
            return None, 0
        error = self.error
        segment_cost = error(start, end)
        if segment_cost == 0:
            # A constant segment: every place gains 0, and the last wins.
            return end - self.min_size, 0.0
        left = self._fast_costs(start, end, segment_cost, prefixes=True)
        right = self._fast_costs(start, end, segment_cost, prefixes=False)
        # Place b, from start + min_size on, splits [start, b) and [b, end):
        # the b - start values from start, the end - b values to end.
        shortest, longest = self.min_size - 1, end - start - self.min_size
        fast = segment_cost - left[shortest:longest] - right[shortest:longest][::-1]
        close = np.flatnonzero(fast >= fast.max() - TIE * max(segment_cost, 1e-300))
        return max((segment_cost - error(start, b) - error(b, end), b)
                   for b in (start + self.min_size + close).tolist())[::-1]

    def predict(self, n_bkps: int) -> list:
        n = len(self.signal)
        # found[i]: the best split of the i-th segment, the one ending at bkps[i].
        bkps, found = [n], [self.single_bkp(0, n)]
        gains = [found[0][1]]
        while len(bkps) - 1 < n_bkps:
            # The first segment of the largest gain, as max() over them in order.
            at = gains.index(max(gains))
            bkp = found[at][0]
            if bkp is None:
                break
            start, end = bkps[at - 1] if at else 0, bkps[at]
            bkps.insert(at, bkp)
            found[at:at + 1] = [self.single_bkp(start, bkp), self.single_bkp(bkp, end)]
            gains[at:at + 1] = [found[at][1], found[at + 1][1]]
        return bkps


def binseg_l1(signal, min_size: int, n_bkps: int) -> list:
    """The breakpoints (ends of segments, the last = len(signal)) that
    ``ruptures.Binseg(model='l1', min_size=min_size, jump=1).fit(signal)
    .predict(n_bkps=n_bkps)`` gives."""
    return _Segmenter(signal, min_size).predict(n_bkps)
