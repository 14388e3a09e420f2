"""Real ReFrame runs on the `local` system, asserted on the JSON run report."""
import pytest
from conftest import env_regex, run_reframe, unexplained_failures, values

from hpcnet.constants import CHECKS_DIR, DEFAULT_REPORTS_DIR, P2PMode
from hpcnet.metrics import P2P_BANDWIDTH_SIZES

pytestmark = pytest.mark.integration

P2P = CHECKS_DIR / 'p2p.py'


def test_p2p_every_mpi_both_partitions_all_modes(tmp_path, one_env_per_stack):
    proc, cases = run_reframe(tmp_path, '-c', str(P2P), '-n', '^hpcnet_p2p%',
                              '-p', env_regex(one_env_per_stack), '-S', 'time_per_size_ms=10')
    p2p = [c for c in cases if c['name'].startswith('hpcnet_p2p ')]
    assert len(p2p) == len(one_env_per_stack) * 2 * len(P2PMode.ALL), proc.stdout[-3000:]
    # A stack's known defect (Debian MPICH 4.0.2 hangs in MPI_Finalize) may
    # fail a case even after the retry, but only as that, named by the
    # kernel's watchdog; anything else is a failure.
    failed = unexplained_failures(p2p, ok=('pass',))
    assert not failed, failed
    for c in p2p:
        if c['result'] != 'pass':
            continue
        perf = {k.split(':')[-1]: v for k, v in c['perfvalues'].items()}
        assert perf['latency_8B'][0] > 0 and perf['bandwidth_4MiB'][0] > 0
        assert {f'bandwidth_{s >> 10}KiB' if s < 1 << 20 else f'bandwidth_{s >> 20}MiB'
                for s in P2P_BANDWIDTH_SIZES} <= set(perf)
        # The whole curve is in the report, 0 B .. 4 MiB.
        assert [r['size_bytes'] for r in c['curve']] == [0] + [1 << i for i in range(23)]
        assert c['first_exchange_us'] > 0
        # Proof of the transport, per partition.
        assert f"on fabric '{c['partition']}'" in c['transport']
        assert c['mpi_library']


def _one_env(one_env_per_stack):
    return one_env_per_stack[0]


NOT_ASSERTED = ("$not_asserted:\n  hpcnet_p2p:\n"
                "    'local:shm/.*/(latency_0B|bandwidth_.*)': only latency_8B is under test\n")


#: A null bound needs its reason (hpcnet.acceptance.references.references.UNBOUNDED).
UNBOUNDED = ("$unbounded:\n  hpcnet_p2p:\n"
             "    'local:shm/.*/pingpong/latency_8B': these tests judge the machinery, not the host\n")


def _write_refs(tmp_path, latency_ref, not_asserted=NOT_ASSERTED):
    refdir = tmp_path / 'refs'
    refdir.mkdir()
    (refdir / 'local.yaml').write_text(
        'hpcnet_p2p:\n  $index: [$partition, mpi_family, mode]\n  local:shm:\n    .*:\n'
        f'      pingpong:\n        latency_8B: {latency_ref}\n' + not_asserted + UNBOUNDED)
    return refdir


def _run_with_refs(tmp_path, refdir, one_env_per_stack):
    proc, cases = run_reframe(tmp_path, '-c', str(P2P), '-n', '^hpcnet_p2p.*mode=pingpong',
                              '-p', env_regex([_one_env(one_env_per_stack)]),
                              '-S', 'time_per_size_ms=5', env={'HPCNET_REFERENCE_DIR': str(refdir)},
                              retries=0, system='local:shm')
    (case,) = [c for c in cases if c['name'].startswith('hpcnet_p2p')]
    return proc, case


