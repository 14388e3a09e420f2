"""Where `hpcnet history` places a change whose border the data leave
uncertain: at the session whose provenance changed (docs/acceptance.md,
"Nightly history", states the rule for users).

Binseg puts a border where the L1 cost is least.  Nights beside the border
that sit between the two levels, or a level's own noise, can make that a
few sessions away from the session that changed the system (its MPI, its
stack, its nodes: stored_series.facts), and then the sessions between are
shown as outliers of the wrong level and the change as "no recorded
change".  A change whose session recorded nothing is moved to the nearest
session at most NEAR sessions from it that recorded a change, when the
split there passes the same test as the one found (levels.find_changes with
the moved border among the candidates keeps every change): the data cannot
tell the two borders apart, and the recorded change says which one it was.
"""
from __future__ import annotations

from hpcnet.acceptance.comparison import compare
from hpcnet.acceptance.history.levels import ALPHA, MIN_SEGMENT, THRESHOLD, Finding, find_changes
from hpcnet.acceptance.history.stored_series import Series, facts


def near(min_segment: int = MIN_SEGMENT) -> int:
    """The farthest a change is moved, in sessions: fewer than a level, the
    run of nights that the rule would show as outliers of either level."""
    return min_segment - 1


def changed_at(series: Series, position: int, provenance: dict) -> list:
    """What the session at ``position`` of ``series`` recorded differently
    from the session of the value before it ('what: a -> b' lines)."""
    if not 0 < position < len(series.sessions):
        return []
    now, before = series.sessions[position], series.sessions[position - 1]
    return compare.what_changed(facts(before, provenance[before.uuid], series.case),
                                facts(now, provenance[now.uuid], series.case))


def placed(series: Series, finding: Finding, provenance: dict, *, min_segment: int = MIN_SEGMENT,
           alpha: float = ALPHA, threshold: float = THRESHOLD) -> Finding:
    """``finding`` of ``series`` with each change that its session recorded
    nothing for moved to the nearest session within near() that recorded a
    change, where the data allow it (module docstring)."""
    rule = {'min_segment': min_segment, 'alpha': alpha, 'threshold': threshold}
    for found in [c.position for c in finding.changes]:
        if changed_at(series, found, provenance):
            continue
        positions = [c.position for c in finding.changes]
        around = sorted((q for q in range(found - near(min_segment), found + near(min_segment) + 1)
                         if q != found and q not in positions),
                        key=lambda q: (abs(q - found), q))
        for q in around:
            if not changed_at(series, q, provenance):
                continue
            moved = sorted(q if p == found else p for p in positions)
            refit = find_changes(series.values, candidates=moved, **rule)
            if [c.position for c in refit.changes] == moved:
                finding = refit
            break
    return finding
