"""Whole sessions that do not belong to a metric's baseline (a noisy night,
a neighbour's job), told apart from a metric that is noisy everywhere.

Per metric, over the medians of its sessions (logs: a rate and a time
move by ratios): the Iglewicz-Hoaglin modified z-score of each session
median, 0.6745 |m - median(m)| / MAD(m).  A session above OUTLYING_Z, and
farther than the floor from the others' median, is outlying:

* one outlying session of at least MIN_SESSIONS is left out of the metric
  and named: the other sessions agree, so the tolerance is theirs;
* more than one is refused: the sessions disagree among themselves, and
  which of them is the system's level nothing in the data says;
* with fewer than MIN_SESSIONS sessions no session is judged: the MAD of
  three medians is one of their distances, so an outlying one cannot be
  told from a noisy metric.  The baseline says so where the metric's
  spread is too wide to bound (hpcnet.acceptance.references.spread);
* nor where a session has fewer than MIN_SESSION_SAMPLES samples of the
  metric: a session of one sample is that sample, and a slow one is a
  slower mode the metric visits (the sample rules of spread), not a night
  to leave out.

The MAD is the rule's because it is not moved by the session it judges;
a standard deviation of five medians, one of them 30 % low, is set by that
one and widens the tolerance until nothing fails.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Modified z-score of a session median above which the session is outlying
#: (Iglewicz and Hoaglin's 3.5).
OUTLYING_Z = 3.5
#: Sessions needed to tell an outlying session from a noisy metric.
MIN_SESSIONS = 4
#: Samples of a metric every session needs for its median to be a session's.
MIN_SESSION_SAMPLES = 2
#: The MAD in standard deviations of a normal distribution (scipy's scale='normal').
_NORMAL_MAD = 0.6744897501960817
#: What a metric whose baseline cannot bound it is, and what the site does.
TOO_NOISY = 'too noisy to judge: retake or widen by hand'


@dataclass(frozen=True)
class SessionScreen:
    """What the screen found of one metric's sessions."""
    kept: list                  #: indices of the samples kept
    left_out: tuple | None      #: (session, its median, the others' median) left out
    refused: str | None         #: why no session can be trusted to be the level
    sessions: int               #: distinct sessions screened


def session_medians(values: list, sessions: list) -> dict:
    """{session: median of its values}, in the order sessions first appear."""
    by_session: dict = {}
    for value, session in zip(values, sessions):
        by_session.setdefault(session, []).append(value)
    return {s: float(np.median(v)) for s, v in by_session.items()}


def modified_z(medians: list) -> list:
    """The Iglewicz-Hoaglin modified z-score of each of ``medians`` (logs):
    infinite for one off a MAD of 0, 0 for one at the centre."""
    logs = np.log(np.asarray(medians, dtype=float))
    centre = float(np.median(logs))
    mad = float(np.median(np.abs(logs - centre)))
    if mad == 0:
        return [0.0 if x == centre else math.inf for x in logs]
    return [float(_NORMAL_MAD * abs(x - centre) / mad) for x in logs]


def screen(values: list, sessions: list, floor: float) -> SessionScreen:
    """The module docstring's rule on one metric's samples (``sessions[i]``
    the session of ``values[i]``); a session within ``floor`` (a fraction)
    of the others' median is never outlying."""
    medians = session_medians(values, sessions)
    everything = list(range(len(values)))
    counts = {s: sessions.count(s) for s in medians}
    if (len(medians) < MIN_SESSIONS or min(medians.values()) <= 0
            or min(counts.values()) < MIN_SESSION_SAMPLES):
        return SessionScreen(everything, None, None, len(medians))
    names = list(medians)
    z = modified_z([medians[s] for s in names])
    outlying = []
    for name, score in zip(names, z):
        others = float(np.median([medians[s] for s in names if s != name]))
        if score > OUTLYING_Z and abs(math.log(medians[name] / others)) > math.log1p(floor):
            outlying.append((name, medians[name], others))
    if not outlying:
        return SessionScreen(everything, None, None, len(medians))
    if len(outlying) > 1:
        said = ', '.join(f'{s} at {m / o:.2f} of the others' for s, m, o in outlying)
        return SessionScreen(everything, None,
                             f'{len(outlying)} of {len(medians)} sessions outlying ({said}): the '
                             'sessions disagree among themselves', len(medians))
    session = outlying[0][0]
    return SessionScreen([i for i in everything if sessions[i] != session], outlying[0], None,
                         len(medians))


def left_out_words(left_out: tuple) -> str:
    """'session s3 (median 700, 0.70 of the other sessions' 1000)'."""
    session, median, others = left_out
    return (f'session {session} (median {median:g}, {median / others:.2f} of the other '
            f"sessions' {others:g})")
