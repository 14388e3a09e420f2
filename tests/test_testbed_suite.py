"""The suite on the Slurm virtual cluster: multi-node runs through slurmctld,
bytes across the shaped veth links, references derived from the wire rate;
the pair matrix finding a slowed node; and the testbed's rows of the fault
matrix (a link throttled to 85 %, a node's link set down during a run, slurmd killed).

Needs root and namespaces (CI has both); skipped with the reason otherwise.
"""
import json
import os
import re
import statistics
import threading
import time
from pathlib import Path

import conftest
import pytest
from conftest import env_regex, run_reframe, running_testbed, unexplained_failures, values as recorded
from helpers import needs_testbed

from hpcnet.testbed import paper
from hpcnet.checklib.calibration import ABOVE_WIRE, Calibration
from hpcnet.fabrics import tcp_payload_MBps
from hpcnet import testbed as tbm
from hpcnet.constants import CHECKS_DIR, MEASUREMENT_WITHHELD, SYSTEMS_DIR, P2PMode
from hpcnet.metrics import CALIBRATED_SUFFIX
from hpcnet.model import Partition
from hpcnet.siteconfig.sites import load_site_files
from hpcnet.paths import WORK_DIR
from hpcnet.variables import TESTBED_RATE_ENV

pytestmark = needs_testbed()

NAME = 'hpcnets'     # never touches a developer's 'hpcnet' testbed
CHECKS = CHECKS_DIR
#: The wire's TCP payload fraction (reference/testbed.yaml).
EFFICIENCY = 1448 / 1538
#: Lower bounds of reference/testbed.yaml for bandwidth_4MiB over iperf3's on the same link.
LOWER_BOUND = {'bw': 0.10, 'pingpong': 0.15}


@pytest.fixture(scope='module')
def tb():
    with running_testbed(NAME) as t:
        yield t


def run_on_testbed(t, tmp_path, *args, timeout=1500, check='p2p.py'):
    return run_reframe(tmp_path, '-c', str(CHECKS / check), *args, system='testbed:eth',
                       timeout=timeout, retries=0,
                       prefix=t.head_prefix(cwd=str(WORK_DIR)), env=t.env())


def test_multinode_p2p_passes_within_wire_rate_references(tb, tmp_path, one_env_per_stack):
    proc, cases = run_on_testbed(tb, tmp_path, '-n', 'hpcnet_p2p.*scale=2_nodes',
                                 '-p', env_regex(one_env_per_stack))
    cases = [c for c in cases if c['name'].startswith('hpcnet_p2p ')]
    assert len(cases) == len(one_env_per_stack) * len(P2PMode.ALL), proc.stdout[-4000:]
    failed = unexplained_failures(cases)
    assert not failed, failed
    for c in cases:
        if c['result'] == 'fail':
            continue          # a known defect of the stack (allowed above)
        values = recorded(c)
        if c['mode'] in ('pingping', 'bibw'):
            # reference/testbed.yaml asserts none of their metrics (CPU-bound
            # here): recorded with the reason, and the case says "not judged".
            assert c['not_asserted']['bandwidth_4MiB']['reason']
            assert c['judgement'].startswith('not judged: no metric of this case is asserted'), \
                c['judgement']
            continue
        # One rank on each of two nodes; each node's eth0 sent at least what its rank sent.
        assert len({lc['host'] for lc in c['link_counters']}) == 2
        assert max(lc['tx_bytes'] for lc in c['link_counters']) > 4 * 2**20
        assert "on fabric 'tcp'" in c['transport']
        # Never above the wire, however busy the host.
        assert values['efficiency_4MiB'] <= (1 + ABOVE_WIRE) * EFFICIENCY, c['name']
        if c['judgement'].startswith(f'not judged: {MEASUREMENT_WITHHELD}'):
            print(f"\n{c['name']} {c['environ']}: {c['judgement']}")
            continue
        # Judged over iperf3 on the same link (reference/testbed.yaml): ReFrame's
        # verdict is 'pass' only inside the ratio's bounds.
        assert c['judgement'].startswith('judged against'), c['judgement']
        ratio = values['bandwidth_4MiB' + CALIBRATED_SUFFIX]
        calibration = c['link_calibration']
        # Over the bracket of the two iperf3 runs (calibration.Calibration.over).
        bracket = Calibration(calibration['iperf3_before_MBps'],
                              calibration['iperf3_after_MBps'], {})
        assert ratio == pytest.approx(bracket.over(values['bandwidth_4MiB']))
        assert (c['result'] == 'pass') == (ratio >= 1 - LOWER_BOUND[c['mode']]), (c['name'], ratio)


