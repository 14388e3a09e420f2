"""Progress of a phase that can take long (a module survey, a download,
reading stored sessions), on standard error: standard output holds only
what the command answers (it may be parsed, or kept as a log of results),
and a log of stderr shows what the time went on.

A leaf: it imports nothing of hpcnet.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from dataclasses import dataclass

#: Seconds a phase runs before it is said: one over sooner says nothing, so
#: a quick answer (or a user's error, one line) stays as short as it was.
SAY_AFTER_S = 2.0


def progress_line(message: str) -> None:
    '''``hpcnet: message`` on standard error, at once.'''
    print(f'hpcnet: {message}', file=sys.stderr, flush=True)


@dataclass
class Phase:
    '''What a phase came to, said on its last line; a phase that raised
    ends "stopped".'''
    outcome: str = 'stopped'


class _StartLine:
    '''A phase's first line, said once, unless the phase ended first.'''

    def __init__(self, doing: str):
        self.doing, self.said, self.closed = doing, False, False
        self.lock = threading.Lock()

    def say(self) -> None:
        with self.lock:
            if not self.closed:
                self.said = True
                progress_line(f'{self.doing} ...')

    def close(self) -> bool:
        '''No start line after this; whether it was said.'''
        with self.lock:
            self.closed = True
            return self.said


#: The start lines whose timer may still say them, and those held across a fork.
_PENDING: set = set()
_HELD: list = []


def _hold_for_fork() -> None:
    """No start line is being said while the process forks: a child of a
    fork taken while the timer's thread holds stderr's lock would inherit it
    held (hpcnet.longwork.forked forks while a phase runs)."""
    _HELD[:] = list(_PENDING)
    for line in _HELD:
        line.lock.acquire()


def _release_after_fork() -> None:
    for line in _HELD:
        line.lock.release()
    _HELD.clear()


def _forget_in_child() -> None:
    """The child has no timer thread: it says none of its parent's lines."""
    for line in _HELD:
        line.lock, line.closed = threading.Lock(), True
    _HELD.clear()
    _PENDING.clear()


os.register_at_fork(before=_hold_for_fork, after_in_parent=_release_after_fork,
                    after_in_child=_forget_in_child)


@contextlib.contextmanager
def phase(doing: str):
    '''``hpcnet: DOING ...`` once the block has run SAY_AFTER_S, then
    ``hpcnet: DOING: OUTCOME (N s)`` when it ends; the block sets the
    outcome on the Phase it is given.  Two whole lines: whatever the phase
    itself writes to stderr in between (pip's errors, the metrics index's
    progress) stays readable.'''
    started = time.monotonic()
    start = _StartLine(doing)
    timer = threading.Timer(SAY_AFTER_S, start.say)
    timer.daemon = True
    if SAY_AFTER_S > 0:
        timer.start()
    else:
        start.say()
    done = Phase()
    _PENDING.add(start)
    try:
        yield done
    finally:
        timer.cancel()
        _PENDING.discard(start)
        if start.close():
            progress_line(f'{doing}: {done.outcome} ({time.monotonic() - started:.0f} s)')
