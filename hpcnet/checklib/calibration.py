"""A link judged against itself: on an emulated cluster, the benchmark's
figure over iperf3's on the same two nodes, measured in the same job.

Where a partition's nodes share one host's cores (``nodes_share_cores``: the
testbed), what a benchmark reaches across the emulated wire depends on how
busy the host is as much as on the wire.  Such a case runs iperf3 between its
two nodes just before and just after the benchmark and is judged on
``<metric>_over_iperf3`` (over the faster of the two iperf3 runs), so the
same host load is on both sides of the ratio.
Two findings come before any ratio:

- a node's interface shaped (tc tbf) below the partition's ``link_rate_bps``:
  the link is not the one declared, and the case fails naming the node;
- iperf3 below :data:`HOST_FLOOR` of the wire's payload rate on links shaped
  as declared: the host could not emulate the wire, and the case is
  "testbed host overloaded: not judged", naming the figures.
"""
from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass

from hpcnet import templates
from hpcnet.checklib.linkstats import per_node
from hpcnet.constants import HOST_OVERLOADED

#: The lowest fraction of the wire's TCP payload rate at which iperf3 shows
#: that the host still emulates the wire: a healthy testbed host reaches
#: 0.94-1.01 (docs/measurements.md, "Calibrated judging").
HOST_FLOOR = 0.90
#: How far above the wire a figure may read: a shaped link lets no more
#: through (reference/testbed.yaml's wire-derived upper bounds).
ABOVE_WIRE = 0.02
#: iperf3's run before and after the benchmark (s), and its port (not the
#: hpcnet_iperf3 check's, so a leftover server of one never answers the other).
IPERF3_SECONDS = 1
IPERF3_PORT = 5202
PHASES = ('before', 'after')
#: A shaper within this fraction below the declared rate is the declared rate
#: (tc rounds rates to its clock).
RATE_ROUNDING = 0.001

_SHAPER = re.compile(r'^hpcnet-shaper: (\S+) (\S+) (.*)$', re.M)
_PRESSURE = re.compile(r'^hpcnet-cpu-pressure: (.*)$', re.M)


class CalibrationError(ValueError):
    '''The calibration did not produce a figure (says which and why).'''


def tcp_payload_MBps(rate_bps: float, mtu: int | None) -> float:
    '''The TCP payload rate a wire of ``rate_bps`` carries at ``mtu``: a full
    segment carries mtu - 52 bytes (IP, TCP, timestamps) and occupies
    mtu + 38 bytes of wire time (Ethernet header, frame check, preamble,
    inter-frame gap).'''
    mtu = mtu or 1500
    return rate_bps / 8e6 * (mtu - 52) / (mtu + 38)


def file_name(phase: str) -> str:
    return f'calibration-iperf3-{phase}.json'


SHAPER_FILE = 'calibration-shaper.txt'
LOG_FILE = 'calibration.log'
#: What a calibrated case keeps in its output directory, as evidence.
FILES = [SHAPER_FILE, LOG_FILE, *(file_name(phase) for phase in PHASES)]


def shaper_command(iface: str, launcher: str, num_nodes: int) -> str:
    '''A command printing each node's root qdisc of ``iface`` (tc JSON) and
    the host's CPU pressure, one tagged line each.'''
    script = (f'printf "hpcnet-shaper: %s %s %s\\n" "$(hostname)" {shlex.quote(iface)} '
              f'"$(tc -j qdisc show dev {shlex.quote(iface)} 2>&1 | tr -d "\\n")"; '
              'printf "hpcnet-cpu-pressure: %s\\n" "$(head -n1 /proc/pressure/cpu 2>/dev/null)"')
    return per_node(f'sh -c {shlex.quote(script)}', launcher, num_nodes)


def iperf3_command(phase: str, stagedir: str, iface: str, launcher: str) -> str:
    '''iperf3 from the job's second node to its first, on ``iface``, writing
    the client's JSON into the stage directory.'''
    script = templates.job_script(
        'iperf3-pair', IFACE=iface, PORT=IPERF3_PORT, TIMEOUT_S=30, DURATION_S=IPERF3_SECONDS,
        CONNECT_TIMEOUT_MS=5000, WAIT_STEPS=50,
        RENDEZVOUS=f'{stagedir}/calibration-rendezvous-{phase}',
        CLIENT_JSON=f'{stagedir}/{file_name(phase)}',
        SERVER_LOG=f'{stagedir}/calibration-iperf3-server-{phase}.log')
    return per_node(f'sh -c {shlex.quote(script)}', launcher, 2)