@pytest.mark.parametrize('ref,result', [
    ('[1000.0, null, 0.5, us]', 'pass'),            # generous: any sane host passes
    ('[0.0001, null, 0.01, us]', 'fail'),           # 1 ps: no host does this
    ("['$xfail', 'known regression', [0.0001, null, 0.01, us]]", 'xfail'),
])
def test_reference_file_end_to_end(tmp_path, one_env_per_stack, ref, result):
    proc, case = _run_with_refs(tmp_path, _write_refs(tmp_path, ref), one_env_per_stack)
    assert case['result'] == result, proc.stdout[-2000:]
    perf = {k.split(':')[-1]: v for k, v in case['perfvalues'].items()}
    assert perf['latency_8B'][1] == 0.0001 if result != 'pass' else perf['latency_8B'][1] == 1000.0
    if result == 'fail':
        assert case['fail_phase'] == 'performance'
        assert 'latency_8B' in case['fail_reason']
    # Deliberately not judged: recorded with the reason, and in perfvalues
    # without a reference or bounds.
    assert set(case['not_asserted']) == {'latency_0B', 'bandwidth_64KiB', 'bandwidth_1MiB',
                                         'bandwidth_4MiB'}
    assert perf['latency_0B'][1:4] == [0, None, None] and perf['latency_0B'][5] == 'pass', perf
    assert case['not_asserted']['latency_0B']['reason'] == 'only latency_8B is under test'
    # The value is the report's perfvalues' alone: not_asserted holds the reason.
    assert set(case['not_asserted']['bandwidth_4MiB']) == {'reason'}
    assert values(case)['bandwidth_4MiB'] > 0
    assert case['judgement'].startswith('judged against')


def test_a_value_without_reference_fails_where_the_system_has_a_file(tmp_path, one_env_per_stack):
    proc, case = _run_with_refs(tmp_path, _write_refs(tmp_path, '[1000.0, null, 0.5, us]',
                                                      not_asserted=''), one_env_per_stack)
    assert case['result'] == 'fail' and case['fail_phase'] == 'performance', proc.stdout[-2000:]
    assert "no reference value found for performance variable 'latency_0B'" in case['fail_reason']


def test_no_reference_file_is_not_judged_and_says_so(tmp_path, one_env_per_stack):
    proc, case = _run_with_refs(tmp_path, tmp_path, one_env_per_stack)
    assert case['result'] == 'pass'
    assert case['judgement'].startswith('not judged: ') and 'local.yaml does not exist' in \
        case['judgement']


def test_malformed_reference_fails_with_file_and_key(tmp_path, one_env_per_stack):
    refdir = _write_refs(tmp_path, '[fast, -0.1, 0.1, us]')
    proc, cases = run_reframe(tmp_path, '-c', str(P2P), '-n', '^hpcnet_p2p.*mode=pingpong',
                              '-p', env_regex([_one_env(one_env_per_stack)]),
                              env={'HPCNET_REFERENCE_DIR': str(refdir)}, retries=0,
                              system='local:shm')
    # The configuration validates the directory: nothing runs, one line.
    assert proc.returncode == 2 and cases == [], proc.stdout[-2000:]
    assert (f"hpcnet: error: {refdir / 'local.yaml'}: hpcnet_p2p.local:shm..*.pingpong.latency_8B: "
            "reference value 'fast' is not a finite number") in proc.stdout


def test_sessions_of_the_tests_stay_out_of_the_users_history(tmp_path, own_history,
                                                             one_env_per_stack):
    user_db = DEFAULT_REPORTS_DIR / 'results.db'
    before = user_db.stat().st_mtime_ns if user_db.exists() else None
    proc, cases = run_reframe(tmp_path, '-c', str(P2P), '-n', '^hpcnet_p2p.*mode=pingpong',
                              '-p', env_regex([_one_env(one_env_per_stack)]),
                              '-S', 'time_per_size_ms=2', retries=0, system='local:shm')
    assert cases and proc.returncode == 0, proc.stdout[-2000:]
    assert (user_db.stat().st_mtime_ns if user_db.exists() else None) == before
    assert (own_history / 'results.db').stat().st_size > 0
    assert list((own_history / 'perflogs').rglob('hpcnet_p2p.log'))


def test_unknown_system_is_one_clear_message(tmp_path):
    proc, _ = run_reframe(tmp_path, '-c', str(P2P), '--system', 'nosuchsystem', timeout=120)
    assert proc.returncode != 0
    assert 'nosuchsystem' in proc.stdout


