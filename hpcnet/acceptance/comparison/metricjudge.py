"""One metric of a comparison judged from its two sides' samples: its
direction, unit and kind from the metric catalogue (hpcnet.metrics), by one
family of rules by kind:

* a configured value (an MTU): exactly, any change is a regression;
* a count, or a proportion that can be zero (UDP loss, an overlap):
  repeat by repeat (countjudge: errors where there were none, the share of
  bad repeats, the magnitudes);
* every other metric by statcompare's rule against its tolerance, a zero
  among its samples included (a zero is its lowest value, see
  floored_zeros): no zero switches it to another rule.

The tolerance is never below QUANTA steps of the printed figure
(print_floor), the baseline's rule (hpcnet.acceptance.references.spread):
a benchmark that prints two decimals moves 0.24 to 0.25 us by rounding
alone. A metric a side measured only in withheld measurements is not
decided.
"""
from __future__ import annotations

import statistics
from dataclasses import replace

from hpcnet import metrics
from hpcnet.acceptance.comparison import countjudge, statcompare
from hpcnet.acceptance.references import spread
from hpcnet.constants import MEASUREMENT_WITHHELD, TOLERANCE_CAP


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
          tolerance: statcompare.Tolerance, glitch: str = '') -> statcompare.Comparison:
    """One metric judged: its direction and unit from the metric catalogue
    (never from a unit's spelling), each side's (unit, values) converted
    to the catalogue's unit first; ``glitch``: statcompare.compare_samples'."""
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
    step = spread.print_step(before + after)
    if judged_by_repeats(entry):
        return countjudge.compare_counts(
            before, after, higher_better=higher_better, alpha=alpha,
            tolerance=print_floor(tolerance, step, statistics.median(before)))
    negative = [v for v in before + after if v < 0]
    if negative:
        return _not_compared(before, after, f'{negative[0]:g} {entry.unit}: a negative figure '
                                            f'is not a measurement of {metric}')
    before, after = floored_zeros(before, after, step)
    return statcompare.compare_samples(
        before, after, higher_better=higher_better, alpha=alpha,
        tolerance=print_floor(tolerance, step, statistics.median(before)), glitch=glitch)


def judged_by_repeats(entry: metrics.Metric) -> bool:
    """Whether a metric is judged repeat by repeat (countjudge): a count,
    or a proportion that can be zero (a loss, an overlap); an efficiency is
    a proportion that is never zero and moves as its rate does."""
    return entry.kind == metrics.Kind.COUNT or (entry.kind == metrics.Kind.PROPORTION
                                                and entry.can_be_zero)


def print_floor(tolerance: statcompare.Tolerance, step: float,
                median_before: float) -> statcompare.Tolerance:
    """``tolerance``, at least spread.QUANTA print steps (``step``:
    spread.print_step of both sides' samples) over the median before, at
    most TOLERANCE_CAP: a move of a print step or two is rounding."""
    if not step or not median_before:
        return tolerance
    quanta = spread.QUANTA * step / abs(median_before)
    if quanta <= tolerance.fraction:
        return tolerance
    words = f'{spread.QUANTA} print steps of {step:g}'
    if quanta >= TOLERANCE_CAP:
        return statcompare.Tolerance(TOLERANCE_CAP, f'the {TOLERANCE_CAP * 100:g} % cap; {words}')
    return statcompare.Tolerance(quanta, words)


def floored_zeros(before: list, after: list, step: float) -> tuple:
    """(before, after) with each zero at half the print step ``step`` (the
    largest value a benchmark prints as 0), or, where the samples show no
    print step, at half their smallest nonzero value.  The rank rule sees a
    zero as the lowest value whatever it is set to; the value only bounds
    how far the shift bounds reach."""
    if min(before + after) > 0:
        return before, after
    floor = (step or min((v for v in before + after if v > 0), default=1.0)) / 2
    return [v or floor for v in before], [v or floor for v in after]


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
