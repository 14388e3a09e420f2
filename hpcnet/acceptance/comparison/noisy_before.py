"""The before side of a comparison screened as a baseline screens its
sessions (hpcnet.acceptance.references.outlying_sessions): an outlying
session is left out of the metric and named beside its verdict; a metric
whose sessions disagree, or move more than the tolerance cap, is too noisy
to judge, never UNCHANGED against a tolerance that accepts a third of the
bandwidth gone."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from hpcnet.acceptance.comparison import statcompare
from hpcnet.acceptance.references.outlying_sessions import TOO_NOISY, left_out_words, screen
from hpcnet.constants import TOLERANCE_CAP


@dataclass(frozen=True)
class ScreenedBefore:
    """The before side's samples of each metric key after the screen."""
    values: dict        #: {key: (unit, [values])} without an outlying session
    medians: dict       #: {key: [median of each session kept]}
    notes: dict         #: {key: 'session ... left out'}
    refused: dict       #: {key: why no session can be trusted to be the level}


def screened(per_session: dict, floor: float) -> ScreenedBefore:
    """``per_session``: {session: {key: (unit, [values])}} of the before side;
    ``floor``: no session within it of the others is outlying."""
    values, medians, notes, refused = {}, {}, {}, {}
    keys = {key for session in per_session.values() for key in session}
    for key in keys:
        samples, sessions, unit = [], [], None
        for name, session in per_session.items():
            if key in session:
                unit = session[key][0]
                samples += session[key][1]
                sessions += [name] * len(session[key][1])
        found = screen(samples, sessions, floor)
        if found.refused:
            refused[key] = found.refused
        left = found.left_out[0] if found.left_out is not None else None
        values[key] = (unit, [samples[i] for i in found.kept])
        medians[key] = [statistics.median(per_session[s][key][1])
                        for s in dict.fromkeys(sessions) if s != left]
        if found.left_out is not None:
            notes[key] = (f'outlying before: {left_out_words(found.left_out)}, left out '
                          f'({found.sessions} sessions)')
    return ScreenedBefore(values, medians, notes, refused)


def too_noisy(result: statcompare.Comparison, refused: str | None) -> statcompare.Comparison:
    """``result`` not decided where the before side cannot bound it: its
    sessions disagree (``refused``) or its tolerance reached the cap; a
    result judged without a tolerance (counts, configured values) as it is."""
    if result.tolerance != result.tolerance:      # NaN: not judged against a tolerance
        return result
    if refused is None and result.tolerance < TOLERANCE_CAP:
        return result
    why = refused or (f'its sessions before move more than the {TOLERANCE_CAP:.0%} tolerance cap '
                      'allows')
    return replace(result, verdict=statcompare.Verdict.INCONCLUSIVE, more_samples=None,
                   slow_after=None, reason=f'not decided: the before side is {TOO_NOISY}: {why}; '
                          f'after: {result.reason}')
