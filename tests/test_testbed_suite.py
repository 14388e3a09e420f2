"""The suite on the Slurm virtual cluster: multi-node runs through slurmctld,
bytes across the shaped veth links, references derived from the wire rate.

Needs root and namespaces (CI has both); skipped with the reason otherwise.
"""
import pytest
from conftest import env_regex, perf, run_reframe, running_testbed, unexplained_failures

from hpcnet import testbed as tbm
from hpcnet.constants import PROJECT_ROOT, P2PMode

SKIP = tbm.unavailable_reason()
pytestmark = [pytest.mark.testbed, pytest.mark.integration,
              pytest.mark.skipif(SKIP is not None, reason=SKIP or '')]

NAME = 'hpcnets'     # never touches a developer's 'hpcnet' testbed
P2P = PROJECT_ROOT / 'checks' / 'p2p.py'


@pytest.fixture(scope='module')
def tb():
    with running_testbed(NAME) as t:
        yield t


def run_on_testbed(t, tmp_path, *args, timeout=1500):
    return run_reframe(tmp_path, '-c', str(P2P), *args, system='testbed:eth', timeout=timeout,
                       prefix=t.head_prefix(cwd=str(PROJECT_ROOT)), env=t.env())


def test_multinode_p2p_passes_within_wire_rate_references(tb, tmp_path, one_env_per_stack):
    proc, cases = run_on_testbed(tb, tmp_path, '-n', '^hpcnet_p2p_multinode%',
                                 '-p', env_regex(one_env_per_stack))
    cases = [c for c in cases if c['name'].startswith('hpcnet_p2p_multinode')]
    assert len(cases) == len(one_env_per_stack) * len(P2PMode.ALL), proc.stdout[-4000:]
    failed = unexplained_failures(cases)
    assert not failed, failed
    for c in cases:
        if c['result'] == 'fail':
            continue          # a known defect of the stack (allowed above)
        values = perf(c)
        # Judged against reference/testbed.yaml (ReFrame's verdict is 'pass'
        # only inside the bounds); the reference must really be there.
        refs = {k.split(':')[-1]: v[1] for k, v in c['perfvalues'].items()}
        if c['environ'].endswith('impi2021') and 'bibw' in c['name']:
            # No reference (reference/testbed.yaml: bimodal, CPU-bound here).
            assert refs['bandwidth_4MiB'] == 0
            continue
        assert refs['bandwidth_4MiB'] > 0, f'no reference for {c["name"]} {c["environ"]}'
        # Payload over wire rate: 0.956 streaming, 0.983 ping-pong (burst); the
        # known deviation (XFAIL) is far below.
        if c['result'] == 'pass':
            assert 0.85 < values['efficiency_4MiB'] < 1.0, c['name']
        else:
            assert values['efficiency_4MiB'] < 0.85, c['name']
        # One rank per node; the sanity already required each node's eth0 to
        # have sent at least what its rank sent (in bw mode the receiver
        # sends only acks, so only the sender's count is large).
        assert sorted(lc['host'] for lc in c['link_counters']) == ['cn1', 'cn2']
        assert max(lc['tx_bytes'] for lc in c['link_counters']) > 4 * 2**20
        assert "on fabric 'tcp'" in c['transport']
    xfails = sorted((c['environ'], c['name']) for c in cases if c['result'] == 'xfail')
    # The known deviation of reference/testbed.yaml: Open MPI's bidirectional rate.
    assert all('openmpi' in env and 'bibw' in name for env, name in xfails), xfails


def test_degraded_link_fails_the_bandwidth_checks(tb, tmp_path, one_env_per_stack):
    tb.shape('500mbit')
    try:
        proc, cases = run_on_testbed(tb, tmp_path, '-n', '^hpcnet_p2p_multinode%mode=bw$',
                                     '-p', env_regex(one_env_per_stack[:1]))
    finally:
        tb.shape('1gbit')
    (case,) = [c for c in cases if c['name'].startswith('hpcnet_p2p_multinode')]
    assert case['result'] == 'fail', proc.stdout[-3000:]
    assert case['fail_phase'] == 'performance'
    assert 'bandwidth_4MiB' in case['fail_reason']
    assert perf(case)['bandwidth_4MiB'] < 70     # ~60 MB/s at 500 Mbit/s


def test_nothing_left_after_runs(tb):
    pids = [r['pid'] for r in tb.state['resources'] if r['kind'] == 'proc']
    tb.down()
    assert tbm.leftovers(NAME, tb.state_dir, pids) == []
