"""A link judged against itself: on an emulated cluster, the benchmark's
figure over iperf3's on the same two nodes, measured in the same job.

Where a partition's nodes share one host's cores (``nodes_share_cores``: the
testbed), what a benchmark reaches across the emulated wire depends on how
busy the host is as much as on the wire.  Such a case runs iperf3 between its
two nodes just before and just after the benchmark and is judged on
``<metric>_over_iperf3`` (over the faster of the two iperf3 runs), so the
same host load is on both sides of the ratio.
Three findings come before any ratio:

- on a partition whose host was proven to emulate the wire (its
  ``wire_efficiency``: hpcnet.testbed.wire), the faster iperf3 run of a quiet
  host more than :data:`SLOW_LINK_MARGIN` below what the clean link measured:
  the link is slow, measured, and the case fails; the shaping read on the
  path (any tc qdisc or class on either node's interface on the way to the
  other: hpcnet.parsers.qdiscs) may explain it, never decides it; where both
  runs are that slow, the job measures once more right after them
  (:data:`CONFIRM_PHASE`), and the link is slow only where that run is too;
- without that proof, a shaper below the declared rate on the path: a slow
  link cannot be told from the host, and the measurement is withheld;
- iperf3 below the floor (proven: the same margin; else :data:`HOST_FLOOR`
  of the wire's payload rate) while the host
  was busy with work not the job's: in an idle second just before each
  iperf3 run, the host's cores busy for :data:`BUSY_CPU_PCT` of the time or
  more (``/proc/stat``), or some task waiting for a core for
  :data:`BUSY_STALL_PCT` or more (PSI, ``/proc/pressure/cpu``): the host could
  not emulate the wire, and the measurement is withheld ("measurement
  withheld (host busy: ...)");
- iperf3 that slow on a quiet host, with nothing on the path shaped below
  the declared rate: the host's limit still, and the figure is judged over
  iperf3 as always, with a note saying so (``link_calibration.judged_against``).

The host's load is read while the job does nothing: read while the job
runs, it would hold the job's own busy-polling ranks and the emulated wire's
softirq work, which keep a task waiting as much on a quiet host as other
work does on a busy one.
"""
from __future__ import annotations

import json
import math
import os
import re
import shlex
from dataclasses import dataclass, field

from hpcnet import templates
from hpcnet.parsers import qdiscs
from hpcnet.fabrics import per_node, tcp_payload_MBps
from hpcnet.constants import MEASUREMENT_WITHHELD

#: The lowest fraction of the wire's TCP payload rate at which iperf3 shows
#: that the host still emulates the wire: a healthy testbed host reaches
#: 0.94-1.01 (docs/measurements.md, "Calibrated judging").
HOST_FLOOR = 0.90
#: The host is busy from either share of the idle second before iperf3:
#: its cores busy with work not the job's, or some task waiting for a core.
#: Both lie between a quiet host's readings and those beside one process
#: spinning on a core (docs/measurements.md, "Calibrated judging").
BUSY_CPU_PCT = 40.0
BUSY_STALL_PCT = 10.0
#: The idle window (s) the host's load is read over, before each iperf3 run.
IDLE_WINDOW_S = 1
#: How far below what a clean link measured when the testbed came up (the
#: partition's wire_efficiency) the faster iperf3 run of a quiet host may
#: fall before the link is slow: a path shaped to 85 % measures 0.85 of the
#: wire, a quiet host's clean one-second runs came within 0.07 of the
#: bring-up's (docs/measurements.md, "A wire-true testbed").
SLOW_LINK_MARGIN = 0.08
#: How far above the wire a figure may read: a shaped link lets no more
#: through (reference/testbed.yaml's wire-derived upper bounds).
ABOVE_WIRE = 0.02
#: iperf3's run before and after the benchmark (s), and its port (not the
#: hpcnet_iperf3 check's, so a leftover server of one never answers the other).
IPERF3_SECONDS = 1
IPERF3_PORT = 5202
PHASES = ('before', 'after')
#: The run measured once more, right after the 'after' one, where neither
#: of the two reached the slow-link floor: a link is slow where it stays
#: slow, not where one moment of the host's other work slowed both runs.
CONFIRM_PHASE = 'again'
#: The receiver's rate (bit/s) of each iperf3 client JSON result given, as
#: awk reads it: exit 0 where none reached ``floor_bps`` (or none held one),
#: 1 where one did.
_ALL_BELOW_AWK = r'''
function judge(text,   at, rate) {
  at = index(text, "\"sum_received\"")
  if (at == 0) return
  text = substr(text, at)
  if (!match(text, /"bits_per_second"[ \t]*:[ \t]*[0-9.eE+]+/)) return
  rate = substr(text, RSTART, RLENGTH)
  sub(/.*:[ \t]*/, "", rate)
  if (rate + 0 >= floor_bps) reached = 1
}
FNR == 1 && NR > 1 { judge(text); text = "" }
{ text = text $0 " " }
END { judge(text); exit reached }
'''
#: A shaper within this fraction below the declared rate is the declared rate
#: (tc rounds rates to its clock).
RATE_ROUNDING = 0.001