#: How close our fastest 4 MiB ping-pong sample must come to the paper's
#: one-way time (docs/measurements.md, "Calibrated judging").
PAPER_TOLERANCE = 0.05


def partition_of_testbed() -> Partition:
    '''The testbed's partition as its site file declares it.'''
    site = next(s for s in load_site_files(SYSTEMS_DIR) if s.system['name'] == 'testbed')
    part = site.system['partitions'][0]
    return Partition.from_extras(f'testbed:{part["name"]}', part['extras'])


def host_slowdown(case: dict, link_rate_bps: int) -> float:
    '''How much slower than the wire's TCP payload rate (at the partition's
    MTU) iperf3 found the case's link in the same job (the faster of its
    runs before and after; 1 where it reached the wire).'''
    found = case['link_calibration']
    link = Calibration(found['iperf3_before_MBps'], found['iperf3_after_MBps'], {})
    wire = tcp_payload_MBps(link_rate_bps, partition_of_testbed().mtu)
    return max(1.0, wire / link.link_MBps)


def test_paper_tables_beside_ours(tb, tmp_path, one_env_per_stack):
    '''The Rocks cluster paper reproduced: ping-pong and ping-ping across two
    nodes for every compiler x MPI, set beside its Tables I-IV; at 4 MiB our
    MPI ping-pong is within 5 % of the paper's one-way time: never faster than
    Gigabit Ethernet, and no slower than the link as iperf3 found it in the
    same job.'''
    # 30 samples per size at least: the median of a 4 MiB one-way time on
    # this 2-core host then moves by a few percent, not ten.
    theirs = statistics.mean(paper.paper_table()[('PingPong', 4 << 20)])
    link_rate_bps = int(tb.env()[TESTBED_RATE_ENV])
    # Per environment, the best of up to three sessions: the link is not
    # slower than its best.
    raw, calibrated = {}, {}
    for attempt in range(3):
        (tmp_path / f'session{attempt}').mkdir()
        proc, cases = run_on_testbed(tb, tmp_path / f'session{attempt}', '-n',
                                     'hpcnet_p2p.*scale=2_nodes.*mode=ping',
                                     '-p', env_regex(one_env_per_stack), '-S', 'min_iters=30')
        report = json.loads((tmp_path / f'session{attempt}' / 'report.json').read_text())
        print(paper.tables(report))
        # The link's one-way time is its fastest sample: a stall of the shared
        # cores only ever adds time (the tables above show the medians).
        curves = paper.our_curves(report, 'min_us')
        assert curves, proc.stdout[-3000:]
        for case in cases:
            env, key = case['environ'], ('PingPong', case['environ'])
            if case.get('mode') != 'pingpong' or key not in curves:
                continue
            # A 4 MiB one-way time is mostly wire time: a host that slowed
            # iperf3 on the link slows it too, so the upper bound is the
            # paper's time scaled by iperf3's shortfall.
            ratio = curves[key][4 << 20] / theirs
            slowdown = host_slowdown(case, link_rate_bps)
            print(f'{env}: 4 MiB one way {curves[key][4 << 20]:.0f} us, {ratio:.3f} of the '
                  f'paper\'s; iperf3 at 1/{slowdown:.3f} of the wire: {ratio / slowdown:.3f}')
            raw[env] = min(ratio, raw.get(env, ratio))
            calibrated[env] = min(ratio / slowdown, calibrated.get(env, ratio / slowdown))
        assert raw, proc.stdout[-3000:]
        if not paper_misses(raw, calibrated):
            break
    assert not paper_misses(raw, calibrated), (paper_misses(raw, calibrated), raw, calibrated)


