"""The socket kernel (src/sockets.c) as the checks use it: its tests and
the rules its output is judged by.

Pure functions of the test and the parsed output; the ReFrame checks in
checks/sockets.py and checks/iperf3.py wire them into the pipeline.
"""
from __future__ import annotations

import math

from reframe.core.exceptions import SanityError

from hpcnet.checklib import sanity

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

# The sizes with their own performance variables are the metric catalogue's
# (hpcnet.metrics).  udp_stream runs its UDP_STREAM_PERF_SIZES also at its
# paced rates (``--paced-sizes``): a bit rate at tiny datagrams is a packet
# rate that neither a link nor a host carries.

#: The column each test's throughput performance variables read.
THROUGHPUT_COLUMN = {TCP_STREAM: 'recv_MBps', TCP_BIDIR: 'total_recv_MBps'}
#: Link directions a test loads at once (efficiency denominator).
DIRECTIONS = {TCP_STREAM: 1, TCP_BIDIR: 2, UDP_STREAM: 1}

#: Columns that may be 0 (losses; udp_stream's rate 0 = unpaced); every
#: other column must be > 0.
ZERO_ALLOWED_COLUMNS = frozenset({'lost_pkts', 'loss_pct', 'out_of_order', 'lost', 'rate_mbps'})


#: udp_stream paced rates (Mbit/s of payload) over loopback, which has no
#: link rate: stated fixed rates, well below what a loopback receiver on a
#: small host takes in (about 4,700 Mbit/s unpaced at 1 KiB on a 2-core VM,
#: docs/measurements.md), so that a loss there is a fault, not the CPU.
LOCAL_UDP_RATES_MBPS = (100.0, 500.0)
#: udp_stream paced rates across a link: these fractions of its wire rate,
#: well inside the payload share of the wire (0.94 for 1 KiB datagrams on
#: Ethernet), so the link carries them with room for the sender's bursts.
UDP_RATE_FRACTIONS = (0.25, 0.5)
#: Highest loss (%) at a paced rate the link carries: a healthy link loses
#: none; the bound only leaves room for a stray drop in a long run.
MAX_PACED_LOSS_PCT = 0.1
#: A paced run must send at least this fraction of its stated rate, or the
#: run tested no rate worth the name (the host could not keep the schedule).
#: Not closer to 1: a run a stalled host paced a little slower still judges
#: a rate the link carries, and a busy host would otherwise fail the case.
MIN_RATE_REACHED = 0.5


def udp_rates_from_link(link_rate_bps: float, fractions) -> tuple:
    '''Paced rates (Mbit/s, whole, ascending, distinct) as fractions of a
    wire rate.'''
    return tuple(sorted({max(1.0, float(round(f * float(link_rate_bps) / 1e6)))
                         for f in fractions}))


def rate_label(rate_mbps: float) -> str:
    '''A paced rate in a metric name: ``500Mbit``, ``2p5Mbit``.'''
    return f'{rate_mbps:g}'.replace('.', 'p') + 'Mbit'


def kernel_rates_arg(rates) -> str:
    '''``--rate-mbps`` of the kernel: the paced rates and 0 (unpaced: the
    receiver's capacity), as the kernel prints them back.'''
    return ','.join(f'{r:.10g}' for r in sorted(set(rates))) + ',0'


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
                 udp_rates_mbps: tuple | None, validate: bool,
                 paced_sizes: tuple = (), max_paced_loss_pct: float = MAX_PACED_LOSS_PCT) -> None:
    '''The kernel ran ``test`` at every size, its values are sane, and the
    pacing and validation are as asked.  udp_rr: losses stay under
    ``max_loss_pct``.  udp_stream: every size ran unpaced (the receiver's
    capacity: its loss is not judged, an unpaced sender outruns any
    receiver), and ``paced_sizes`` at each of ``udp_rates_mbps``, where the
    sender must reach the rate and the loss stay under ``max_paced_loss_pct``.'''
    for key, want in (('test', test), ('transport', 'udp' if test in UDP_TESTS else 'tcp')):
        if out.header.get(key) != want:
            raise SanityError(f'kernel output says {key}: {out.header.get(key)!r}, '
                              f'expected {want!r}')
    sanity.check_sizes(out.sizes, sizes)
    with sanity.sanity_from_output_errors():
        out.require_finite_positive(out.columns, nonnegative=ZERO_ALLOWED_COLUMNS & set(out.columns),
                                    what=test)
    if test == UDP_STREAM:
        check_udp_stream(out, sizes, tuple(udp_rates_mbps or ()), tuple(paced_sizes),
                         max_paced_loss_pct)
    else:
        for row in out.rows:
            if 'loss_pct' in row and row['loss_pct'] > max_loss_pct:
                raise SanityError(f'{test} lost {row["loss_pct"]:g} % at {int(row["size_bytes"])} B '
                                  f'(more than max_loss_pct {max_loss_pct:g} %)')
    if test in RR_TESTS:
        first = out.header_float('first-rtt-us')
        if not (math.isfinite(first) and first > 0):
            raise SanityError(f'first-rtt-us is {first} (must be > 0)')
    if validate and out.validated != len(out.rows):
        raise SanityError(f'payload validation: {out.header.get("validation")!r}, '
                          f'expected passed {len(out.rows)} (one per row)')


def check_udp_stream(out, sizes: tuple, rates: tuple, paced_sizes: tuple,
                     max_paced_loss_pct: float) -> None:
    '''udp_stream's runs are those asked; loss is judged at the paced rates
    only (see :func:`check_output`).'''
    said = [float(r) for r in out.header.get('rate-mbps', '').split(',') if r]
    want = sorted(set(rates)) + [0.0]
    if len(said) != len(want) or not all(math.isclose(a, b, rel_tol=1e-9)
                                         for a, b in zip(said, want)):
        raise SanityError(f'kernel paced at rate-mbps: {out.header.get("rate-mbps")!r}, '
                          f'asked for {",".join(f"{r:g}" for r in want)}')
    runs = {(int(r['size_bytes']), float(r['rate_mbps'])) for r in out.rows}
    expected = {(s, 0.0) for s in sizes} | {(s, float(r)) for s in paced_sizes for r in rates}
    if runs != expected or len(runs) != len(out.rows):
        missing = sorted(expected - runs)
        extra = sorted(runs - expected)
        raise SanityError('udp_stream runs (size B, Mbit/s) are not those asked: '
                          f'missing {missing or "none"}, unexpected {extra or "none"}'
                          + ('' if len(runs) == len(out.rows) else ', some twice'))
    for row in out.rows:
        rate = float(row['rate_mbps'])
        if rate == 0:
            continue
        size = int(row['size_bytes'])
        sent = float(row['send_MBps']) * 8
        if sent < MIN_RATE_REACHED * rate:
            raise SanityError(f'udp_stream at {size} B sent {sent:.1f} Mbit/s, less than '
                              f'{MIN_RATE_REACHED:g} of its paced rate {rate:g} Mbit/s: the host '
                              'could not keep the schedule, so the rate was not tested')
        if row['loss_pct'] > max_paced_loss_pct:
            raise SanityError(f'udp_stream lost {row["loss_pct"]:g} % at {size} B paced at '
                              f'{rate:g} Mbit/s (sent {sent:.1f}), a rate the link carries '
                              f'(more than max_paced_loss_pct {max_paced_loss_pct:g} %)')