#: The load probe's line: phase, start|end, the clock (ns), /proc/stat's
#: first line, /proc/pressure/cpu's first line.
_LOAD = re.compile(r'^hpcnet-host-load (\S+) (start|end): (\d+) (cpu .*?) \| ?(.*)$', re.M)
_SOME_TOTAL = re.compile(r'^some\b.*\btotal=(\d+)')
#: /proc/stat's idle and iowait columns (after the 'cpu' label), of the first eight.
_IDLE_COLUMNS = (3, 4)
_STAT_COLUMNS = 8


class CalibrationError(ValueError):
    '''The calibration did not produce a figure (says which and why).'''


def file_name(phase: str) -> str:
    return f'calibration-iperf3-{phase}.json'


SHAPER_FILE = 'calibration-shaper.txt'
LOG_FILE = 'calibration.log'
#: What a calibrated case keeps in its output directory, as evidence.
FILES = [SHAPER_FILE, LOG_FILE, *(file_name(phase) for phase in (*PHASES, CONFIRM_PHASE))]


def shaper_command(iface: str, launcher: str, num_nodes: int) -> str:
    '''A command printing, from each node, every tc view of ``iface`` that
    hpcnet.parsers.qdiscs reads and the node's address on it, one tagged
    line each.'''
    dev = shlex.quote(iface)
    views = (('shaper', f'tc -j qdisc show dev {dev} 2>&1 | tr -d "\\n"'),
             ('classes', f'tc class show dev {dev} 2>&1 | tr "\\n" ";"'),
             ('filters', f'tc -j filter show dev {dev} 2>&1 | tr -d "\\n"'),
             ('address', f'ip -j -4 addr show dev {dev} 2>&1 | tr -d "\\n"'))
    script = '; '.join(f'printf "hpcnet-{view}: %s %s %s\\n" "$(hostname)" {dev} "$({command})"'
                       for view, command in views)
    return per_node(f'sh -c {shlex.quote(script)}', launcher, num_nodes)


def load_command(phase: str) -> str:
    '''A command reading the host's load over an idle window, on the job's
    first node: one tagged line at each end.'''
    line = (f'printf "hpcnet-host-load {phase} %s: %s %s | %s\\n" "$1" "$(date +%s%N)" '
            '"$(head -n1 /proc/stat)" "$(head -n1 /proc/pressure/cpu 2>/dev/null)"')
    script = f'probe() {{ {line}; }}; probe start; sleep {IDLE_WINDOW_S}; probe end'
    return f'sh -c {shlex.quote(script)}'


