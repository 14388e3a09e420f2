"""checks/sockets.py for real: the socket kernel under ReFrame on local:tcp
(both roles on this host, loopback), and on the Slurm testbed next to iperf3
on the same shaped 1 Gbit/s link, in one ReFrame session; and the rules its
udp_stream output is judged by (hpcnet.checklib.sockets), on made-up outputs.

Run: /tmp/rfvenv/bin/python -m pytest tests/test_checks_sockets.py -s
(-s shows our and iperf3's throughput).
"""
import shutil

import pytest
from conftest import perf, run_reframe, running_testbed, values
from reframe.core.exceptions import SanityError

from hpcnet.checklib import sockets
from hpcnet.checklib.calibration import ABOVE_WIRE
from hpcnet import testbed as tbm
from hpcnet.constants import CHECKS_DIR, MEASUREMENT_WITHHELD
from hpcnet.paths import WORK_DIR
from hpcnet.parsers.kernel import parse_kernel_output

SOCKETS = CHECKS_DIR / 'sockets.py'
IPERF3 = CHECKS_DIR / 'iperf3.py'
TESTS = ('tcp_stream', 'tcp_bidir', 'tcp_rr', 'udp_stream', 'udp_rr')
RR_PERF = {'rtt_median_32B', 'rtt_p99_32B', 'rtt_median_1KiB', 'rtt_p99_1KiB', 'rtt_first'}
#: Performance variables of each test on a partition without link_rate_bps.
PERF_VARIABLES = {
    'tcp_stream': {'throughput_64KiB', 'throughput_1MiB'},
    'tcp_bidir': {'throughput_64KiB', 'throughput_1MiB'},
    'tcp_rr': RR_PERF,
    # unpaced: the receiver's capacity; paced at loopback's stated 100 and 500 Mbit/s: loss
    'udp_stream': {'udp_receiver_capacity_1KiB', 'udp_receiver_capacity_32KiB',
                   'udp_loss_100Mbit_1KiB', 'udp_loss_500Mbit_1KiB',
                   'udp_loss_100Mbit_32KiB', 'udp_loss_500Mbit_32KiB'},
    'udp_rr': RR_PERF,
}
#: Sizes the kernel runs with the check's defaults.
SIZES = {
    'tcp_stream': [1 << i for i in range(21)],          # 1 B .. 1 MiB
    'tcp_bidir': [1 << i for i in range(21)],
    'tcp_rr': [1 << i for i in range(5, 15)],            # 32 B .. 16 KiB
    'udp_stream': [1 << i for i in range(16)],           # 1 B .. 32 KiB
    'udp_rr': [1 << i for i in range(5, 15)],
}


def _test_param(case):
    # 'hpcnet_sockets %test=tcp_rr' -> 'tcp_rr'
    return case['name'].split('%test=')[1].split()[0]


@pytest.mark.integration
def test_all_socket_tests_pass_on_loopback(tmp_path):
    proc, cases = run_reframe(tmp_path, '-c', str(SOCKETS), '-n', '^hpcnet_sockets%',
                              '-S', 'duration_ms=40', '-S', 'stream_window_ms=10',
                              system='local:tcp', timeout=300)
    runs = {_test_param(c): c for c in cases if c['name'].startswith('hpcnet_sockets ')}
    assert sorted(runs) == sorted(TESTS), proc.stdout[-3000:]
    failed = [(name, c.get('fail_reason')) for name, c in runs.items() if c['result'] != 'pass']
    assert not failed, failed
    assert proc.returncode == 0
    for name, case in runs.items():
        values = perf(case)
        assert set(values) == PERF_VARIABLES[name], name
        for var, value in values.items():
            if var.startswith('udp_loss_'):
                assert 0 <= value <= sockets.MAX_PACED_LOSS_PCT, (name, var, value)
            else:
                assert value > 0, (name, var, value)
        # The whole table is in the report, and both ends ran here.
        assert sorted({int(r['size_bytes']) for r in case['curve']}) == SIZES[name]
        assert case['client_host'] == case['server_host']
        (link,) = case['link_counters']
        assert link['iface'] == 'lo' and link['tx_bytes'] > 0
        assert case['mpi_library'] == 'none'
    # udp_stream: every size unpaced, 1 KiB and 32 KiB also at the stated
    # loopback rates, where the sender keeps its rate.
    udp = runs['udp_stream']
    assert udp['udp_rates_mbps'] == [100, 500]
    assert sorted((int(r['size_bytes']), r['rate_mbps']) for r in udp['curve']) == sorted(
        [(s, 0) for s in SIZES['udp_stream']] + [(s, r) for s in (1024, 32768) for r in (100, 500)])
    for row in udp['curve']:
        if row['rate_mbps']:
            # never above the schedule: one datagram per size x 8 / rate in 40 ms
            slots = 0.040 * row['rate_mbps'] * 1e6 / (row['size_bytes'] * 8)
            assert row['sent_pkts'] <= slots + 1, row
            assert row['send_MBps'] * 8 >= sockets.MIN_RATE_REACHED * row['rate_mbps'], row


