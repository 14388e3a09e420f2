"""The link proofs' arithmetic (hpcnet.checklib.linkbytes) and their verdict
(hpcnet.checklib.sanity.check_link_traffic): per node, the least traffic the sizes
and calls a run made must put on its interface, by collective operation,
OSU program and IMB benchmark; a proof that fails names the node, the
counter seen, the bound and what it was derived from."""
from pathlib import Path

import pytest
from reframe.core.exceptions import SanityError

from hpcnet.checklib import linkbytes, sanity
from hpcnet.constants import Collective
from hpcnet.checklib.linkbytes import ANY_ROOT, LinkBound, Traffic
from hpcnet import fabrics
from hpcnet.fabrics import LinkDelta
from hpcnet.parsers.imb import parse_imb
from hpcnet.parsers.kernel import parse_kernel_output
from hpcnet.parsers.osu import parse_osu

SAMPLES = Path(__file__).parent / 'data' / 'samples'
KiB, MiB = 1024, 1024 * 1024


def hosts_of(ranks, per_node=1):
    return {rank: f'cn{rank // per_node + 1}' for rank in range(ranks)}


# --------------------------------------------------------------------------
# One call of each collective: the table of hpcnet.checklib.linkbytes
# --------------------------------------------------------------------------

@pytest.mark.parametrize('op, expected', [
    # 4 ranks, m = 1 KiB; rank 0 is the root.
    (Collective.BCAST, [Traffic(tx_bytes=KiB)] + [Traffic(rx_bytes=KiB)] * 3),
    (Collective.REDUCE, [Traffic(rx_bytes=KiB)] + [Traffic(tx_bytes=KiB)] * 3),
    (Collective.GATHER, [Traffic(rx_bytes=3 * KiB)] + [Traffic(tx_bytes=KiB)] * 3),
    (Collective.ALLREDUCE, [Traffic(tx_bytes=KiB, rx_bytes=KiB)] * 4),
    (Collective.ALLGATHER, [Traffic(tx_bytes=KiB, rx_bytes=3 * KiB)] * 4),
    (Collective.ALLTOALL, [Traffic(tx_bytes=3 * KiB, rx_bytes=3 * KiB)] * 4),
    # The whole vector is 1 KiB: each rank's block 256 B.
    (Collective.REDUCE_SCATTER, [Traffic(tx_bytes=768, rx_bytes=256)] * 4),
])
def test_one_call_of_each_collective(op, expected):
    assert linkbytes.collective_call(op, KiB, 4, root=0) == expected


def test_allreduce_bound_is_at_least_the_classic_bandwidth_term():
    # Patarasuk & Yuan's ring sends 2 (p-1)/p m per rank; its per-rank
    # lower bound is (p-1)/p m.  Ours (m) lies between, for every p >= 2.
    for p in (2, 3, 4, 16, 1024):
        (one, *_) = linkbytes.collective_call(Collective.ALLREDUCE, MiB, p)
        assert (p - 1) / p * MiB <= one.tx_bytes <= 2 * (p - 1) / p * MiB


def test_a_moving_root_bounds_what_either_role_carries():
    for op in (Collective.BCAST, Collective.REDUCE, Collective.GATHER):
        assert (linkbytes.collective_call(op, 100, 3, root=ANY_ROOT)
                == [Traffic(carried_bytes=100)] * 3)


def test_reduce_scatter_blocks_as_osu_and_imb_split_them():
    assert linkbytes.split_blocks(12, 2, 4) == (8, 4)        # 3 floats: 2 + 1
    assert linkbytes.split_blocks(1, 4, 1) == (1, 0, 0, 0)   # fewer items than ranks
    assert linkbytes.collective_call(Collective.REDUCE_SCATTER, 12, 2, blocks=(8, 4)) == [
        Traffic(tx_bytes=4, rx_bytes=8), Traffic(tx_bytes=8, rx_bytes=4)]


def test_barriers_in_a_row_are_packets_not_bytes():
    assert linkbytes.barrier_run(10, 2) == [Traffic(tx_packets=5, rx_packets=5)] * 2
    assert linkbytes.barrier_run(7, 1) == [Traffic(tx_packets=4, rx_packets=4)]
    with pytest.raises(ValueError, match='barrier_run'):
        linkbytes.collective_call(Collective.BARRIER, 0, 2)