def iperf3_command(phase: str, stagedir: str, iface: str, launcher: str) -> str:
    '''The host's load over an idle window, then iperf3 from the job's second
    node to its first, on ``iface``, writing the client's JSON into the stage
    directory: one compound command, so that a redirection takes both.'''
    script = templates.job_script(
        'iperf3-pair', IFACE=iface, PORT=IPERF3_PORT, TIMEOUT_S=30, DURATION_S=IPERF3_SECONDS,
        CONNECT_TIMEOUT_MS=5000, WAIT_STEPS=50,
        RENDEZVOUS=f'{stagedir}/calibration-rendezvous-{phase}',
        CLIENT_JSON=f'{stagedir}/{file_name(phase)}',
        SERVER_LOG=f'{stagedir}/calibration-iperf3-server-{phase}.log')
    return ('{ ' + load_command(phase) + '; '
            + per_node(f'sh -c {shlex.quote(script)}', launcher, 2) + '; }')


def confirm_command(stagedir: str, iface: str, launcher: str, link_rate_bps: int,
                    mtu: int | None, proven: float) -> str:
    '''iperf3 once more (CONFIRM_PHASE) where neither run before and after
    the benchmark reached the slow-link floor: the slow link's confirmation.'''
    floor_bps = Calibration.floor(proven) * tcp_payload_MBps(link_rate_bps, mtu) * 8e6
    return (f'if {all_below_command(stagedir, floor_bps)}; '
            f'then {iperf3_command(CONFIRM_PHASE, stagedir, iface, launcher)}; fi')


def all_below_command(stagedir: str, floor_bps: float) -> str:
    '''A command whose status is 0 where neither iperf3 run before and after
    the benchmark reached ``floor_bps`` (or neither held a rate).'''
    files = ' '.join(shlex.quote(f'{stagedir}/{file_name(phase)}') for phase in PHASES)
    return f'awk -v floor_bps={floor_bps:.0f} {shlex.quote(_ALL_BELOW_AWK)} {files}'


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


@dataclass(frozen=True)
class HostLoad:
    '''The host's load over an idle window: the share (%) of its cores'
    time busy, and of the wall time some task waited for a core (None where
    /proc/pressure/cpu could not be read).'''
    cpu_busy_pct: float
    cpu_stall_pct: float | None

    def busy(self) -> bool:
        return self.cpu_busy_pct >= BUSY_CPU_PCT or (
            self.cpu_stall_pct is not None and self.cpu_stall_pct >= BUSY_STALL_PCT)

    def describe(self) -> str:
        stall = ('' if self.cpu_stall_pct is None
                 else f', some task waiting for a core {self.cpu_stall_pct:.1f} %')
        return f'cores busy {self.cpu_busy_pct:.0f} %{stall}'


def host_load(text: str, phase: str) -> HostLoad | None:
    '''The host's load over the ``phase`` idle window, from its probe's two
    lines; None where the probe did not read both ends.'''
    ends = {}
    for tag, end, clock_ns, stat, pressure in _LOAD.findall(text):
        if tag == phase:
            columns = [int(c) for c in stat.split()[1:_STAT_COLUMNS + 1]]
            total = _SOME_TOTAL.match(pressure.strip())
            ends[end] = (int(clock_ns), columns, int(total.group(1)) if total else None)
    if set(ends) != {'start', 'end'}:
        return None
    (start_ns, start_cpu, start_us), (end_ns, end_cpu, end_us) = ends['start'], ends['end']
    ticks = [after - before for before, after in zip(start_cpu, end_cpu)]
    if end_ns <= start_ns or sum(ticks) <= 0:
        return None
    idle = sum(ticks[column] for column in _IDLE_COLUMNS)
    stall = (None if start_us is None or end_us is None
             else 100.0 * (end_us - start_us) / ((end_ns - start_ns) / 1000))
    return HostLoad(100.0 * (sum(ticks) - idle) / sum(ticks), stall)


