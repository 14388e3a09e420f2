"""checks/sockets.py for real: the socket kernel under ReFrame on local:tcp
(both roles on this host, loopback), and on the Slurm testbed next to iperf3
on the same shaped 1 Gbit/s link, in one ReFrame session.

Run: /tmp/rfvenv/bin/python -m pytest tests/test_checks_sockets.py -s
(-s shows our and iperf3's throughput).
"""
import shutil

import pytest
from conftest import perf, run_reframe, running_testbed

from hpcnet import testbed as tbm
from hpcnet.constants import CHECKS_DIR, WORK_DIR

pytestmark = pytest.mark.integration

SOCKETS = CHECKS_DIR / 'sockets.py'
IPERF3 = CHECKS_DIR / 'iperf3.py'
TESTS = ('tcp_stream', 'tcp_bidir', 'tcp_rr', 'udp_stream', 'udp_rr')
RR_PERF = {'rtt_median_32B', 'rtt_p99_32B', 'rtt_median_1KiB', 'rtt_p99_1KiB', 'rtt_first'}
#: Performance variables of each test on a partition without link_rate_bps.
PERF_VARIABLES = {
    'tcp_stream': {'throughput_64KiB', 'throughput_1MiB'},
    'tcp_bidir': {'throughput_64KiB', 'throughput_1MiB'},
    'tcp_rr': RR_PERF,
    'udp_stream': {'throughput_1KiB', 'throughput_32KiB', 'loss_1KiB', 'loss_32KiB'},
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
            if var.startswith('loss_'):
                assert 0 <= value < 1, (name, var, value)
            else:
                assert value > 0, (name, var, value)
        # The whole table is in the report, and both ends ran here.
        assert [int(r['size_bytes']) for r in case['curve']] == SIZES[name]
        assert case['client_host'] == case['server_host']
        (link,) = case['link_counters']
        assert link['iface'] == 'lo' and link['tx_bytes'] > 0
        assert case['mpi_library'] == 'none'
    # Paced at the check's loopback rate, 2000 Mbit/s = 250 MB/s (the sender's
    # rate: the receiver's, over first to last datagram, can be above it when
    # the sender catches up after a delay).
    assert runs['udp_stream']['udp_rate_mbps'] == 2000
    for row in runs['udp_stream']['curve']:
        assert row['send_MBps'] < 250 * 1.05, row


# ---------------------------------------------------------------------------
# The testbed: two nodes, 1 Gbit/s links

TB_SKIP = tbm.unavailable_reason()
TB_NAME = 'hpcnetk'     # never touches a developer's 'hpcnet' testbed


@pytest.fixture(scope='module')
def tb():
    with running_testbed(TB_NAME) as t:
        yield t


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
    assert proc.returncode == 0

    ours_perf, theirs_perf = perf(ours), perf(theirs)
    ours_mbps, iperf3_mbps = ours_perf['throughput_1MiB'], theirs_perf['throughput']
    print(f'\ntcp_stream 1 MiB: {ours_mbps:.1f} MB/s (efficiency '
          f'{ours_perf["efficiency_1MiB"]:.3f}); iperf3: {iperf3_mbps:.1f} MB/s (efficiency '
          f'{theirs_perf["efficiency"]:.3f}); ours/iperf3 = {ours_mbps / iperf3_mbps:.3f}')
    assert ours_mbps >= 0.95 * iperf3_mbps, (ours_mbps, iperf3_mbps)
    # Payload over the 1 Gbit/s wire rate: TCP/IP/Ethernet headers cost ~4.4 %
    # (0.9415); the bounds are reference/testbed.yaml's (tcp_stream -10 %; one
    # 1 s window per size measured 0.866-0.95; iperf3 -5 % over 5 s), never above
    # the wire.
    assert 0.9415 * 0.90 <= ours_perf['efficiency_1MiB'] <= 0.9415 * 1.02
    assert 0.9415 * 0.95 <= theirs_perf['efficiency'] <= 0.9415 * 1.02

    # Server on one node, client on the other, and both nodes' eth0 counted
    # the bytes (the sender's at least the payload).
    assert {ours['server_host'], ours['client_host']} == {'cn1', 'cn2'}
    summary = theirs['iperf3_summary']
    assert {summary['server_host'], summary['client_host']} == {'cn1', 'cn2'}
    for case, sender, payload in (
            (ours, ours['client_host'], sum(r['bytes_received'] for r in ours['curve'])),
            (theirs, summary['client_host'], summary['bytes_received'])):
        links = {lc['host']: lc for lc in case['link_counters']}
        assert sorted(links) == ['cn1', 'cn2'] and all(lc['iface'] == 'eth0'
                                                       for lc in links.values())
        assert links[sender]['tx_bytes'] >= payload > 100 * 2**20


@pytest.mark.testbed
@pytest.mark.skipif(TB_SKIP is not None, reason=TB_SKIP or '')
def test_testbed_leaves_nothing_behind(tb):
    pids = [r['pid'] for r in tb.state['resources'] if r['kind'] == 'proc']
    tb.down()
    assert tbm.leftovers(TB_NAME, tb.state_dir, pids) == []
