"""Work spread over the host's cores in forked processes, which share this
process's memory as it was at the fork: `hpcnet history` judges thousands of
independent series and draws the trend page's figures this way.

Fork, not spawn: a worker then needs neither to import hpcnet again nor to
receive the data it reads.  A fork copies no thread but the caller's, and a
lock another thread held stays held in the child: the one other thread
hpcnet's commands run while they judge, a phase's progress timer, is held
still across each fork (hpcnet.longwork.progress).
"""
from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor

_FORK = multiprocessing.get_context('fork')


class ForkedError(RuntimeError):
    '''A forked process that ended without sending its result.'''


def cores() -> int:
    '''The cores this process may run on.'''
    return len(os.sched_getaffinity(0))


#: (function, items) of the map_in_order running: its workers inherit it at
#: the fork and are sent positions only, so neither needs pickling.
_WORK: tuple = ()


def _apply_at(position: int):
    function, items = _WORK
    return function(items[position])


def map_in_order(function: Callable, items: Sequence, *, per_worker: int,
                 workers: int | None = None) -> list:
    '''[function(item) for item in items], over up to ``workers`` processes
    (default: the host's cores), each given at least ``per_worker`` items:
    below that, a worker's start costs more than it saves, and one process
    does it all.'''
    global _WORK
    processes = min(cores() if workers is None else workers, len(items) // per_worker)
    if processes < 2:
        return [function(item) for item in items]
    _WORK = (function, items)
    try:
        with ProcessPoolExecutor(processes, mp_context=_FORK) as pool:
            return list(pool.map(_apply_at, range(len(items)),
                                 chunksize=max(1, len(items) // (processes * 8))))
    finally:
        _WORK = ()


class Beside:
    '''function(*args) computed in a forked process while this one goes on;
    result() waits for it and returns it, or raises what it raised.'''

    def __init__(self, function: Callable, *args):
        self._what = getattr(function, '__qualname__', repr(function))
        self._receive, send = _FORK.Pipe(duplex=False)
        self._process = _FORK.Process(target=_send_result, args=(send, function, args),
                                      daemon=True)
        self._process.start()
        send.close()

    def result(self):
        try:
            succeeded, value = self._receive.recv()
        except EOFError:
            self._process.join()
            raise ForkedError(f'{self._what}: its process ended with exit code '
                              f'{self._process.exitcode} before it sent a result') from None
        finally:
            self._receive.close()
        self._process.join()
        if not succeeded:
            raise value
        return value


def _send_result(send, function: Callable, args: tuple) -> None:
    '''The child's part of Beside: the result, or the exception, to the parent.'''
    try:
        outcome = (True, function(*args))
    except Exception as err:   # noqa: BLE001  (raised again in the parent by result())
        outcome = (False, err)
    send.send(outcome)
    send.close()
