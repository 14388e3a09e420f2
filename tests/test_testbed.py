"""The Slurm virtual cluster (hpcnet.testbed), built for real.

Needs root, network/UTS/mount namespaces, munge and Slurm (slurmctld, slurmd);
skipped with the reason otherwise. One testbed (named ``hpcnett``, so it never
touches a developer's ``hpcnet`` one) serves the module; a second one is built
and broken half-way to check that a failed ``up`` leaves nothing behind.
"""

import json
import os
import re
import shutil
import statistics
import subprocess
import time
from pathlib import Path

import pytest
from conftest import env_regex, run_reframe, unexplained_failures
from helpers import needs_testbed

from hpcnet import testbed as tbm
from hpcnet.checklib import calibration
from hpcnet.constants import CHECKS_DIR, SRC_DIR
from hpcnet.paths import WORK_DIR
from hpcnet.variables import REFERENCE_DIR_ENV, TESTBED_NODES_ENV, TESTBED_WIRE_ENV
from hpcnet.parsers.kernel import parse_kernel_output
from hpcnet.testbed import (DEFAULTS, StepError, Testbed, TestbedError, burst_bytes, paper, softirq,
                            wire)
from hpcnet.testbed.config import ETHERNET_OVERHEAD
from hpcnet.commands.testbed import testbed_main as run_cli

NAME = 'hpcnett'            # our testbed's namespaces: hpcnett-hn0, ...
FAIL_NAME = 'hpcnetf'       # the one broken half-way
OMPI_ENV = {
    'OMPI_ALLOW_RUN_AS_ROOT': '1', 'OMPI_ALLOW_RUN_AS_ROOT_CONFIRM': '1',
    'OMPI_MCA_pml': 'ob1', 'OMPI_MCA_btl': 'tcp,self',
    'OMPI_MCA_btl_tcp_if_include': 'eth0',
    'OMPI_MCA_oob_tcp_if_include': 'eth0',
}
MPICH_ENV = {'UCX_TLS': 'tcp,self', 'UCX_NET_DEVICES': 'eth0'}
# ReFrame 4.10's slurm backend: its sacct command and the regex it applies.
RFM_SACCT = 'sacct -S {day} -P -j {ids} -o jobid,state,exitcode,end,nodelist'
RFM_STATE_RE = (r'^(?P<jobid>\d+(?:\+\d+|_\d+|_\[\d+-\d+\])?)\|(?P<state>\S+)'
                r'([^\|]*)\|(?P<exitcode>\d+)\:(?P<signal>\d+)\|(?P<end>\S+)\|'
                r'(?P<nodespec>.*)')

PINGPONG_C = r'''
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int rank, size, len; char host[256], lib[MPI_MAX_LIBRARY_VERSION_STRING];
    size_t n = strtoul(argv[1], 0, 10); int iters = atoi(argv[2]);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size);
    gethostname(host, sizeof host); MPI_Get_library_version(lib, &len);
    char *buf = calloc(n, 1), *nl = strchr(lib, '\n'); if (nl) *nl = 0;
    for (int i = 0; i < iters && size > 1; i++) {
        if (rank == 0) {
            MPI_Send(buf, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
    }
    printf("rank %d host %s lib %s\n", rank, host, lib); fflush(stdout);
    MPI_Finalize(); return 0;
}
'''


pytestmark = needs_testbed(integration=False)


@pytest.fixture(scope='module')
def tb():
    t = Testbed(name=NAME)
    t.down()      # leftovers of an interrupted earlier run, if any
    t.up()          # the defaults: 4 compute nodes, wire-true 1 Gbit/s links
    try:
        yield t
    finally:
        t.down()


@pytest.fixture(scope='module')
def mpi_bins(tmp_path_factory):
    d = tmp_path_factory.mktemp('mpi')
    (d / 'pp.c').write_text(PINGPONG_C)
    bins = {}
    for mpi, cc in (('openmpi', 'mpicc.openmpi'), ('mpich', 'mpicc.mpich')):
        if shutil.which(cc):
            subprocess.run([cc, '-O2', '-o', str(d / f'pp_{mpi}'),
                            str(d / 'pp.c')], check=True, timeout=120)
            bins[mpi] = d / f'pp_{mpi}'
    return bins