# ---------------------------------------------------------------------------
# udp_stream's verdict on made-up outputs: loss judged at the paced rates only

UDP_COLUMNS = ('size_bytes rate_mbps duration_s sent_pkts recv_pkts lost_pkts loss_pct out_of_order '
               'send_MBps recv_MBps recv_Mbps')


def _udp_output(runs, rates=(100, 500)):
    '''Kernel output of udp_stream runs [(size, rate, sent, received, send Mbit/s)]
    paced at ``rates``.'''
    rates = sorted(rates) + [0]
    lines = ['hpcnet-kernel: sockets 1', 'mpi-library: none', 'ranks: 2', 'host: 0 a', 'host: 1 a',
             'test: udp_stream', 'transport: udp', 'client-host: a', 'server-host: a',
             'rate-mbps: ' + ','.join(f'{r:g}' for r in rates), 'paced-sizes: 1024',
             f'columns: {UDP_COLUMNS}']
    for size, rate, sent, recvd, mbit in runs:
        lost = sent - recvd
        lines.append(f'row: {size} {rate:g} 0.3 {sent} {recvd} {lost} {100 * lost / sent:.4f} 0 '
                     f'{mbit / 8:.3f} {mbit / 8:.3f} {mbit:.3f}')
    return parse_kernel_output('\n'.join(lines + ['done: ok']) + '\n', expect_kernel='sockets')


def _judge(runs, rates=(100.0, 500.0), sizes=(64, 1024), paced=(1024,)):
    sockets.check_output(_udp_output(runs), 'udp_stream', sizes, 1.0, rates, False, paced)


GOOD = [(64, 0, 1000, 1000, 300.0), (1024, 100, 3662, 3662, 100.0), (1024, 500, 18311, 18311, 500.0),
        (1024, 0, 200000, 150000, 4000.0)]


def test_unpaced_loss_is_the_receivers_capacity_not_judged():
    _judge(GOOD)      # 25 % lost unpaced at 1 KiB: the receiver's capacity, no verdict


@pytest.mark.parametrize('change,message', [
    ((1024, 500, 18311, 18200, 500.0),
     r'udp_stream lost 0\.6062 % at 1024 B paced at 500 Mbit/s \(sent 500\.0\), a rate the link '
     r'carries \(more than max_paced_loss_pct 0\.1 %\)'),
    ((1024, 100, 1500, 1500, 40.0),
     r'udp_stream at 1024 B sent 40\.0 Mbit/s, less than 0\.5 of its paced rate 100 Mbit/s: '
     r'the host could not keep the schedule'),
])
def test_paced_loss_and_rate_are_judged(change, message):
    runs = [change if run[:2] == change[:2] else run for run in GOOD]
    with pytest.raises(SanityError, match=message):
        _judge(runs)


def test_paced_loss_within_the_bound_passes():
    # 0.06 %: under 0.1 %; and a stalled host's shortfall of the rate still
    # judges a rate the link carries
    runs = [(1024, 500, 18311, 18300, 500.0) if run[:2] == (1024, 500) else
            (1024, 100, 2900, 2900, 80.0) if run[:2] == (1024, 100) else run for run in GOOD]
    _judge(runs)


@pytest.mark.parametrize('runs,rates,message', [
    (GOOD[:2] + GOOD[3:], (100.0, 500.0), r'missing \[\(1024, 500\.0\)\]'),
    (GOOD, (100.0, 200.0), r"kernel paced at rate-mbps: '100,500,0', asked for 100,200,0"),
])
def test_runs_not_asked_for_fail(runs, rates, message):
    with pytest.raises(SanityError, match=message):
        _judge(runs, rates=rates)


def test_rates_from_the_link_and_their_names():
    assert sockets.udp_rates_from_link(10**9, sockets.UDP_RATE_FRACTIONS) == (250.0, 500.0)
    assert sockets.udp_rates_from_link(10**6, (0.25, 0.5)) == (1.0,)
    assert sockets.kernel_rates_arg([500.0, 100.0]) == '100,500,0'
    assert sockets.rate_label(500.0) == '500Mbit' and sockets.rate_label(2.5) == '2p5Mbit'


