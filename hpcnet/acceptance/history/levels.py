"""The levels of one series of session values, and where they change: the
rule `hpcnet history` judges each metric by (hpcnet.acceptance.history.history reads
the series; docs/acceptance.md, "Nightly history", states it for users).

1. Too short: fewer than sessions_needed() values cannot show a change at
   all (two levels of MIN_SEGMENT sessions each whose rank test can reach
   ALPHA), so the series is "not decided".
2. Candidates: ruptures' binary segmentation (Binseg) with the L1 cost (the
   median of each level, so one far value does not pull a level) on
   log(value) (a relative change is the same size at any scale; raw values
   for a series with a zero or a negative value, such as error counts), no
   level shorter than MIN_SEGMENT sessions: one bad night, or a few, cannot
   be a level of its own in the middle of a series.  As many candidates as
   such levels fit, up to MAX_CANDIDATES, in Binseg's order (the largest
   gain first).
3. Each candidate is tested against the levels on both sides of it, up to
   the neighbouring change points, each level without its outliers (4.):
   the two-sided Mann-Whitney U p times the number of places the border
   could have been (Bonferroni: the search chose the place that separates
   them best) below ALPHA, and the medians moved by more than THRESHOLD.
   A level needs MIN_SEGMENT nights that belong with it: its outliers past
   the midpoint of the two levels' medians belong with the other level, its
   other outliers are bad nights of its own (left out of the test, still
   its nights). The weakest candidate that fails goes, its neighbours' levels grow and
   are tested again, until every one left passes.
4. Outliers: a value more than OUTLIER_Z robust standard deviations and more
   than THRESHOLD from its level's median (residuals pooled over the series,
   hpcnet.acceptance.references.spread.outliers) is an outlier: never a change, left
   out of the levels step 3 tests.
5. The ends are not the middle.  The newest values that stand apart from
   the last level, all on one side (each beyond THRESHOLD and beyond
   OUTLIER_Z robust sd of the other values around their levels), are its
   ``tail``: what the newest nights say, never outliers of an older level.
   The oldest values that stand apart from the first level the same way are
   its ``head``: a level the period's start cut short (the level before a
   change a few sessions in), never outliers of the newer level.
"""
from __future__ import annotations

import bisect
import functools
import math
import statistics
from dataclasses import dataclass

import numpy as np

from hpcnet.longwork import forked
from hpcnet.acceptance.comparison import compare, statcompare
from hpcnet.acceptance.history.binseg import binseg_l1
from hpcnet.acceptance.history.pooled_outliers import PooledOutliers
from hpcnet.acceptance.references.spread import OUTLIER_Z, outliers as spread_outliers, robust_sigma

#: The fewest sessions of one level: a change needs this many nights on each
#: side, so up to MIN_SEGMENT - 1 bad nights in a row in the middle of a
#: series are outliers (at its end they are its tail).
MIN_SEGMENT = 4
#: Significance level of each change point's rank test, corrected for the
#: search (as `hpcnet compare`'s).
ALPHA = compare.ALPHA
#: Smallest relative change of level that is a change (as `hpcnet compare`).
THRESHOLD = compare.THRESHOLD
#: The most candidates of one series (2.): more than a long period's real
#: changes, as Binseg proposes the largest gains first; every one more is a
#: round of the elimination (3.), the search's cost.  A series of up to
#: (MAX_CANDIDATES + 1) x MIN_SEGMENT sessions gets as many as fit.
MAX_CANDIDATES = 24
#: Fewest series per worker process where find_all() judges series over
#: several cores: below it a worker's start costs more than it saves.
SERIES_PER_WORKER = 64


