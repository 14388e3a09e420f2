"""Day one on a cluster as real ones are: the Slurm testbed with cn3 drained
(`scontrol update ... State=DRAIN`) and cn4 allocated by another user's job,
the MPIs an EasyBuild HierarchicalMNS module tree (as tests/test_site_testbed.py).

`hpcnet site init` proposes the partition on cn1 and cn2, naming cn3 and cn4
with their states, and starts no job on a busy node (its probe asks for the
idle ones by name); `hpcnet site check` passes; the whole-partition checks
(collectives, pairs, preflight at scale ``all_nodes``) pass on the two nodes
a job gets; `site init --dry-run` starts no job; `site init --from` a
directory the `--dump-commands` script saved on the head node writes the
same file as the live run.  With cn2 drained as well, one node is left: the
whole-partition cases are "not decided" (exit 3), never a pass.

Needs root and namespaces (CI has both); skipped with the reason otherwise.
"""
import json
import re
import time

import pytest
from conftest import hpcnet_on_head_node, running_testbed
from helpers import needs_testbed

from hpcnet.exitcodes import Exit
from hpcnet.siteconfig.sites import load_site_files

pytestmark = needs_testbed()

NAME = 'hpcnetdr'            # never touches a developer's 'hpcnet' testbed
SITE = 'daybreak'
#: The tree's Open MPI (Debian's 4.1, SystemMPI) under GCC/system.
ENV = 'GCC-system-OpenMPI-system'
DRAINED, HELD = 'cn3', 'cn4'
#: What site init names them by (scontrol's State=), and the checks (ReFrame's node states).
LEFT_OUT = 'cn3 (IDLE+DRAIN), cn4 (ALLOCATED)'
CHECKS_LEFT_OUT = 'cn3 (DRAIN+IDLE), cn4 (ALLOCATED)'
#: The whole-partition cases of one environment.
WHOLE_PARTITION = ['-n', r'^hpcnet_(collectives|pairs|preflight)\b.*scale=all_nodes',
                   '-p', f'^({ENV}|builtin)$']
#: Every job the testbed's Slurm knows of, ended (sacct: jobcomp/filetxt) or not (squeue).
ALL_JOBS = (['sacct', '-a', '-X', '-n', '-P', '-S', '2000-01-01', '-o', 'jobid,jobname,nodelist'],
            ['squeue', '-h', '-o', '%i %j %N'])


def _slurm(tb, *argv):
    return tb.run('hn0', list(argv), check=True).stdout


def _jobs(tb) -> set:
    return {ln for argv in ALL_JOBS for ln in _slurm(tb, *argv).splitlines() if ln.strip()}


def _wait_for(tb, what, ready, timeout=60):
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f'{what} within {timeout} s: ' + _slurm(
            tb, 'scontrol', '--oneliner', 'show', 'node')
        time.sleep(1)


def _state(tb, node) -> str:
    return re.search(r'\bState=(\S+)', _slurm(tb, 'scontrol', '--oneliner', 'show', 'node',
                                                node)).group(1)


@pytest.fixture(scope='module')
def tb():
    with running_testbed(NAME) as t:
        # A node in maintenance, and one running another user's job.
        _slurm(t, 'scontrol', 'update', f'NodeName={DRAINED}', 'State=DRAIN',
               'Reason=maintenance')
        held = _slurm(t, 'sbatch', '--parsable', '--partition=eth', f'--nodelist={HELD}',
                      '--chdir=/tmp', '--output=/dev/null', '--job-name=someone-else',
                      '--wrap', 'sleep 3600').strip()
        _wait_for(t, f'{HELD} allocated', lambda: _state(t, HELD) == 'ALLOCATED')
        print(_slurm(t, 'scontrol', '--oneliner', 'show', 'node'))
        yield t
        _slurm(t, 'scancel', held)


@pytest.fixture(scope='module')
def daybreak(tb, hierarchical_tree, tmp_path_factory):
    '''(hpcnet on the head node, scratch directory, the live init: its
    process, its wall time in s, the file it wrote).'''
    scratch = tmp_path_factory.mktemp('daybreak')
    hpcnet = hpcnet_on_head_node(tb, scratch, hierarchical_tree.modulepath)

    started = time.monotonic()
    init = hpcnet('site', 'init', SITE)
    seconds = time.monotonic() - started
    print(f'hpcnet site init {SITE} with {LEFT_OUT}: exit {init.returncode} in {seconds:.1f} s')
    print(init.stderr)
    return hpcnet, scratch, init, seconds, scratch / 'systems' / f'{SITE}.py'


def test_init_proposes_the_partition_on_the_idle_nodes(tb, daybreak):
    _, _, init, seconds, path = daybreak
    assert init.returncode == Exit.OK, init.stderr
    left = f'eth: {LEFT_OUT} left out: scontrol shows them not idle'
    assert f'hpcnet: {left}' in init.stderr.splitlines(), init.stderr
    assert 'the probe job on cn1, cn2' in init.stderr, init.stderr
    (site,) = load_site_files(path.parent)
    (part,) = site.system['partitions']
    assert part['name'] == 'eth-tcp'
    # The partition keeps its size: the checks take what is idle when they start.
    assert (part['extras']['num_nodes'], part['extras']['iface']) == (4, 'eth0')
    text = path.read_text()
    assert f'- {left}' in text, text
    # The one job site init started ran on the idle nodes, and ended.
    (probe,) = [ln for ln in _jobs(tb) if ln.split('|')[1:2] == ['sh']]
    assert probe.split('|')[2] == 'cn[1-2]', probe
    # Printed by the fixture (the issue asks under 30 s); bounded far above it so that a
    # busy host cannot fail it, and below the 120 s a probe waiting on busy nodes took.
    assert seconds < 120, f'site init took {seconds:.0f} s'


