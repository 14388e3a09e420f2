"""Progress of a phase that can take long (a module survey, a download,
reading stored sessions): a line on standard error when it starts and one
when it ends, so that standard output holds only what the command answers
(it may be parsed, or kept as a log of results), and a log of stderr shows
what the time went on.

A leaf: it imports nothing of hpcnet.
"""
from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass


def progress_line(message: str) -> None:
    '''``hpcnet: message`` on standard error, at once.'''
    print(f'hpcnet: {message}', file=sys.stderr, flush=True)


@dataclass
class Phase:
    '''What a phase came to, said on its last line; a phase that raised
    ends "stopped".'''
    outcome: str = 'stopped'


@contextlib.contextmanager
def phase(doing: str):
    '''``hpcnet: DOING ...`` when the block starts and ``hpcnet: DOING:
    OUTCOME (N s)`` when it ends; the block sets the outcome on the Phase it
    is given.  Two whole lines: whatever the phase itself writes to stderr
    in between (pip's errors, the metrics index's progress) stays readable.'''
    progress_line(f'{doing} ...')
    started = time.monotonic()
    done = Phase()
    try:
        yield done
    finally:
        progress_line(f'{doing}: {done.outcome} ({time.monotonic() - started:.0f} s)')