def sessions_needed(min_segment: int = MIN_SEGMENT, alpha: float = ALPHA) -> int:
    """The fewest sessions in which a change can be found: two levels of at
    least ``min_segment`` sessions whose test (_levels_differ) can reach
    ``alpha``; its smallest p, at complete separation, is
    2 x borders / C(n, n1), smallest where the levels are equally long."""
    n = 2 * min_segment
    while 2 * (n - 2 * min_segment + 1) * statcompare.min_exact_p(n // 2, n - n // 2) >= alpha:
        n += 1
    return n


def relative_change(new: float, old: float) -> float:
    """new / old - 1; infinite, with new's sign, from a level of 0."""
    return new / old - 1 if old else math.copysign(math.inf, new)


@dataclass(frozen=True)
class Change:
    """A change of level at ``position`` (the first value of the new level)."""
    position: int
    before: float           #: median of the level before
    after: float            #: median of the level after
    p_value: float          #: two-sided Mann-Whitney U p x the borders searched
    n_before: int
    n_after: int

    @property
    def size(self) -> float:
        """Relative change of the level, after / before - 1."""
        return relative_change(self.after, self.before)


@dataclass(frozen=True)
class Outlier:
    position: int
    value: float
    level: float            #: median of the level it stands in


@dataclass(frozen=True)
class Apart:
    """Values at one end of a series that stand apart from the level next to
    them, all on one side: the newest (a tail) or the oldest (a head)."""
    start: int              #: position of the first of them
    end: int                #: after the last of them
    median: float           #: their median
    level: float            #: median of the level next to them, without them

    @property
    def nights(self) -> int:
        return self.end - self.start

    @property
    def size(self) -> float:
        return relative_change(self.median, self.level)


@dataclass(frozen=True)
class Finding:
    """What find_changes found in one series."""
    changes: tuple
    outliers: tuple
    #: (start, end, median) of each level, end exclusive, its outliers left
    #: out of the median (the level Change and Outlier give).
    levels: tuple
    too_short: bool
    tail: Apart | None = None
    head: Apart | None = None


def _relative(values) -> bool:
    return min(values) > 0


def _level_median(kept: list, segment: list) -> float:
    """A level's median, its outliers left out; of all its values when every
    one of them is an outlier (a level of a few disagreeing sessions)."""
    return statistics.median(kept or segment)


def _sorted_median(ordered: np.ndarray) -> float:
    """statistics.median of a sorted float array, the same float."""
    k = len(ordered) // 2
    return float(ordered[k]) if len(ordered) % 2 else float((ordered[k - 1] + ordered[k]) / 2)


def _levels_differ(before: np.ndarray, after: np.ndarray, low: float, high: float, *,
                   nights: tuple, relative: bool, min_segment: int, alpha: float,
                   threshold: float, distinct: bool) -> tuple:
    """(whether the two levels differ, p, median before, after): the
    two-sided Mann-Whitney U p times the number of places the levels' border
    could have been put (Bonferroni: the search tried them all); a level of
    fewer than ``min_segment`` nights never differs.
    ``before``, ``after``: each level's values, outliers taken out, sorted;
    ``low``, ``high``: their _level_median; ``nights``: each level's nights
    that belong with it (_Elimination.nights); ``distinct``: no two values
    of the series are equal."""
    if min(nights) < min_segment:
        # A level whose sessions disagree is no level.
        return False, 1.0, low, high
    direction = 'greater' if high > low else 'less'
    borders = max(1, len(before) + len(after) - 2 * min_segment + 1)
    p = min(1.0, 2 * borders * statcompare.mann_whitney_p_sorted(
        before, after, direction, distinct=distinct))
    moved = abs(high / low - 1) > threshold if relative else high != low
    return p < alpha and moved, p, low, high


class _LevelMedians:
    """statistics.median of each level values[start:end], computed once: the
    search merges two levels at a time, and every other level stays."""

    def __init__(self, values: list):
        self.values = values
        self.array = np.asarray(values, dtype=float)
        self.known: dict = {}

    def __call__(self, start: int, end: int) -> float:
        if (start, end) not in self.known:
            self.known[start, end] = statistics.median(self.values[start:end])
        return self.known[start, end]


def _residuals(values: list, bounds: list, relative: bool,
               median_of: _LevelMedians | None = None) -> np.ndarray:
    """Each value over (minus, for counts) its level's median."""
    median_of = median_of or _LevelMedians(values)
    level = np.repeat([median_of(start, end) for start, end in zip(bounds, bounds[1:])],
                      np.diff(bounds))
    return median_of.array / level if relative else median_of.array - level


def _outliers(values: list, bounds: list, relative: bool, threshold: float,
              median_of: _LevelMedians | None = None) -> list:
    """Positions of the values far from their level: residuals pooled over
    the series, by the rule baselines leave repeats out by (spread.outliers:
    OUTLIER_Z robust sd and ``threshold``); pooled, because a level of a few
    sessions says little about its own spread."""
    return spread_outliers(_residuals(values, bounds, relative, median_of),
                           threshold if relative else 0.0)


def _candidates(values: list, relative: bool, min_segment: int,
                max_candidates: int = MAX_CANDIDATES) -> list:
    """Positions where ruptures' Binseg (L1 cost) splits the series into
    levels of at least ``min_segment`` values, as many as fit up to
    ``max_candidates`` (hpcnet.acceptance.history.binseg finds the same breakpoints
    faster)."""
    signal = np.log(values) if relative else np.asarray(values, dtype=float)
    most = min(max_candidates, len(values) // min_segment - 1)
    return [b for b in binseg_l1(signal, min_segment, max(1, most)) if b < len(values)]


def _end(values: list, bounds: list, *, newest: bool, relative: bool, threshold: float,
         min_segment: int, residuals: np.ndarray,
         exclude: frozenset = frozenset()) -> Apart | None:
    """The longest run of values at the newest (else the oldest) end of the
    series that stand apart from the rest of their level, all on one side:
    each beyond ``threshold`` and OUTLIER_Z robust sd of the other values
    around their levels; the rest keeps ``min_segment`` values.
    ``residuals``: _residuals of the levels ``bounds``."""
    start, stop = (bounds[-2], len(values)) if newest else (0, bounds[1])
    others = np.concatenate((residuals[:start], residuals[stop:]))
    level_values = np.asarray(values[start:stop], dtype=float)
    usable = np.array([i not in exclude for i in range(start, stop)], dtype=bool)
    centre = 1.0 if relative else 0.0
    found = None
    for k in range(1, stop - start - min_segment + 1):
        part = range(stop - k, stop) if newest else range(start, start + k)
        if set(part) & exclude:
            break
        in_part = np.zeros(stop - start, dtype=bool)
        in_part[part.start - start:part.stop - start] = True
        rest = level_values[usable & ~in_part]
        level = statistics.median(rest.tolist())
        spread = robust_sigma(np.concatenate((others, rest / level if relative else rest - level)))
        limit = max(OUTLIER_Z * spread, threshold if relative else 0.0)
        apart = level_values[in_part]
        off = (apart / level if relative else apart - level) - centre
        if not (np.all(off > limit) or np.all(off < -limit)):
            break
        found = Apart(part.start, part.stop, statistics.median(apart.tolist()), level)
    return found


def _ends(values: list, bounds: list, relative: bool, threshold: float,
          min_segment: int, residuals: np.ndarray | None = None) -> tuple:
    """(tail, head) of the series (module docstring, 5.); ``residuals``:
    _residuals of the levels ``bounds``, where known."""
    if residuals is None:
        residuals = _residuals(values, bounds, relative)
    kw = {'relative': relative, 'threshold': threshold, 'min_segment': min_segment,
          'residuals': residuals}
    tail = _end(values, bounds, newest=True, **kw)
    head = _end(values, bounds, newest=False,
                exclude=frozenset(range(tail.start, tail.end)) if tail else frozenset(), **kw)
    return tail, head


class _Elimination:
    """The state of _eliminate: the change points left, each one's test (by
    its position) and the residual of each value from its level's median."""

    def __init__(self, values: list, kept: list, *, relative: bool, min_segment: int,
                 alpha: float, threshold: float):
        self.median_of = _LevelMedians(values)
        self.array = self.median_of.array
        self.kept = list(kept)
        self.relative, self.threshold = relative, threshold
        self.rule = {'relative': relative, 'min_segment': min_segment, 'alpha': alpha,
                     'threshold': threshold, 'distinct': len(set(values)) == len(values)}
        self.residuals = _residuals(values, self.bounds(), relative, self.median_of)
        self.pooled = PooledOutliers(self.residuals, threshold if relative else 0.0)
        self.outside = np.zeros(len(values), dtype=bool)
        self.out: set = set()
        #: Each level's values, its outliers taken out, sorted, and its
        #: median, by (start, end).
        self.sorted_levels: dict = {}
        self.tests: dict = {}
        #: The failing tests by position: (p, -|medians moved|, -position), the
        #: order the weakest is taken out by.
        self.weak: dict = {}

    def bounds(self) -> list:
        return [0, *self.kept, len(self.array)]

    def level(self, start: int, end: int) -> tuple:
        """The level's values, its outliers taken out, sorted, and its
        _level_median."""
        key = (start, end)
        if key not in self.sorted_levels:
            kept = np.sort(self.array[start:end][~self.outside[start:end]])
            self.sorted_levels[key] = (
                kept, _sorted_median(kept) if len(kept) else self.median_of(start, end))
        return self.sorted_levels[key]

    def nights(self, start: int, end: int, own: float, other: float) -> int:
        """How many of the level's nights belong with it against a
        neighbour: all but its outliers past the midpoint of the two levels'
        medians (``own``, ``other``; geometric for relative values), which
        belong with the neighbour. An outlier on its own level's side is a
        bad night of that level, still one of its nights: left out of the
        test, it does not make the level too short to be one."""
        if len(self.level(start, end)[0]) == end - start:
            return end - start     # no outlier in it
        values = self.array[start:end]
        midpoint = math.sqrt(own * other) if self.relative else (own + other) / 2
        past = values > midpoint if other > own else values < midpoint
        return end - start - int(np.count_nonzero(self.outside[start:end] & past))

    def test(self, i: int, bounds: list) -> None:
        """_levels_differ of the i-th change point's two levels."""
        left, position, right = bounds[i:i + 3]
        (before, low), (after, high) = self.level(left, position), self.level(position, right)
        nights = (self.nights(left, position, low, high), self.nights(position, right, high, low))
        test = _levels_differ(before, after, low, high, nights=nights, **self.rule)
        self.tests[position] = test
        self.weak.pop(position, None)
        if not test[0]:
            self.weak[position] = (test[1], -abs(test[3] - test[2]), -position)

    def update_outliers(self, untested: set) -> None:
        """The outliers by the residuals now; the change points beside a
        level that gained or lost one join ``untested``."""
        now = self.pooled.outliers()
        bounds = self.bounds()
        for position in now ^ self.out:
            level = bisect.bisect_right(self.kept, position)
            untested.update(i for i in (level - 1, level) if 0 <= i < len(self.kept))
            self.outside[position] = position in now
            self.sorted_levels.pop((bounds[level], bounds[level + 1]), None)
        self.out = now

    def remove(self, position: int) -> set:
        """Take the change point at ``position`` out: its two levels merge.
        The indices of the change points beside the merged level."""
        i = self.kept.index(position)
        bounds = self.bounds()
        start, end = bounds[i], bounds[i + 2]
        del self.kept[i], self.tests[position], self.weak[position]
        median = self.median_of(start, end)
        part = self.array[start:end]
        self.pooled.changed(start, end)
        self.residuals[start:end] = part / median if self.relative else part - median
        return {j for j in (i - 1, i) if 0 <= j < len(self.kept)}


def _eliminate(values: list, kept: list, *, relative: bool, min_segment: int, alpha: float,
               threshold: float) -> tuple:
    """(the change points left, the outliers, _levels_differ of each, the
    residuals of their levels) once every candidate left passes (module
    docstring, 3. and 4.): the weakest that fails goes, one at a time. A
    test depends only on its two levels' values and outliers, so only those
    whose levels changed run again: the two beside the candidate that went
    (its levels merged), and those whose levels gained or lost an outlier."""
    search = _Elimination(values, kept, relative=relative, min_segment=min_segment,
                          alpha=alpha, threshold=threshold)
    untested = set(range(len(search.kept)))
    while True:
        # One bad night says nothing about the level it stands in.
        search.update_outliers(untested)
        bounds = search.bounds()
        for i in untested:
            search.test(i, bounds)
        if not search.weak:
            return (search.kept, search.out, [search.tests[b] for b in search.kept],
                    search.residuals)
        # The weakest goes first (the first of equals): its neighbours'
        # levels grow and are tested again.
        untested = search.remove(-max(search.weak.values())[2])


def find_changes(values: list, *, min_segment: int = MIN_SEGMENT, alpha: float = ALPHA,
                 threshold: float = THRESHOLD, max_candidates: int = MAX_CANDIDATES,
                 candidates: list | None = None) -> Finding:
    """The change points, outliers and ends of one series by the module's
    rule; ``candidates``, where given, in place of Binseg's (2.), each
    tested as Binseg's are (3.)."""
    values = [float(v) for v in values]
    n = len(values)
    if n < sessions_needed(min_segment, alpha):
        tail = head = None
        if n > min_segment:
            tail, head = _ends(values, [0, n], _relative(values), threshold, min_segment)
        return Finding((), (), ((0, n, statistics.median(values) if values else math.nan),),
                       True, tail, head)
    relative = _relative(values)
    kept, out, tests, residuals = _eliminate(
        values, sorted(candidates) if candidates is not None
        else _candidates(values, relative, min_segment, max_candidates), relative=relative,
        min_segment=min_segment, alpha=alpha, threshold=threshold)
    bounds = [0, *kept, n]
    segments = [values[start:end] for start, end in zip(bounds, bounds[1:])]
    levels = [[values[j] for j in range(start, end) if j not in out]
              for start, end in zip(bounds, bounds[1:])]
    changes = tuple(Change(b, tests[i][2], tests[i][3], tests[i][1], len(levels[i]),
                           len(levels[i + 1])) for i, b in enumerate(kept))
    medians = [_level_median(level, segment) for level, segment in zip(levels, segments)]
    tail, head = _ends(values, bounds, relative, threshold, min_segment, residuals)
    at_ends = {i for end in (tail, head) if end for i in range(end.start, end.end)}
    found = [Outlier(i, values[i], median)
             for (start, end), median in zip(zip(bounds, bounds[1:]), medians)
             for i in sorted(out - at_ends) if start <= i < end]
    return Finding(changes, tuple(found),
                   tuple((start, end, median)
                         for (start, end), median in zip(zip(bounds, bounds[1:]), medians)),
                   False, tail, head)


def find_all(series_values: list, *, min_segment: int = MIN_SEGMENT, alpha: float = ALPHA,
             threshold: float = THRESHOLD, max_candidates: int = MAX_CANDIDATES,
             workers: int | None = None) -> list:
    """find_changes of each series, in order, over the host's cores (the
    series are independent; ``workers`` caps the processes, 1 judges them in
    this process), in forked workers that share this process's memory."""
    judge = functools.partial(find_changes, min_segment=min_segment, alpha=alpha,
                              threshold=threshold, max_candidates=max_candidates)
    return forked.map_in_order(judge, series_values, per_worker=SERIES_PER_WORKER,
                               workers=workers)