def paper_misses(raw: dict, calibrated: dict) -> list:
    '''What keeps our 4 MiB ping-pong from matching the paper's, by
    environment: its time over the paper's (``raw``) and over the paper's
    scaled by iperf3's shortfall in the same job (``calibrated``).  The
    median (the paper's own figure is an average over its compilers x MPIs)
    may be at most the tolerance faster than the paper (``raw``) or slower
    than the link allows (``calibrated``); any one MPI twice that.'''
    misses = []
    for tolerance, ratios in ((PAPER_TOLERANCE, {'median': statistics.median(raw.values())}),
                              (2 * PAPER_TOLERANCE, raw)):
        misses += [f'{env} {r:.3f} of the paper\'s time, faster than 1 - {tolerance:g}'
                   for env, r in ratios.items() if r < 1 - tolerance]
    for tolerance, ratios in ((PAPER_TOLERANCE,
                               {'median': statistics.median(calibrated.values())}),
                              (2 * PAPER_TOLERANCE, calibrated)):
        misses += [f'{env} {r:.3f} of the paper\'s time on the link as iperf3 found it, '
                   f'slower than 1 + {tolerance:g}' for env, r in ratios.items() if r > 1 + tolerance]
    return misses


def test_pair_matrix_runs_in_rounds_and_names_the_slow_node(tb, tmp_path, one_env_per_stack):
    env = [e for e in one_env_per_stack if 'openmpi' in e][:1] or one_env_per_stack[:1]
    nodes = tb.compute_nodes()
    slow = nodes[2]
    tb.shape('500mbit', node=slow)
    try:
        proc, cases = run_on_testbed(tb, tmp_path, '-n', 'hpcnet_pairs', '-p', env_regex(env),
                                     check='pairs.py')
    finally:
        tb.shape(tb.rate, node=slow)
    found = [c for c in cases if c['name'].startswith('hpcnet_pairs')]
    assert len(found) == 1, proc.stdout[-3000:]
    (case,) = found
    assert case['num_tasks'] == len(nodes)
    assert len(case['pair_table']) == len(nodes) * (len(nodes) - 1) // 2
    rounds = {int(r['round']) for r in case['pair_table'] if 'round' in r}
    if rounds:
        assert len(rounds) == len(nodes) - 1, rounds        # N-1 rounds of disjoint pairs
    # Every pair of the slow node is bad twice: the node is named, no link.
    assert case['culprits']['bandwidth'] == {'nodes': [slow], 'links': [], 'inconclusive': []}, \
        (case['culprits'], case['pair_table'])
    assert f'bandwidth: node {slow}' in case['attribution']
    # The node named by measuring fails the case: no bad node on a healthy testbed.
    assert case['result'] == 'fail' and case['fail_phase'] == 'performance', proc.stdout[-3000:]
    assert 'bandwidth_outlier_nodes' in case['fail_reason'], case['fail_reason']


def one_case(proc, cases, prefix):
    found = [c for c in cases if c['name'].startswith(prefix)]
    assert len(found) == 1, proc.stdout[-3000:]
    return found[0]


def _fault_row(fault, case):
    return (fault, case['result'], case.get('fail_reason') or '')


