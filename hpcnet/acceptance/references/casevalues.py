"""The values a case of a run report recorded: one copy of each, in its
``perfvalues`` (ReFrame's), whether asserted or kept but not asserted.

A case's ``not_asserted`` (hpcnet.checklib.testlib) names the values its
reference file does not assert, with the reason, and holds no value: two
copies of one number could disagree.  Reports recorded before held the value
there and not in ``perfvalues``; such a value is read from there.
"""
from __future__ import annotations

from hpcnet import metrics


def recorded_values(tc: dict):
    """(variable, value, unit, not asserted) of every value a case recorded
    (module docstring), without xfail or missing values."""
    kept = tc.get('not_asserted') or {}
    recorded = set()
    for key, val in (tc.get('perfvalues') or {}).items():
        value, unit, result = val[0], val[4], val[5] if len(val) > 5 else None
        var = key.split(':')[-1]
        recorded.add(var)
        if value is None or result == 'xfail':
            continue
        yield var, float(value), unit, var in kept
    for var, old in kept.items():
        if var not in recorded and old.get('value') is not None:
            yield var, float(old['value']), old['unit'], True


def perf_samples(tc: dict):
    """(variable, value, unit) of a case's asserted values (recorded_values)."""
    for var, value, unit, unasserted in recorded_values(tc):
        if not unasserted:
            yield var, value, unit


#: The link's own figures a calibrated case records, with their units.
LINK_FIGURES = ((metrics.LINK_OVER_WIRE, metrics.Unit.RATIO),
                (metrics.LINK_BELOW_WIRE, metrics.Unit.COUNT))


def link_values(tc: dict):
    """(variable, value, unit, not asserted) of the link's own measured
    figures a calibrated case recorded (LINK_FIGURES), where it did: judged
    by compare, asserted by no reference."""
    recorded = tc.get('link_calibration') or {}
    for name, unit in LINK_FIGURES:
        if recorded.get(name) is not None:
            yield name, float(recorded[name]), unit, True
