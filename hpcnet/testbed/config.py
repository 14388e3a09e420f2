"""The testbed's one set of defaults and its errors (used by ``hpcnet
testbed`` and ``hpcnet testbed run`` alike)."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from hpcnet.paths import DATA_DIR
from hpcnet.variables import TESTBED_STATE_DIR_ENV, TESTBED_TEMPLATES_ENV


@dataclass(frozen=True)
class Defaults:
    """What ``hpcnet testbed up`` builds unless told otherwise."""
    name: str = 'hpcnet'
    #: A head node and this many compute nodes, each with its own link.
    nodes: int = 4
    #: Every link shaped like Gigabit Ethernet (docs/testbed.md).
    rate: str = '1gbit'
    #: A bucket of five full frames: a larger one lets messages that fit in it
    #: leave faster than any wire; a smaller one loses the tokens of every
    #: timer that fires late (docs/testbed.md, "Why 8 KiB").
    burst: str = '8kb'
    #: SCHED_FIFO priority of the host's ksoftirqd threads while the testbed
    #: is up (0: leave them alone); see hpcnet/testbed/softirq.py.
    softirq_priority: int = 1


DEFAULTS = Defaults()

#: tbf's latency bound (how long a packet may wait for tokens).
TBF_LATENCY = '50ms'
#: Bytes a real Ethernet frame spends on the wire beyond what the kernel
#: hands the device: preamble 8 + frame check 4 + inter-frame gap 12.
ETHERNET_OVERHEAD = 24
IFACE = 'eth0'
HEAD = 'hn0'
SUBNET_PREFIX = '10.77.0'       # /24; head .10, cnI .(10+I)
NETMASK_BITS = 24
HOST_OFFSET = 10
MAX_NODES = 200
NETNS_DIR = Path('/run/netns')
BRIDGE = 'br0'

STOP_WAIT = 20.0        # seconds for daemons to exit on SIGTERM
KILL_WAIT = 5.0         # seconds after SIGKILL
CMD_TIMEOUT = 30.0      # default timeout of every helper command
READY_TIMEOUT = 40.0    # slurm daemons up and nodes idle

REQUIRED_TOOLS = ('ip', 'tc', 'nsenter', 'unshare', 'mount', 'umount',
                  'munged', 'slurmctld', 'slurmd', 'scontrol', 'sinfo',
                  'sacct')


class TestbedError(Exception):
    """Any failure of the testbed, with a message meant for a human."""

    __test__ = False  # not a pytest class


class TestbedUsageError(TestbedError):
    """An option or variable the user gave that is not valid (exit 2)."""


class StepError(TestbedError):
    """A named step of ``up`` failed."""

    def __init__(self, step: str, detail: str):
        self.step = step
        self.detail = detail
        super().__init__(f"step '{step}' failed: {detail}")


def _tc_quantity(value: str, what: str, pattern: str, units: dict, valid: str) -> int:
    """A number with one of tc's unit suffixes, as an int of the base unit."""
    m = re.fullmatch(pattern, str(value).strip().lower())
    if not m:
        raise TestbedUsageError(f'{what} {value!r} is not valid (valid: {valid})')
    return int(float(m.group(1)) * units[m.group(2)])


def rate_bps(rate: str) -> int:
    """'1gbit' -> 1000000000 (tc's decimal units of bits per second)."""
    return _tc_quantity(rate, 'rate', r'(\d+(?:\.\d+)?)(k|m|g)?bit',
                        {None: 1, 'k': 10**3, 'm': 10**6, 'g': 10**9},
                        "a number with kbit, mbit or gbit, e.g. 1gbit, 500mbit; or 'none'")


def burst_bytes(burst: str) -> int:
    """'6kb' -> 6144 (tc's sizes: bytes, kb and mb of 1024)."""
    return _tc_quantity(burst, 'burst', r'(\d+)(k|m)?b?', {None: 1, 'k': 1 << 10, 'm': 1 << 20},
                        'bytes, or a number with kb or mb, e.g. 6kb')


def default_state_dir(name: str = DEFAULTS.name) -> Path:
    env = os.environ.get(TESTBED_STATE_DIR_ENV)
    if env and name == DEFAULTS.name:
        return Path(env)
    return Path(f'/run/{name}-testbed')


def default_template_dir() -> Path:
    env = os.environ.get(TESTBED_TEMPLATES_ENV)
    if env:
        return Path(env)
    return DATA_DIR / 'ci' / 'testbed'
