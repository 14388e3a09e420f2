"""Progress of a phase that can take long (a module survey, a download,
reading stored sessions), on standard error: standard output holds only
what the command answers (it may be parsed, or kept as a log of results),
and a log of stderr shows what the time went on.

A leaf: it imports nothing of hpcnet.
"""
from __future__ import annotations

import contextlib
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
    try:
        yield done
    finally:
        timer.cancel()
        if start.close():
            progress_line(f'{doing}: {done.outcome} ({time.monotonic() - started:.0f} s)')