def _tx(t, node):
    r = t.run(node, ['cat', f'/sys/class/net/{t.iface}/statistics/tx_bytes'],
              check=True, cwd='/')
    return int(r.stdout)


def _srun(t, argv, env=None, cwd='/', timeout=60):
    return t.run(t.head, argv, env=dict(os.environ, **(env or {})), cwd=cwd,
                 timeout=timeout)


def test_up_status_and_refusals(tb, capsys):
    st = tb.status()
    assert st['complete'] and st['rate'] == '1gbit'
    assert tb.nodes() == ['hn0', 'cn1', 'cn2', 'cn3', 'cn4']
    assert tb.addresses() == {'hn0': '10.77.0.10', 'cn1': '10.77.0.11', 'cn2': '10.77.0.12',
                              'cn3': '10.77.0.13', 'cn4': '10.77.0.14'}
    for n in st['nodes']:
        assert 'tbf' in n['qdisc'] and '1Gbit' in n['qdisc'], n
        # Ethernet's per-frame overhead counted, a bucket of a few frames.
        assert 'overhead 24' in n['qdisc'], n
        burst = re.search(r'burst (\d+)([KM]?)b', n['qdisc'])
        bytes_ = int(burst[1]) * {'': 1, 'K': 1 << 10, 'M': 1 << 20}[burst[2]]
        assert abs(bytes_ / burst_bytes(tb.burst) - 1) < 0.01, n
        assert all(d['alive'] for d in n['daemons']), n
    # The bucket is the smallest that measured wire-true on this host.
    proof = tb.state['wire']
    assert proof['wire_true'] and proof['burst'] == tb.burst in wire.BURSTS, proof
    assert 1 - wire.SLOWER_TOLERANCE <= proof['efficiency'] <= 1 + wire.FASTER_TOLERANCE
    assert proof['retransmits'] <= proof['segments'] * wire.RETRANSMIT_SHARE
    assert 0.5 < proof['as_checks_measure'] <= 1 + wire.FASTER_TOLERANCE
    assert tb.env()[TESTBED_WIRE_ENV] == str(proof['as_checks_measure'])
    # The host's softirq threads run ahead of the ranks while the testbed is up.
    assert str(tb.state_dir) in softirq.holders()
    for pid in softirq.softirq_threads():
        assert os.sched_getscheduler(pid) == os.SCHED_FIFO
        assert os.sched_getparam(pid).sched_priority == DEFAULTS.softirq_priority
    # ... and the host's backlog has a NIC's queue for each port the testbed adds.
    assert softirq.backlog_holders()[str(tb.state_dir)] == softirq.backlog_needed(4) == 10000
    assert int(softirq.BACKLOG_SYSCTL.read_text()) >= 10000 == st['backlog']
    assert re.search(r'cn1 eth\* idle', st['sinfo']), st['sinfo']
    assert re.search(r'cn2 eth\* idle', st['sinfo']), st['sinfo']
    # Each node: its own hostname, only lo and eth0, its own address.
    for node, addr in tb.addresses().items():
        r = tb.run(node, ['sh', '-c', 'hostname; ls /sys/class/net; '
                          'ip -4 -o addr show dev eth0'], check=True, cwd='/')
        lines = r.stdout.split()
        assert lines[0] == node and 'eth0' in lines and 'lo' in lines
        assert f'{addr}/24' in r.stdout
    # No address of ours in the root namespace.
    root = subprocess.run(['ip', '-4', '-o', 'addr'], capture_output=True,
                          text=True, timeout=10).stdout
    assert '10.77.0.' not in root
    # The API for the ReFrame integration.
    pre = tb.head_prefix(cwd='/')
    assert pre[0] == 'nsenter' and pre[-1] == '--'
    assert tb.rate == '1gbit' and tb.iface == 'eth0'
    env = tb.env({})
    assert env['SLURM_CONF'] == str(tb.slurm_conf)
    # What config/systems/testbed.py builds its partitions from.
    assert env['HPCNET_TESTBED_NODES'] == '4' and env['HPCNET_TESTBED_RATE_BPS'] == '1000000000'
    # This kernel has no RDMA: no device, the reason kept, no roce partition.
    assert tb.rdma_device is None and 'HPCNET_TESTBED_RDMA_DEVICE' not in env
    assert 'no RDMA in this kernel' in tb.rdma_absent_reason, tb.rdma_absent_reason
    # up twice refuses; so does another state dir with the same name.
    with pytest.raises(TestbedError, match='testbed already up .*run down first'):
        tb.up()
    with pytest.raises(TestbedError, match='already exist'):
        Testbed('/run/hpcnett-other', name=NAME).up()
    assert not Path('/run/hpcnett-other').exists()
    # CLI
    assert run_cli(['status', '--testbed-name', NAME]) == 0
    assert 'cn2' in capsys.readouterr().out


