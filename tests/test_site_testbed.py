"""`hpcnet site init` and `hpcnet site check` on the Slurm testbed taken as a
stranger's cluster: no hand-written system file is used (the site file goes
to a scratch HPCNET_SYSTEMS_DIRS; `testbed` is never selected), the MPIs are
an EasyBuild HierarchicalMNS module tree (Core -> Compiler -> MPI) on
HPCNET_MODULEPATH.  The written file validates, the check passes, and the p2p
check runs across two nodes through the tree's Open MPI and passes.  Then
the check fails, naming the cause, for a partition with no nodes, a stage
directory the nodes cannot see, an interface one node lacks, and a PMI the
MPI cannot use (Debian's Open MPI 4.1 has no PMI-2: docs/testbed.md).

Needs root and namespaces (CI has both); skipped with the reason otherwise.
"""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import case_verdicts, hpcnet_on_head_node, running_testbed
from helpers import needs_testbed

from hpcnet.constants import CHECKS_DIR, CONFIG_DIR
from hpcnet.siteconfig.sites import load_site_files

pytestmark = needs_testbed()

NAME = 'hpcnetsi'            # never touches a developer's 'hpcnet' testbed
SITE = 'stranger'
#: The tree's Open MPI (Debian's 4.1, SystemMPI) under GCC/system.
ENV = 'GCC-system-OpenMPI-system'


@pytest.fixture(scope='module')
def tb():
    with running_testbed(NAME) as t:
        yield t


@pytest.fixture(scope='module')
def stranger(tb, hierarchical_tree, tmp_path_factory):
    '''(hpcnet on the head node, the site file `site init` wrote there).'''
    scratch = tmp_path_factory.mktemp('stranger')
    hpcnet = hpcnet_on_head_node(tb, scratch, hierarchical_tree.modulepath)
    proc = hpcnet('site', 'init', SITE)
    assert proc.returncode == 0, proc.stderr
    return hpcnet, scratch / 'systems' / f'{SITE}.py', scratch


def test_site_init_writes_a_valid_site_file(stranger):
    hpcnet, path, _ = stranger
    text = path.read_text()
    (site,) = load_site_files(path.parent)
    assert site.system['name'] == SITE and site.system['hostnames'] == ['^hn0$']
    (part,) = site.system['partitions']
    assert part['name'] == 'eth-tcp' and part['access'] == ['--partition=eth', '--exclusive']
    extras = part['extras']
    assert (extras['fabric'], extras['iface'], extras['num_nodes']) == ('tcp', 'eth0', 4)
    assert extras['nodes_share_cores'] is True
    # The testbed's tbf (1 Gbit/s) is the wire, not the veth's sysfs speed.
    assert (extras['link_rate_bps'], extras['link_speed_mbps']) == (10**9, 10000)
    # Every value line says where it came from.
    values = [ln for ln in text.splitlines() if re.match(r"\s+('\w+': |\w+=)", ln)]
    assert values and all('  # ' in ln for ln in values), text
    validated = hpcnet('fabrics', 'validate')
    assert validated.returncode == 0, validated.stderr
    assert f'ok: system {SITE}: eth-tcp (tcp)' in validated.stdout
    again = hpcnet('site', 'init', SITE)
    assert again.returncode == 2
    assert again.stderr.strip().count('\n') == 0 and 'exists' in again.stderr, again.stderr
    dry = hpcnet('site', 'init', SITE, '--dry-run')     # prints the probe; starts no job
    assert dry.returncode == 0 and 'srun -l --partition=eth --nodelist=' in dry.stdout, dry.stdout


def test_site_check_passes(stranger):
    hpcnet, _, _ = stranger
    proc = hpcnet('site', 'check', '--system', SITE, '-p', f'^{ENV}$')
    print(proc.stdout)          # the findings, for the log of a CI run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f'{SITE}:eth-tcp: {ENV} (openmpi 4.1' in proc.stdout
    assert 'started 2 ranks on 2 node(s)' in proc.stdout
    assert 'every node reads the stage directory' in proc.stdout
    # The testbed's mpi.conf makes the PMIx barrier wait (PMIxCollFence=ring).
    assert re.search(r'^ok +Slurm PMIx fence: TreeWidth \d+, PMIxCollFence ring', proc.stdout,
                     re.M), proc.stdout
    assert not re.search(r'^FAIL', proc.stdout, re.M), proc.stdout


