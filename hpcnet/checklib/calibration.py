"""A link judged against itself: on an emulated cluster, the benchmark's
figure over iperf3's on the same two nodes, measured in the same job.

Where a partition's nodes share one host's cores (``nodes_share_cores``: the
testbed), what a benchmark reaches across the emulated wire depends on how
busy the host is as much as on the wire.  Such a case runs iperf3 between its
two nodes just before and just after the benchmark and is judged on
``<metric>_over_iperf3`` (over the faster of the two iperf3 runs), so the
same host load is on both sides of the ratio.
Three findings come before any ratio:

- the path shaped (any tc qdisc or class on either node's interface on the
  way to the other: hpcnet.checklib.qdiscs) below the partition's
  ``link_rate_bps``: the link is not the one declared, and the case fails
  naming the node and the shaper;
- iperf3 below :data:`HOST_FLOOR` of the wire's payload rate while the host's
  CPU pressure (PSI, read before and after) is at or above
  :data:`BUSY_PRESSURE_PCT`: the host could not emulate the wire, and the
  measurement is withheld ("measurement withheld (host busy: ...)");
- iperf3 that slow on a quiet host, with nothing on the path shaped below
  the declared rate: the host's limit still (stalls shorter than the
  pressure's 10 s average: the emulated wire is the shaper, so a slow link
  shows as one), and the figure is judged over iperf3 as always, with a note
  saying so (``link_calibration.judged_against``).
"""
from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass, field

from hpcnet import templates
from hpcnet.checklib import qdiscs
from hpcnet.checklib.linkstats import per_node
from hpcnet.constants import MEASUREMENT_WITHHELD

#: The lowest fraction of the wire's TCP payload rate at which iperf3 shows
#: that the host still emulates the wire: a healthy testbed host reaches
#: 0.94-1.01 (docs/measurements.md, "Calibrated judging").
HOST_FLOOR = 0.90
#: The CPU pressure (``/proc/pressure/cpu``, "some avg10": the share of the
#: last 10 s some task waited for a core) from which the host is busy: above
#: every reading of a clean testbed run, whose own busy-polling ranks keep a
#: task waiting up to 28 % of the time, and below what other work beside it
#: brings (up to 58 %) (docs/measurements.md, "Calibrated judging").
BUSY_PRESSURE_PCT = 30.0
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

#: The pressure probe's line; a line without its phase is the one read before.
_PRESSURE = re.compile(r'^hpcnet-cpu-pressure(?: (before|after))?: (.*)$', re.M)
_AVG10 = re.compile(r'\bavg10=(\d+(?:\.\d+)?)')


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


def pressure_command(phase: str, launcher: str, num_nodes: int) -> str:
    '''A command printing each node's CPU pressure, one tagged line each.'''
    script = (f'printf "hpcnet-cpu-pressure {phase}: %s\\n" '
              '"$(head -n1 /proc/pressure/cpu 2>/dev/null)"')
    return per_node(f'sh -c {shlex.quote(script)}', launcher, num_nodes)


def shaper_command(iface: str, launcher: str, num_nodes: int) -> str:
    '''A command printing, from each node, every tc view of ``iface`` that
    hpcnet.checklib.qdiscs reads and the node's address on it, one tagged
    line each, then the CPU pressure before the run: one compound command,
    so that a redirection after it takes the output of both.'''
    dev = shlex.quote(iface)
    views = (('shaper', f'tc -j qdisc show dev {dev} 2>&1 | tr -d "\\n"'),
             ('classes', f'tc class show dev {dev} 2>&1 | tr "\\n" ";"'),
             ('filters', f'tc -j filter show dev {dev} 2>&1 | tr -d "\\n"'),
             ('address', f'ip -j -4 addr show dev {dev} 2>&1 | tr -d "\\n"'))
    script = '; '.join(f'printf "hpcnet-{view}: %s %s %s\\n" "$(hostname)" {dev} "$({command})"'
                       for view, command in views)
    return ('{ ' + per_node(f'sh -c {shlex.quote(script)}', launcher, num_nodes) + '; '
            + pressure_command('before', launcher, num_nodes) + '; }')


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


def pressure_pct(line: str) -> float | None:
    '''The "some avg10" of a /proc/pressure/cpu line (%), or None.'''
    found = _AVG10.search(line)
    return float(found.group(1)) if found and line.startswith('some') else None


def _busiest(lines: list) -> str:
    '''The reading of the busiest node (the host's, where nodes share it).'''
    readable = [line for line in lines if pressure_pct(line) is not None]
    return max(readable, key=pressure_pct) if readable else (lines[0] if lines else '')


