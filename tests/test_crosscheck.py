"""Ratios of our point-to-point kernel to IMB and OSU, from report test cases."""
from hpcnet.acceptance.comparison import crosscheck

PINGPONG = 'hpcnet_p2p %scale=1_node %mode=pingpong /1a2b3c4d'
BW = 'hpcnet_p2p %scale=1_node %mode=bw /5e6f7a8b'
TWO_NODE_BW = 'hpcnet_p2p %scale=2_nodes %mode=bw /9c0d1e2f'
IMB = 'hpcnet_imb %benchmark=PingPong /0a1b2c3d'
OSU_BW = 'hpcnet_osu %benchmark=osu_bw /4e5f6a7b'
OSU_LATENCY = 'hpcnet_osu %benchmark=osu_latency /8c9d0e1f'


def case(name, curve, env='gcc12-impi2021', result='pass', partition='shm'):
    return {'name': name, 'system': 'local', 'partition': partition, 'environ': env,
            'result': result, 'curve': curve}


OURS = [{'size_bytes': 0, 'median_us': 0.10, 'mean_us': 0.11, 'bw_MBps': 0},
        {'size_bytes': 8, 'median_us': 0.12, 'mean_us': 0.13, 'bw_MBps': 66.7},
        {'size_bytes': 1 << 20, 'median_us': 100.0, 'mean_us': 104.8576, 'bw_MBps': 10485.76},
        {'size_bytes': 1 << 22, 'median_us': 400.0, 'mean_us': 419.4304, 'bw_MBps': 10485.76}]
IMB_CURVE = [{'size_bytes': 0, 't_usec': 0.11, 'mbytes_per_sec': 0},
             {'size_bytes': 8, 't_usec': 0.13, 'mbytes_per_sec': 61.5},
             {'size_bytes': 1 << 20, 't_usec': 100.0, 'mbytes_per_sec': 10485.76},
             {'size_bytes': 1 << 22, 't_usec': 400.0, 'mbytes_per_sec': 10485.76}]


def osu_bw(mbps):
    return [{'size_bytes': 1 << 20, 'bandwidth_MBps': mbps},
            {'size_bytes': 1 << 22, 'bandwidth_MBps': mbps}]


def by_metric(rows, reference):
    return {r.metric: r for r in rows if r.reference == reference}


def test_case_parameters():
    assert crosscheck.case_parameters(BW) == ('hpcnet_p2p', {'scale': '1_node', 'mode': 'bw'})
    assert crosscheck.case_parameters('hpcnet_imb %benchmark=PingPong') == \
        ('hpcnet_imb', {'benchmark': 'PingPong'})


def test_ratios_against_imb_median_and_mean():
    rows = by_metric(crosscheck.ratios([case(PINGPONG, OURS), case(IMB, IMB_CURVE)]),
                     'IMB PingPong')
    assert set(rows) == {'latency_0B', 'latency_8B', 'bandwidth_1MiB', 'bandwidth_4MiB'}
    assert abs(rows['latency_8B'].ratio_mean - 1.0) < 1e-9 and rows['latency_8B'].ok
    assert abs(rows['latency_8B'].ratio_median - 0.12 / 0.13) < 1e-9
    # ours by mean: 1 MiB / 104.86 us = 10000 MB/s: shown, but judged by median
    assert abs(rows['bandwidth_1MiB'].ratio_mean - 10000 / 10485.76) < 1e-6
    assert rows['bandwidth_1MiB'].ok
    assert 'OFF TARGET' not in crosscheck.table(list(rows.values()))


def test_osu_bw_is_paired_with_our_streaming_mode_not_the_ping_pong():
    slow_pingpong = [dict(r, bw_MBps=r['bw_MBps'] / 2) for r in OURS]
    cases = [case(PINGPONG, slow_pingpong), case(BW, OURS), case(OSU_BW, osu_bw(10485.76)),
             case(TWO_NODE_BW, [dict(r, bw_MBps=1.0) for r in OURS])]
    rows = by_metric(crosscheck.ratios(cases), 'osu_bw')
    assert set(rows) == {'bandwidth_1MiB', 'bandwidth_4MiB'}
    assert all(abs(r.ratio_median - 1.0) < 1e-9 and r.ok for r in rows.values())


def test_osu_latency_against_our_ping_pong():
    theirs = [{'size_bytes': 0, 'avg_latency_us': 0.10}, {'size_bytes': 8, 'avg_latency_us': 0.11}]
    rows = by_metric(crosscheck.ratios([case(PINGPONG, OURS), case(OSU_LATENCY, theirs)]),
                     'osu_latency')
    assert set(rows) == {'latency_0B', 'latency_8B'}
    assert rows['latency_0B'].ok                  # equal
    assert not rows['latency_8B'].ok              # 0.12 against 0.11: 9 % above


def test_figures_are_medians_over_the_repeats():
    # Three repeats of each side: one outlier per side does not move the verdict.
    ours = [case(BW, OURS), case(BW, OURS), case(BW, [dict(r, bw_MBps=1.0) for r in OURS])]
    theirs = [case(OSU_BW, osu_bw(10485.76)), case(OSU_BW, osu_bw(10485.76)),
              case(OSU_BW, osu_bw(99999.0))]
    (row, _) = crosscheck.ratios(ours + theirs)
    assert row.samples == (3, 3) and row.ok and abs(row.ratio_median - 1.0) < 1e-9
    assert '3/3' in crosscheck.table([row])


def test_our_kernel_as_bottleneck_is_off_target():
    slow = [dict(OURS[1], median_us=0.20), dict(OURS[2], bw_MBps=9000.0)]
    rows = by_metric(crosscheck.ratios([case(PINGPONG, slow), case(IMB, IMB_CURVE)]),
                     'IMB PingPong')
    assert not rows['latency_8B'].ok          # 0.20 us against IMB's 0.13
    assert not rows['bandwidth_1MiB'].ok      # 86 % of IMB
    assert 'OFF TARGET' in crosscheck.table(list(rows.values()))


def test_only_pairs_of_passing_runs_of_one_environment_count():
    assert crosscheck.ratios([case(PINGPONG, OURS), case(IMB, IMB_CURVE, result='fail')]) == []
    assert crosscheck.ratios([case(PINGPONG, OURS), case(IMB, IMB_CURVE, env='other')]) == []
    assert crosscheck.ratios([case(PINGPONG, OURS), case(IMB, IMB_CURVE, partition='tcp')]) == []
