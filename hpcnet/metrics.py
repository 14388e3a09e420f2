"""The metric catalogue: every performance variable a check defines, once.

One entry per family of names: the test class, the pattern its names
fullmatch, the unit the check reports, which way is better, and the kinds of
partition that can judge it.  Everything that reads a metric reads it here:
the checks take their per-size variable lists from it, reference validation
(hpcnet.acceptance.references.references) refuses names, units and bounds it does not
allow, the baseline bounds the worse side it names, compare and history take
the direction from it.  Direction never comes from a unit's spelling: a
``ratio`` is better higher for an efficiency and lower for the worst pair's
latency over the median's.

Names are built as the checks build them: ``<quantity>_<size_label(size)>``
over the size lists below and in hpcnet.constants.  tests/test_references.py
holds the catalogue to the checks' classes and to recorded reports.  This
module imports no ReFrame: the checks, the validation and the judging all
stand on it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from hpcnet import fabrics
from hpcnet.constants import (CALIBRATED_SUFFIX, COLLECTIVE_SIZES, P2P_BANDWIDTH_SIZES,
                              P2P_LATENCY_SIZES, Unit)
from hpcnet.sizes import size_label

# Sizes (bytes) with their own performance variables; every check keeps the
# whole table in its ``curve`` variable regardless.
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


@dataclass(frozen=True)
class Metric:
    '''One family of performance variables of a test class.'''
    test: str
    pattern: str           #: a regex the variable's name fullmatches
    unit: str              #: as the check reports it
    better: str            #: Better.*
    kinds: frozenset       #: the PartitionKind.* that can judge it

    def matches(self, name: str) -> bool:
        return re.fullmatch(self.pattern, name) is not None

    def judgeable(self, kind: str) -> bool:
        return kind in self.kinds


def _labels(sizes) -> str:
    return '(' + '|'.join(size_label(s) for s in sorted(set(sizes))) + ')'


def _sized(quantities: str, sizes, suffix: str = '') -> str:
    return f'({quantities})_{_labels(sizes)}{suffix}'


def _entries(test: str, *rows, kinds: frozenset = _ANY) -> tuple:
    '''Metric entries of ``test`` from (pattern, unit, better[, kinds]) rows.'''
    return tuple(Metric(test, row[0], row[1], row[2], row[3] if len(row) > 3 else kinds)
                 for row in rows)


#: A bandwidth over iperf3's on the same link (hpcnet.checklib.calibration).
_CALIBRATED = (Unit.RATIO, Better.HIGHER)

CATALOGUE: tuple = (
    *_entries('hpcnet_p2p',
              (_sized('latency', P2P_LATENCY_SIZES), Unit.US, Better.LOWER),
              (_sized('bandwidth', P2P_BANDWIDTH_SIZES), Unit.MBPS, Better.HIGHER),
              # Over the partition's declared wire rate.
              (_sized('efficiency', P2P_BANDWIDTH_SIZES), Unit.RATIO, Better.HIGHER, _NETWORK),
              (_sized('bandwidth', P2P_BANDWIDTH_SIZES, CALIBRATED_SUFFIX), *_CALIBRATED,
               _NETWORK)),
    *_entries('hpcnet_collectives',
              (_sized('avg|max', _COLLECTIVE_NAMES), Unit.US, Better.LOWER)),
    # A pair needs two nodes, and its bytes a link.
    *_entries('hpcnet_pairs',
              ('latency_(median_pair|worst_pair)', Unit.US, Better.LOWER),
              # The worst pair's latency over the median pair's: 1 at best.
              ('latency_worst_over_median', Unit.RATIO, Better.LOWER),
              ('bandwidth_(median_pair|worst_pair)', Unit.MBPS, Better.HIGHER),
              ('bandwidth_(median_pair|worst_pair)' + CALIBRATED_SUFFIX, *_CALIBRATED),
              # The worst pair's bandwidth over the median pair's: 1 at best.
              ('bandwidth_worst_over_median', Unit.RATIO, Better.HIGHER),
              ('(latency|bandwidth)_(outlier_nodes|outlier_links|inconclusive_pairs)',
               Unit.COUNT, Better.LOWER), kinds=_NETWORK),
    # Shared memory has no link to check.
    *_entries('hpcnet_preflight',
              ('link_errors|link_drops', Unit.COUNT, Better.LOWER),
              ('mtu', Unit.BYTES, Better.NONE), kinds=_NETWORK),
    *_entries('hpcnet_iperf3',
              ('throughput', Unit.MBPS, Better.HIGHER),
              ('efficiency', Unit.RATIO, Better.HIGHER),
              ('throughput' + CALIBRATED_SUFFIX, *_CALIBRATED), kinds=_NETWORK),
    # Sockets run over a network interface (loopback on one node) only.
    *_entries('hpcnet_sockets',
              (_sized('rtt_median|rtt_p99', RR_PERF_SIZES), Unit.US, Better.LOWER),
              ('rtt_first', Unit.US, Better.LOWER),
              (_sized('throughput', STREAM_PERF_SIZES), Unit.MBPS, Better.HIGHER),
              (_sized('efficiency', STREAM_PERF_SIZES), Unit.RATIO, Better.HIGHER),
              (_sized('throughput', STREAM_PERF_SIZES, CALIBRATED_SUFFIX), *_CALIBRATED),
              (_sized('udp_receiver_capacity', UDP_STREAM_PERF_SIZES), Unit.MBIT, Better.HIGHER),
              # udp_loss_<rate>Mbit_<size> (hpcnet.checklib.sockets.rate_label: 12p5Mbit).
              (r'udp_loss_\d+(p\d+)?Mbit_' + _labels(UDP_STREAM_PERF_SIZES), Unit.LOST_PCT,
               Better.LOWER), kinds=_NETWORK),
    *_entries('hpcnet_imb',
              (_sized('latency', P2P_LATENCY_SIZES), Unit.US, Better.LOWER),
              (_sized('bandwidth', P2P_BANDWIDTH_SIZES), Unit.MBPS, Better.HIGHER),
              (_sized('bandwidth', P2P_BANDWIDTH_SIZES, CALIBRATED_SUFFIX), *_CALIBRATED,
               _NETWORK),
              (_sized('msgrate', MSG_RATE_SIZES), Unit.MSG_RATE, Better.HIGHER),
              (_sized('avg|max', _COLLECTIVE_NAMES), Unit.US, Better.LOWER)),
    *_entries('hpcnet_imb_nbc',
              (_sized('overall|pure', _COLLECTIVE_NAMES), Unit.US, Better.LOWER),
              (_sized('overlap', _COLLECTIVE_NAMES), Unit.OVERLAP_PCT, Better.HIGHER)),
    *_entries('hpcnet_osu',
              (_sized('latency', P2P_LATENCY_SIZES), Unit.US, Better.LOWER),
              (_sized('bandwidth', P2P_BANDWIDTH_SIZES), Unit.MBPS, Better.HIGHER),
              (_sized('msgrate', MSG_RATE_SIZES), Unit.MSG_RATE, Better.HIGHER),
              (_sized('avg|max', _COLLECTIVE_NAMES), Unit.US, Better.LOWER)),
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