@dataclass(frozen=True)
class Calibration:
    '''iperf3 on the case's link before and after it, the shaping on its
    path and the host's CPU pressure before and after.'''
    before_MBps: float
    after_MBps: float
    shaped_bps: dict        #: host -> the lowest shaped rate toward the path's other end, or None
    cpu_pressure: str = ''  #: /proc/pressure/cpu's "some" line before the run, as read
    cpu_pressure_after: str = ''
    shaped_by: dict = field(default_factory=dict)   #: host -> the tc shaper(s) setting that rate

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

    def ratio(self, value_MBps: float) -> float:
        '''What the case is judged by: over() the iperf3 bracket, like with
        like.  A path slower than declared is not judged by it: the shaper
        on the path names it (throttled()), and the case fails on that.'''
        return self.over(value_MBps)

    def throttled(self, iface: str, link_rate_bps: int) -> list:
        '''Nodes whose interface shapes the path below the declared rate.'''
        return [f'{host}: {iface} is shaped to {rate / 1e6:g} Mbit/s toward the other node '
                f'(tc {self.shaped_by.get(host, "tbf")}), below the partition\'s link_rate_bps '
                f'({link_rate_bps / 1e6:g} Mbit/s)'
                for host, rate in sorted(self.shaped_bps.items())
                if rate is not None and rate < link_rate_bps * (1 - RATE_ROUNDING)]

    def pressures(self) -> list:
        '''The CPU pressures (some avg10, %) read, before then after.'''
        return [p for p in (pressure_pct(self.cpu_pressure), pressure_pct(self.cpu_pressure_after))
                if p is not None]

    def host_busy(self) -> bool | None:
        '''Whether the host was busy around the run (either reading at or
        above BUSY_PRESSURE_PCT); None where no pressure could be read.'''
        found = self.pressures()
        return max(found) >= BUSY_PRESSURE_PCT if found else None

    def below_floor(self, link_rate_bps: int, mtu: int | None) -> bool:
        wire = tcp_payload_MBps(link_rate_bps, mtu)
        return min(self.before_MBps, self.after_MBps) < HOST_FLOOR * wire

    def host_limited(self, link_rate_bps: int, mtu: int | None) -> bool:
        '''iperf3 below the floor while the CPU pressure read quiet: with no
        shaper on the path below the declared rate (throttled() is asked
        first), the shortfall is the host's, stalls shorter than the
        pressure's 10 s average; the figure is judged over iperf3.'''
        return self.below_floor(link_rate_bps, mtu) and self.host_busy() is False

    def iperf3_figures(self, link_rate_bps: int, mtu: int | None) -> str:
        wire = tcp_payload_MBps(link_rate_bps, mtu)
        return (f'iperf3 on the same link reached {self.before_MBps:.1f} MB/s before and '
                f'{self.after_MBps:.1f} MB/s after the run, {self.before_MBps / wire:.2f} and '
                f'{self.after_MBps / wire:.2f} of the wire\'s payload rate {wire:.1f} MB/s '
                f'(emulating the wire needs {HOST_FLOOR:.2f})')

    def pressure_figures(self) -> str:
        readings = ', '.join(f'{pressure_pct(line):.2f} % {phase}' for phase, line in
                             (('before', self.cpu_pressure), ('after', self.cpu_pressure_after))
                             if pressure_pct(line) is not None)
        return (f'CPU pressure some avg10 {readings} (busy from {BUSY_PRESSURE_PCT:g} %)'
                if readings else 'no CPU pressure readable (/proc/pressure/cpu)')

    def withheld(self, link_rate_bps: int, mtu: int | None) -> str | None:
        '''Why this measurement is withheld (iperf3 below the floor on a busy
        host, or on a host whose load could not be read), or None.'''
        if not self.below_floor(link_rate_bps, mtu) or self.host_busy() is False:
            return None
        why = 'host busy' if self.host_busy() else 'host load unknown'
        return (f'{MEASUREMENT_WITHHELD} ({why}: {self.pressure_figures()}): '
                f'{self.iperf3_figures(link_rate_bps, mtu)}')

    def host_limited_note(self, link_rate_bps: int, mtu: int | None) -> str | None:
        '''Why a figure of a quiet host below the wire is judged over iperf3, or None.'''
        if not self.host_limited(link_rate_bps, mtu):
            return None
        return (f'the host below the wire, no shaper on the path below the declared rate '
                f'({self.pressure_figures()}): {self.iperf3_figures(link_rate_bps, mtu)}; '
                'judged over iperf3 on the same link')


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
    try:
        rates = qdiscs.path_rates(text)
    except qdiscs.ShapingError as err:
        raise CalibrationError(str(err)) from None
    if not rates:
        raise CalibrationError(f'{SHAPER_FILE}: no node reported its interface')
    readings = {phase: [line.strip() for when, line in _PRESSURE.findall(text)
                        if (when or 'before') == phase] for phase in PHASES}
    return Calibration(figures['before'], figures['after'],
                       {host: rate for host, (rate, _) in rates.items()},
                       _busiest(readings['before']), _busiest(readings['after']),
                       {host: what for host, (rate, what) in rates.items() if rate is not None})