# ---------------------------------------------------------------------------
# The testbed: two nodes, 1 Gbit/s links

TB_SKIP = tbm.unavailable_reason()
TB_NAME = 'hpcnetk'     # never touches a developer's 'hpcnet' testbed


@pytest.fixture(scope='module')
def tb():
    with running_testbed(TB_NAME) as t:
        yield t


@pytest.mark.integration
@pytest.mark.testbed
@pytest.mark.skipif(TB_SKIP is not None, reason=TB_SKIP or '')
def test_tcp_stream_matches_iperf3_on_the_same_link(tb, tmp_path):
    if shutil.which('iperf3') is None:
        pytest.skip('iperf3 is not on PATH')
    # Like with like: iperf3 averages over 5 s (-t 5); ours runs 64 KiB .. 1 MiB
    # for 1 s each (the median of 5 windows of 200 ms; 5 s in all).  With one
    # 300 ms window per size (before windows), one stall
    # of ~10 ms on this shared 2-core host (other jobs running) costs a size
    # 3-4 %: seen at random sizes (1 MiB at 115.4 MB/s next to 119.9 at the
    # others), which a 5 s average dilutes.
    proc, cases = run_reframe(
        tmp_path, '-c', str(SOCKETS), '-c', str(IPERF3),
        '-n', r'^(hpcnet_sockets.*test=tcp_stream\b|hpcnet_iperf3)',
        '-S', 'hpcnet_sockets.stream_min_size=65536',
        '-S', 'hpcnet_sockets.stream_window_ms=200',
        system='testbed:eth', timeout=300,
        prefix=tb.head_prefix(cwd=str(WORK_DIR)), env=tb.env())
    ours = [c for c in cases if c['name'].startswith('hpcnet_sockets ')]
    theirs = [c for c in cases if c['name'].startswith('hpcnet_iperf3 ')]
    assert len(ours) == 1 and len(theirs) == 1, proc.stdout[-4000:]
    (ours,), (theirs,) = ours, theirs
    for case in ours, theirs:
        assert case['result'] == 'pass', (case['name'], case.get('fail_reason'))
        if case['judgement'].startswith(f'not judged: {MEASUREMENT_WITHHELD}'):
            pytest.skip(case['judgement'])
    assert proc.returncode == 0

    ours_perf, theirs_perf = values(ours), values(theirs)
    ours_mbps, iperf3_mbps = ours_perf['throughput_1MiB'], theirs_perf['throughput']
    print(f'\ntcp_stream 1 MiB: {ours_mbps:.1f} MB/s (efficiency '
          f'{ours_perf["efficiency_1MiB"]:.3f}, over iperf3 before/after it '
          f'{ours_perf["throughput_1MiB_over_iperf3"]:.3f}); iperf3 case: {iperf3_mbps:.1f} MB/s '
          f'(efficiency {theirs_perf["efficiency"]:.3f}); ours/iperf3 = {ours_mbps / iperf3_mbps:.3f}')
    # Judged over iperf3 on the same link in the same job (reference/testbed.yaml,
    # -10 %), so a busy host moves both sides; never above the wire.
    assert ours_perf['throughput_1MiB_over_iperf3'] >= 0.90, ours_perf
    assert ours_perf['efficiency_1MiB'] <= 0.9415 * (1 + ABOVE_WIRE)
    assert theirs_perf['efficiency'] <= 0.9415 * (1 + ABOVE_WIRE)

    # Server on one node, client on the other, and both nodes' eth0 counted
    # the bytes (the sender's at least the payload; the payload tens of MB
    # however busy the host, far above the session's control traffic).
    assert {ours['server_host'], ours['client_host']} == {'cn1', 'cn2'}
    summary = theirs['iperf3_summary']
    assert {summary['server_host'], summary['client_host']} == {'cn1', 'cn2'}
    for case, sender, payload in (
            (ours, ours['client_host'], sum(r['bytes_received'] for r in ours['curve'])),
            (theirs, summary['client_host'], summary['bytes_received'])):
        links = {lc['host']: lc for lc in case['link_counters']}
        assert sorted(links) == ['cn1', 'cn2'] and all(lc['iface'] == 'eth0'
                                                       for lc in links.values())
        assert links[sender]['tx_bytes'] >= payload > 16 * 2**20


@pytest.mark.integration
@pytest.mark.testbed
@pytest.mark.skipif(TB_SKIP is not None, reason=TB_SKIP or '')
def test_testbed_leaves_nothing_behind(tb):
    pids = [r['pid'] for r in tb.state['resources'] if r['kind'] == 'proc']
    tb.down()
    assert tbm.leftovers(TB_NAME, tb.state_dir, pids) == []
