"""The performance variables each check defines, as name patterns.

Reference files are validated against this table before every run, without
loading the checks (ReFrame's loader takes seconds): a typo such as
``hpcnet_p2pp`` or ``bandwith_4MiB`` then fails with the valid names instead
of leaving a reference that never applies.  Names are built as the checks
build them: ``<quantity>_<size_label(size)>`` over the size lists in
hpcnet.constants, hpcnet.checklib.benchlib and hpcnet.checklib.sockets (tests/test_references.py
holds the table to the checks' classes and to the recorded report).
"""
from __future__ import annotations

import re

from hpcnet.constants import CALIBRATED_SUFFIX, COLLECTIVE_SIZES, P2P_BANDWIDTH_SIZES, P2P_LATENCY_SIZES
from hpcnet.sizes import size_label

# As hpcnet.checklib.sockets and hpcnet.checklib.benchlib define them; not imported from there
# because both import ReFrame and the check framework, which this table (read
# by hpcnet.acceptance.references, itself imported by the framework) must not.
_STREAM_PERF_SIZES = (64 * 1024, 1024 * 1024)
_RR_PERF_SIZES = (32, 1024)
_UDP_STREAM_PERF_SIZES = (1024, 32 * 1024)
_MSG_RATE_SIZES = (8,) + P2P_BANDWIDTH_SIZES
#: A barrier has one row, named as the 0 B size.
_COLLECTIVE_NAMES = (0,) + COLLECTIVE_SIZES


def _labels(sizes) -> str:
    return '(' + '|'.join(size_label(s) for s in sorted(set(sizes))) + ')'


def _sizes(quantities: str, sizes) -> str:
    return f'({quantities})_{_labels(sizes)}'


#: {test class: [regex that a performance variable name fullmatches]}.
METRICS: dict = {
    'hpcnet_p2p': [_sizes('latency', P2P_LATENCY_SIZES),
                   _sizes('bandwidth|efficiency', P2P_BANDWIDTH_SIZES),
                   _sizes('bandwidth', P2P_BANDWIDTH_SIZES) + CALIBRATED_SUFFIX],
    'hpcnet_collectives': [_sizes('avg|max', _COLLECTIVE_NAMES)],
    'hpcnet_pairs': ['(latency|bandwidth)_(median_pair|worst_pair|worst_over_median|outlier_nodes|'
                     'outlier_links|inconclusive_pairs)'],
    'hpcnet_preflight': ['link_errors', 'link_drops', 'mtu'],
    'hpcnet_iperf3': ['throughput', 'efficiency', 'throughput' + CALIBRATED_SUFFIX],
    'hpcnet_sockets': [_sizes('rtt_median|rtt_p99', _RR_PERF_SIZES), 'rtt_first',
                       _sizes('throughput|efficiency', _STREAM_PERF_SIZES),
                       _sizes('throughput', _STREAM_PERF_SIZES) + CALIBRATED_SUFFIX,
                       _sizes('udp_receiver_capacity', _UDP_STREAM_PERF_SIZES),
                       # udp_loss_<rate>Mbit_<size> (hpcnet.checklib.sockets.rate_label: 12p5Mbit).
                       r'udp_loss_\d+(p\d+)?Mbit_' + _labels(_UDP_STREAM_PERF_SIZES)],
    'hpcnet_imb': [_sizes('latency', P2P_LATENCY_SIZES), _sizes('bandwidth', P2P_BANDWIDTH_SIZES),
                   _sizes('bandwidth', P2P_BANDWIDTH_SIZES) + CALIBRATED_SUFFIX,
                   _sizes('msgrate', _MSG_RATE_SIZES), _sizes('avg|max', _COLLECTIVE_NAMES)],
    'hpcnet_imb_nbc': [_sizes('overall|pure|overlap', _COLLECTIVE_NAMES)],
    'hpcnet_osu': [_sizes('latency', P2P_LATENCY_SIZES), _sizes('bandwidth', P2P_BANDWIDTH_SIZES),
                   _sizes('msgrate', _MSG_RATE_SIZES), _sizes('avg|max', _COLLECTIVE_NAMES)],
}


def is_known(test: str, metric: str, table: dict = METRICS) -> bool:
    return any(re.fullmatch(p, metric) for p in table.get(test, ()))
