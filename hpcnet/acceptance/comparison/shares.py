"""Shares of repeats, compared before and after: how many repeats of each
side fell somewhere bad (a slow mode, an error, a loss), and whether the
after side's share is larger than chance allows.

The test is Fisher's exact test (scipy.stats.fisher_exact), one-sided on
the worse side: the 2 x 2 table of (bad, good) repeats after and before,
exact for the handfuls of repeats a session has, where a normal
approximation of two proportions is not.

The mode boundary (mode_boundary) is ours: the before side's samples split
into modes where sorted values jump by more than the tolerance (modes);
its main mode is the largest (of two as large, the better), and the
boundary lies the tolerance beyond the main mode's worse edge. A sample
beyond it is in a slow mode: no healthy wobble of the main mode reaches
it, and a mode the before side already visited (1 of 25 repeats at 60 %)
is counted on both sides, so a mode that grows (5 of 15 after) is seen
though no sample after is slower than the before side's slowest.
"""
from __future__ import annotations

from dataclasses import dataclass

from scipy import stats


@dataclass(frozen=True)
class Share:
    """``bad`` of ``n`` repeats of one side."""
    bad: int
    n: int

    def words(self) -> str:
        return f'{self.bad} of {self.n}'


def share_rose_p(before: Share, after: Share) -> float:
    """One-sided p of Fisher's exact test that after's share of bad repeats
    is larger than before's."""
    table = [[after.bad, after.n - after.bad], [before.bad, before.n - before.bad]]
    return float(stats.fisher_exact(table, alternative='greater').pvalue)


def share_fell_p(before: Share, after: Share) -> float:
    """One-sided p of Fisher's exact test that after's share is smaller."""
    table = [[after.bad, after.n - after.bad], [before.bad, before.n - before.bad]]
    return float(stats.fisher_exact(table, alternative='less').pvalue)


def modes(values: list, gap: float) -> list:
    """The values sorted and split into modes wherever one sorted value
    exceeds the one below it by more than ``gap`` (a fraction): the groups
    a healthy metric's noise never separates."""
    ordered = sorted(values)
    groups = [[ordered[0]]]
    for value in ordered[1:]:
        if value > groups[-1][-1] * (1 + gap):
            groups.append([])
        groups[-1].append(value)
    return groups


def main_mode(groups: list, higher_better: bool) -> list:
    """The largest of the modes ``groups`` (of two as large, the better)."""
    return max(groups, key=lambda g: (len(g), g[0] if higher_better else -g[0]))


def mode_boundary(before: list, higher_better: bool, tolerance: float) -> float:
    """The value beyond which a sample is in a slow mode (module docstring):
    the tolerance beyond the worse edge of the before side's main mode."""
    main = main_mode(modes(before, tolerance), higher_better)
    return min(main) * (1 - tolerance) if higher_better else max(main) * (1 + tolerance)


def beyond(values: list, boundary: float, higher_better: bool) -> list:
    """The values on the worse side of ``boundary``."""
    return [v for v in values if (v < boundary if higher_better else v > boundary)]
