"""What of a testbed is still present after it is taken down."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from hpcnet.testbed.processes import alive
from hpcnet.testbed.softirq import holders


def leftovers(name: str, state_dir, pids=()) -> list[str]:
    """Everything of testbed ``name`` still present (empty: nothing)."""
    left = []
    out = subprocess.run(['ip', 'netns', 'list'], capture_output=True,
                         text=True, timeout=10).stdout
    left += [f'netns {l.split()[0]}' for l in out.splitlines()
             if l.startswith(name + '-')]
    if Path(state_dir).exists():
        left.append(f'state dir {state_dir}')
    with open('/proc/mounts') as f:
        left += [f'mount {l.split()[1]}' for l in f
                 if str(state_dir) in l or f'/run/netns/{name}-' in l]
    left += [f'pid {p}' for p in pids if alive(p)]
    if str(state_dir) in holders():
        left.append(f'ksoftirqd priority still held for {state_dir}')
    for d in os.listdir('/proc'):
        if d.isdigit() and int(d) != os.getpid() and alive(int(d)):
            try:
                cmd = open(f'/proc/{d}/cmdline', 'rb').read().decode(
                    errors='replace')
            except OSError:
                continue
            if str(state_dir) in cmd:
                left.append(f'process {d}: {cmd.replace(chr(0), " ")}')
    return left