def test_site_check_passes(daybreak):
    hpcnet, _, _, _, _ = daybreak
    proc = hpcnet('site', 'check', '--system', SITE, '-p', f'^{ENV}$')
    print(proc.stdout)
    assert proc.returncode == Exit.OK, proc.stdout + proc.stderr
    assert f'ok          {SITE}:eth-tcp: a job ran on cn1, cn2' in proc.stdout
    assert f'{SITE}:eth-tcp: left out, not idle now: {LEFT_OUT}' in proc.stdout
    assert 'started 2 ranks on 2 node(s)' in proc.stdout
    assert re.search(r'^ok +sacct: job \d+, which ended, is COMPLETED', proc.stdout, re.M)


def _cases(scratch):
    report = json.loads((scratch / 'reports' / 'latest.json').read_text())
    return [tc for run in report['runs'] for tc in run['testcases'] if not tc.get('fixture')]


def test_whole_partition_checks_pass_on_the_available_nodes(daybreak):
    hpcnet, scratch, _, _, _ = daybreak
    proc = hpcnet('run', '--system', SITE, *WHOLE_PARTITION, '-S',
                  'hpcnet_collectives.time_per_size_ms=5', timeout=1800)
    print(proc.stdout[-3000:])
    # The nodes share the host's cores, so on a busy host iperf3 withholds the pairs'
    # measurement (exit 3, "not judged"): every case still ran on the available nodes
    # and passed, which is what this test is about.
    withheld = re.search(r'^hpcnet: NOT DECIDED: \d+ pass; \d+ case\(s\) not judged: '
                         r'measurement withheld', proc.stdout, re.M)
    assert proc.returncode == Exit.OK or (proc.returncode == Exit.UNDECIDED and withheld), \
        proc.stdout[-3000:] + proc.stderr[-2000:]
    cases = _cases(scratch)
    names = {tc['name'].split()[0] for tc in cases}
    assert names == {'hpcnet_collectives', 'hpcnet_pairs', 'hpcnet_preflight'}, names
    for tc in cases:
        assert tc['result'] == 'pass', (tc['name'], tc.get('fail_reason'))
        assert (tc['job_nodelist'], tc['nodes_left_out']) == (['cn1', 'cn2'], CHECKS_LEFT_OUT), tc['name']


def test_dry_run_starts_no_job(tb, daybreak):
    hpcnet, _, _, _, _ = daybreak
    before = _jobs(tb)
    dry = hpcnet('site', 'init', SITE, '--dry-run')
    assert dry.returncode == Exit.OK, dry.stderr
    assert '--nodelist=cn1,cn2 --nodes=2' in dry.stdout, dry.stdout
    assert _jobs(tb) == before


def test_from_a_saved_directory_writes_the_same_file(tb, daybreak):
    hpcnet, scratch, init, _, path = daybreak
    assert init.returncode == Exit.OK, init.stderr
    dump = hpcnet('site', 'init', SITE, '--dump-commands')
    assert dump.returncode == Exit.OK, dump.stderr
    script, saved = scratch / 'site-init-dump.sh', scratch / 'saved'
    script.write_text(dump.stdout)
    ran = tb.run('hn0', ['sh', str(script), str(saved)], timeout=300)
    assert ran.returncode == 0 and 'failed:' not in ran.stderr, ran.stderr
    offline = scratch / 'offline'
    again = hpcnet('site', 'init', SITE, '--from', str(saved), systems_dir=offline)
    assert again.returncode == Exit.OK, again.stderr
    assert (offline / f'{SITE}.py').read_text() == path.read_text()


def test_one_node_left_is_not_decided(tb, daybreak):
    hpcnet, scratch, _, _, _ = daybreak
    _slurm(tb, 'scontrol', 'update', 'NodeName=cn2', 'State=DRAIN', 'Reason=maintenance')
    try:
        proc = hpcnet('run', '--system', SITE, '-n', r'^hpcnet_preflight\b.*scale=all_nodes')
    finally:
        _slurm(tb, 'scontrol', 'update', 'NodeName=cn2', 'State=RESUME')
    print(proc.stdout[-2000:])
    assert proc.returncode == Exit.UNDECIDED, proc.stdout[-3000:] + proc.stderr[-2000:]
    (case,) = _cases(scratch)
    assert case['result'] == 'skip' and case['skip_undecided'], case
    assert case['skip_reason'] == (
        f'not decided: 1 node(s) of {SITE}:eth-tcp available (--flex-alloc-nodes=idle), a '
        'whole-partition case needs 2; left out: cn2 (DRAIN+IDLE), cn3 (DRAIN+IDLE), '
        'cn4 (ALLOCATED)'), case['skip_reason']
