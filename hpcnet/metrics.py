"""The metric catalogue: every performance variable a check defines, once.

One entry per quantity of a test class: the sizes it is named at, the unit
the check reports, which way is better, its kind (continuous, a count, a
proportion; whether it can be zero), the kinds of partition that can judge
it, and what decides it where its case is judged over iperf3.  Everything
that reads a metric reads it here: the checks name and unit their
performance variables by their entries (Metric.name_for, Metric.unit),
reference validation (hpcnet.acceptance.references.references) refuses names, units and
bounds it does not allow, the baseline bounds the worse side it names,
compare and history take the direction from it.  Direction never comes from
a unit's spelling: a ``ratio`` is better higher for an efficiency and lower
for the worst pair's latency over the median's.

A name is ``<quantity>[_<qualifier>][_<size_label(size)>][_over_iperf3]``.
tests/test_references.py holds the catalogue to the checks' classes and to
recorded reports; tests/test_metric_catalogue.py adds a metric the way a
check does.  This module imports no ReFrame: the checks, the validation and
the judging all stand on it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from hpcnet import fabrics
from hpcnet.sizes import size_label


class Unit:
    US = 'us'
    MBPS = 'MB/s'   # 10^6 bytes per second
    RATIO = 'ratio'
    COUNT = 'count'   # errors, drops, outlier nodes: 0 when healthy
    BYTES = 'bytes'   # a configuration value (MTU): any change is a change
    LOST_PCT = '% lost'          # UDP datagrams lost: lower is better
    OVERLAP_PCT = '% overlap'    # IMB-NBC computation overlap: higher is better
    MSG_RATE = 'msg/s'
    MBIT = 'Mbit/s'  # 10^6 bits per second (iperf3's unit)


#: Units whose figures scale with the host that runs the ranks where a
#: partition's nodes share one host (a busier host: longer times, lower
#: rates, more datagrams lost, less overlap): there a case's figures in them
#: are shown and its ratios over iperf3 decide.  A ratio of two figures of
#: the same run (the worst pair over the median pair) and a count of bad
#: nodes or errors are the host's on both sides of the division, or none of
#: it: they are judged as on any partition.
HOST_SCALED_UNITS = frozenset({Unit.US, Unit.MBPS, Unit.MSG_RATE, Unit.MBIT, Unit.LOST_PCT,
                               Unit.OVERLAP_PCT})

#: Suffix of a metric judged over iperf3 on the same link, where a partition's
#: nodes share the host's cores (hpcnet.checklib.calibration): bandwidth_4MiB_over_iperf3.
CALIBRATED_SUFFIX = '_over_iperf3'
#: The link's own rate as a calibrated case measured it (iperf3, the fastest
#: of its runs) over the wire's TCP payload rate, on a partition proven to
#: emulate the wire: a figure of the case's link_calibration that compare
#: judges like any metric (hpcnet.acceptance.comparison.compare), so that a
#: slower link is found by measuring it.
LINK_OVER_WIRE = 'link_over_wire'
#: 1 where a calibrated case's link measured slower than the wire (below the
#: floor proven at bring-up, in every iperf3 run of the repeat, the host
#: quiet: hpcnet.checklib.calibration.Calibration.slow_link), else 0: a count
#: judged repeat by repeat (hpcnet.acceptance.comparison.countjudge), so a
#: node slow in one allocation of five is "errors where there were none".
LINK_BELOW_WIRE = 'link_below_wire'
#: The checks with calibrated metrics (hpcnet.checklib.calibrated).
_CALIBRATED_TESTS = ('hpcnet_p2p', 'hpcnet_imb', 'hpcnet_imb_nbc', 'hpcnet_iperf3',
                     'hpcnet_pairs', 'hpcnet_sockets')

# Sizes (bytes) with their own performance variables; every check keeps the
# whole table in its ``curve`` variable regardless.
P2P_LATENCY_SIZES = (0, 8)
P2P_BANDWIDTH_SIZES = (65536, 1048576, 4194304)
#: Bytes per rank of the collectives.
COLLECTIVE_SIZES = (8, 65536, 1048576)
#: Socket streams (hpcnet_sockets tcp_stream, tcp_bidir).
STREAM_PERF_SIZES = (64 * 1024, 1024 * 1024)
#: Socket request/response round trips.
RR_PERF_SIZES = (32, 1024)
#: UDP streams, unpaced and at each paced rate.
UDP_STREAM_PERF_SIZES = (1024, 32 * 1024)
#: Message rate: small messages (its figure of merit) and the bandwidth sizes.
MSG_RATE_SIZES = (8,) + P2P_BANDWIDTH_SIZES
#: A barrier has one row, named as the 0 B size.
_COLLECTIVE_NAMES = (0,) + COLLECTIVE_SIZES


class Better:
    '''Which way a metric's value is better.'''
    HIGHER = 'higher'   #: rates, efficiencies, a bandwidth ratio
    LOWER = 'lower'     #: times, counts of errors or culprits, losses
    NONE = 'none'       #: a configuration value (an MTU): any change is a change
    ALL = (HIGHER, LOWER, NONE)


class Kind:
    '''What a metric's values are, for the statistics that judge them.'''
    CONTINUOUS = 'continuous'   #: a time, a rate, a ratio of two: judged by its shift
    COUNT = 'count'             #: errors, culprits: 0 when healthy, judged repeat by repeat
    #: A part of a whole (an efficiency, % lost): judged repeat by repeat
    #: where it can be zero, else by its shift.
    PROPORTION = 'proportion'
    ALL = (CONTINUOUS, COUNT, PROPORTION)


class PartitionKind:
    '''What a partition offers a metric: shared memory of one node, or a
    network (any other fabric: its bytes cross an interface, of one node or
    between nodes).  A metric of the link (an efficiency over the wire, a
    pair matrix, link counters) cannot be judged on shared memory.'''
    SHARED_MEMORY = 'shared memory'
    NETWORK = 'network'
    ALL = (SHARED_MEMORY, NETWORK)

    @staticmethod
    def of(fabric: str) -> str:
        has_link = fabrics.fabric(fabric).has_link
        return PartitionKind.NETWORK if has_link else PartitionKind.SHARED_MEMORY


_ANY = frozenset(PartitionKind.ALL)
_NETWORK = frozenset({PartitionKind.NETWORK})


class CatalogueError(LookupError):
    '''A check names a quantity, a size or a qualifier its entry does not hold.'''


@dataclass(frozen=True)
class Metric:
    '''One quantity of a test class: the performance variables named by it.'''
    test: str
    quantity: str          #: the name's first part: 'latency', 'avg', 'link_errors'
    unit: str              #: as the check reports it
    better: str            #: Better.*
    kinds: frozenset       #: the PartitionKind.* that can judge it
    sizes: tuple = ()      #: the sizes named (size_label); () : the name has no size
    kind: str = Kind.CONTINUOUS
    can_be_zero: bool = False   #: a measured 0 is a value (a count, no loss), not a fault
    qualifier: str = ''    #: a regex between quantity and size (udp_loss_12p5Mbit_1KiB)
    #: The quantity whose ratio over iperf3 (at this metric's size) decides
    #: it where its case is judged over iperf3; '': none of its own (a
    #: latency: the case's ratios together decide).
    judged_over: str = ''
    ratio: bool = False    #: a ratio over iperf3 itself (its name ends in CALIBRATED_SUFFIX)

    @property
    def pattern(self) -> str:
        '''The regex every name of this entry fullmatches.'''
        return self._regex(named=False)

    def _regex(self, named: bool) -> str:
        '''The names' regex, its qualifier and size groups named where ``named``.'''
        qualifier = f'_({"?P<qualifier>" * named}{self.qualifier})' if self.qualifier else ''
        size = f'_({"?P<size>" * named}{_labels(self.sizes)})' if self.sizes else ''
        return self.quantity + qualifier + size + (CALIBRATED_SUFFIX if self.ratio else '')

    def matches(self, name: str) -> bool:
        return re.fullmatch(self.pattern, name) is not None

    def judgeable(self, kind: str) -> bool:
        return kind in self.kinds

    def name_for(self, size: int | None = None, qualifier: str = '') -> str:
        '''The performance variable's name at ``size`` (with ``qualifier``).'''
        parts = [self.quantity]
        if self.qualifier or qualifier:
            parts.append(qualifier)
        if self.sizes or size is not None:
            parts.append(size_label(size) if size is not None else '')
        name = '_'.join(parts) + (CALIBRATED_SUFFIX if self.ratio else '')
        if not self.matches(name):
            raise CatalogueError(f'{name} is not a name of {self.test} {self.quantity} '
                                 f'(hpcnet.metrics: {self.pattern})')
        return name

    def counterpart(self, name: str) -> str | None:
        '''The ratio over iperf3 that decides ``name`` (a name of this entry)
        where its case is judged over iperf3; None where it has none of its own.'''
        found = re.fullmatch(self._regex(named=True), name)
        if self.ratio or not self.judged_over or found is None:
            return None
        parts = [self.judged_over] + [found.group(g) for g in ('qualifier', 'size')
                                      if g in found.groupdict()]
        return '_'.join(parts) + CALIBRATED_SUFFIX


    def figure(self, name: str) -> tuple:
        '''What the value of ``name`` (a name of this entry) is read from: the
        quantity measured (a ratio over iperf3 and an efficiency are its
        bandwidth's or throughput's), its qualifier and its size.  Names of
        one figure move together in a glitch of its measurement.'''
        found = re.fullmatch(self._regex(named=True), name)
        groups = found.groupdict() if found is not None else {}
        return (self.judged_over or self.quantity, groups.get('qualifier') or '',
                groups.get('size') or '')


def _labels(sizes) -> str:
    return '|'.join(size_label(s) for s in sorted(set(sizes)))


def _entries(test: str, quantities: str, unit: str, better: str, kinds: frozenset = _ANY,
             **fields) -> tuple:
    '''Entries of ``test``, one per quantity of ``quantities`` (space-separated),
    and for a quantity judged over itself (``judged_over='='``) its ratio over
    iperf3, a network's only.'''
    judged_over = fields.pop('judged_over', '')
    over_itself = judged_over == '='
    out = []
    for quantity in quantities.split():
        out.append(Metric(test, quantity, unit, better, kinds,
                          judged_over=quantity if over_itself else judged_over, **fields))
        if over_itself:
            out.append(Metric(test, quantity, Unit.RATIO, Better.HIGHER, _NETWORK,
                              fields.get('sizes', ()), ratio=True))
    return tuple(out)


_COUNT = dict(kind=Kind.COUNT, can_be_zero=True)
_PAIR = ('median_pair', 'worst_pair')

CATALOGUE: tuple = (
    *(entry for test in _CALIBRATED_TESTS
      for entry in _entries(test, LINK_OVER_WIRE, Unit.RATIO, Better.HIGHER, _NETWORK)),
    *(entry for test in _CALIBRATED_TESTS
      for entry in _entries(test, LINK_BELOW_WIRE, Unit.COUNT, Better.LOWER, _NETWORK, **_COUNT)),
    *_entries('hpcnet_p2p', 'latency', Unit.US, Better.LOWER, sizes=P2P_LATENCY_SIZES),
    *_entries('hpcnet_p2p', 'bandwidth', Unit.MBPS, Better.HIGHER, sizes=P2P_BANDWIDTH_SIZES,
              judged_over='='),
    # Over the partition's declared wire rate.
    *_entries('hpcnet_p2p', 'efficiency', Unit.RATIO, Better.HIGHER, _NETWORK,
              sizes=P2P_BANDWIDTH_SIZES, kind=Kind.PROPORTION, judged_over='bandwidth'),
    *_entries('hpcnet_collectives', 'avg max', Unit.US, Better.LOWER, sizes=_COLLECTIVE_NAMES),
    # A pair needs two nodes, and its bytes a link.
    *_entries('hpcnet_pairs', ' '.join(f'latency_{p}' for p in _PAIR), Unit.US, Better.LOWER,
              _NETWORK),
    # The worst pair's latency over the median pair's: 1 at best.
    *_entries('hpcnet_pairs', 'latency_worst_over_median', Unit.RATIO, Better.LOWER, _NETWORK),
    *_entries('hpcnet_pairs', ' '.join(f'bandwidth_{p}' for p in _PAIR), Unit.MBPS,
              Better.HIGHER, _NETWORK, judged_over='='),
    # The worst pair's bandwidth over the median pair's: 1 at best.
    *_entries('hpcnet_pairs', 'bandwidth_worst_over_median', Unit.RATIO, Better.HIGHER, _NETWORK),
    *_entries('hpcnet_pairs', ' '.join(f'{q}_{c}' for q in ('latency', 'bandwidth') for c in
                                       ('outlier_nodes', 'outlier_links', 'inconclusive_pairs',
                                        'outlier_uplinks')),
              Unit.COUNT, Better.LOWER, _NETWORK, **_COUNT),
    # Shared memory has no link to check.
    *_entries('hpcnet_preflight', 'link_errors link_drops', Unit.COUNT, Better.LOWER, _NETWORK,
              **_COUNT),
    *_entries('hpcnet_preflight', 'mtu', Unit.BYTES, Better.NONE, _NETWORK),
    *_entries('hpcnet_iperf3', 'throughput', Unit.MBPS, Better.HIGHER, _NETWORK, judged_over='='),
    *_entries('hpcnet_iperf3', 'efficiency', Unit.RATIO, Better.HIGHER, _NETWORK,
              kind=Kind.PROPORTION, judged_over='throughput'),
    # Sockets run over a network interface (loopback on one node) only.
    *_entries('hpcnet_sockets', 'rtt_median rtt_p99', Unit.US, Better.LOWER, _NETWORK,
              sizes=RR_PERF_SIZES),
    *_entries('hpcnet_sockets', 'rtt_first', Unit.US, Better.LOWER, _NETWORK),
    *_entries('hpcnet_sockets', 'throughput', Unit.MBPS, Better.HIGHER, _NETWORK,
              sizes=STREAM_PERF_SIZES, judged_over='='),
    *_entries('hpcnet_sockets', 'efficiency', Unit.RATIO, Better.HIGHER, _NETWORK,
              sizes=STREAM_PERF_SIZES, kind=Kind.PROPORTION, judged_over='throughput'),
    *_entries('hpcnet_sockets', 'udp_receiver_capacity', Unit.MBIT, Better.HIGHER, _NETWORK,
              sizes=UDP_STREAM_PERF_SIZES),
    # udp_loss_<rate>Mbit_<size> (hpcnet.checklib.sockets.rate_label: 12p5Mbit).
    *_entries('hpcnet_sockets', 'udp_loss', Unit.LOST_PCT, Better.LOWER, _NETWORK,
              sizes=UDP_STREAM_PERF_SIZES, qualifier=r'\d+(p\d+)?Mbit', kind=Kind.PROPORTION,
              can_be_zero=True),
    # IMB prints 0.00 us at 0 bytes on a fast path.
    *_entries('hpcnet_imb', 'latency', Unit.US, Better.LOWER, sizes=P2P_LATENCY_SIZES,
              can_be_zero=True),
    *_entries('hpcnet_imb', 'bandwidth', Unit.MBPS, Better.HIGHER, sizes=P2P_BANDWIDTH_SIZES,
              judged_over='='),
    *_entries('hpcnet_imb', 'msgrate', Unit.MSG_RATE, Better.HIGHER, sizes=MSG_RATE_SIZES),
    *_entries('hpcnet_imb', 'avg max', Unit.US, Better.LOWER, sizes=_COLLECTIVE_NAMES),
    *_entries('hpcnet_imb_nbc', 'overall pure', Unit.US, Better.LOWER, sizes=_COLLECTIVE_NAMES),
    *_entries('hpcnet_imb_nbc', 'overlap', Unit.OVERLAP_PCT, Better.HIGHER,
              sizes=_COLLECTIVE_NAMES, kind=Kind.PROPORTION, can_be_zero=True),
    *_entries('hpcnet_osu', 'latency', Unit.US, Better.LOWER, sizes=P2P_LATENCY_SIZES),
    *_entries('hpcnet_osu', 'bandwidth', Unit.MBPS, Better.HIGHER, sizes=P2P_BANDWIDTH_SIZES),
    *_entries('hpcnet_osu', 'msgrate', Unit.MSG_RATE, Better.HIGHER, sizes=MSG_RATE_SIZES),
    *_entries('hpcnet_osu', 'avg max', Unit.US, Better.LOWER, sizes=_COLLECTIVE_NAMES),
)


def class_of(test: str) -> str:
    '''The class of a test name as a report gives it ('hpcnet_p2p %mode=bw
    /1a2b3c4d' -> 'hpcnet_p2p').'''
    return (test.split() or [test])[0]


def classes() -> list:
    return sorted({m.test for m in CATALOGUE})


def of_test(test: str) -> tuple:
    '''The entries of a test class (or of a test name, class_of()).'''
    cls = class_of(test)
    return tuple(m for m in CATALOGUE if m.test == cls)


def lookup(test: str, metric: str) -> Metric | None:
    '''The entry of ``metric`` of ``test`` (a class or a report's test name),
    or None where the catalogue does not know it: then nothing may guess its
    direction or unit.'''
    return next((m for m in of_test(test) if m.matches(metric)), None)


def metric(test: str, quantity: str, ratio: bool = False) -> Metric:
    '''The entry of ``quantity`` of ``test`` (its ratio over iperf3 where
    ``ratio``): what a check names and units a performance variable by.'''
    found = next((m for m in of_test(test) if m.quantity == quantity and m.ratio == ratio), None)
    if found is None:
        raise CatalogueError(f'{class_of(test)} has no quantity {quantity!r} in the metric '
                             f'catalogue (hpcnet.metrics; its quantities: '
                             f'{", ".join(sorted({m.quantity for m in of_test(test)}))})')
    return found


def ratios_over_iperf3(test: str, names) -> set:
    '''The ratios over iperf3 among the metric ``names`` of one case of
    ``test``: a case with any is judged over iperf3 on its own link, and its
    other metrics are shown, not judged.'''
    return {name for name in names if (entry := lookup(test, name)) is not None and entry.ratio}


def counterpart(test: str, name: str, ratios: set) -> str | None:
    '''What decides ``name`` of a case of ``test`` in its stead where the
    case is judged over iperf3 (``ratios``: ratios_over_iperf3 of the case):
    the ratio its entry names (an efficiency: its bandwidth's), or, for a
    metric with none in a unit that scales with the host (a latency: the
    host's, over a veth), the case's ratios together; None for a ratio
    itself, a scale-free metric (HOST_SCALED_UNITS) and a case not judged
    over iperf3.'''
    entry = lookup(test, name)
    if not ratios or name in ratios or (entry is not None and entry.ratio):
        return None
    own = entry.counterpart(name) if entry is not None else None
    if own in ratios:
        return own
    if entry is not None and entry.unit not in HOST_SCALED_UNITS and not entry.judged_over:
        return None
    return f'the case\'s ratios over iperf3 ({", ".join(sorted(ratios))})'


def figure(test: str, name: str) -> tuple:
    '''What the value of metric ``name`` of ``test`` is read from
    (Metric.figure); a name the catalogue does not know is a figure of its own.'''
    entry = lookup(test, name)
    return entry.figure(name) if entry is not None else (name, '', '')


def is_known(test: str, metric: str) -> bool:
    return lookup(test, metric) is not None


def higher_is_better(test: str, metric: str) -> bool | None:
    '''Whether higher is better for ``metric`` of ``test``; None where it
    has no better side, and where the catalogue does not know it: a reader
    then treats any change as a change for the worse, never guesses a side.'''
    entry = lookup(test, metric)
    if entry is None or entry.better == Better.NONE:
        return None
    return entry.better == Better.HIGHER


def not_in_catalogue(test: str, metric: str) -> str:
    '''Why a metric without an entry is not judged, in one line.'''
    return (f'{metric} of {class_of(test)} is not in the metric catalogue (hpcnet.metrics): '
            'its unit and better direction are unknown, and a guessed direction turns a '
            'regression into an improvement')


# Units one metric may be recorded in across suite versions: (quantity,
# factor to that quantity's base unit).  Bit and byte rates are one quantity
# (8 bits a byte); a ratio, a count or a percentage converts to nothing else.
_UNITS = {
    'ns': ('time', 1e-9), 'us': ('time', 1e-6), 'usec': ('time', 1e-6), 'ms': ('time', 1e-3),
    's': ('time', 1.0),
    'KB/s': ('data rate', 1e3), 'MB/s': ('data rate', 1e6), 'GB/s': ('data rate', 1e9),
    'Kbit/s': ('data rate', 1e3 / 8), 'Mbit/s': ('data rate', 1e6 / 8),
    'Gbit/s': ('data rate', 1e9 / 8),
}


class UnitError(ValueError):
    '''Two units that measure different things.'''


def conversion(from_unit: str, to_unit: str) -> float:
    '''The factor that turns a value in ``from_unit`` into ``to_unit``
    (Gbit/s -> Mbit/s: 1000); UnitError where they measure different things
    or either is not a known unit of time or data rate.'''
    if from_unit == to_unit:
        return 1.0
    source, target = _UNITS.get(from_unit), _UNITS.get(to_unit)
    if source is None or target is None or source[0] != target[0]:
        raise UnitError(f'{from_unit!r} does not convert to {to_unit!r} (convertible: '
                        f'times {", ".join(u for u, q in _UNITS.items() if q[0] == "time")}; '
                        f'data rates {", ".join(u for u, q in _UNITS.items() if q[0] != "time")})')
    return source[1] / target[1]


@dataclass(frozen=True)
class UnitLimits:
    '''What a reference value in a unit can be, each limit with its reason.
    No unit of the suite measures a negative value (a time, a rate, a
    count, a ratio of two rates or times, a percentage, a size).'''
    #: The largest value a reference may hold: above it, no measurement of this suite.
    most: float
    most_reason: str
    #: The widest absolute threshold of a reference of 0 (ReFrame reads a
    #: zero reference's thresholds as absolute values); None: no metric in
    #: this unit has a reference of 0.
    zero_slack: float | None = None
    zero_slack_reason: str = ''


_TEN_TB_PER_S = ('no link or memory a pair of ranks shares moves 10 TB/s (NDR InfiniBand: '
                 '50 GB/s; a socket\'s memory: a few hundred GB/s)')

UNIT_LIMITS = {
    Unit.US: UnitLimits(
        1e5, 'small messages and round trips take microseconds to milliseconds, never a '
             'tenth of a second',
        10.0, 'a 0 is the fast path IMB prints as 0.00; 10 us more is a trip through a '
              'network stack, not the fast path'),
    Unit.MBPS: UnitLimits(1e7, _TEN_TB_PER_S),
    Unit.MBIT: UnitLimits(8e7, _TEN_TB_PER_S),
    Unit.MSG_RATE: UnitLimits(1e10, 'a NIC posts a few hundred million messages a '
                                    'second, shared memory a few billion, none ten billion'),
    Unit.RATIO: UnitLimits(100.0, 'two measurements of one quantity 100 times apart are a '
                                  'broken measurement, not a reference'),
    Unit.COUNT: UnitLimits(
        1e6, 'a million errors, drops or culprits in one case is a broken counter',
        10.0, 'more than 10 errors, drops or culprits in one case where a healthy one has none '
              'is a fault, not noise'),
    Unit.BYTES: UnitLimits(65536.0, 'an MTU is at most 65,536 bytes (the loopback\'s)'),
    Unit.LOST_PCT: UnitLimits(
        100.0, 'a share is at most 100 %',
        1.0, 'losing more than 1 % of the datagrams of a paced rate the link carries is a '
             'fault (the check\'s own sanity fails above 0.1 %)'),
    Unit.OVERLAP_PCT: UnitLimits(100.0, 'a share is at most 100 %'),
}

#: Collective times grow with the partition: an alltoall of 1 MiB per rank
#: over 4,096 Gigabit Ethernet nodes moves 4 GiB per node, ~37 s.
COLLECTIVE_QUANTITIES = ('avg', 'max', 'overall', 'pure')
COLLECTIVE_MOST_US = 6e7
COLLECTIVE_MOST_REASON = ('an alltoall of 1 MiB per rank over 4,096 Gigabit Ethernet nodes '
                          'takes ~37 s, no collective of the suite a minute')


def most(entry: Metric) -> tuple:
    '''(the largest value a reference of ``entry`` may hold, why); (None,
    '') for a unit without limits.'''
    if entry.unit == Unit.US and entry.quantity in COLLECTIVE_QUANTITIES:
        return COLLECTIVE_MOST_US, COLLECTIVE_MOST_REASON
    limits = UNIT_LIMITS.get(entry.unit)
    return (limits.most, limits.most_reason) if limits else (None, '')