def test_srun_two_hostnames(tb):
    r = _srun(tb, ['srun', '-N2', '-n2', '-t', '1', 'hostname'])
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == ['cn1', 'cn2']


def _mpi_moves_bytes(tb, binary, mpi_opt, env, lib):
    size, iters = 4 << 20, 5
    before = {n: _tx(tb, n) for n in tb.compute_nodes()}
    try:
        r = _srun(tb, ['srun', '-N2', '-n2', '-t', '1', f'--mpi={mpi_opt}',
                       str(binary), str(size), str(iters)], env=env,
                  cwd=str(binary.parent), timeout=45)
    except subprocess.TimeoutExpired:
        tb.run(tb.head, ['scancel', '--partition=eth'], cwd='/')
        raise
    after = {n: _tx(tb, n) for n in tb.compute_nodes()}
    assert r.returncode == 0, r.stdout + r.stderr
    hosts = dict(re.findall(r'rank (\d) host (\S+)', r.stdout))
    assert len(set(hosts.values())) == 2, r.stdout
    assert r.stdout.count(lib) == 2, r.stdout
    for n in hosts.values():
        assert after[n] - before[n] >= size * iters, (n, before, after)


def test_openmpi_pmix_across_nodes_moves_bytes(tb, mpi_bins):
    if 'openmpi' not in mpi_bins:
        pytest.skip('mpicc.openmpi not installed')
    _mpi_moves_bytes(tb, mpi_bins['openmpi'], 'pmix', OMPI_ENV, 'Open MPI')


def test_mpich_pmi2_across_nodes_moves_bytes(tb, mpi_bins):
    if 'mpich' not in mpi_bins:
        pytest.skip('mpicc.mpich not installed')
    _mpi_moves_bytes(tb, mpi_bins['mpich'], 'pmi2', MPICH_ENV, 'MPICH')


def test_sbatch_exit_codes_via_sacct_completion(tb, tmp_path):
    ids = {}
    for name, code in (('ok', 0), ('fail', 3)):
        r = tb.run(tb.head, ['sbatch', '--parsable', '-N1', '-t', '1',
                             '-o', str(tmp_path / f'{name}.out'),
                             '--wrap', f'hostname; exit {code}'],
                   check=True, cwd=str(tmp_path))
        ids[name] = r.stdout.strip().split(';')[0]
    # Exactly the command ReFrame's slurm backend runs (sacct is the
    # testbed's wrapper, which adds --completion).
    cmd = RFM_SACCT.format(day=time.strftime('%F'), ids=','.join(ids.values()))
    deadline = time.monotonic() + 30
    while True:
        r = tb.run(tb.head, cmd.split(), cwd='/',
                   env=dict(os.environ, SLURM_TIME_FORMAT='%s'))
        assert r.returncode == 0, r.stderr
        found = {m['jobid']: m for m in re.finditer(RFM_STATE_RE, r.stdout,
                                                    re.MULTILINE)}
        if set(ids.values()) <= set(found) or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert found[ids['ok']]['state'] == 'COMPLETED', r.stdout
    assert found[ids['ok']]['exitcode'] == '0'
    assert found[ids['fail']]['state'] == 'FAILED', r.stdout
    assert found[ids['fail']]['exitcode'] == '3'
    assert float(found[ids['fail']]['end']) > 0
    # Without the wrapper: what ReFrame would get with no slurmdbd.
    plain = tb.run(tb.head, [shutil.which('sacct'), '-j', ids['ok']], cwd='/')
    assert plain.returncode != 0
    assert 'accounting storage is disabled' in plain.stderr