def test_collectives_pairs_and_preflight(tmp_path, one_env_per_stack):
    '''Collectives (a reduction and a personalized exchange), the pair
    matrix and the preflight, every MPI, both partitions.'''
    proc, cases = run_reframe(
        tmp_path, '-c', str(CHECKS_DIR), '-R',
        '-n', r'^(hpcnet_collectives.*op=(allreduce|alltoall)\b|hpcnet_pairs|hpcnet_preflight)',
        '-p', env_regex(one_env_per_stack + ['builtin']), '-S', 'time_per_size_ms=5')
    by = {}
    for c in cases:
        by.setdefault(c['name'].split()[0], []).append(c)
    failed = unexplained_failures(cases)
    assert not failed, failed
    assert len(by['hpcnet_collectives']) == len(one_env_per_stack) * 2 * 2, proc.stdout[-3000:]
    for c in by['hpcnet_collectives']:
        if c['result'] != 'pass':
            continue
        perf = {k.split(':')[-1]: v[0] for k, v in c['perfvalues'].items()}
        assert perf['avg_8B'] > 0 and perf['max_1MiB'] >= perf['avg_1MiB'] > 0
        assert all(r['op'] == c['op'] for r in c['curve'])
        assert f"on fabric '{c['partition']}'" in c['transport']
    # One node is one pair, whose outlier count could only be 0: not run, said why.
    assert len(by['hpcnet_pairs']) == len(one_env_per_stack) * 2
    for c in by['hpcnet_pairs']:
        assert c['result'] == 'skip', c
        assert 'the pair matrix needs at least 2 nodes' in c['skip_reason'], c['skip_reason']
    (shm, tcp) = sorted(by['hpcnet_preflight'], key=lambda c: c['partition'])
    assert shm['result'] == 'skip' and tcp['result'] == 'pass'


def _fake_roce_site(tmp_path):
    '''A one-host site declaring RoCE on mlx5_0 (local scheduler: the job runs
    on this host, where the in-job probe reads HPCNET_SYSFS_ROOT).'''
    sites = tmp_path / 'systems'
    sites.mkdir()
    (sites / 'fakeroce.py').write_text(
        'from hpcnet.model import partition_extras\n'
        "system = {'name': 'fakeroce', 'hostnames': ['^never-matches$'], 'partitions': [\n"
        "  {'name': 'roce', 'scheduler': 'local', 'launcher': 'mpirun', 'max_jobs': 1,\n"
        "   'extras': partition_extras(fabric='roce', iface='lo', rdma_device='mlx5_0',\n"
        "                              gid_index=3)}]}\n")
    return sites


def test_rdma_readiness_is_judged_on_the_nodes(tmp_path, one_env_per_stack):
    '''No RDMA device where the ranks run: the case fails naming the node and
    the device (the partition declares the fabric).  With the device there (a fake sysfs on
    the node), the same case runs the MPI and is judged.'''
    sites = _fake_roce_site(tmp_path)
    openmpi = [e for e in one_env_per_stack if 'openmpi' in e][:1] or one_env_per_stack[:1]
    args = ('-c', str(P2P), '-n', 'hpcnet_p2p.*mode=pingpong', '-p', env_regex(openmpi),
            '-S', 'time_per_size_ms=2')
    proc, cases = run_reframe(tmp_path / 'none', *args, system='fakeroce:roce', retries=0,
                              env={'HPCNET_SYSTEMS_DIRS': str(sites),
                                   'HPCNET_SYSFS_ROOT': str(tmp_path / 'empty-sysfs')})
    (case,) = [c for c in cases if c['name'].startswith('hpcnet_p2p')]
    assert case['result'] == 'fail', proc.stdout[-3000:]
    assert 'declares fabric roce, but' in case['fail_reason'] \
        and 'has no RDMA device mlx5_0' in case['fail_reason'], case['fail_reason']
    fake = tmp_path / 'sysfs'
    (fake / 'class' / 'infiniband' / 'mlx5_0').mkdir(parents=True)
    proc, cases = run_reframe(tmp_path / 'present', *args, system='fakeroce:roce', retries=0,
                              env={'HPCNET_SYSTEMS_DIRS': str(sites), 'HPCNET_SYSFS_ROOT': str(fake)})
    (case,) = [c for c in cases if c['name'].startswith('hpcnet_p2p')]
    # The device "exists" on the node: the MPI was started (and, with no real
    # HCA behind the name, failed): a failure, never a pass or a skip.
    assert case['result'] == 'fail', proc.stdout[-3000:]
    assert 'RDMA device' not in case['fail_reason'], case['fail_reason']
