"""Processes and namespaces of the testbed: start, signal, wait, find what
is left inside a namespace, and whether this machine can build a testbed."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Sequence

from hpcnet.testbed.config import KILL_WAIT, REQUIRED_TOOLS


def unavailable_reason(tools: Sequence[str] = REQUIRED_TOOLS) -> str | None:
    """Why a testbed (or what needs only namespaces and ``tools``) cannot be
    built on this machine, or None when it can."""
    if os.geteuid() != 0:
        return 'needs root'
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        return 'not installed: ' + ', '.join(missing)
    try:
        r = subprocess.run(['unshare', '--net', '--uts', '--mount', 'true'],
                           capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f'cannot probe namespaces: {e}'
    if r.returncode != 0:
        return f'namespaces not permitted: {r.stderr.strip()}'
    return None


def fmt_cmd(argv: Sequence[str]) -> str:
    return ' '.join(shlex.quote(str(a)) for a in argv)


# --- processes -----------------------------------------------------------

def proc_stat(pid: int):
    """(state, starttime) of a process, or None if it does not exist."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            data = f.read()
    except OSError:
        return None
    rest = data[data.rindex(')') + 2:].split()
    return rest[0], rest[19]


def alive(pid: int, start: str | None = None) -> bool:
    st = proc_stat(pid)
    if st is None or st[0] in ('Z', 'X'):
        return False
    return start is None or st[1] == start


# Popen objects of the daemons this Python process started, so that they are
# reaped (no zombies) when ``down`` runs in the same process as ``up``.
CHILDREN: dict[int, subprocess.Popen] = {}


def reap():
    for pid, proc in list(CHILDREN.items()):
        if proc.poll() is not None:
            del CHILDREN[pid]


def signal_pid(pid: int, sig: int):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def wait_gone(procs: dict[int, str | None], timeout: float) -> list[int]:
    """Wait (bounded) until none of ``procs`` is alive; return the live ones."""
    deadline = time.monotonic() + timeout
    while True:
        reap()
        live = [p for p, s in procs.items() if alive(p, s)]
        if not live or time.monotonic() >= deadline:
            return live
        time.sleep(0.05)


def stop(procs: dict[int, str | None], term_wait: float) -> list[str]:
    """SIGTERM, bounded wait, SIGKILL, bounded wait. Return problems."""
    live = [p for p, s in procs.items() if alive(p, s)]
    if not live:
        return []
    for p in live:
        signal_pid(p, signal.SIGTERM)
    live = wait_gone({p: procs[p] for p in live}, term_wait)
    for p in live:
        signal_pid(p, signal.SIGKILL)
    live = wait_gone({p: procs[p] for p in live}, KILL_WAIT)
    return [f'process {p} survived SIGKILL' for p in live]


def ns_inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def procs_in_namespaces(inodes: dict[str, set]) -> dict[int, str | None]:
    """Processes whose net, uts or mnt namespace is one of ``inodes``."""
    me = {os.getpid()}
    p = os.getppid()
    while p > 1 and p not in me:      # never sweep ourselves or our callers
        me.add(p)
        try:
            with open(f'/proc/{p}/stat') as f:
                d = f.read()
            p = int(d[d.rindex(')') + 2:].split()[1])
        except (OSError, ValueError):
            break
    found = {}
    for entry in os.listdir('/proc'):
        if not entry.isdigit() or int(entry) in me:
            continue
        pid = int(entry)
        for kind, inos in inodes.items():
            if not inos:
                continue
            try:
                link = os.readlink(f'/proc/{pid}/ns/{kind}')
            except OSError:
                continue
            m = re.search(r'\[(\d+)\]', link)
            if m and int(m.group(1)) in inos:
                st = proc_stat(pid)
                if st and st[0] not in ('Z', 'X'):
                    found[pid] = st[1]
                break
    return found


def mounts() -> list[str]:
    with open('/proc/self/mounts') as f:
        return [line.split()[1].replace('\\040', ' ') for line in f]
