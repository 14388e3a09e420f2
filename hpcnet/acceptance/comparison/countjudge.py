"""Counts and proportions that are 0 when healthy (link errors, outlier
nodes, UDP loss) or that a fault sets to 0 (an overlap of computation and
communication), judged repeat by repeat.

A bad repeat is one the fault shows in: a nonzero value where lower is
better (an error, a loss), a zero where higher is better (no overlap). A
median or a ratio of such values cannot see a fault in a minority of
repeats (a flapping link, a bad node in some allocations), so each repeat
counts, and the rule is, in order:

1. fewer than statcompare.MIN_SAMPLES repeats on a side: not decided;
2. **errors where there were none**: no bad repeat before and any after
   (one of 5, 2 of 5, 7 of 15) is a regression; the before side is the
   system's healthy state, and a fault that shows in one repeat of five
   is there;
3. **a larger share of bad repeats** after than before, by Fisher's exact
   test one-sided at alpha (shares.share_rose_p), is a regression;
4. **the magnitudes**: the nonzero values of each side, where both have at
   least statcompare.MIN_SAMPLES, by statcompare's rule (a loss of 0.1 %
   in every repeat before and 30 % in every repeat after share the same
   bad repeats); a regression of them is a regression;
5. **some to none**: bad repeats before and none after is an improvement,
   as is a share smaller by Fisher's test or magnitudes improved;
6. otherwise unchanged (or not decided, where the magnitudes are).
"""
from __future__ import annotations

import statistics

from hpcnet.acceptance.comparison import shares, statcompare

Verdict = statcompare.Verdict


def _bad(values: list, higher_better: bool) -> list:
    """The repeats the fault shows in: zeros where higher is better, else nonzero values."""
    return [v for v in values if (v == 0 if higher_better else v != 0)]


def _median_ratio(before: list, after: list) -> float:
    median_before, median_after = statistics.median(before), statistics.median(after)
    if median_before:
        return median_after / median_before
    return 1.0 if not median_after else float('inf')


def _listed(values: list) -> str:
    return ', '.join(f'{v:g}' for v in values[:7]) + (' ...' if len(values) > 7 else '')


def _share_words(was: shares.Share, now: shares.Share, higher_better: bool,
                 bad_after: list) -> str:
    """'nonzero in 2 of 5 repeats after (35, 40), 0 of 5 before'."""
    what = 'at 0' if higher_better else 'nonzero'
    values = f' ({_listed(bad_after)})' if bad_after and not higher_better else ''
    return f'{what} in {now.words()} repeats after{values}, {was.words()} before'


def compare_counts(before: list, after: list, *, higher_better: bool,
                   tolerance: statcompare.Tolerance, alpha: float) -> statcompare.Comparison:
    """The verdict on a count or proportion by the module docstring's rule."""
    ratio = _median_ratio(before, after)

    def result(verdict: str, reason: str, p: float = float('nan'),
               more: int | None = None) -> statcompare.Comparison:
        return statcompare.Comparison(verdict, ratio, ratio, ratio, p, len(before), len(after),
                                      reason, more, tolerance.fraction)

    short = statcompare.MIN_SAMPLES - min(len(before), len(after))
    if short > 0:
        return result(Verdict.INCONCLUSIVE,
                      f'not compared: {len(before)}+{len(after)} samples: fewer than '
                      f'{statcompare.MIN_SAMPLES} on a side cannot be judged', more=short)
    bad_before, bad_after = _bad(before, higher_better), _bad(after, higher_better)
    was, now = shares.Share(len(bad_before), len(before)), shares.Share(len(bad_after), len(after))
    shared = _share_words(was, now, higher_better, bad_after)
    if not bad_before and bad_after:
        kind = 'a zero where there was none' if higher_better else 'errors where there were none'
        return result(Verdict.REGRESSED, f'{kind}: {shared}')
    p_rose = shares.share_rose_p(was, now)
    if p_rose < alpha:
        return result(Verdict.REGRESSED, f"the share of bad repeats rose: {shared}, Fisher's "
                                         f'exact p={p_rose:.3g}', p_rose)
    sizes = _magnitudes(before, after, higher_better, tolerance, alpha)
    if sizes is not None and sizes.verdict == Verdict.REGRESSED:
        return result(Verdict.REGRESSED, f'{shared}; the nonzero values: {sizes.reason}', p_rose)
    if bad_before and not bad_after:
        return result(Verdict.IMPROVED, f'some to none: {shared}', p_rose)
    p_fell = shares.share_fell_p(was, now)
    if p_fell < alpha or (sizes is not None and sizes.verdict == Verdict.IMPROVED):
        return result(Verdict.IMPROVED, f"{shared}, Fisher's exact p={p_fell:.3g} for fewer" + (
            f'; the nonzero values: {sizes.reason}' if sizes is not None else ''), p_rose)
    if sizes is not None and sizes.verdict == Verdict.INCONCLUSIVE:
        return result(Verdict.INCONCLUSIVE, f'{shared}; the nonzero values: {sizes.reason}',
                      p_rose, sizes.more_samples)
    told = '' if sizes is None else f'; the nonzero values inside the tolerance ({sizes.reason})'
    return result(Verdict.UNCHANGED, f"{shared}, Fisher's exact p={p_rose:.3g}{told}", p_rose)


def _magnitudes(before: list, after: list, higher_better: bool,
                tolerance: statcompare.Tolerance, alpha: float) -> statcompare.Comparison | None:
    """statcompare's verdict on the nonzero values of each side, None where
    a side has fewer than statcompare.MIN_SAMPLES of them."""
    sized_before, sized_after = [v for v in before if v > 0], [v for v in after if v > 0]
    if min(len(sized_before), len(sized_after)) < statcompare.MIN_SAMPLES:
        return None
    return statcompare.compare_samples(sized_before, sized_after, higher_better=higher_better,
                                       tolerance=tolerance, alpha=alpha)