def test_testbed_fault_matrix(tb, tmp_path, one_env_per_stack):
    '''A link throttled to 85 % of its rate, a node's link set down during a
    run, a node's slurmd killed as a session starts: each case fails naming
    the cause, and the session's other cases still run.'''
    env = [e for e in one_env_per_stack if 'openmpi' in e][:1] or one_env_per_stack[:1]
    rows = []
    # 1. Throttled to 85 %: every node's link, while the partition still declares
    # the testbed's 1 Gbit/s; iperf3 measures the link below what `testbed up`
    # proved of it, whatever the ratio to iperf3 says (hpcnet.checklib.calibration),
    # and the shaper read on the path is named beside the measurement.
    for node in tb.compute_nodes():
        tb.shape('850mbit', node=node)
    assert tb.rate == '1gbit'
    try:
        proc, cases = run_on_testbed(tb, tmp_path / 'slow', '-n', 'hpcnet_p2p.*mode=bw',
                                     '-p', env_regex(env))
    finally:
        tb.shape('1gbit')
    case = one_case(proc, cases, 'hpcnet_p2p')
    rows.append(_fault_row('link throttled to 85 %', case))
    assert case['result'] == 'fail' and case['fail_phase'] == 'performance', proc.stdout[-3000:]
    assert 'the link measured slower than the wire' in case['fail_reason'], case['fail_reason']
    assert 'eth0 is shaped to 850 Mbit/s' in case['fail_reason'], case['fail_reason']
    # Both runs around the benchmark slow: the job measured the link once more.
    assert case['link_calibration']['iperf3_again_MBps'] < 0.9 * tcp_payload_MBps(10**9, 1500), \
        case['link_calibration']

    # 2. slurmd of cn1 killed as the session starts (steps already running on
    # a node outlive their slurmd, so the fault belongs to the next job there):
    # that job ends as NODE_FAIL and says so; Slurm then takes cn1 out of
    # service and the session's other cases run on the other nodes.
    tb.kill_slurmd('cn1')
    try:
        proc, cases = run_on_testbed(tb, tmp_path / 'slurmd', '-n',
                                     'hpcnet_p2p.*scale=2_nodes.*mode=(pingpong|bw|pingping)',
                                     '-p', env_regex(env))
    finally:
        tb.start_slurmd('cn1')
    runs = sorted((c for c in cases if c['name'].startswith('hpcnet_p2p')),
                  key=lambda c: c['job_submit_time'] or 0)
    assert len(runs) == 3, proc.stdout[-3000:]           # every case ran and was kept
    first, others = runs[0], runs[1:]
    rows.append(_fault_row('slurmd killed on a node of the job', first))
    assert first['result'] == 'fail' and 'the job ended as NODE_FAIL on cn1' in first['fail_reason'], \
        first['fail_reason']
    assert all('NODE_FAIL' not in (c['fail_reason'] or '') and 'cn1' not in c['job_nodelist']
               for c in others), others

    # 3. A node's link set down while the job runs on it.
    def link_down_later():
        time.sleep(4)
        tb.run('cn1', ['ip', 'link', 'set', 'eth0', 'down'], cwd='/')
    thread = threading.Thread(target=link_down_later)
    thread.start()
    try:
        proc, cases = run_on_testbed(tb, tmp_path / 'down', '-n', 'hpcnet_p2p.*mode=bw',
                                     '-p', env_regex(env), '-S', 'time_limit=40s')
    finally:
        thread.join()
        tb.run('cn1', ['ip', 'link', 'set', 'eth0', 'up'], cwd='/')
    case = one_case(proc, cases, 'hpcnet_p2p')
    rows.append(_fault_row("a node's link set down during the run", case))
    assert case['result'] == 'fail', proc.stdout[-3000:]

    conftest.FAULT_MATRIX.extend(rows)


def test_p2p_through_easybuild_modules_on_the_testbed(tb, tmp_path, easybuild_tree,
                                                      module_discovery):
    '''The gompi toolchain module of the EasyBuild tree (Debian's Open MPI
    with pmix under srun; Debian's MPICH, gmpich, is 4.0.2 with its finalize
    hang) loads inside the Slurm job on two nodes, and the p2p check passes.'''
    variables, found = module_discovery
    (gompi,) = [e.name for e in found.environments if e.mpi.candidate.env_name == 'gompi-system']
    proc, cases = run_reframe(tmp_path, '-c', str(CHECKS / 'p2p.py'),
                              '-n', 'hpcnet_p2p.*scale=2_nodes.*mode=pingpong', '-p',
                              env_regex([gompi]), system='testbed:eth', retries=0, timeout=900,
                              prefix=tb.head_prefix(cwd=str(WORK_DIR)),
                              env=tb.env({**os.environ, **variables}))
    (case,) = [c for c in cases if c['name'].startswith('hpcnet_p2p ')] or [None]
    assert case is not None, proc.stdout[-3000:]
    # A host too busy to emulate the wire makes the case "not judged", not
    # failed: a failure here, performance too, is one.
    assert not unexplained_failures([case]), proc.stdout[-3000:]
    outdir = Path(case['outputdir'])
    script = (outdir / 'rfm_job.sh').read_text()
    assert f'module use {easybuild_tree.modulepath}\nmodule load gompi/system\n' in script
    assert 'lmod/init/bash' in script
    errors = (outdir / 'rfm_job.err').read_text()
    assert not re.search(r'Lmod has detected|module: command not found', errors), errors
    assert len({lc['host'] for lc in case['link_counters']}) == 2
    assert case['mpi_library'].startswith('Open MPI v4.1')


def test_nothing_left_after_runs(tb):
    pids = [r['pid'] for r in tb.state['resources'] if r['kind'] == 'proc']
    tb.down()
    assert tbm.leftovers(NAME, tb.state_dir, pids) == []
