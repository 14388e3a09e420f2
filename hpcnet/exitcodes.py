"""The exit-code contract of `hpcnet run`, `baseline`, `compare`, `accept`,
`history`, `report` and `site check` (docs/developing.md, "Exit codes"): one meaning per code,
as pytest documents its own; a command that prints a verdict exits with it.

A command that decides nothing never exits OK: "not decided" is its own
code, so a nightly job cannot mistake "no data" for "no regression".
"""
from __future__ import annotations

import enum


class Exit(enum.IntEnum):
    #: Everything was judged (or, without references, passed its sanity
    #: with performance recorded) and nothing is worse.
    OK = 0
    #: A case failed, a metric regressed, a metric measured before is
    #: missing after, or a metric's history changed for the worse.
    FAILED = 1
    #: A usage or configuration error: one line names the thing and what is valid.
    USAGE = 2
    #: Not decided: too few samples, metrics on one side only, a history too
    #: short to say, nothing matched or judged, cases skipped that the
    #: partition declares, or a case nothing can fail (no metric asserted,
    #: the baseline's spread why for some).
    UNDECIDED = 3
    #: Interrupted (Ctrl-C, SIGINT): nothing decided; the shell's 128 + 2.
    INTERRUPTED = 130


#: The words each code stands for, in run summaries and report titles.
WORDS = {
    Exit.OK: 'PASSED',
    Exit.FAILED: 'FAILED',
    Exit.USAGE: 'USAGE OR CONFIGURATION ERROR',
    Exit.UNDECIDED: 'NOT DECIDED',
    Exit.INTERRUPTED: 'INTERRUPTED',
}


def worst(*codes: int) -> Exit:
    """The code of several findings together: a failure outranks "not
    decided", which outranks OK (a usage error stops before any finding)."""
    rank = {Exit.OK: 0, Exit.UNDECIDED: 1, Exit.FAILED: 2, Exit.USAGE: 3, Exit.INTERRUPTED: 4}
    return max((Exit(c) for c in codes), key=rank.__getitem__, default=Exit.OK)