def _iperf(tb, server_node='cn1', client_node='cn2'):
    a1, a2 = tb.addresses()[server_node], tb.addresses()[client_node]
    server = subprocess.Popen(
        tb.node_prefix(server_node, '/') + ['iperf3', '-s', '-1', '-B', a1],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=tb.env())
    try:
        deadline = time.monotonic() + 10
        while True:         # until the server listens (bounded)
            ss = tb.run(server_node, ['ss', '-Hltn', f'src {a1}:5201'], cwd='/')
            if ss.stdout.strip() or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        r = tb.run(client_node, ['iperf3', '-c', a1, '-B', a2, '-t', '2', '-J'],
                   cwd='/', timeout=20)
        assert r.returncode == 0, r.stdout[-500:] + r.stderr
        end = json.loads(r.stdout)['end']
        assert 'sum_received' in end, r.stdout[-1500:]
        return end['sum_received']['bits_per_second'] / 1e6
    finally:
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=5)


#: TCP payload per full frame over the bytes it occupies on a real Ethernet
#: wire: 1448 (MTU 1500 - IP 20 - TCP 20 - timestamps 12) of 1538 (+ header 14,
#: frame check 4, preamble 8, inter-frame gap 12).
WIRE_PAYLOAD_FRACTION = 1448 / 1538
#: How far above the wire's payload rate a measurement may be (timer and
#: rounding): more than this and the link is faster than a wire.
WIRE_TOLERANCE = 0.02
#: Bytes of payload and of wire time in a full frame (WIRE_PAYLOAD_FRACTION).
FRAME_PAYLOAD, FRAME_WIRE = 1448, 1538
#: A transfer (a ping-pong message, or a bw window of messages) smaller than
#: this is a few buckets: its first bucket leaves at once (the tokens refill
#: while the reply travels) and it arrives after the host's latency (~10 us on
#: veth), less than a wire needs to serialize it; without netem no qdisc can
#: add that delay (ci/testbed/README.md, "Shaping").  Measured with the 6 KiB
#: bucket: ping-pong <= 1.008 of the wire from 64 KiB, bw <= 1.013 from 8 KiB
#: messages in windows of 8; below that up to 2.5x and 1.05x.  With 8 KiB:
#: ping-pong <= 1.006, bw <= 1.014 (below: 2.3x, 1.032).
WIRE_FROM_TRANSFER_BYTES = 64 * 1024
BW_WINDOW = 8
#: The Rocks cluster paper's 4 MiB IMB PingPong one-way time over real GbE,
#: averaged over its compilers x MPIs (reference/paper/: 35,886 us).
PAPER_4MIB_US = statistics.mean(paper.paper_table()[('PingPong', 4 << 20)])
#: The link is judged by the best of this many measurements: the shaper's
#: timer and the ranks share the host's two cores with whatever else runs, and
#: one stall costs a run several %; the link itself cannot be faster than it
#: is, so the best run is its figure (every run is still held to the wire).
BEST_OF = 3
#: What a bulk TCP flow must reach of a shaped rate well under the host's own
#: limit (the suite's floor, hpcnet.checklib.calibration).
LINK_FLOOR = calibration.HOST_FLOOR
#: Our bandwidth over iperf3's on the same link, measured in the same test
#: (reference/testbed.yaml's calibrated lower bounds).
OVER_IPERF3_FLOOR = {'bw': 0.90, 'pingpong': 0.85}


