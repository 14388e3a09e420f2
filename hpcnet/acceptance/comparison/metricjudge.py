"""One metric of a comparison judged from its two sides' samples: its
direction and unit from the metric catalogue (hpcnet.metrics), a configured
value (an MTU) exactly, counts that are 0 when healthy by their medians, and
every other metric by statcompare's rule against its tolerance; a metric a
side measured only in withheld measurements is not decided.
"""
from __future__ import annotations

import statistics
from dataclasses import replace

from hpcnet import metrics
from hpcnet.acceptance.comparison import statcompare
from hpcnet.constants import MEASUREMENT_WITHHELD


def _not_compared(before: list, after: list, why: str,
                  more_samples: int | None = None) -> statcompare.Comparison:
    return statcompare.Comparison(
        verdict=statcompare.Verdict.INCONCLUSIVE, ratio=float('nan'), ci_low=float('nan'),
        ci_high=float('nan'), p_value=float('nan'), n_before=len(before), n_after=len(after),
        reason=f'not compared: {why}', more_samples=more_samples)


def _compare_exact(before: list, after: list) -> statcompare.Comparison:
    '''A configuration value (an MTU): any change of it is a regression.'''
    same = sorted(set(before)) == sorted(set(after))
    median_before, median_after = statistics.median(before), statistics.median(after)
    ratio = median_after / median_before if median_before else float('nan')
    return statcompare.Comparison(
        verdict=statcompare.Verdict.UNCHANGED if same else statcompare.Verdict.REGRESSED,
        ratio=ratio, ci_low=ratio, ci_high=ratio, p_value=float('nan'),
        n_before=len(before), n_after=len(after),
        reason=f'configured value {", ".join(f"{v:g}" for v in sorted(set(before)))} -> '
               f'{", ".join(f"{v:g}" for v in sorted(set(after)))}', more_samples=None)


def _compare_counts(before: list, after: list, higher_better: bool) -> statcompare.Comparison:
    '''Counts that are 0 when healthy (link errors, outlier nodes), and any
    side with a zero: a ratio and a rank test mean nothing there; any change
    of the median is the verdict, and one error where there were none is a
    regression.  Never below statcompare.MIN_SAMPLES on a side: a median of
    fewer is not a level.'''
    short = statcompare.MIN_SAMPLES - min(len(before), len(after))
    if short > 0:
        return _not_compared(before, after, f'{len(before)}+{len(after)} samples: fewer than '
                             f'{statcompare.MIN_SAMPLES} on a side cannot be judged', short)
    median_before, median_after = statistics.median(before), statistics.median(after)
    if median_after == median_before:
        verdict = statcompare.Verdict.UNCHANGED
    elif (median_after > median_before) == higher_better:
        verdict = statcompare.Verdict.IMPROVED
    else:
        verdict = statcompare.Verdict.REGRESSED
    ratio = median_after / median_before if median_before else (1.0 if not median_after
                                                                 else float('inf'))
    return statcompare.Comparison(
        verdict=verdict, ratio=ratio, ci_low=ratio, ci_high=ratio, p_value=float('nan'),
        n_before=len(before), n_after=len(after),
        reason=f'median count {median_before:g} -> {median_after:g}', more_samples=None)


def not_fairly_measured(before: list, after: list, fair_before: bool,
                         fair_after: bool, why: str) -> statcompare.Comparison:
    '''A metric a side measured only in measurements that were withheld:
    not decided; where only the after side lacks fair samples, samples of a
    quieter moment decide it.'''
    side = 'before' if fair_after else 'after' if fair_before else 'before and after'
    return _not_compared(before, after, f'{MEASUREMENT_WITHHELD} ({why}) whenever it was measured '
                         f'{side}: those samples are shown, not judged',
                         statcompare.MIN_SAMPLES if fair_before else None)


def _in_unit(side: str, unit: str, values: list, entry: metrics.Metric) -> list:
    """``values`` (in ``unit``) in the catalogue's unit of ``entry``;
    metrics.UnitError naming the side where they cannot be."""
    try:
        factor = metrics.conversion(unit, entry.unit)
    except metrics.UnitError as err:
        raise metrics.UnitError(f"the {side} side's unit {err}") from None
    return [v * factor for v in values]


def judge(test: str, metric: str, before_side: tuple, after_side: tuple, alpha: float,
           tolerance: statcompare.Tolerance) -> statcompare.Comparison:
    """One metric judged: its direction and unit from the metric catalogue
    (never from a unit's spelling), each side's (unit, values) converted
    to the catalogue's unit first."""
    (unit_before, before), (unit_after, after) = before_side, after_side
    entry = metrics.lookup(test, metric)
    if entry is None:
        return _not_compared(before, after, metrics.not_in_catalogue(test, metric))
    try:
        before = _in_unit('before', unit_before, before, entry)
        after = _in_unit('after', unit_after, after, entry)
    except metrics.UnitError as err:
        return _not_compared(before, after, str(err))
    if entry.better == metrics.Better.NONE:
        return _compare_exact(before, after)
    higher_better = entry.better == metrics.Better.HIGHER
    if entry.kind == metrics.Kind.COUNT or min(before + after) <= 0:
        return _compare_counts(before, after, higher_better)
    return statcompare.compare_samples(before, after, higher_better=higher_better,
                                       alpha=alpha, tolerance=tolerance)


def calibrated_ratios(before: dict, after: dict) -> dict:
    '''{(test, partition, environ): the ``*_over_iperf3`` metrics both
    sides measured}: the cases judged over iperf3 on their own link (only
    where the partition's nodes share one host's cores:
    hpcnet.checklib.calibrated).'''
    measured: dict = {}
    for key in before.keys() & after.keys():
        measured.setdefault(key[:3], set()).add(key[3])
    return {case: found for case, names in measured.items()
            if (found := metrics.ratios_over_iperf3(case[0], names))}


def calibrated_counterpart(key: tuple, ratios: dict) -> str | None:
    '''What decides in the stead of a metric of a case judged over iperf3
    (``ratios``: calibrated_ratios): its ``<metric>_over_iperf3`` (for an
    efficiency, its bandwidth's or throughput's), or, for a metric with
    none (a latency: the host's, over a veth), the case's ratios together;
    None for a ratio itself and for a case not judged over iperf3
    (hpcnet.metrics.counterpart: the catalogue entry names it).'''
    return metrics.counterpart(key[0], key[3], ratios.get(key[:3]) or set())


def shown_for(result: statcompare.Comparison, decider: str) -> statcompare.Comparison:
    '''``result`` as shown, not judged: ``decider`` decides in its stead.'''
    return replace(result, verdict=statcompare.Verdict.SHOWN, more_samples=None,
                   reason=f'shown, not judged: judged by {decider} (the case is judged over iperf3 '
                          "on its own link, where the nodes share the host's cores and an "
                          'absolute figure moves with the host); ' + result.reason)
