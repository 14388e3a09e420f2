"""A bad period a series came back from (docs/acceptance.md, "Nightly
history"): a change for the worse, then, later in the period, a change to a
level no worse than the one before the bad period by more than the rule's
threshold.  The level before is the one the series held and the site's
runs passed at (or a level the site accepted): a series back at it is
RECOVERED, not failed, and the bad period is named, because a failure that
lasts the whole window after the system is healthy again tells the site
nothing it can act on, and a red history stops being read.
"""
from __future__ import annotations

from dataclasses import dataclass

from hpcnet import metrics
from hpcnet.acceptance.history.levels import THRESHOLD, Change, relative_change
from hpcnet.acceptance.history.stored_series import Series


@dataclass(frozen=True)
class Recovery:
    """The changes of one bad period: the change for the worse that began it
    first, the change back to the level before it last."""
    changes: tuple
    level: float            #: median of the level before the bad period

    @property
    def start(self) -> Change:
        return self.changes[0]

    @property
    def end(self) -> Change:
        return self.changes[-1]


def worse_than(series: Series, value: float, level: float, threshold: float = THRESHOLD) -> bool:
    """Whether ``value`` is worse than ``level`` by more than ``threshold``
    (relative; any worse difference for a series with a zero or a negative
    value, whose levels are compared raw), by the catalogue's better side;
    any change beyond it for a value with no better side."""
    if value == level:
        return False
    if min(series.values) <= 0:
        size, threshold = value - level, 0.0
    else:
        size = relative_change(value, level)
    higher = metrics.higher_is_better(series.key[0], series.key[3])
    if higher is None:
        return abs(size) > threshold
    return size < -threshold if higher else size > threshold


def recoveries(series: Series, threshold: float = THRESHOLD) -> list:
    """Each bad period of ``series`` it came back from, oldest first: an
    unaccepted change for the worse in the period, up to the first later
    change whose level is no worse than the level before it."""
    changes = series.finding.changes if series.finding else ()
    out, i = [], 0
    while i < len(changes):
        change = changes[i]
        if (change.position in series.accepted or not series.worse(change)
                or series.session_of(change.position).index < 1):
            i += 1
            continue
        back = next((j for j in range(i + 1, len(changes))
                     if not worse_than(series, changes[j].after, change.before, threshold)), None)
        if back is None:
            i += 1
            continue
        out.append(Recovery(tuple(changes[i:back + 1]), change.before))
        i = back + 1
    return out
