"""Ratios of our ping-pong to IMB PingPong, from report test cases."""
from hpcnet import crosscheck


def case(name, curve, env='gcc12-impi2021', result='pass'):
    return {'name': name, 'system': 'local', 'partition': 'shm', 'environ': env,
            'result': result, 'curve': curve}


OURS = [{'size_bytes': 0, 'median_us': 0.10, 'mean_us': 0.11, 'bw_MBps': 0},
        {'size_bytes': 8, 'median_us': 0.12, 'mean_us': 0.13, 'bw_MBps': 66.7},
        {'size_bytes': 1 << 20, 'median_us': 100.0, 'mean_us': 104.8576, 'bw_MBps': 10485.76},
        {'size_bytes': 1 << 22, 'median_us': 400.0, 'mean_us': 419.4304, 'bw_MBps': 10485.76}]
IMB = [{'size_bytes': 0, 't_usec': 0.11, 'mbytes_per_sec': 0},
       {'size_bytes': 8, 't_usec': 0.13, 'mbytes_per_sec': 61.5},
       {'size_bytes': 1 << 20, 't_usec': 100.0, 'mbytes_per_sec': 10485.76},
       {'size_bytes': 1 << 22, 't_usec': 400.0, 'mbytes_per_sec': 10485.76}]


def test_ratios_median_and_mean():
    rows = {r.metric: r for r in crosscheck.ratios([case(crosscheck.OURS, OURS),
                                                     case(crosscheck.IMB, IMB)])}
    assert set(rows) == {'latency_0B', 'latency_8B', 'bandwidth_1MiB', 'bandwidth_4MiB'}
    assert abs(rows['latency_8B'].ratio_mean - 1.0) < 1e-9 and rows['latency_8B'].ok
    assert abs(rows['latency_8B'].ratio_median - 0.12 / 0.13) < 1e-9
    # ours by mean: 1 MiB / 104.86 us = 10000 MB/s: shown, but judged by median
    assert abs(rows['bandwidth_1MiB'].ratio_mean - 10000 / 10485.76) < 1e-6
    assert rows['bandwidth_1MiB'].ok
    assert 'OFF TARGET' not in crosscheck.table(list(rows.values()))


def test_our_kernel_as_bottleneck_is_off_target():
    slow = [dict(OURS[1], median_us=0.20), dict(OURS[2], bw_MBps=9000.0)]
    rows = {r.metric: r for r in crosscheck.ratios([case(crosscheck.OURS, slow),
                                                     case(crosscheck.IMB, IMB)])}
    assert not rows['latency_8B'].ok          # 0.20 us against IMB's 0.13
    assert not rows['bandwidth_1MiB'].ok      # 86 % of IMB
    assert 'OFF TARGET' in crosscheck.table(list(rows.values()))


def test_only_pairs_of_passing_runs_count():
    assert crosscheck.ratios([case(crosscheck.OURS, OURS), case(crosscheck.IMB, IMB, result='fail')]) == []
    assert crosscheck.ratios([case(crosscheck.OURS, OURS), case(crosscheck.IMB, IMB, env='other')]) == []
