"""The socket kernel (src/sockets.c) as the checks use it: its tests, the
sizes with performance variables, and the rules its output is judged by.

Pure functions of the test and the parsed output; the ReFrame checks in
checks/sockets.py and checks/iperf3.py wire them into the pipeline.
"""
from __future__ import annotations

import math

from reframe.core.exceptions import SanityError

from hpcnet import sanity
from hpcnet.constants import Unit

#: The tests of the kernel (src/sockets.c --test).
TCP_STREAM = 'tcp_stream'
TCP_BIDIR = 'tcp_bidir'
TCP_RR = 'tcp_rr'
UDP_STREAM = 'udp_stream'
UDP_RR = 'udp_rr'
SOCKET_TESTS = (TCP_STREAM, TCP_BIDIR, TCP_RR, UDP_STREAM, UDP_RR)
STREAM_TESTS = (TCP_STREAM, TCP_BIDIR)
RR_TESTS = (TCP_RR, UDP_RR)
UDP_TESTS = (UDP_STREAM, UDP_RR)

#: Kernel name in its output ("hpcnet-kernel: sockets 1").
KERNEL = 'sockets'

#: Sizes (bytes) with their own performance variables; the whole table is
#: kept in the ``curve`` variable regardless.
STREAM_PERF_SIZES = (64 * 1024, 1024 * 1024)
RR_PERF_SIZES = (32, 1024)
UDP_STREAM_PERF_SIZES = (1024, 32 * 1024)

#: The column each test's throughput performance variables read.
THROUGHPUT_COLUMN = {TCP_STREAM: 'recv_MBps', TCP_BIDIR: 'total_recv_MBps',
                     UDP_STREAM: 'recv_MBps'}
#: Link directions a test loads at once (efficiency denominator).
DIRECTIONS = {TCP_STREAM: 1, TCP_BIDIR: 2, UDP_STREAM: 1}

#: Columns that may be 0 (losses); every other column must be > 0.
ZERO_ALLOWED_COLUMNS = frozenset({'lost_pkts', 'loss_pct', 'out_of_order', 'lost'})

#: Unit of packet loss.
PERCENT = Unit.LOST_PCT

#: Loopback sustains this paced UDP payload rate without loss (Mbit/s).
LOCAL_UDP_RATE_MBPS = 2000.0


def bytes_sent_by_host(test: str, client: str, server: str, rows) -> dict:
    '''Payload each end sent that reached the other end, by host (lower
    bounds: rr warm-up and first transactions are not counted).'''
    if test == TCP_STREAM:
        sent = {client: sum(r['bytes_received'] for r in rows), server: 0}
    elif test == TCP_BIDIR:
        sent = {client: sum(r['c2s_bytes'] for r in rows),
                server: sum(r['s2c_bytes'] for r in rows)}
    elif test == UDP_STREAM:
        sent = {client: sum(r['recv_pkts'] * r['size_bytes'] for r in rows), server: 0}
    else:
        each = sum(r['iterations'] * r['size_bytes'] for r in rows)
        sent = {client: each, server: each}
    if client == server:
        return {client: int(sum(sent.values()))}
    return {h: int(v) for h, v in sent.items()}


def check_output(out, test: str, sizes: tuple, max_loss_pct: float,
                 udp_rate_mbps: float | None, validate: bool) -> None:
    '''The kernel ran ``test`` at every size, its values are sane, losses
    stay under ``max_loss_pct``, the pacing and validation are as asked.'''
    for key, want in (('test', test), ('transport', 'udp' if test in UDP_TESTS else 'tcp')):
        if out.header.get(key) != want:
            raise SanityError(f'kernel output says {key}: {out.header.get(key)!r}, '
                              f'expected {want!r}')
    sanity.check_sizes(out.sizes, sizes)
    with sanity.sanity_from_output_errors():
        out.require_finite_positive(out.columns, nonnegative=ZERO_ALLOWED_COLUMNS & set(out.columns),
                                    what=test)
    for row in out.rows:
        if 'loss_pct' in row and row['loss_pct'] > max_loss_pct:
            raise SanityError(f'{test} lost {row["loss_pct"]:g} % at {int(row["size_bytes"])} B '
                              f'(more than max_loss_pct {max_loss_pct:g} %)')
    if test == UDP_STREAM:
        rate = out.header_float('rate-mbps')
        if not math.isclose(rate, udp_rate_mbps, rel_tol=1e-6):
            raise SanityError(f'kernel paced at {rate:g} Mbit/s, asked for {udp_rate_mbps:g}')
    if test in RR_TESTS:
        first = out.header_float('first-rtt-us')
        if not (math.isfinite(first) and first > 0):
            raise SanityError(f'first-rtt-us is {first} (must be > 0)')
    if validate and out.validated != len(sizes):
        raise SanityError(f'payload validation: {out.header.get("validation")!r}, '
                          f'expected passed {len(sizes)}')
