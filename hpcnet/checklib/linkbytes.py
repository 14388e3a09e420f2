"""The least traffic a benchmark's run puts on each node's interface: the
link proof of the runs whose per-node bytes the MPI library decides
(collectives) or the benchmark's defaults decide (OSU, IMB).

Each bound is a lower bound for ANY correct algorithm, derived from what
must leave or reach a rank (information that exists only there, or that
only others hold), summed over the sizes and calls the run made.  Headers,
acknowledgements, warm-ups the output does not count, and other traffic on
the interface only add to the counters, never subtract.

Assumptions, stated once:

- every message between two ranks crosses the interface: one rank per node,
  or ranks of one host talking over that interface (local:tcp, loopback);
- MPI libraries send payload as it is (no compression), so what a rank sends
  does not depend on the values in the buffers; a bound proved for some
  values then holds for the constant buffers the benchmarks use;
- a reduction's information argument sets the other ranks' vectors to 0:
  x + 0 = x for every float but -0 and NaN (the sum keeps each element).

Per call, p ranks, m bytes as the benchmark defines its size (per rank
*lower bound*, "tx" sent, "rx" received):

=============== ============================ =============================
operation       m is                         bound per rank
=============== ============================ =============================
barrier         (no payload)                 a packet out and in (below)
bcast           the bytes broadcast          root tx >= m; others rx >= m
reduce          each rank's vector           others tx >= m; root rx >= m
allreduce       each rank's vector           tx >= m and rx >= m
gather          each rank's block            others tx >= m; root rx >= (p-1) m
allgather       each rank's block            tx >= m; rx >= (p-1) m
alltoall        the block to each rank       tx >= (p-1) m; rx >= (p-1) m
reduce_scatter  the whole vector, block b_i  tx >= m - b_i; rx >= b_i
=============== ============================ =============================

Why: bcast's data exists only at the root and every other rank must end
with all of it.  A reduction's result on rank j, with every other input 0,
is rank i's vector: all m bytes of it must leave i (allreduce, reduce to a
root) and reach j; so each rank also receives m (allreduce), the root m
(reduce).  The bandwidth-optimal allreduce (reduce-scatter + allgather,
Patarasuk & Yuan 2009) sends 2 (p-1)/p m per rank: m lies between its
reduce-scatter half, (p-1)/p m, and that, for every p >= 2, and p = 2
meets it exactly (payload only: the counters also see headers).
Gather/allgather/alltoall move distinct blocks that only their owner
holds.  A reduce_scatter rank must send its share of every other rank's
block (m - b_i) and receive, already summed or not, its own (b_i).

Where the root moves from call to call (IMB's Bcast, Reduce, Gather) or is
not known, each rank is root in some calls and not in others: what holds
for either role is that it carries (tx + rx) the smaller of the two, m.

A barrier carries no payload but cannot complete without each rank telling
the others it arrived and hearing that they did: at least one message out
and one in per barrier.  Messages of consecutive barriers may share a packet,
but not three: a rank's message of barrier k must have left before any other
rank leaves barrier k, which comes before that rank's k+1 message and so
before this rank can finish k+1 and send for k+2 (and the same for what
it receives).  So n barriers in a row are at least ceil(n / 2) packets each
way per rank.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields

from hpcnet.constants import Collective
from hpcnet.sizes import size_label


@dataclass(frozen=True)
class Traffic:
    '''The least traffic on one interface (each field a lower bound).'''
    tx_bytes: int = 0
    rx_bytes: int = 0
    #: Sent plus received, where the direction is not known (a moving root).
    carried_bytes: int = 0
    tx_packets: int = 0
    rx_packets: int = 0

    def __add__(self, other: 'Traffic') -> 'Traffic':
        return Traffic(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def times(self, calls: int) -> 'Traffic':
        return Traffic(*(getattr(self, f.name) * calls for f in fields(self)))

    def items(self):
        '''(counter name, bound) of the nonzero bounds.'''
        return [(f.name, getattr(self, f.name)) for f in fields(self) if getattr(self, f.name)]


@dataclass(frozen=True)
class LinkBound:
    '''Per host, the least traffic its interface must show, and what it
    was derived from (named in a failure).'''
    per_host: dict
    basis: str


#: Root of a collective that moves from call to call (or is not known).
ANY_ROOT = None


def collective_call(op: str, size: int, ranks: int, root=0, blocks=None) -> list:
    '''Per rank, the least traffic of one call of ``op`` (names of
    :class:`hpcnet.constants.Collective`) with ``size`` bytes as the module
    table defines them.  ``root``: the root rank, or ANY_ROOT.  ``blocks``:
    for reduce_scatter, the bytes each rank receives (default: size split
    evenly).'''
    p, m = ranks, size
    if p < 2:
        raise ValueError(f'a collective link bound needs at least 2 ranks, got {p}')
    if op == Collective.BARRIER:
        raise ValueError('a barrier is bounded in packets over a run of barriers: '
                         'use barrier_run()')
    if op == Collective.REDUCE_SCATTER:
        blocks = tuple(blocks) if blocks is not None else (m // p,) * p
        if len(blocks) != p:
            raise ValueError(f'reduce_scatter: {len(blocks)} blocks for {p} ranks')
        reduced = sum(blocks)           # m, less what does not fill an item per rank
        return [Traffic(tx_bytes=reduced - b, rx_bytes=b) for b in blocks]
    if op == Collective.ALLREDUCE:
        return [Traffic(tx_bytes=m, rx_bytes=m)] * p
    if op == Collective.ALLGATHER:
        return [Traffic(tx_bytes=m, rx_bytes=(p - 1) * m)] * p
    if op == Collective.ALLTOALL:
        return [Traffic(tx_bytes=(p - 1) * m, rx_bytes=(p - 1) * m)] * p
    rooted = {Collective.BCAST: (Traffic(tx_bytes=m), Traffic(rx_bytes=m)),
              Collective.REDUCE: (Traffic(rx_bytes=m), Traffic(tx_bytes=m)),
              Collective.GATHER: (Traffic(rx_bytes=(p - 1) * m), Traffic(tx_bytes=m))}
    if op not in rooted:
        raise ValueError(f'no link bound for collective {op!r} '
                         f'(known: {", ".join(Collective.ALL)})')
    as_root, as_other = rooted[op]
    if root is ANY_ROOT:
        return [Traffic(carried_bytes=m)] * p
    return [as_root if rank == root else as_other for rank in range(p)]


def barrier_run(barriers: int, ranks: int) -> list:
    '''Per rank, the least packets of ``barriers`` barriers in a row.'''
    packets = math.ceil(barriers / 2)
    return [Traffic(tx_packets=packets, rx_packets=packets)] * ranks


def split_blocks(size: int, ranks: int, element: int) -> tuple:
    '''Bytes each rank receives of a reduce_scatter of ``size`` bytes of
    ``element``-byte items split as evenly as possible (the first ranks
    get the remainder), as OSU and IMB split it.'''
    items = size // element
    portion, remainder = divmod(items, ranks)
    return tuple((portion + (rank < remainder)) * element for rank in range(ranks))


def per_host(per_rank: list, hosts: dict) -> dict:
    '''Sum the ranks' bounds over the host each ran on (``hosts``: rank -> host).'''
    if sorted(hosts) != list(range(len(per_rank))):
        raise ValueError(f'hosts known for ranks {sorted(hosts)}, bounds for {len(per_rank)} ranks')
    totals = {}
    for rank, traffic in enumerate(per_rank):
        host = hosts[rank]
        totals[host] = totals.get(host, Traffic()) + traffic
    return totals


def _add(total: list, more: list) -> list:
    return [a + b for a, b in zip(total, more)] if total else list(more)


def _sizes(sizes) -> str:
    sizes = sorted(sizes)
    if not sizes:
        return 'no size'
    if len(sizes) == 1:
        return size_label(sizes[0])
    return f'{len(sizes)} sizes {size_label(sizes[0])}..{size_label(sizes[-1])}'


# --------------------------------------------------------------------------
# Our kernel (src/collectives.c)
# --------------------------------------------------------------------------

def kernel_calls(row: dict, warmup: int, validated: bool) -> int:
    '''Calls of the operation src/collectives.c made for one row: its
    ``iterations`` (samples, one call each), the warm-up (the header's
    ``warmup``) and, with ``--validate``, one checked call (not for barrier).'''
    return int(row['iterations']) + warmup + (1 if validated and row['op'] != Collective.BARRIER
                                              else 0)


def kernel_collective(op: str, rows, ranks: int, hosts: dict, warmup: int, validated: bool,
                      root: int = 0) -> LinkBound:
    '''The link bound of a src/collectives.c run of ``op``.  Sizes as the
    kernel defines them (src/collectives.c): reduce_scatter's size is the
    whole vector, its ``count`` column the floats each rank receives.
    Every iteration (warm-up included) runs an MPI_Barrier before the
    operation: a barrier row is two barriers per call.'''
    total, calls = [], 0
    for row in rows:
        n = kernel_calls(row, warmup, validated)
        calls += n
        if op == Collective.BARRIER:
            total = _add(total, barrier_run(2 * n, ranks))
            continue
        size = int(row['size_bytes'])
        blocks = None
        if op == Collective.REDUCE_SCATTER:
            block = int(row['count']) * 4                 # MPI_FLOAT
            size, blocks = block * ranks, (block,) * ranks
        total = _add(total, [t.times(n) for t in
                             collective_call(op, size, ranks, root=root, blocks=blocks)])
    basis = (f'{op} over {ranks} ranks, {_sizes(int(r["size_bytes"]) for r in rows)}, '
             f'{calls} calls (iterations + warm-up'
             f'{" + validation" if validated and op != Collective.BARRIER else ""})')
    return LinkBound(per_host(total, hosts), basis)


# --------------------------------------------------------------------------
# OSU Micro-Benchmarks
# --------------------------------------------------------------------------

#: OMB's per-size loop counts (timed iterations, warm-up "skip"), from
#: c/util/osu_util.h and set_benchmark_defaults() in c/util/osu_util.c of
#: OMB 7.4: a size above LARGE_MESSAGE_SIZE (8192) runs the *_LARGE counts;
#: -i sets both iteration counts, -x both warm-ups.
OSU_LARGE_MESSAGE_SIZE = 8192
OSU_LOOPS = {
    'latency': {'small': (10000, 100), 'large': (1000, 10)},     # LAT_LOOP_*/LAT_SKIP_*
    'bandwidth': {'small': (100, 10), 'large': (20, 2)},         # BW_LOOP_*/BW_SKIP_*
    'collective': {'small': (1000, 100), 'large': (100, 10)},    # COLL_LOOP_*/COLL_SKIP_*
}
#: osu_bw/osu_bibw/osu_mbw_mr: messages in flight per iteration
#: (WINDOW_SIZE_LARGE, the default of -W).
OSU_WINDOW = 64
#: Bytes of OMB's datatypes (-T; default MPI_CHAR), by the name its
#: "# Datatype:" line prints.
OSU_DATATYPE_BYTES = {'MPI_CHAR': 1, 'MPI_INT': 4, 'MPI_FLOAT': 4}

_OSU_COLLECTIVE_OP = {'osu_allreduce': Collective.ALLREDUCE, 'osu_alltoall': Collective.ALLTOALL,
                      'osu_allgather': Collective.ALLGATHER, 'osu_bcast': Collective.BCAST,
                      'osu_reduce': Collective.REDUCE, 'osu_gather': Collective.GATHER,
                      'osu_reduce_scatter': Collective.REDUCE_SCATTER,
                      'osu_barrier': Collective.BARRIER}
#: What a pair of ranks sends per iteration: (messages of the size each
#: way, rank 0 then rank 1).  osu_bw's receiver answers each window with one
#: MPI_CHAR, osu_mbw_mr's too (counted: 1 byte per iteration).
_OSU_PT2PT = {'osu_latency': ('latency', 1, 1), 'osu_multi_lat': ('latency', 1, 1),
              'osu_bw': ('bandwidth', OSU_WINDOW, 0),
              'osu_bibw': ('bandwidth', OSU_WINDOW, OSU_WINDOW),
              'osu_mbw_mr': ('bandwidth', OSU_WINDOW, 0)}


def osu_calls(kind: str, size: int, iterations=None, warmup=None, printed=None) -> int:
    '''Iterations OMB ran at ``size``, warm-up included: the ``Iterations``
    column where printed (``-f``), else -i; the warm-up -x, else OMB's
    defaults for ``kind``.  osu_mbw_mr (7.4) keeps its small counts at every
    size; the large ones are fewer, so using them is a lower bound there too.'''
    default_iters, default_skip = OSU_LOOPS[kind]['large' if size > OSU_LARGE_MESSAGE_SIZE
                                                  else 'small']
    timed = printed if printed is not None else (iterations if iterations is not None
                                                 else default_iters)
    return int(timed) + (warmup if warmup is not None else default_skip)


def osu(program: str, rows, hosts: dict, iterations=None, warmup=None,
        datatype: str | None = None) -> LinkBound:
    '''The link bound of an OMB run of ``program`` between ``len(hosts)``
    ranks (``rows``: its table; ``iterations``/``warmup``: the -i/-x the
    check passed, None for OMB's defaults).  Collectives: the module table,
    sizes as OMB defines them (osu_reduce_scatter's size is the whole
    vector, osu_alltoall's the block to each rank); osu_reduce and
    osu_gather may move their root (omb_get_root_rank): ANY_ROOT.'''
    ranks = len(hosts)
    total, calls = [], 0
    sizes = [int(r['size_bytes']) for r in rows]
    if program in _OSU_PT2PT:
        kind, sent_by_0, sent_by_1 = _OSU_PT2PT[program]
        if ranks != 2:
            raise ValueError(f'{program}: link bound for 2 ranks, got {ranks}')
        for size in sizes:
            n = osu_calls(kind, size, iterations, warmup)
            calls += n
            ack = 1 if sent_by_1 == 0 else 0
            payload = [sent_by_0 * size, sent_by_1 * size + ack]
            total = _add(total, [Traffic(tx_bytes=n * payload[0], rx_bytes=n * payload[1]),
                                 Traffic(tx_bytes=n * payload[1], rx_bytes=n * payload[0])])
        window = f', window {OSU_WINDOW}' if kind == 'bandwidth' else ''
        return LinkBound(per_host(total, hosts),
                         f'{program}, {_sizes(sizes)}{window}, {calls} iterations '
                         f'({_osu_counts(iterations, warmup)})')
    if program not in _OSU_COLLECTIVE_OP:
        raise ValueError(f'no link bound for OSU program {program!r}')
    op = _OSU_COLLECTIVE_OP[program]
    element = OSU_DATATYPE_BYTES.get(datatype or 'MPI_CHAR', 8)
    root = ANY_ROOT if op in (Collective.REDUCE, Collective.GATHER) else 0
    for row in rows:
        size = int(row.get('size_bytes', 0))
        n = osu_calls('collective', size, iterations, warmup, row.get('iterations'))
        calls += n
        if op == Collective.BARRIER:
            total = _add(total, barrier_run(n, ranks))
            continue
        blocks = split_blocks(size, ranks, element) if op == Collective.REDUCE_SCATTER else None
        total = _add(total, [t.times(n) for t in collective_call(op, size, ranks, root, blocks)])
    printed = bool(rows) and 'iterations' in rows[0]
    return LinkBound(per_host(total, hosts),
                     f'{program} ({op}) over {ranks} ranks, {_sizes(sizes)}, {calls} iterations '
                     f'({_osu_counts(iterations, warmup, printed)})')


def _osu_counts(iterations, warmup, printed: bool = False) -> str:
    timed = ('its Iterations column' if printed else f'-i {iterations}' if iterations is not None
             else "OMB 7.4's default")
    skip = f'-x {warmup}' if warmup is not None else "OMB 7.4's default"
    return f'timed: {timed}; warm-up: {skip}'


# --------------------------------------------------------------------------
# Intel MPI Benchmarks
# --------------------------------------------------------------------------

#: IMB's collectives (IMB-MPI1 and IMB-NBC) as operations of the table.
#: IMB's size conventions are the kernel's: Reduce_scatter's #bytes is the
#: whole MPI_FLOAT vector, Alltoall's the block to each rank.  IMB moves the
#: root of Bcast, Reduce and Gather from repetition to repetition: ANY_ROOT.
IMB_COLLECTIVE_OP = {'Bcast': Collective.BCAST, 'Ibcast': Collective.BCAST,
                     'Reduce': Collective.REDUCE, 'Allreduce': Collective.ALLREDUCE,
                     'Iallreduce': Collective.ALLREDUCE,
                     'Reduce_scatter': Collective.REDUCE_SCATTER,
                     'Allgather': Collective.ALLGATHER, 'Gather': Collective.GATHER,
                     'Alltoall': Collective.ALLTOALL, 'Ialltoall': Collective.ALLTOALL,
                     'Barrier': Collective.BARRIER, 'Ibarrier': Collective.BARRIER}
IMB_FLOAT_BYTES = 4


def imb(benchmark: str, rows, hosts: dict) -> LinkBound:
    '''The link bound of an IMB collective, exact in its counts: IMB prints
    the #repetitions of every size (its warm-up only adds).'''
    if benchmark not in IMB_COLLECTIVE_OP:
        raise ValueError(f'no link bound for IMB benchmark {benchmark!r}')
    op = IMB_COLLECTIVE_OP[benchmark]
    ranks = len(hosts)
    total, calls, sizes = [], 0, []
    for row in rows:
        n = int(row['repetitions'])
        calls += n
        if op == Collective.BARRIER:
            total = _add(total, barrier_run(n, ranks))
            continue
        size = int(row['size_bytes'])
        sizes.append(size)
        if op == Collective.REDUCE_SCATTER:
            # Which rank gets the remainder item is IMB's choice: any rank
            # may hold the largest block or the smallest.
            blocks = split_blocks(size, ranks, IMB_FLOAT_BYTES)
            call = [Traffic(tx_bytes=sum(blocks) - max(blocks), rx_bytes=min(blocks))] * ranks
        else:
            call = collective_call(op, size, ranks, ANY_ROOT)
        total = _add(total, [t.times(n) for t in call])
    return LinkBound(per_host(total, hosts),
                     f'IMB {benchmark} ({op}) over {ranks} ranks, {_sizes(sizes)}, '
                     f'{calls} repetitions')
