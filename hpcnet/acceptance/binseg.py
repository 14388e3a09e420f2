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

from hpcnet.acceptance.spread import median_of

#: Places whose fast gain is within this fraction of the segment's cost of
#: the best are decided by ruptures' CostL1 figures: far above the rounding
#: of either way of summing (n x machine epsilon of the cost).
TIE = 1e-9


def _prefix_costs(deviations: np.ndarray) -> np.ndarray:
    """cost[k - 1] = L1 cost of the first k values, for every k: the sum of
    the upper floor(k/2) values minus that of the lower floor(k/2) (the
    median cancels), the values added one at a time to two heaps (the lower
    ceil(k/2), the upper floor(k/2)) and their running sums."""
    lower: list = []        # negated: a max-heap
    upper: list = []
    sum_lower = sum_upper = 0.0
    costs = []
    for count, value in enumerate(deviations.tolist(), 1):
        if count % 2:
            # Lower gains one: the smallest of upper and the value.
            moved = heapq.heappushpop(upper, value) if upper else value
            heapq.heappush(lower, -moved)
            sum_upper += value - moved
            sum_lower += moved
            # The median, lower's largest, is in neither half.
            costs.append(sum_upper - sum_lower - lower[0])
        else:
            # Upper gains one: the largest of lower and the value.
            moved = -heapq.heappushpop(lower, -value)
            heapq.heappush(upper, moved)
            sum_lower += value - moved
            sum_upper += moved
            costs.append(sum_upper - sum_lower)
    return np.asarray(costs)


class _Segmenter:
    def __init__(self, signal: np.ndarray, min_size: int):
        self.signal = np.asarray(signal, dtype=float)
        #: The signal as ruptures' CostL1 holds it (a column): its sums in its order.
        self.column = self.signal.reshape(-1, 1)
        self.min_size = max(min_size, CostL1().min_size)
        self.best: dict = {}
        self.costs: dict = {}

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

    def _single_bkp(self, start: int, end: int) -> tuple:
        if end - start < 2 * self.min_size:
            return None, 0
        error = self.error
        segment_cost = error(start, end)
        if segment_cost == 0:
            # A constant segment: every place gains 0, and the last wins.
            return end - self.min_size, 0.0
        values = self.signal[start:end]
        deviations = values - median_of(values)
        left = _prefix_costs(deviations)
        right = _prefix_costs(deviations[::-1])[::-1]
        # Place b splits [start, b) and [b, end): left[b - start - 1], right[b - start].
        places = np.arange(start + self.min_size, end - self.min_size + 1)
        fast = segment_cost - left[places - start - 1] - right[places - start]
        close = places[fast >= fast.max() - TIE * max(segment_cost, 1e-300)]
        return max((segment_cost - error(start, int(b)) - error(int(b), end), int(b))
                   for b in close)[::-1]

    def predict(self, n_bkps: int) -> list:
        n = len(self.signal)
        # found[i]: the best split of the i-th segment, the one ending at bkps[i].
        bkps, found = [n], [self.single_bkp(0, n)]
        while len(bkps) - 1 < n_bkps:
            # The first segment of the largest gain, as max() over them in order.
            at = max(range(len(found)), key=lambda i: found[i][1])
            bkp = found[at][0]
            if bkp is None:
                break
            start, end = bkps[at - 1] if at else 0, bkps[at]
            bkps.insert(at, bkp)
            found[at:at + 1] = [self.single_bkp(start, bkp), self.single_bkp(bkp, end)]
        return bkps


def binseg_l1(signal, min_size: int, n_bkps: int) -> list:
    """The breakpoints (ends of segments, the last = len(signal)) that
    ``ruptures.Binseg(model='l1', min_size=min_size, jump=1).fit(signal)
    .predict(n_bkps=n_bkps)`` gives."""
    return _Segmenter(signal, min_size).predict(n_bkps)