def shaped_as_declared(tb, rate_bps: int = 10**9, nodes=('cn1', 'cn2')) -> None:
    '''Each node's link is the declared wire: a root tbf at ``rate_bps`` with
    the Ethernet size table (without it, frames pass 24 bytes short and the
    link is faster than the wire).  Asserted before any skip for load, so an
    overloaded host never hides a shaping defect.'''
    for node in nodes:
        said = tb.run(node, ['tc', '-d', '-j', 'qdisc', 'show', 'dev', 'eth0'], cwd='/').stdout
        (root,) = [q for q in json.loads(said) if q.get('root')]
        assert root['kind'] == 'tbf' and root['options']['rate'] * 8 == rate_bps, (node, root)
        assert root.get('stab', {}).get('overhead') == ETHERNET_OVERHEAD, (node, root)


def fastest_through_the_shaper_MBps(transfer: int, bucket: int, rate_bps: float = 1e9) -> float:
    '''The highest payload rate a transfer can show through tbf: it occupies
    the wire time of its frames, less the bucket, which is full again when a
    transfer starts (the tokens refill while the reply travels) and leaves at
    once.  A real NIC has no bucket: this is the emulation's one known excess,
    up to 1.13x the wire at 64 KiB with 8 KiB, 1.002x at 4 MiB (ci/testbed/README.md,
    "Shaping": 8 KiB measured up to 1.026 at 64 KiB).'''
    frames = -(-transfer // FRAME_PAYLOAD)
    wire_bytes = transfer + frames * (FRAME_WIRE - FRAME_PAYLOAD)
    return transfer / ((wire_bytes - bucket) * 8 / rate_bps) / 1e6


def test_fastest_through_the_shaper():
    wire_MBps = 1e9 / 8 * WIRE_PAYLOAD_FRACTION / 1e6
    bucket = burst_bytes(DEFAULTS.burst)
    assert fastest_through_the_shaper_MBps(4 << 20, 0) == pytest.approx(wire_MBps, rel=1e-3)
    assert fastest_through_the_shaper_MBps(4 << 20, bucket) / wire_MBps == pytest.approx(1.0019, abs=1e-3)
    assert fastest_through_the_shaper_MBps(64 << 10, bucket) / wire_MBps == pytest.approx(1.132, abs=1e-3)


def best_of(measure, good, tries: int = BEST_OF):
    '''Measure up to ``tries`` times, stop at the first ``good`` value; the
    best value seen otherwise (``measure`` returns (value, better_key)).'''
    seen = []
    for _ in range(tries):
        value, key = measure()
        seen.append((key, value))
        if good(value):
            return value, len(seen)
    return max(seen)[1], len(seen)


@pytest.mark.skipif(not shutil.which('iperf3'), reason='iperf3 not installed')
def test_shaping_iperf3(tb):
    wire = 1000 * WIRE_PAYLOAD_FRACTION                 # Mbit/s of payload at 1 Gbit/s

    def iperf(share):
        def measure():
            mbit = _iperf(tb)
            assert mbit <= (1 + WIRE_TOLERANCE) * wire * share, mbit   # every run
            return mbit, mbit
        return best_of(measure, lambda mbit: mbit >= LINK_FLOOR * wire * share)[0]
    at_1g = iperf(1)
    tb.shape('500mbit')
    try:
        r = tb.run('cn2', ['tc', 'qdisc', 'show', 'dev', 'eth0'], cwd='/')
        assert '500Mbit' in r.stdout
        at_500m = iperf(0.5)
    finally:
        tb.shape('1gbit')
    # One node slowed: both directions of its link, the others untouched.
    tb.shape('500mbit', node='cn2')
    try:
        slow_node = iperf(0.5)
        assert tb.run('cn1', ['tc', 'qdisc', 'show', 'dev', 'eth0'], cwd='/').stdout.count('1Gbit')
    finally:
        tb.shape('1gbit', node='cn2')
    print(f'iperf3 cn2->cn1: 1gbit {at_1g:.0f} Mbit/s (wire payload {wire:.0f}), '
          f'500mbit {at_500m:.0f} Mbit/s, cn2 alone at 500mbit {slow_node:.0f} Mbit/s')
    # At 1 Gbit/s only the ceiling is the shaper's: what iperf3 reaches below
    # it is the shared host's limit (the floor is judged at 500 Mbit/s, well
    # under that limit, where it is the shaper's again).
    assert at_1g <= (1 + WIRE_TOLERANCE) * wire, at_1g
    shaped_as_declared(tb)
    assert LINK_FLOOR * wire / 2 <= at_500m <= (1 + WIRE_TOLERANCE) * wire / 2, at_500m
    assert LINK_FLOOR * wire / 2 <= slow_node <= (1 + WIRE_TOLERANCE) * wire / 2, slow_node
    assert tb.rate == '1gbit'


@pytest.mark.skipif(not shutil.which('iperf3'), reason='iperf3 not installed')
def test_one_path_slowed_and_no_other(tb):
    '''One pair's path at half rate: both directions across it are at most
    half the wire; the paths from each of its nodes to a third node are not
    slowed (judged against the slowed path, measured in the same test).'''
    wire = 1000 * WIRE_PAYLOAD_FRACTION
    assert run_cli(['shape', '--testbed-name', NAME, '--node', 'cn1', '--peer', 'cn2',
                    '--rate', '500mbit']) == 0
    try:
        tb.load()               # what the command saved
        status = tb.status()
        paths = {n['name']: n['paths'] for n in status['nodes']}
        assert paths['cn1'] == {'cn2': '500mbit'} and paths['cn2'] == {'cn1': '500mbit'}, paths
        assert paths['cn3'] == {} and 'htb' in [n for n in status['nodes']
                                                 if n['name'] == 'cn1'][0]['qdisc']
        slowed = {(s, c): _iperf(tb, s, c) for s, c in (('cn1', 'cn2'), ('cn2', 'cn1'))}
        others = {(s, c): best_of(lambda: (_iperf(tb, s, c),) * 2,
                                  lambda mbit: mbit >= LINK_FLOOR * wire)[0]
                  for s, c in (('cn3', 'cn1'), ('cn2', 'cn3'))}
    finally:
        assert run_cli(['shape', '--testbed-name', NAME, '--node', 'cn1', '--peer', 'cn2',
                        '--rate', 'none']) == 0
        tb.load()
    print(f'iperf3 Mbit/s, path cn1-cn2 at 500mbit: {slowed}; other paths: {others}')
    for pair, mbit in slowed.items():
        assert mbit <= (1 + WIRE_TOLERANCE) * wire / 2, (pair, mbit)
    # A path the shaper slowed too would read as the slowed ones (ratio 1);
    # an unslowed one reaches the host's own limit, which a busy host brings
    # down toward half the wire (docs/measurements.md, "Calibrated judging").
    for pair, mbit in others.items():
        assert mbit > 1.15 * max(slowed.values()), (pair, mbit, slowed)
    shaped_as_declared(tb, nodes=('cn1', 'cn2', 'cn3'))      # back to the link's own tbf
    assert all(not n['paths'] for n in tb.status()['nodes'])


def test_pair_matrix_on_two_nodes_reports_the_pair_and_attributes_nothing(tb, tmp_path,
                                                                          one_env_per_stack):
    '''A partition of two nodes: the one pair is measured and reported, no
    outlier rule or attribution is applied, and the check says why.'''
    env = [e for e in one_env_per_stack if 'openmpi' in e][:1] or one_env_per_stack[:1]
    # What the matrix reports, not how fast the shared host moved it: no
    # references (the testbed's absolute MB/s is the host's limit as much as
    # the wire's; the calibrated checks judge that).
    (tmp_path / 'no-references').mkdir()
    two = dict(tb.env(), **{TESTBED_NODES_ENV: '2',
                            REFERENCE_DIR_ENV: str(tmp_path / 'no-references')})
    proc, cases = run_reframe(tmp_path, '-c', str(CHECKS_DIR / 'pairs.py'), '-n', 'hpcnet_pairs',
                              '-p', env_regex(env), '-S', 'samples=20', '-S', 'bw_samples=2',
                              system='testbed:eth', timeout=600, retries=0,
                              prefix=tb.head_prefix(cwd=str(WORK_DIR)), env=two)
    found = [c for c in cases if c['name'].startswith('hpcnet_pairs')]
    assert len(found) == 1, proc.stdout[-3000:]
    (case,) = found
    assert not unexplained_failures([case]), proc.stdout[-3000:]
    assert len(case['pair_table']) == 1 and case['culprits'] == {}, case['pair_table']
    assert case['attribution'] == ('not computed: 2 nodes are one pair, reported as measured; '
                                   'putting a slow pair on a node or a link needs at least 3 nodes')
    assert case['schedule']['rounds'] == [0] and case['schedule']['order'] == 'turns'
    perf = {k.split(':')[-1] for k in case['perfvalues']}
    assert 'bandwidth_median_pair' in perf, perf
    assert not perf & {'bandwidth_worst_pair', 'bandwidth_outlier_nodes'}, perf


def _p2p_across_nodes(tb, p2p, mode):
    r = _srun(tb, ['srun', '-N2', '-n2', '-t', '2', '--mpi=pmix', str(p2p), '--mode', mode,
                   '--min-size', '512', '--max-size', str(4 << 20), '--time-per-size', '300',
                   '--min-iters', '8', '--warmup', '2', '--window', str(BW_WINDOW)],
              env=OMPI_ENV, cwd=str(p2p.parent), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return parse_kernel_output(r.stdout, expect_kernel='p2p')


def test_link_never_faster_than_the_wire(tb, tmp_path):
    '''At no message size does our ping-pong or streaming bandwidth across
    two nodes exceed what a Gigabit Ethernet wire can carry as TCP payload,
    less the shaper's one bucket per transfer (beyond WIRE_TOLERANCE); large
    messages reach it.  The 4 MiB one-way time
    is set beside the Rocks cluster paper's real GbE (IMB PingPong over
    MPICH 3.2 / Open MPI 1.10: 35,840-35,980 us).'''
    if not shutil.which('mpicc.openmpi'):
        pytest.skip('mpicc.openmpi not installed')
    subprocess.run(['make', '-s', '-C', str(SRC_DIR), 'MPICC=mpicc.openmpi',
                    f'BINDIR={tmp_path}', f'{tmp_path}/p2p'], check=True)
    wire_MBps = 1e9 / 8 * WIRE_PAYLOAD_FRACTION / 1e6
    for mode in ('pingpong', 'bw'):
        def measure():
            before = _iperf(tb) / 8
            out = _p2p_across_nodes(tb, tmp_path / 'p2p', mode)
            iperf3_MBps = (before + _iperf(tb) / 8) / 2
            assert len(set(out.hosts.values())) == 2
            print(f'\n{mode}: ' + ', '.join(f'{int(r["size_bytes"])}:{r["bw_MBps"] / wire_MBps:.3f}'
                                           for r in out.rows) + f'; iperf3 {iperf3_MBps:.1f} MB/s')
            for row in out.rows:          # every run: never faster than wire and bucket
                transfer = int(row['size_bytes']) * (BW_WINDOW if mode == 'bw' else 1)
                if transfer < WIRE_FROM_TRANSFER_BYTES:
                    continue
                limit = fastest_through_the_shaper_MBps(transfer, burst_bytes(tb.burst))
                assert row['bw_MBps'] <= (1 + WIRE_TOLERANCE) * limit, (mode, row, limit)
            at_4mib = out.row_for_size(4 << 20)
            return (at_4mib, iperf3_MBps), at_4mib['bw_MBps'] / iperf3_MBps
        (at_4mib, iperf3_MBps), runs = best_of(
            measure, lambda found: found[0]['bw_MBps'] >= OVER_IPERF3_FLOOR[mode] * found[1])
        one_way_us = at_4mib['median_us']
        print(f'\n{mode} 4 MiB (best of {runs}): {at_4mib["bw_MBps"]:.1f} MB/s, '
              f'{at_4mib["bw_MBps"] / iperf3_MBps:.3f} of iperf3 on the same link; one way '
              f'{one_way_us:,.0f} us (paper, real GbE: {PAPER_4MIB_US:,.0f} us; ratio '
              f'{one_way_us / PAPER_4MIB_US:.3f})')
        shaped_as_declared(tb)
        # Judged over iperf3 on the same link, measured around it: a busy host
        # slows both (the paper's time is test_paper_tables_beside_ours').
        assert at_4mib['bw_MBps'] >= OVER_IPERF3_FLOOR[mode] * iperf3_MBps, (mode, at_4mib)


def test_cli_exec_and_down_when_not_up(tb, capfd):
    assert run_cli(['exec', '--testbed-name', NAME, 'cn2', '--', 'hostname']) == 0
    assert capfd.readouterr().out.strip() == 'cn2'
    assert run_cli(['exec', '--testbed-name', NAME, 'hn0', '--', 'sh', '-c',
                     'exit 7']) == 7
    assert run_cli(['down', '--testbed-name', 'hpcnetz']) == 0
    assert 'not up' in capfd.readouterr().out


def test_down_leaves_nothing(tb):
    pids = [r['pid'] for r in tb.state['resources'] if r['kind'] == 'proc']
    assert len(pids) == 2 + len(tb.compute_nodes())     # munged, slurmctld, a slurmd each
    # A process left inside a node (as a job or `exec` would) is swept too.
    stray = subprocess.Popen(tb.node_prefix('cn1', '/') + ['sleep', '300'])
    original = json.loads(softirq.RECORD.read_text())['original']
    original_backlog = json.loads(softirq.BACKLOG_RECORD.read_text())['original']
    r = tb.down()
    assert r['was_up'] and not r['problems']
    if not softirq.holders():       # the last testbed down: the policies it found are back
        for pid, (policy, priority, _) in original.items():
            assert os.sched_getscheduler(int(pid)) == policy
            assert os.sched_getparam(int(pid)).sched_priority == priority
    if not softirq.backlog_holders():
        assert int(softirq.BACKLOG_SYSCTL.read_text()) == original_backlog
    assert stray.wait(timeout=10) != 0
    assert tbm.leftovers(NAME, tb.state_dir, pids) == []
    assert tb.down()['was_up'] is False


def test_refusals_before_anything_is_created(monkeypatch):
    t = Testbed(name=FAIL_NAME)
    monkeypatch.setattr(os, 'geteuid', lambda: 1000)
    with pytest.raises(TestbedError, match='needs root'):
        t.up()
    monkeypatch.undo()

    def no_namespaces(self):
        self._cmd('probe namespaces', ['sh', '-c', 'echo "unshare: unshare '
                  'failed: Operation not permitted" >&2; exit 1'])
    monkeypatch.setattr(Testbed, '_step_probe_namespaces', no_namespaces)
    with pytest.raises(StepError) as e:
        t.up()
    assert e.value.step == 'probe namespaces'
    assert 'Operation not permitted' in str(e.value)
    assert tbm.leftovers(FAIL_NAME, t.state_dir) == []


def test_failure_half_way_leaves_nothing(monkeypatch):
    """Break ``up`` after every daemon has started: all of it is undone."""
    t = Testbed(name=FAIL_NAME)
    t.down()
    pids = []
    spawn, start_slurmd = Testbed._spawn, Testbed._step_start_slurmd

    def spy(self, *a, **kw):
        pids.append(spawn(self, *a, **kw))
        return pids[-1]

    def broken(self):
        start_slurmd(self)
        raise RuntimeError('injected failure')

    monkeypatch.setattr(Testbed, '_spawn', spy)
    monkeypatch.setattr(Testbed, '_step_start_slurmd', broken)
    with pytest.raises(StepError) as e:
        t.up(nodes=2, rate='1gbit')
    assert e.value.step == 'start slurmd'
    assert 'injected failure' in str(e.value)
    assert 'nothing left' in str(e.value)
    assert len(pids) == 4       # munged, slurmctld and both slurmds ran
    assert tbm.leftovers(FAIL_NAME, t.state_dir, pids) == []
