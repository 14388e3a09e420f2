"""Whether a reference can tell a working system from a broken one, by what
the metric catalogue (hpcnet.metrics) says of its metric: its unit's limits
(UNIT_LIMITS), its better side, whether it can be 0.

A reference passes a validation of its shape and still accepts anything
where its value is one no measurement gives, or where its bounds hold every
value the metric can take.  Each rule and its reason:

- a value is not negative: no metric of the suite measures one;
- a value is at most its unit's largest (metrics.most()): a time of a
  second for an 8-byte message, a bandwidth above 10 TB/s, is a typo or a
  unit mix-up, and bounds around it accept every real figure;
- a reference of 0 is one of a metric that can be 0 (a count, a loss), and
  its thresholds are absolute (ReFrame reads them so where the reference is
  0): its worse side is held to the unit's zero slack, since a count of 0
  with an upper threshold of 1000 accepts a thousand errors; a 0 of a
  metric better higher fails nothing (no value is below 0);
- the upper threshold of a metric better higher leaves room to improve (at
  least IMPROVEMENT_ROOM, or null with its reason): a tighter one fails the
  upgrade that made the system faster, and a site learns to ignore a red
  run that means "better".
"""
from __future__ import annotations

from hpcnet import metrics

#: The tightest upper threshold of a metric better higher: +50 % is an
#: improvement no upgrade of a working system makes by chance, so what
#: exceeds it is worth a look; anything tighter fails real improvements.
IMPROVEMENT_ROOM = 0.5


def problem(name: str, val: list, entry: metrics.Metric) -> str | None:
    """What makes the reference ``val`` ([value, lower, upper, unit]) of
    ``name`` unable to fail a broken system, in one clause with what is
    valid; None where nothing does."""
    value, lower, upper = val[:3]
    if value < 0:
        return (f'reference value {value:g} is negative, and {name} cannot be (valid: '
                f'0 <= value, in {entry.unit})')
    most, why = metrics.most(entry)
    if most is not None and value > most:
        return (f'reference value {value:g} {entry.unit} is no measurement of {name}: {why} '
                f'(valid: 0 <= value <= {most:g} {entry.unit})')
    if value == 0:
        return _zero_problem(name, lower, upper, entry)
    if entry.better == metrics.Better.HIGHER and upper is not None and upper < IMPROVEMENT_ROOM:
        return (f'upper threshold {upper:g} fails an improvement of more than {upper:.1%}, and '
                f'{name} is better higher (valid: upper >= {IMPROVEMENT_ROOM:g}, or null with '
                'its reason in $unbounded: an upgrade that makes the system faster is no fault)')
    return None


def _zero_problem(name: str, lower, upper, entry: metrics.Metric) -> str | None:
    """What is wrong with a reference of 0 of ``name`` (problem())."""
    if not entry.can_be_zero:
        return (f'a reference of 0 for {name}, which is not 0 on a working system: bounds '
                f'around 0 are absolute and accept any value (valid: the measured value, '
                f'above 0 {entry.unit})')
    if entry.better == metrics.Better.HIGHER:
        return (f'a reference of 0 for {name}, which is better higher, fails nothing: no value '
                'is below 0 (valid: the measured value above 0, or the metric in $not_asserted '
                'with its reason)')
    slack = metrics.UNIT_LIMITS[entry.unit]
    if upper is not None and upper > slack.zero_slack:
        return (f'upper threshold {upper:g} of a reference of 0 accepts up to {upper:g} '
                f'{entry.unit} (ReFrame reads the thresholds of a 0 as absolute values): '
                f'{slack.zero_slack_reason} (valid: 0 <= upper <= {slack.zero_slack:g})')
    return None
