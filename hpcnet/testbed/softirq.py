"""Give the kernel's softirq threads (``ksoftirqd/N``) a real-time priority
while a testbed is up, and restore what they had when the last testbed on
the host goes down.

Why: on a real cluster a NIC's interrupt and packet work runs beside the
ranks, never behind them.  On the testbed every node's ranks busy-poll the
host's few cores, and the shaper's timer and the veth/bridge packet path run
as softirqs; once the kernel defers them to ``ksoftirqd`` (a normal task),
they wait behind spinning ranks for milliseconds, the token bucket stays
idle, and the link loses throughput (measured: 4 MiB ping-pong medians of
35.8-39.8 ms one way, against 35.4-35.9 ms with ``ksoftirqd`` at SCHED_FIFO 1;
ci/testbed/README.md, "Shaping").

Several testbeds may be up at once (tests use their own names), so the
original policies are kept in one host-wide record with the state
directories holding it; the last holder to leave restores them.
"""
from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, List

from hpcnet.testbed.processes import proc_stat

#: The host-wide record: {'original': {pid: [policy, priority, start]}, 'holders': [state dirs]}.
RECORD = Path('/run/hpcnet-testbed-softirq.json')


def softirq_threads() -> Dict[int, str]:
    """pid -> start time of every ksoftirqd/N."""
    threads = {}
    for proc in Path('/proc').iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if not (proc / 'comm').read_text().startswith('ksoftirqd/'):
                continue
        except OSError:         # exited while we looked
            continue
        stat = proc_stat(int(proc.name))
        if stat is not None:
            threads[int(proc.name)] = stat[1]
    return threads


@contextmanager
def _locked_record() -> Iterator[dict]:
    # The lock is on the record's directory: a lock file would be left behind.
    lock = os.open(RECORD.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = json.loads(RECORD.read_text()) if RECORD.exists() else \
            {'original': {}, 'holders': []}
        yield record
        if record['holders']:
            RECORD.write_text(json.dumps(record, indent=1) + '\n')
        else:
            RECORD.unlink(missing_ok=True)
    finally:
        os.close(lock)


def holders() -> List[str]:
    """The state directories of the testbeds holding the priority now."""
    return json.loads(RECORD.read_text())['holders'] if RECORD.exists() else []


def _live_holders(record: dict, leaving: str) -> List[str]:
    """The holders but ``leaving`` and those whose testbed is gone (killed
    without down: its state file went with it)."""
    return [h for h in record['holders'] if h != leaving and (Path(h) / 'state.json').exists()]


def hold(state_dir: str, priority: int) -> List[int]:
    """Set every ksoftirqd to SCHED_FIFO ``priority`` for the testbed of
    ``state_dir``; returns the pids changed."""
    with _locked_record() as record:
        record['holders'] = _live_holders(record, state_dir)
        threads = softirq_threads()
        if not record['holders']:
            record['original'] = {}
            for pid, start in threads.items():
                record['original'][str(pid)] = [os.sched_getscheduler(pid),
                                                os.sched_getparam(pid).sched_priority, start]
        for pid in threads:
            os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(priority))
        record['holders'].append(state_dir)
        return sorted(threads)


def release(state_dir: str) -> List[str]:
    """The testbed of ``state_dir`` no longer needs the priority: if it was
    the last one, restore the original policies.  Returns problems."""
    if not RECORD.exists():
        return []
    problems = []
    with _locked_record() as record:
        record['holders'] = _live_holders(record, state_dir)
        if record['holders']:
            return []
        threads = softirq_threads()
        for pid, (policy, priority, start) in record['original'].items():
            if threads.get(int(pid)) != start:
                continue        # a CPU went offline: its thread is gone
            try:
                os.sched_setscheduler(int(pid), policy, os.sched_param(priority))
            except OSError as e:
                problems.append(f'restore the scheduling policy of ksoftirqd pid {pid}: {e}')
        record['original'] = {}
    return problems