def test_no_bound_without_two_ranks_or_for_an_unknown_op():
    with pytest.raises(ValueError, match='at least 2 ranks'):
        linkbytes.collective_call(Collective.ALLREDUCE, 8, 1)
    with pytest.raises(ValueError, match="no link bound for collective 'scan'"):
        linkbytes.collective_call('scan', 8, 2)


# --------------------------------------------------------------------------
# src/collectives.c runs
# --------------------------------------------------------------------------

def kernel_rows(op, *size_count_iters):
    return [{'op': op, 'size_bytes': s, 'count': c, 'iterations': n}
            for s, c, n in size_count_iters]


def test_kernel_allreduce_over_sizes_and_calls():
    rows = kernel_rows(Collective.ALLREDUCE, (4, 1, 100), (1 * MiB, MiB // 4, 20))
    bound = linkbytes.kernel_collective(Collective.ALLREDUCE, rows, 4, hosts_of(4),
                                        warmup=10, validated=True)
    # Per row: iterations + 10 warm-up + 1 validated call.
    per_node = 111 * 4 + 31 * MiB
    assert bound.per_host == {f'cn{i}': Traffic(tx_bytes=per_node, rx_bytes=per_node)
                              for i in range(1, 5)}
    assert bound.basis == ('allreduce over 4 ranks, 2 sizes 4B..1MiB, 142 calls '
                           '(iterations + warm-up + validation)')


def test_kernel_bcast_bounds_the_root_and_the_others_apart():
    rows = kernel_rows(Collective.BCAST, (64 * KiB, 64 * KiB, 9))
    bound = linkbytes.kernel_collective(Collective.BCAST, rows, 3, hosts_of(3), warmup=1,
                                        validated=False)
    assert bound.per_host == {'cn1': Traffic(tx_bytes=10 * 64 * KiB),
                              'cn2': Traffic(rx_bytes=10 * 64 * KiB),
                              'cn3': Traffic(rx_bytes=10 * 64 * KiB)}


def test_kernel_reduce_scatter_reads_the_floats_each_rank_gets():
    # 1000 bytes over 3 ranks: 83 floats each (the kernel's count), 996 reduced.
    rows = kernel_rows(Collective.REDUCE_SCATTER, (1000, 83, 10))
    bound = linkbytes.kernel_collective(Collective.REDUCE_SCATTER, rows, 3, hosts_of(3),
                                        warmup=0, validated=False)
    assert bound.per_host['cn2'] == Traffic(tx_bytes=10 * 2 * 332, rx_bytes=10 * 332)


def test_kernel_barrier_counts_the_line_up_barrier_too():
    # Every iteration runs the kernel's MPI_Barrier, then the timed one.
    rows = kernel_rows(Collective.BARRIER, (0, 0, 5120))
    bound = linkbytes.kernel_collective(Collective.BARRIER, rows, 2, hosts_of(2), warmup=10,
                                        validated=True)
    assert bound.per_host['cn1'] == Traffic(tx_packets=5130, rx_packets=5130)


def test_ranks_of_one_host_add_up():
    # local:tcp: both ranks on one host, all their messages over loopback.
    rows = kernel_rows(Collective.ALLTOALL, (8, 8, 100))
    bound = linkbytes.kernel_collective(Collective.ALLTOALL, rows, 2, {0: 'vm', 1: 'vm'},
                                        warmup=0, validated=False)
    assert bound.per_host == {'vm': Traffic(tx_bytes=1600, rx_bytes=1600)}
    with pytest.raises(ValueError, match='hosts known for ranks'):
        linkbytes.per_host([Traffic()] * 3, {0: 'a', 1: 'b'})


def test_kernel_bound_from_a_real_output():
    path = SAMPLES / 'hpcnet-collectives.local-shm.openmpi-5.0.11.txt'
    out = parse_kernel_output(path.read_text(), source=str(path), expect_kernel='collectives')
    rows = out.rows_where(op=Collective.ALLREDUCE)
    bound = linkbytes.kernel_collective(Collective.ALLREDUCE, rows, 2, out.hosts,
                                        warmup=int(out.header['warmup']),
                                        validated=out.header['validate'] == 'on')
    expected = sum(int(r['size_bytes']) * (int(r['iterations']) + 11) for r in rows)
    assert bound.per_host == {'vm': Traffic(tx_bytes=2 * expected, rx_bytes=2 * expected)}
    # The old proof asked for one message of the largest size (1 KiB here).
    assert expected > 1000 * 1024


# --------------------------------------------------------------------------
# OSU Micro-Benchmarks
# --------------------------------------------------------------------------

def osu_rows(*sizes):
    return [{'size_bytes': s} for s in sizes]


def test_osu_latency_with_omb_defaults():
    # OMB 7.4: 10000 + 100 round trips up to 8 KiB, 1000 + 10 above.
    bound = linkbytes.osu('osu_latency', osu_rows(0, 8, 8192, 16384), hosts_of(2))
    each = 10100 * (8 + 8192) + 1010 * 16384
    assert bound.per_host == {'cn1': Traffic(tx_bytes=each, rx_bytes=each),
                              'cn2': Traffic(tx_bytes=each, rx_bytes=each)}
    assert bound.basis == ("osu_latency, 4 sizes 0B..16KiB, 31310 iterations (timed: OMB 7.4's "
                           "default; warm-up: OMB 7.4's default)")


def test_osu_bw_and_bibw_send_a_window_per_iteration():
    sizes = (8, 4 * MiB)
    one_way = 110 * 64 * 8 + 22 * 64 * 4 * MiB          # (100 + 10), (20 + 2) windows of 64
    bw = linkbytes.osu('osu_bw', osu_rows(*sizes), hosts_of(2))
    # The receiver answers every window with one byte.
    assert bw.per_host == {'cn1': Traffic(tx_bytes=one_way, rx_bytes=132),
                           'cn2': Traffic(tx_bytes=132, rx_bytes=one_way)}
    bibw = linkbytes.osu('osu_bibw', osu_rows(*sizes), hosts_of(2))
    assert bibw.per_host['cn2'] == Traffic(tx_bytes=one_way, rx_bytes=one_way)
    # Both ranks on one host: a window each way, each counted once sent, once received.
    bw_one_host = linkbytes.osu('osu_bw', osu_rows(*sizes), {0: 'vm', 1: 'vm'})
    assert bw_one_host.per_host == {'vm': Traffic(tx_bytes=one_way + 132, rx_bytes=one_way + 132)}


def test_osu_options_replace_the_defaults():
    bound = linkbytes.osu('osu_latency', osu_rows(1 * MiB), hosts_of(2), iterations=5, warmup=0)
    assert bound.per_host['cn1'] == Traffic(tx_bytes=5 * MiB, rx_bytes=5 * MiB)
    assert 'timed: -i 5; warm-up: -x 0' in bound.basis
    # -i alone: OMB's warm-up stays.
    assert linkbytes.osu_calls('bandwidth', 64, iterations=7) == 17


def test_osu_collective_uses_its_iterations_column():
    rows = [{'size_bytes': 4, 'iterations': 1000}, {'size_bytes': MiB, 'iterations': 100}]
    bound = linkbytes.osu('osu_allreduce', rows, hosts_of(2))
    each = 1100 * 4 + 110 * MiB
    assert bound.per_host['cn2'] == Traffic(tx_bytes=each, rx_bytes=each)
    assert 'timed: its Iterations column' in bound.basis


def test_osu_rooted_collectives_and_reduce_scatter():
    # osu_bcast keeps root 0; osu_reduce and osu_gather may move it.
    bcast = linkbytes.osu('osu_bcast', osu_rows(MiB), hosts_of(2))
    assert bcast.per_host == {'cn1': Traffic(tx_bytes=110 * MiB),
                              'cn2': Traffic(rx_bytes=110 * MiB)}
    reduce = linkbytes.osu('osu_reduce', osu_rows(MiB), hosts_of(2))
    assert reduce.per_host['cn1'] == Traffic(carried_bytes=110 * MiB)
    # 3 chars over 2 ranks: 2 + 1 (OMB gives the remainder to the first ranks).
    rs = linkbytes.osu('osu_reduce_scatter', osu_rows(3), hosts_of(2))
    assert rs.per_host == {'cn1': Traffic(tx_bytes=1100, rx_bytes=2200),
                           'cn2': Traffic(tx_bytes=2200, rx_bytes=1100)}


def test_osu_bound_from_real_outputs_grows_with_the_work():
    lat = parse_osu((SAMPLES / 'osu_latency.openmpi-4.1.4.txt').read_text(),
                    expect_benchmark='osu_latency')
    bw = parse_osu((SAMPLES / 'osu_bw.openmpi-4.1.4.txt').read_text(), expect_benchmark='osu_bw')
    lat_bound = linkbytes.osu('osu_latency', lat.rows, hosts_of(2)).per_host['cn1'].tx_bytes
    bw_bound = linkbytes.osu('osu_bw', bw.rows, hosts_of(2)).per_host['cn1'].tx_bytes
    # The old proof asked 4 MiB of either: these runs move gigabytes.
    assert lat_bound > 1000 * 4 * MiB and bw_bound > 1000 * 4 * MiB
    assert bw_bound != lat_bound


def test_osu_program_without_a_bound():
    with pytest.raises(ValueError, match="no link bound for OSU program 'osu_put_latency'"):
        linkbytes.osu('osu_put_latency', osu_rows(8), hosts_of(2))
    with pytest.raises(ValueError, match='for 2 ranks, got 4'):
        linkbytes.osu('osu_bw', osu_rows(8), hosts_of(4))


# --------------------------------------------------------------------------
# IMB: #repetitions per size, printed
# --------------------------------------------------------------------------

def test_imb_collectives_from_their_repetitions():
    out = parse_imb((Path(__file__).parent / 'data' / 'imb' /
                     'IMB-MPI1_collectives.impi-2021.19.txt').read_text())
    tables = {t.benchmark: t for t in out.tables}
    hosts = hosts_of(2)
    alltoall = tables['Alltoall']
    each = sum(int(r['size_bytes']) * int(r['repetitions']) for r in alltoall.rows)
    assert each > 0
    assert linkbytes.imb('Alltoall', alltoall.rows, hosts).per_host['cn1'] == Traffic(
        tx_bytes=each, rx_bytes=each)
    # IMB moves Bcast's root: what either role carries.
    bcast = tables['Bcast']
    each = sum(int(r['size_bytes']) * int(r['repetitions']) for r in bcast.rows)
    assert linkbytes.imb('Bcast', bcast.rows, hosts).per_host['cn2'] == Traffic(carried_bytes=each)
    barrier = linkbytes.imb('Barrier', tables['Barrier'].rows, hosts)
    assert barrier.per_host['cn1'] == Traffic(tx_packets=500, rx_packets=500)   # 1000 in a row
    assert barrier.basis == 'IMB Barrier (barrier) over 2 ranks, no size, 1000 repetitions'


def test_imb_reduce_scatter_whoever_gets_the_remainder():
    # 4 bytes = one float over 2 ranks: one rank reduces it, which one is IMB's choice.
    rows = [{'size_bytes': 4, 'repetitions': 10}, {'size_bytes': 8, 'repetitions': 10}]
    bound = linkbytes.imb('Reduce_scatter', rows, hosts_of(2))
    # 4 B: tx >= 4 - 4, rx >= 0; 8 B: tx >= 8 - 4, rx >= 4; 10 repetitions each.
    assert bound.per_host['cn1'] == Traffic(tx_bytes=40, rx_bytes=40)


# --------------------------------------------------------------------------
# The verdict
# --------------------------------------------------------------------------

def delta(host, **counters):
    base = {'tx_bytes': 0, 'rx_bytes': 0, 'tx_packets': 0, 'rx_packets': 0}
    return LinkDelta(host, 'eth0', {**base, **counters})


def test_a_node_below_its_bound_fails_naming_node_seen_bound_and_basis():
    bound = LinkBound({'cn1': Traffic(tx_bytes=1000, rx_bytes=500),
                       'cn2': Traffic(rx_bytes=1000)}, 'bcast over 2 ranks, 1 size 1000B, 1 calls')
    ok = [delta('cn1', tx_bytes=1100, rx_bytes=600), delta('cn2', tx_bytes=10, rx_bytes=1200)]
    sanity.check_link_traffic(ok, ['cn1', 'cn2'], bound, 'eth0')
    short = [ok[0], delta('cn2', tx_bytes=5000, rx_bytes=999)]
    with pytest.raises(SanityError, match=r"^cn2: eth0 received 999 bytes during the run, fewer "
                                          r"than the 1000 bytes that bcast over 2 ranks, 1 size "
                                          r"1000B, 1 calls must put on this node's link: the "
                                          r"traffic took another path than eth0$"):
        sanity.check_link_traffic(short, ['cn1', 'cn2'], bound, 'eth0')
    with pytest.raises(SanityError, match=r'no eth0 counters from cn2 \(have: \[.cn1.\]\)'):
        sanity.check_link_traffic(ok[:1], ['cn1', 'cn2'], bound, 'eth0')


def test_what_the_old_proofs_let_through_now_fails():
    # A barrier's 5120 iterations against counters that saw srun's few packets.
    rows = kernel_rows(Collective.BARRIER, (0, 0, 5120))
    bound = linkbytes.kernel_collective(Collective.BARRIER, rows, 2, hosts_of(2), warmup=10,
                                        validated=True)
    srun_only = [delta('cn1', tx_bytes=640, rx_bytes=640, tx_packets=8, rx_packets=8),
                 delta('cn2', tx_bytes=640, rx_bytes=640, tx_packets=8, rx_packets=8)]
    with pytest.raises(SanityError, match='cn1: eth0 sent 8 packets during the run, fewer than '
                                          'the 5130 packets that barrier over 2 ranks'):
        sanity.check_link_traffic(srun_only, ['cn1', 'cn2'], bound, 'eth0')
    # An allreduce up to 1 MiB whose link saw one 1 MiB message each way:
    # (1000 + 11) x 4 B + (40 + 11) x 1 MiB.
    rows = kernel_rows(Collective.ALLREDUCE, (4, 1, 1000), (MiB, MiB // 4, 40))
    bound = linkbytes.kernel_collective(Collective.ALLREDUCE, rows, 2, hosts_of(2), warmup=10,
                                        validated=True)
    one_message = [delta(h, tx_bytes=MiB + 100, rx_bytes=MiB + 100) for h in ('cn1', 'cn2')]
    with pytest.raises(SanityError, match=r'cn1: eth0 sent 1048676 bytes .* fewer than the '
                                          r'53481420 bytes that allreduce over 2 ranks, 2 sizes '
                                          r'4B..1MiB, 1062 calls'):
        sanity.check_link_traffic(one_message, ['cn1', 'cn2'], bound, 'eth0')


def test_a_moving_root_is_judged_on_sent_plus_received():
    bound = LinkBound({'cn1': Traffic(carried_bytes=1000)}, 'IMB Bcast')
    sanity.check_link_traffic([delta('cn1', tx_bytes=400, rx_bytes=600)], ['cn1'], bound, 'eth0')
    with pytest.raises(SanityError, match=r'cn1: eth0 carried \(sent \+ received\) 999 bytes'):
        sanity.check_link_traffic([delta('cn1', tx_bytes=400, rx_bytes=599)], ['cn1'], bound,
                                  'eth0')


def test_a_missing_interface_is_named_with_its_node():
    text = 'hpcnet-link: before cn1 eth0 tx_bytes=1\nhpcnet-link: missing cn2 eth0\n'
    with pytest.raises(fabrics.LinkStatsError, match=r'^interface eth0 does not exist on cn2$'):
        fabrics.link_deltas(text)


def test_counters_of_both_phases_give_the_delta():
    before = 'hpcnet-link: before cn1 eth0 tx_bytes=100 tx_errors=0\n'
    after = 'hpcnet-link: after cn1 eth0 tx_bytes=350 tx_errors=2\n'
    [delta] = fabrics.link_deltas(before + after)
    assert (delta.host, delta.iface, delta.delta) == ('cn1', 'eth0', {'tx_bytes': 250, 'tx_errors': 2})
    assert delta.errors == {'tx_errors': 2}
    with pytest.raises(fabrics.LinkStatsError, match=r"cn1 eth0: counters only \['before'\]"):
        fabrics.link_deltas(before)
