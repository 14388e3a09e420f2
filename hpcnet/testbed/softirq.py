"""While a testbed is up, give the kernel's softirq packet work what a real
cluster's NICs have: its threads (``ksoftirqd/N``) a real-time priority, and
its per-CPU queue of received packets (the backlog) one default-sized queue
for every port the testbed adds.  The last testbed on the host to go down
restores what it found.

Why: on a real cluster a NIC's interrupt and packet work runs beside the
ranks, never behind them.  On the testbed every node's ranks busy-poll the
host's few cores, and the shaper's timer and the veth/bridge packet path run
as softirqs; once the kernel defers them to ``ksoftirqd`` (a normal task),
they wait behind spinning ranks for milliseconds, the token bucket stays
idle, and the link loses throughput (docs/testbed.md).

Why the backlog: every frame a node sends is handed to the host's per-CPU
backlog twice (at the bridge's port, then at the receiving node's eth0), and
that one queue of ``net.core.netdev_max_backlog`` packets (1000 by default)
stands in for the receive rings of every NIC and switch port of the testbed.
When three nodes send to a fourth (all-to-all) and the softirq falls a few
milliseconds behind, it overflows and the nodes' eth0 count drops a real link
would not have (docs/testbed.md).

Several testbeds may be up at once (tests use their own names), so what
each setting was is kept in a host-wide record with the state directories
holding it; the last holder to leave restores it.
"""
from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from hpcnet.testbed.processes import proc_stat

#: The host-wide record: {'original': {pid: [policy, priority, start]}, 'holders': [state dirs]}.
RECORD = Path('/run/hpcnet-testbed-softirq.json')
#: The host-wide record of the backlog: {'original': packets, 'holders': {state dir: packets}}.
BACKLOG_RECORD = Path('/run/hpcnet-testbed-backlog.json')
BACKLOG_SYSCTL = Path('/proc/sys/net/core/netdev_max_backlog')
#: Linux's default netdev_max_backlog: the queue of one NIC.
BACKLOG_PER_PORT = 1000


def softirq_threads() -> dict[int, str]:
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
def _locked_record(path: Path = RECORD, empty: dict | None = None) -> Iterator[dict]:
    # The lock is on the record's directory: a lock file would be left behind.
    lock = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = json.loads(path.read_text()) if path.exists() else \
            (empty or {'original': {}, 'holders': []})
        yield record
        if record['holders']:
            path.write_text(json.dumps(record, indent=1) + '\n')
        else:
            path.unlink(missing_ok=True)
    finally:
        os.close(lock)


def holders() -> list[str]:
    """The state directories of the testbeds holding the priority now."""
    return json.loads(RECORD.read_text())['holders'] if RECORD.exists() else []


def _live_holders(record: dict, leaving: str) -> list[str]:
    """The holders but ``leaving`` and those whose testbed is gone (killed
    without down: its state file went with it)."""
    return [h for h in record['holders'] if h != leaving and (Path(h) / 'state.json').exists()]


def backlog_needed(nodes: int) -> int:
    """A default-sized backlog for every veth end a testbed of ``nodes``
    compute nodes adds (each node's eth0 and its bridge port, head included):
    on a cluster each is a NIC or switch port with its own queue."""
    return BACKLOG_PER_PORT * 2 * (nodes + 1)


def backlog_holders() -> dict[str, int]:
    """State directory -> backlog (packets) of the testbeds holding it now."""
    return json.loads(BACKLOG_RECORD.read_text())['holders'] if BACKLOG_RECORD.exists() else {}


def _size_backlog(record: dict, leaving: str, joining: dict[str, int] | None = None) -> int:
    """Keep the live holders but ``leaving`` (add ``joining``) and size the
    backlog for them, never below the host's own; returns the size written."""
    record['holders'] = {h: record['holders'][h] for h in _live_holders(record, leaving)}
    record['holders'].update(joining or {})
    size = max([record['original'], *record['holders'].values()])
    BACKLOG_SYSCTL.write_text(f'{size}\n')
    return size


def hold_backlog(state_dir: str, packets: int) -> int:
    """Make the host's backlog at least ``packets`` for the testbed of
    ``state_dir`` (never smaller than the host had); returns what it is now."""
    with _locked_record(BACKLOG_RECORD, {'original': None, 'holders': {}}) as record:
        if record['original'] is None:
            # Kept while any record exists: a testbed killed without down
            # left the host's value in it, not in the sysctl.
            record['original'] = int(BACKLOG_SYSCTL.read_text())
        return _size_backlog(record, state_dir, {state_dir: packets})


def release_backlog(state_dir: str) -> list[str]:
    """The testbed of ``state_dir`` no longer needs its backlog: size it for
    the testbeds still up, or restore the host's own.  Returns problems."""
    if not BACKLOG_RECORD.exists():
        return []
    with _locked_record(BACKLOG_RECORD) as record:
        try:
            _size_backlog(record, state_dir)
        except OSError as e:
            return [f'restore {BACKLOG_SYSCTL}: {e}']
    return []


def hold(state_dir: str, priority: int) -> list[int]:
    """Set every ksoftirqd to SCHED_FIFO ``priority`` for the testbed of
    ``state_dir``; returns the pids changed."""
    with _locked_record() as record:
        record['holders'] = _live_holders(record, state_dir)
        threads = softirq_threads()
        for pid, start in threads.items():
            # What a thread had stays recorded while any record exists: a
            # testbed killed without down left its priority on the thread.
            kept = record['original'].get(str(pid))
            if kept is None or kept[2] != start:
                record['original'][str(pid)] = [os.sched_getscheduler(pid),
                                                os.sched_getparam(pid).sched_priority, start]
        for pid in threads:
            os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(priority))
        record['holders'].append(state_dir)
        return sorted(threads)


def release(state_dir: str) -> list[str]:
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