@dataclass(frozen=True)
class Calibration:
    '''iperf3 on the case's link before and after it, the shaping on its
    path and the host's load just before each iperf3 run.'''
    before_MBps: float
    after_MBps: float
    shaped_bps: dict        #: host -> the lowest shaped rate toward the path's other end, or None
    shaped_by: dict = field(default_factory=dict)   #: host -> the tc shaper(s) setting that rate
    host_load: dict = field(default_factory=dict)   #: phase -> HostLoad, or None where unread
    #: iperf3 once more after the run, where the two runs were below the
    #: slow-link floor (CONFIRM_PHASE); None where it did not run.
    again_MBps: float | None = None

    @property
    def link_MBps(self) -> float:
        '''The link's rate: the fastest iperf3 run, since a busy host only ever
        slows iperf3 down.'''
        return max(self.before_MBps, self.after_MBps,
                   *(() if self.again_MBps is None else (self.again_MBps,)))

    def over(self, value_MBps: float) -> float:
        '''``value_MBps`` over the link as the two iperf3 runs bracket it: over
        the faster run when above it, over the slower one when below it, 1
        between them.  The host's state during the run lies between the two
        it was measured in: a host that slowed down during the run slows the
        run after it, and a figure it slowed is not held to the faster run.'''
        slower, faster = sorted((self.before_MBps, self.after_MBps))
        if value_MBps > faster:
            return value_MBps / faster
        if value_MBps < slower:
            return value_MBps / slower
        return 1.0

    def ratio(self, value_MBps: float) -> float:
        '''What the case is judged by: over() the iperf3 bracket, like with
        like.  A path slower than declared is not judged by it: iperf3
        measures it slow (slow_link()), and the case fails on that.'''
        return self.over(value_MBps)

    def throttled(self, iface: str, link_rate_bps: int) -> list:
        '''Nodes whose interface shapes the path below the declared rate.'''
        return [f'{host}: {iface} is shaped to {rate / 1e6:g} Mbit/s toward the job\'s other nodes '
                f'(tc {self.shaped_by.get(host, "tbf")}), below the partition\'s link_rate_bps '
                f'({link_rate_bps / 1e6:g} Mbit/s)'
                for host, rate in sorted(self.shaped_bps.items())
                if rate is not None and rate < link_rate_bps * (1 - RATE_ROUNDING)]

    def loads(self) -> list:
        '''(phase, HostLoad) of the phases whose load was read.'''
        return [(phase, self.host_load[phase]) for phase in (*PHASES, CONFIRM_PHASE)
                if self.host_load.get(phase) is not None]

    def host_busy(self) -> bool | None:
        '''Whether the host was busy before either iperf3 run; None where
        no load could be read.'''
        found = self.loads()
        return any(load.busy() for _, load in found) if found else None

    @staticmethod
    def floor(proven: float | None) -> float:
        '''The fraction of the wire's payload rate below which iperf3 says
        something: SLOW_LINK_MARGIN under the proven efficiency, else HOST_FLOOR.'''
        return proven - SLOW_LINK_MARGIN if proven is not None else HOST_FLOOR

    def below_floor(self, link_rate_bps: int, mtu: int | None,
                    proven: float | None = None) -> bool:
        wire = tcp_payload_MBps(link_rate_bps, mtu)
        return min(self.before_MBps, self.after_MBps) < self.floor(proven) * wire

    def host_limited(self, link_rate_bps: int, mtu: int | None,
                     proven: float | None = None) -> bool:
        '''iperf3 below the floor while the host read quiet, on a host not
        proven to emulate the wire: the shortfall is the host's as far as
        anything measured says; the figure is judged over iperf3.'''
        return (proven is None and self.below_floor(link_rate_bps, mtu)
                and self.host_busy() is False)

    def slow_link(self, iface: str, link_rate_bps: int, mtu: int | None,
                  proven: float | None) -> str | None:
        '''Why the link is slow, measured (module docstring), or None.'''
        wire = tcp_payload_MBps(link_rate_bps, mtu)
        if (proven is None or self.host_busy() is not False
                or self.link_MBps >= self.floor(proven) * wire):
            return None
        shaped = self.throttled(iface, link_rate_bps)
        return (f'the link measured slower than the wire: iperf3 {self.link_MBps:.1f} MB/s at '
                f'best, {self.link_MBps / wire:.2f} of the wire\'s payload rate {wire:.1f} MB/s, '
                f'where a clean link measured {proven:.2f} when the testbed came up (slow below '
                f'{self.floor(proven):.2f}), the host quiet ({self.load_figures()}); '
                + (f'on its path: {"; ".join(shaped)}' if shaped else
                   'nothing on its path is shaped below the declared rate'))

    def unproven_shaper(self, iface: str, link_rate_bps: int, mtu: int | None,
                        proven: float | None) -> str | None:
        '''Why a link shaped below the declared rate is not judged where no
        proof says the host emulates the wire, or None.'''
        shaped = self.throttled(iface, link_rate_bps)
        if proven is not None or not shaped:
            return None
        return (f'{MEASUREMENT_WITHHELD} (the links are not proven wire-true, so a slow link '
                f'cannot be told from the host): {"; ".join(shaped)}; '
                f'{self.iperf3_figures(link_rate_bps, mtu)}')

    def iperf3_figures(self, link_rate_bps: int, mtu: int | None) -> str:
        wire = tcp_payload_MBps(link_rate_bps, mtu)
        return (f'iperf3 on the same link reached {self.before_MBps:.1f} MB/s before and '
                f'{self.after_MBps:.1f} MB/s after the run, {self.before_MBps / wire:.2f} and '
                f'{self.after_MBps / wire:.2f} of the wire\'s payload rate {wire:.1f} MB/s '
                f'(emulating the wire needs {HOST_FLOOR:.2f})')

    def load_figures(self) -> str:
        readings = '; '.join(f'{load.describe()} {phase}' for phase, load in self.loads())
        return (f'{readings} (busy from {BUSY_CPU_PCT:g} % busy or {BUSY_STALL_PCT:g} % '
                f'waiting, over {IDLE_WINDOW_S} s idle before each iperf3 run)'
                if readings else 'the host\'s load unread (/proc/stat)')

    def withheld(self, link_rate_bps: int, mtu: int | None,
                 proven: float | None = None) -> str | None:
        '''Why this measurement is withheld (iperf3 below the floor on a busy
        host, or on a host whose load could not be read), or None.'''
        if not self.below_floor(link_rate_bps, mtu, proven) or self.host_busy() is False:
            return None
        why = 'host busy' if self.host_busy() else 'host load unknown'
        return (f'{MEASUREMENT_WITHHELD} ({why}: {self.load_figures()}): '
                f'{self.iperf3_figures(link_rate_bps, mtu)}')

    def host_limited_note(self, link_rate_bps: int, mtu: int | None,
                          proven: float | None = None) -> str | None:
        '''Why a figure of a quiet host below the wire is judged over iperf3, or None.'''
        if not self.host_limited(link_rate_bps, mtu, proven):
            return None
        return (f'the host below the wire and not proven to emulate it, no shaper on the path '
                f'below the declared rate '
                f'({self.load_figures()}): {self.iperf3_figures(link_rate_bps, mtu)}; '
                'judged over iperf3 on the same link')


def read(stagedir: str) -> Calibration:
    '''The calibration a job left in its stage directory.'''
    figures = {phase: iperf3_received_MBps(read_iperf3(f'{stagedir}/{file_name(phase)}'),
                                           f'iperf3 {phase} the run')
               for phase in PHASES}
    again = f'{stagedir}/{file_name(CONFIRM_PHASE)}'
    if os.path.exists(again):
        figures[CONFIRM_PHASE] = iperf3_received_MBps(read_iperf3(again),
                                                      f'iperf3 {CONFIRM_PHASE} after the run')
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
    try:
        with open(f'{stagedir}/{LOG_FILE}', errors='replace') as fp:
            log = fp.read()
    except OSError:
        raise CalibrationError(f'iperf3 wrote no {LOG_FILE}') from None
    return Calibration(figures['before'], figures['after'],
                       {host: rate for host, (rate, _) in rates.items()},
                       {host: what for host, (rate, what) in rates.items() if rate is not None},
                       {phase: host_load(log, phase) for phase in figures},
                       figures.get(CONFIRM_PHASE))