def iperf3_received_MBps(result, where: str) -> float:
    '''The receiver's throughput (MB/s) of an iperf3 client JSON result.'''
    if not isinstance(result, dict):
        raise CalibrationError(f'{where}: not an iperf3 JSON result')
    if result.get('error'):
        raise CalibrationError(f'{where}: iperf3: {result["error"]}')
    try:
        bps = result['end']['sum_received']['bits_per_second']
    except (KeyError, TypeError):
        raise CalibrationError(f'{where}: no end.sum_received') from None
    if not isinstance(bps, (int, float)) or not math.isfinite(bps) or bps <= 0:
        raise CalibrationError(f'{where}: receiver throughput is {bps!r}')
    return bps / 8e6


def read_iperf3(path: str) -> dict:
    try:
        with open(path, errors='replace') as fp:
            return json.load(fp)
    except OSError:
        raise CalibrationError(f'iperf3 wrote no {path}') from None
    except ValueError as err:
        raise CalibrationError(f'{path}: not JSON ({err})') from None


def shaped_rates(text: str) -> dict:
    '''host -> the rate (bit/s) its interface's root tbf qdisc sends at, or
    None where the interface is not shaped.'''
    rates = {}
    for host, iface, said in _SHAPER.findall(text):
        try:
            qdiscs = json.loads(said)
        except ValueError:
            raise CalibrationError(f'{host}: `tc -j qdisc show dev {iface}` said: '
                                   f'{said.strip() or "(nothing)"}') from None
        roots = [q for q in qdiscs if isinstance(q, dict) and q.get('root')]
        tbf = [q for q in roots if q.get('kind') == 'tbf']
        rates[host] = int(tbf[0]['options']['rate']) * 8 if tbf else None
    return rates


@dataclass(frozen=True)
class Calibration:
    '''iperf3 on the case's link before and after it, and the shapers seen.'''
    before_MBps: float
    after_MBps: float
    shaped_bps: dict        #: host -> rate of its tbf, or None
    cpu_pressure: str = ''  #: /proc/pressure/cpu's "some" line, as read

    @property
    def link_MBps(self) -> float:
        '''The link's rate: the faster iperf3 run, since a busy host only ever
        slows iperf3 down.'''
        return max(self.before_MBps, self.after_MBps)

    def over(self, value_MBps: float) -> float:
        '''``value_MBps`` over the link as the two iperf3 runs bracket it: over
        the faster run when above it, over the slower one when below it, 1
        between them.  The host's state during the run lies between the two
        it was measured in: a host that slowed down during the run slows the
        run after it, and a figure it slowed is not held to the faster run.'''
        slower = min(self.before_MBps, self.after_MBps)
        if value_MBps > self.link_MBps:
            return value_MBps / self.link_MBps
        if value_MBps < slower:
            return value_MBps / slower
        return 1.0

    def throttled(self, iface: str, link_rate_bps: int) -> list:
        '''Nodes whose interface is shaped below the declared rate.'''
        return [f'{host}: {iface} is shaped to {rate / 1e6:g} Mbit/s (tc tbf), below the '
                f"partition's link_rate_bps ({link_rate_bps / 1e6:g} Mbit/s)"
                for host, rate in sorted(self.shaped_bps.items())
                if rate is not None and rate < link_rate_bps * (1 - RATE_ROUNDING)]

    def overloaded(self, link_rate_bps: int, mtu: int | None) -> str | None:
        '''Why the host could not emulate the wire during the case, or None.'''
        wire = tcp_payload_MBps(link_rate_bps, mtu)
        if min(self.before_MBps, self.after_MBps) >= HOST_FLOOR * wire:
            return None
        pressure = f'; CPU pressure: {self.cpu_pressure}' if self.cpu_pressure else ''
        return (f'{HOST_OVERLOADED}: iperf3 on the same link reached {self.before_MBps:.1f} MB/s '
                f'before and {self.after_MBps:.1f} MB/s after the run, '
                f'{self.before_MBps / wire:.2f} and {self.after_MBps / wire:.2f} of the wire\'s '
                f'payload rate {wire:.1f} MB/s (emulating the wire needs {HOST_FLOOR:.2f}){pressure}')


def read(stagedir: str) -> Calibration:
    '''The calibration a job left in its stage directory.'''
    figures = {phase: iperf3_received_MBps(read_iperf3(f'{stagedir}/{file_name(phase)}'),
                                           f'iperf3 {phase} the run')
               for phase in PHASES}
    try:
        with open(f'{stagedir}/{SHAPER_FILE}', errors='replace') as fp:
            text = fp.read()
    except OSError:
        raise CalibrationError(f'the shaper probe wrote no {SHAPER_FILE}') from None
    rates = shaped_rates(text)
    if not rates:
        raise CalibrationError(f'{SHAPER_FILE}: no node reported its interface')
    pressure = _PRESSURE.search(text)
    return Calibration(figures['before'], figures['after'], rates,
                       pressure.group(1).strip() if pressure else '')
