"""spread.outliers of a series' residuals (no sessions), kept up to date
while the change-point search of hpcnet.acceptance.history.levels merges levels.

A merge changes the residuals of one level only.  spread.outliers judges
each residual by the median of all of them and a limit made of their MAD; a
median (and a MAD) is one or two order statistics, and a value stays the
r-th smallest while as many values lie below it and at it.  So when the
changed residuals leave those counts as they were, for the median and then
for the MAD of the distances from it, the median and the limit are the
same floats, every unchanged residual keeps its verdict, and only the
changed ones are judged again: the same set spread.outliers returns.
Otherwise it is computed whole.
"""
from __future__ import annotations

import numpy as np

from hpcnet.acceptance.references.spread import _NORMAL_MAD, OUTLIER_Z, outliers


def _middle(x: np.ndarray) -> tuple:
    """The order statistics median_of takes: (its rank, value) of each."""
    k = len(x) // 2
    if len(x) % 2:
        return ((k, float(np.partition(x, k)[k])),)
    part = np.partition(x, (k - 1, k))
    return ((k - 1, float(part[k - 1])), (k, float(part[k])))


def _median(middle: tuple) -> float:
    """median_of, of its order statistics."""
    return middle[0][1] if len(middle) == 1 else (middle[0][1] + middle[1][1]) / 2


def _same_ranks(middle: tuple, old: np.ndarray, new: np.ndarray) -> bool:
    """Whether ``old`` replaced by ``new`` leaves each order statistic of
    ``middle`` where it is (as many values below it and at it)."""
    return all(np.count_nonzero(old < v) == np.count_nonzero(new < v)
               and np.count_nonzero(old <= v) == np.count_nonzero(new <= v)
               for _, v in middle)


class PooledOutliers:
    """The outliers of ``residuals`` (an array the caller changes in place,
    telling changed() first), as spread.outliers(residuals, floor) finds them."""

    def __init__(self, residuals: np.ndarray, floor: float):
        self.residuals, self.floor = residuals, floor
        self.found: set = set()
        self.stats: tuple | None = None     #: (median's, MAD's order statistics, median, limit)
        #: (start, residuals[start:] as they were) of the one change since
        #: the last outliers; 'whole' to compute them whole.
        self.pending: tuple | str = 'whole'

    def changed(self, start: int, end: int) -> None:
        """Residuals[start:end] are about to change."""
        self.pending = (start, self.residuals[start:end].copy()) if self.pending is None \
            else 'whole'

    def outliers(self) -> set:
        if self.pending is None:
            return self.found
        if self.pending == 'whole' or self.stats is None or not self._judge_changed():
            self._whole()
        self.pending = None
        return self.found

    def _whole(self) -> None:
        """spread.outliers, its median and limit taken from the order
        statistics kept (the same operations as median_of, so the same floats)."""
        x = self.residuals
        if len(x) < 3:
            self.found, self.stats = set(outliers(x, self.floor)), None
            return
        middle = _middle(x)
        median = _median(middle)
        distance = np.abs(x - median)
        mad_middle = _middle(distance)
        limit = max(OUTLIER_Z * (_median(mad_middle) / _NORMAL_MAD), self.floor * abs(median))
        self.stats = (middle, mad_middle, median, limit)
        self.found = {int(i) for i in np.flatnonzero(distance > limit)}

    def _judge_changed(self) -> bool:
        """The outliers after the pending change, when it leaves the median
        and the limit as they were (module docstring); False otherwise."""
        start, old = self.pending
        new = self.residuals[start:start + len(old)]
        middle, mad_middle, median, limit = self.stats
        if not _same_ranks(middle, old, new):
            return False
        distance = np.abs(new - median)
        if not _same_ranks(mad_middle, np.abs(old - median), distance):
            return False
        self.found = {i for i in self.found if not start <= i < start + len(old)} | {
            start + int(i) for i in np.flatnonzero(distance > limit)}
        return True