def test_p2p_across_two_nodes_through_the_module_tree(tb, stranger):
    hpcnet, _, scratch = stranger
    selection = ['--system', SITE, '-n', 'hpcnet_p2p.*scale=2_nodes.*mode=pingpong',
                 '-p', f'^{ENV}$', '-S', 'time_per_size_ms=5']
    proc = hpcnet('run', *selection, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    report = json.loads((scratch / 'reports' / 'latest.json').read_text())
    (case,) = [tc for run in report['runs'] for tc in run['testcases']
               if tc['name'].startswith('hpcnet_p2p ')][-1:]
    assert (case['system'], case['partition'], case['environ']) == (SITE, 'eth-tcp', ENV)
    assert case['result'] == 'pass', case.get('fail_reason')
    assert len({lc['host'] for lc in case['link_counters']}) == 2
    # Plain ReFrame on the head node, with the written site file, gives the same verdicts.
    plain_report = scratch / 'plain-reframe.json'
    plain = subprocess.run(
        [*tb.head_prefix(cwd=str(scratch)), str(Path(sys.executable).parent / 'reframe'),
         '-C', str(CONFIG_DIR / 'settings.py'), '-c', str(CHECKS_DIR), '-r',
         '--exec-policy=serial', '--report-file', str(plain_report), *selection],
        env=hpcnet.env, text=True, timeout=900, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert plain.returncode == 0, plain.stdout[-3000:]
    assert case_verdicts(plain_report) == case_verdicts(scratch / 'reports' / 'latest.json') == {
        (case['name'], 'eth-tcp', ENV): ('pass', None)}, plain.stdout[-3000:]


def _variant(scratch, path, name, edit):
    '''A copy of the written site file, changed by ``edit``, alone in a directory.'''
    directory = scratch / name
    directory.mkdir()
    text = edit(path.read_text())
    assert text != path.read_text()
    (directory / path.name).write_text(text)
    return directory


def _failed(proc):
    print(proc.stdout)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return [ln for ln in proc.stdout.splitlines() if ln.startswith('FAIL')]


def test_check_fails_for_a_partition_without_nodes(tb, stranger):
    hpcnet, path, scratch = stranger
    tb.run('hn0', ['scontrol', 'create', 'PartitionName=empty', 'State=UP'], check=True)
    try:
        variant = _variant(scratch, path, 'empty', lambda t: t.replace('--partition=eth',
                                                                      '--partition=empty'))
        proc = hpcnet('site', 'check', '--system', SITE, '-p', f'^{ENV}$',
                      systems_dir=variant)
    finally:
        tb.run('hn0', ['scontrol', 'delete', 'PartitionName=empty'], check=True)
    assert _failed(proc) == [f'FAIL        {SITE}:eth-tcp: Slurm partition empty has no nodes '
                             '(scontrol show partition: TotalNodes=0)'], proc.stdout


def test_check_fails_for_a_stage_directory_the_nodes_cannot_see(tb, stranger):
    hpcnet, _, _ = stranger
    # Each node mounts its own directory on the testbed's TmpFS path.
    private = tb.state_dir / 'tmpfs' / 'site-check-stage'
    proc = hpcnet('site', 'check', '--system', SITE, '-p', f'^{ENV}$', '--stage-dir',
                  str(private))
    failed = _failed(proc)
    assert any(f'cn1, cn2, cn3, cn4 cannot see the stage directory {private}' in ln
               for ln in failed), proc.stdout


def test_check_fails_for_an_interface_missing_on_one_node(tb, stranger):
    hpcnet, path, scratch = stranger
    for node in ('cn1', 'cn2', 'cn3'):
        # A veth pair (this kernel has no dummy links): hpcx0 is up once its peer is.
        tb.run(node, ['ip', 'link', 'add', 'hpcx0', 'type', 'veth', 'peer', 'name', 'hpcx1'],
               check=True)
        for end in ('hpcx0', 'hpcx1'):
            tb.run(node, ['ip', 'link', 'set', end, 'up'], check=True)
    try:
        variant = _variant(scratch, path, 'iface', lambda t: re.sub(
            r"\n\s+link_speed_mbps=.*", '', t.replace("iface='eth0'", "iface='hpcx0'")))
        proc = hpcnet('site', 'check', '--system', SITE, '-p', 'none-at-all',
                      systems_dir=variant)
    finally:
        for node in ('cn1', 'cn2', 'cn3'):
            tb.run(node, ['ip', 'link', 'del', 'hpcx0'], check=True)
    assert _failed(proc) == [f'FAIL        {SITE}:eth-tcp: cn4: interface hpcx0 does not exist '
                             '(the partition declares it)'], proc.stdout


def test_check_fails_for_a_pmi_the_mpi_cannot_use(stranger):
    hpcnet, path, scratch = stranger
    variant = _variant(scratch, path, 'pmi', lambda t: t.replace(
        '(PartitionKey)\n', "(PartitionKey)\n                pmi='pmi2',  # a PMI Debian's Open MPI 4.1 lacks\n"))
    proc = hpcnet('site', 'check', '--system', SITE, '-p', f'^{ENV}$', systems_dir=variant)
    (line,) = _failed(proc)
    assert f'{ENV} (openmpi 4.1' in line and 'srun --mpi=pmi2 (extras pmi) did not start' in line
    assert "OMPI was not built with SLURM's PMI support" in line      # the MPI's own words
