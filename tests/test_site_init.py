"""`hpcnet site init` read from real outputs (tests/data/site-init/README.md):
Slurm's and the nodes' as the testbed printed them, and `rdma link show` and
`show_gids` as posted from real RoCE and InfiniBand hosts; the site file it
writes from them validates and says where every value came from."""
import re
from pathlib import Path

import pytest

from hpcnet.constants import Fabric
from hpcnet.model import ConfigError, PartitionKey
from hpcnet.exitcodes import Exit
from hpcnet.siteinit import check, nodes, proposal, slurm
from hpcnet.siteinit.slurm import SlurmPartition
from hpcnet.siteconfig.sites import load_site_files

DATA = Path(__file__).parent / 'data' / 'site-init'


def read(name):
    return (DATA / name).read_text()


@pytest.fixture(scope='module')
def testbed():
    node_list = slurm.parse_nodes(read('scontrol-show-node.testbed.txt'))
    parts = slurm.parse_partitions(read('scontrol-show-partition.testbed.txt'), node_list)
    return parts, node_list, nodes.parse_probe(read('srun-probe.testbed.txt'))


def test_scontrol_partitions_and_nodes(testbed):
    parts, node_list, _ = testbed
    assert [n.name for n in node_list] == ['cn1', 'cn2', 'cn3', 'cn4']
    assert all(n.partitions == ('eth',) and n.cpus > 0 for n in node_list)
    # A value with blanks in it (OS=Linux ... #1 SMP ...) does not swallow the next key.
    assert all(n.state.startswith('IDLE') for n in node_list), [n.state for n in node_list]
    (eth,) = parts
    assert (eth.name, eth.total_nodes, eth.exclusive, eth.default) == ('eth', 4, True, True)
    assert eth.nodes == ('cn1', 'cn2', 'cn3', 'cn4')


def test_oneliner_value_with_blanks():
    line = read('scontrol-show-node.testbed.txt').splitlines()[0]
    fields = slurm.parse_oneliner(line)[0]
    assert fields['NodeName'] == 'cn1'
    assert ' ' in fields['OS'] and '=' not in fields['OS']


def test_probe_job_output_of_every_node(testbed):
    _, _, found = testbed
    assert [n.host for n in found] == ['cn1', 'cn2', 'cn3', 'cn4']
    for node in found:
        eth0 = node.interfaces['eth0']
        assert eth0.up and eth0.kind == 'ether' and eth0.mtu == 1500
        assert eth0.ipv4 and eth0.ipv4[0].startswith('10.77.0.')
        assert eth0.speed_mbps == 10000          # a veth's sysfs speed
        assert eth0.shaped_bps == 10**9          # `hpcnet testbed up`'s tbf
        assert node.interfaces['lo'].shaped_bps is None
        assert node.interfaces['lo'].kind == 'loopback'
        assert node.rdma_ports == [] and node.gids == []
        assert node.notes, 'rdma link show said why there is no RDMA'
    assert len({n.boot_id for n in found}) == 1   # namespaces of one kernel


def test_probe_output_that_stops_early_is_an_error():
    text = '\n'.join(line for line in read('srun-probe.testbed.txt').splitlines()
                     if not line.startswith('2:'))
    text += '\n2: @@hpcnet-site-init host cn3\n2: sh: 1: ip: not found\n'
    with pytest.raises(nodes.ProbeError, match='task 2 of the probe job stopped early: .*ip: not found'):
        nodes.parse_probe(text)


def test_rdma_link_show_roce_and_ib():
    roce, notes = nodes.parse_rdma_link(read('rdma-link-show.3fs-pr283-roce.txt'))
    assert notes == []
    assert [(p.device, p.port, p.state, p.netdev, p.infiniband) for p in roce] == [
        ('mlx5_0', 1, 'ACTIVE', 'p1p1', False), ('mlx5_1', 1, 'ACTIVE', 'p1p2', False)]
    (rxe,), _ = nodes.parse_rdma_link(read('rdma-link-show.3fs-issue263-rxe.txt'))
    assert (rxe.device, rxe.netdev, rxe.infiniband) == ('rxe_0', 'p1p1', False)
    (ib,), _ = nodes.parse_rdma_link(read('rdma-link-show.rccl-issue1423-ib.txt'))
    assert (ib.device, ib.port, ib.state, ib.netdev, ib.infiniband) == ('mlx5_7', 1, 'ACTIVE',
                                                                        None, True)


def test_show_gids():
    gids = nodes.parse_gids(read('show_gids.nccl-issue1573-roce.txt'))
    assert len(gids) == 8
    v2_ipv4 = [(g.device, g.index, g.ipv4, g.netdev) for g in gids if g.version == 'v2' and g.ipv4]
    assert v2_ipv4 == [('mlx5_0', 7, '10.152.0.12', 'net1'), ('mlx5_1', 7, '10.152.4.12', 'net2')]
    assert [g.index for g in gids if g.device == 'mlx5_0' and g.ipv4 is None] == [4, 5]


def _values(text: str) -> dict:
    '''{key: (value text, comment)} of the rendered file's value lines.'''
    found = {}
    for m in re.finditer(r"^\s+'?(\w+)'?(?:=|: )(.+?),  # (.+)$", text, re.M):
        found.setdefault(m.group(1), (m.group(2), m.group(3)))
    return found


def test_testbed_proposal_validates_and_says_where_each_value_came_from(testbed, tmp_path):
    parts, node_list, found = testbed
    made, skipped = proposal.propose(parts[0], found)
    (tcp,) = made
    assert tcp.name == 'eth-tcp' and tcp.fabric == Fabric.TCP
    values = {k: v for k, (v, _) in tcp.extras.items()}
    assert values == {PartitionKey.FABRIC: 'tcp', PartitionKey.IFACE: 'eth0',
                      PartitionKey.MTU: 1500, PartitionKey.LINK_SPEED_MBPS: 10000,
                      PartitionKey.LINK_RATE_BPS: 10**9, PartitionKey.NUM_NODES: 4,
                      PartitionKey.NODES_SHARE_CORES: True}
    assert skipped and 'no RDMA port is ACTIVE' in skipped[0]
    pmis = slurm.parse_mpi_list(read('srun-mpi-list.testbed.txt'))
    assert pmis == ['pmix', 'none', 'cray_shasta', 'pmi2']
    text = proposal.render('stranger', 'hn0', made, skipped, parts, node_list, pmis)
    (tmp_path / 'stranger.py').write_text(text)
    (site,) = load_site_files(tmp_path)
    assert site.system['name'] == 'stranger' and site.system['hostnames'] == ['^hn0$']
    (part,) = site.system['partitions']
    assert part['access'] == ['--partition=eth', '--exclusive']
    assert part['extras'] == {**values}
    lines = _values(text)
    for key in ['name', 'hostnames', 'scheduler', 'launcher', 'access', 'time_limit', *values]:
        assert key in lines and lines[key][1].strip(), (key, text)
    assert 'scontrol show partition eth: TotalNodes=4' in lines['num_nodes'][1]
    assert '/sys/class/net/eth0/speed on cn1, cn2, cn3, cn4' in lines['link_speed_mbps'][1]
    assert '# scontrol show node: features none; GRES none' in text
    assert '(srun --mpi=list: pmix, none, cray_shasta, pmi2)' in lines['launcher'][1]
    # The veth says 10000 Mb/s; the tbf on it sends 1 Gbit/s: that is the wire.
    assert 'a root tbf sends at 1000 Mbit/s on cn1, cn2, cn3, cn4' in lines['link_rate_bps'][1]


def test_roce_proposal_from_real_rdma_outputs(tmp_path):
    '''The RDMA ports of one real host (`rdma link show`, 3FS #283) with the
    GID table of another (show_gids, NCCL #1573): both have mlx5_0 and
    mlx5_1 on port 1; the RoCE v2 GID with an IPv4 address is index 7.'''
    node = nodes.NodeNetwork(host='node75', boot_id='a')
    node.rdma_ports, node.notes = nodes.parse_rdma_link(read('rdma-link-show.3fs-pr283-roce.txt'))
    node.gids = nodes.parse_gids(read('show_gids.nccl-issue1573-roce.txt'))
    part = SlurmPartition('roce', ('node75',), 1, 'UP', False, 'INFINITE', False)
    made, skipped = proposal.propose(part, [node])
    (roce,) = made
    assert roce.name == 'roce-roce'
    values = {k: v for k, (v, _) in roce.extras.items()}
    assert values[PartitionKey.RDMA_DEVICE] == ['mlx5_0', 'mlx5_1']
    assert values[PartitionKey.GID_INDEX] == 7 and values[PartitionKey.RDMA_PORT] == 1
    # p1p1 is not among the interfaces this node reported: no iface, and no TCP partition.
    assert PartitionKey.IFACE not in values
    assert any('no Ethernet interface' in s for s in skipped)
    (tmp_path / 'r.py').write_text(proposal.render('r', 'node75', made, skipped, [part]))
    (site,) = load_site_files(tmp_path)
    assert site.system['partitions'][0]['features'] == ['roce']


def test_ib_port_is_an_ib_partition():
    node = nodes.NodeNetwork(host='n1')
    node.rdma_ports, _ = nodes.parse_rdma_link(read('rdma-link-show.rccl-issue1423-ib.txt'))
    part = SlurmPartition('ib', ('n1',), 1, 'UP', False, 'INFINITE', False)
    made, _ = proposal.propose(part, [node])
    assert [(p.fabric, p.extras[PartitionKey.RDMA_DEVICE][0]) for p in made] == [('ib', 'mlx5_7')]


def test_bad_system_name():
    with pytest.raises(ConfigError, match="system name '1x' is not valid"):
        proposal.check_name('1x')


def test_access_names_the_slurm_partition():
    assert slurm.partition_of_access(['--partition=eth', '--exclusive']) == 'eth'
    assert slurm.partition_of_access(['-p', 'gpu']) == 'gpu'
    assert slurm.partition_of_access(['--exclusive']) is None


def test_site_check_node_script_on_this_host(tmp_path):
    '''What `site check` runs on each node, run here: the token, the paths
    and the preflight of the declared interface (loopback here).'''
    import subprocess
    from hpcnet.checklib import preflight
    from hpcnet.model import Partition
    from hpcnet.siteinit import check
    token = tmp_path / 'token'
    token.write_text('t0k\n')
    part = Partition.from_extras('s:p', {'fabric': 'tcp', 'iface': 'lo', 'mtu': 1})
    script = check.node_script(part, {'stage': token}, [str(tmp_path), str(tmp_path / 'gone')])
    out = subprocess.run(['sh', '-c', script], text=True, stdout=subprocess.PIPE, check=True).stdout
    (node,) = preflight.parse(out).values()
    assert (node.values['token_stage'], node.values['path_0'], node.values['path_1']) == (
        't0k', 'yes', 'no')
    assert preflight.ethernet_problems(node, 'lo', part.mtu) == [
        f'{node.host}: lo MTU is {node.values["mtu"]}, the partition says 1']


def test_missing_slurm_command_is_one_error(tmp_path, monkeypatch):
    '''A login node without srun: site check's jobs end in SlurmError (one
    line naming the command), not in a traceback.'''
    from hpcnet.model import Partition
    from hpcnet.siteinit import check
    monkeypatch.setenv('PATH', str(tmp_path))
    with pytest.raises(slurm.SlurmError, match='^srun not found: run this on a Slurm login node$'):
        slurm.completed(['srun', 'true'], timeout=5)
    part = Partition.from_extras('s:p', {'fabric': 'tcp', 'iface': 'lo', 'mtu': 1})
    with pytest.raises(slurm.SlurmError, match='^srun not found'):
        check.check_nodes(part, [], tmp_path / 'stage', [])
    assert not list((tmp_path / 'stage').iterdir()), 'the token file is removed'


# A drained node and an allocated one (tests/data/site-init/README.md): the
# partition is proposed on the two idle nodes, naming the two left out.

def _cluster_outputs(hostname='hn0'):
    '''{file of hpcnet.siteinit.plan: recorded text}: what the testbed
    printed with cn3 drained and cn4 allocated, the probe run on cn1 and cn2.'''
    from hpcnet.siteinit import plan
    return {plan.HOSTNAME.file: hostname + '\n',
            plan.SHOW_NODES.file: read('scontrol-show-node.testbed-drained.txt'),
            plan.SHOW_PARTITIONS.file: read('scontrol-show-partition.testbed.txt'),
            'probe-eth.txt': read('srun-probe.testbed-cn1-cn2.txt'),
            plan.MPI_LIST.file: read('srun-mpi-list.testbed.txt'),
            # The testbed's nodes under two leaf switches, in scontrol's format.
            plan.SHOW_TOPOLOGY.file: 'SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=cn[1-2]\n'
                                     'SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=cn[3-4]\n'
                                     'SwitchName=spine Level=1 LinkSpeed=1 Nodes=cn[1-4] '
                                     'Switches=leaf[1-2]\n'}


def test_node_states_a_job_starts_on():
    node_list = slurm.parse_nodes(read('scontrol-show-node.testbed-drained.txt'))
    (eth,) = slurm.parse_partitions(read('scontrol-show-partition.testbed.txt'), node_list)
    assert slurm.split_available(eth, node_list) == (
        ['cn1', 'cn2'], {'cn3': 'IDLE+DRAIN', 'cn4': 'ALLOCATED'})
    node = slurm.SlurmNode('n', ('p',), 'IDLE+RESERVED')
    assert not slurm.available(node) and slurm.available(node, reservation='maint')
    for state in ('MIXED', 'DOWN+NOT_RESPONDING', 'IDLE+MAINT+DRAIN', 'IDLE+POWERED_DOWN',
                  'IDLE+PLANNED', 'IDLE+COMPLETING'):
        assert not slurm.available(slurm.SlurmNode('n', ('p',), state), 'maint'), state


class FakeSlurm:
    '''Stands in for the Slurm commands (hpcnet.siteinit.slurm.run): answers
    from recorded text, and records every command asked.'''

    def __init__(self, outputs):
        from hpcnet.siteinit import plan
        self.by_argv = {plan.SHOW_NODES.argv: outputs[plan.SHOW_NODES.file],
                        plan.SHOW_PARTITIONS.argv: outputs[plan.SHOW_PARTITIONS.file],
                        plan.MPI_LIST.argv: outputs[plan.MPI_LIST.file],
                        plan.SHOW_TOPOLOGY.argv: outputs[plan.SHOW_TOPOLOGY.file]}
        self.probe = outputs['probe-eth.txt']
        self.asked = []

    def __call__(self, argv, timeout=60):
        self.asked.append(list(argv))
        if argv[0] == 'srun' and argv[1] == '-l':
            return self.probe
        return self.by_argv[tuple(argv)]


def _site_init(monkeypatch, tmp_path, *argv):
    from hpcnet import cli
    monkeypatch.setenv('HPCNET_SYSTEMS_DIRS', str(tmp_path / 'systems'))
    monkeypatch.setattr('socket.gethostname', lambda: 'hn0')
    return cli.main(['site', 'init', *argv])


@pytest.fixture
def fake_slurm(monkeypatch):
    fake = FakeSlurm(_cluster_outputs())
    monkeypatch.setattr(slurm, 'run', fake)
    return fake


def test_drained_and_allocated_nodes_leave_the_partition_in(monkeypatch, tmp_path, fake_slurm,
                                                           capsys):
    code = _site_init(monkeypatch, tmp_path, 'day1', '--reservation', 'maint',
                      '--account', 'net-team', '--qos', 'high')
    err = capsys.readouterr().err
    assert code == 0, err
    assert 'eth: cn3 (IDLE+DRAIN), cn4 (ALLOCATED) left out' in err
    probes = [a for a in fake_slurm.asked if a[:2] == ['srun', '-l']]
    (probe,) = probes
    assert '--nodelist=cn1,cn2' in probe and '--nodes=2' in probe
    assert ['--reservation=maint', '--account=net-team', '--qos=high'] == [
        a for a in probe if a.startswith(('--reservation', '--account', '--qos'))]
    assert int(next(a for a in probe if a.startswith('--immediate=')).split('=')[1]) <= 30
    text = (tmp_path / 'systems' / 'day1.py').read_text()
    assert '- eth: cn3 (IDLE+DRAIN), cn4 (ALLOCATED) left out' in text
    (site,) = load_site_files(tmp_path / 'systems')
    (part,) = site.system['partitions']
    assert part['name'] == 'eth-tcp'
    # The reservation was the probe's: it ends with its window, the nightly runs go on.
    assert part['access'] == ['--partition=eth', '--exclusive', '--account=net-team',
                              '--qos=high']
    assert part['extras']['num_nodes'] == 4      # the partition's nodes: the checks take the idle ones
    assert '/sys/class/net/eth0/speed on cn1, cn2' in text
    # The switch tree of the partition's nodes, every one, busy or not.
    assert part['extras']['topology'] == {
        'spines': ['spine'], 'oversubscription': 1,
        'leaves': {'leaf1': {'nodes': ['cn1', 'cn2'], 'spines': ['spine']},
                   'leaf2': {'nodes': ['cn3', 'cn4'], 'spines': ['spine']}}}


def test_a_kept_reservation_is_written_into_the_access(monkeypatch, tmp_path, fake_slurm,
                                                        capsys):
    code = _site_init(monkeypatch, tmp_path, 'day1', '--reservation', 'standing',
                      '--keep-reservation')
    assert code == 0, capsys.readouterr().err
    (site,) = load_site_files(tmp_path / 'systems')
    (part,) = site.system['partitions']
    assert part['access'] == ['--partition=eth', '--exclusive', '--reservation=standing']


def test_dry_run_submits_nothing(monkeypatch, tmp_path, fake_slurm, capsys):
    assert _site_init(monkeypatch, tmp_path, 'day1', '--dry-run') == 0
    out = capsys.readouterr().out
    assert [a[0] for a in fake_slurm.asked] == ['scontrol', 'scontrol'], fake_slurm.asked
    assert "srun -l --partition=eth --nodelist=cn1,cn2 --nodes=2" in out
    assert 'srun --mpi=list' in out
    assert not (tmp_path / 'systems').exists()


def test_a_value_that_is_not_a_slurm_name_is_refused(monkeypatch, tmp_path, fake_slurm, capsys):
    assert _site_init(monkeypatch, tmp_path, 'day1', '--account', 'a b;rm -rf x') == 2
    err = capsys.readouterr().err
    assert "--account 'a b;rm -rf x' is not a Slurm name" in err and 'Traceback' not in err
    assert fake_slurm.asked == []


def test_from_saved_outputs_writes_the_live_file(monkeypatch, tmp_path, fake_slurm, capsys):
    '''--dump-commands' script saves what --from reads: the same outputs give
    the same file, and the script runs each command the live path runs.'''
    import subprocess
    assert _site_init(monkeypatch, tmp_path / 'live', 'day1') == 0
    live = (tmp_path / 'live' / 'systems' / 'day1.py').read_text()
    assert _site_init(monkeypatch, tmp_path, 'day1', '--dump-commands') == 0
    script = capsys.readouterr().out
    # The script run with stand-ins for hostname, scontrol and srun that print the recordings.
    bin_dir, saved = tmp_path / 'bin', tmp_path / 'saved'
    bin_dir.mkdir()
    recorded = tmp_path / 'recorded'
    recorded.mkdir()
    for name, text in _cluster_outputs().items():
        (recorded / name).write_text(text)
    stand_ins = {'hostname': 'cat "$REC/hostname.txt"',
                 'scontrol': 'case "$*" in *node) cat "$REC/scontrol-show-node.txt";; '
                             '*topology) cat "$REC/scontrol-show-topology.txt";; '
                             '*) cat "$REC/scontrol-show-partition.txt";; esac',
                 'srun': 'case "$1" in --mpi=list) cat "$REC/srun-mpi-list.txt";; '
                         '*) cat "$REC/probe-eth.txt";; esac'}
    for name, body in stand_ins.items():
        (bin_dir / name).write_text(f'#!/bin/sh\n{body}\n')
        (bin_dir / name).chmod(0o755)
    env = {'PATH': f'{bin_dir}:/usr/bin:/bin', 'REC': str(recorded)}
    subprocess.run(['sh', '-c', script, 'dump', str(saved)], check=True, env=env)
    assert _site_init(monkeypatch, tmp_path / 'offline', 'day1', '--from', str(saved)) == 0
    assert (tmp_path / 'offline' / 'systems' / 'day1.py').read_text() == live
    assert len(fake_slurm.asked) == 5 + 2     # the live run's 5, the dump's 2 scontrol: none offline


def test_from_a_directory_without_an_output_is_one_line(monkeypatch, tmp_path, capsys):
    from hpcnet.siteinit import plan
    saved = tmp_path / 'saved'
    saved.mkdir()
    (saved / plan.SHOW_NODES.file).write_text(read('scontrol-show-node.testbed-drained.txt'))
    assert _site_init(monkeypatch, tmp_path, 'day1', '--from', str(saved)) == 2
    err = capsys.readouterr().err
    assert f'{saved}/scontrol-show-partition.txt is missing: the output of scontrol' in err


def _site_check_here(monkeypatch, tmp_path, sacct_says):
    '''site check of a one-partition site on the drained testbed, its srun
    run here (the node script on this host as the job 4242), sacct answering
    ``sacct_says`` (stdout, exit code).'''
    import subprocess
    from hpcnet.siteinit import check
    asked = []

    def completed(argv, timeout, env=None):
        asked.append(argv)
        if argv[0] == 'srun':
            return subprocess.run(['sh', '-c', argv[-1]], text=True, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env={'SLURM_JOB_ID': '4242',
                                                               'PATH': '/usr/bin:/bin'})
        assert argv[0] == 'sacct', argv
        return subprocess.CompletedProcess(argv, sacct_says[1], sacct_says[0], 'sacct: error')
    monkeypatch.setattr(slurm, 'completed', completed)
    monkeypatch.setattr(check, 'SACCT_PAUSE_S', 0)
    node_list = slurm.parse_nodes(read('scontrol-show-node.testbed-drained.txt'))
    (eth,) = slurm.parse_partitions(read('scontrol-show-partition.testbed.txt'), node_list)
    system = {'name': 's', 'partitions': [{
        'name': 'eth-tcp', 'scheduler': 'slurm', 'launcher': 'srun',
        'access': ['--partition=eth', '--exclusive'],
        'extras': {'fabric': 'tcp', 'iface': 'lo', 'num_nodes': 4}}]}
    findings = check.check_site(system, {}, tmp_path / 'stage', {'eth': eth},
                                slurm_nodes=node_list)
    return findings, asked


def test_site_check_runs_on_the_idle_nodes_and_asks_sacct(monkeypatch, tmp_path):
    findings, asked = _site_check_here(
        monkeypatch, tmp_path, ('JobID|State|ExitCode|End|NodeList\n4242|COMPLETED|0:0|1764000000|cn1\n'
                                '4242.0|COMPLETED|0:0|1764000000|cn1\n', 0))
    srun = asked[0]
    assert '--nodelist=cn1,cn2' in srun and '--nodes=2' in srun
    texts = [f.line() for f in findings]
    assert any('left out, not idle now: cn3 (IDLE+DRAIN), cn4 (ALLOCATED)' in t for t in texts)
    assert texts[-1].startswith('ok ') and 'sacct: job 4242, which ended, is COMPLETED' in texts[-1]
    assert asked[-1][:1] == ['sacct'] and asked[-1][asked[-1].index('-j') + 1] == '4242'


def test_site_check_fails_when_sacct_does_not_answer(monkeypatch, tmp_path):
    from hpcnet.exitcodes import Exit
    from hpcnet.siteinit import check
    findings, asked = _site_check_here(
        monkeypatch, tmp_path, ('', 1))
    last = findings[-1]
    assert last.code == Exit.FAILED and last.text.startswith('sacct: no answer for job 4242')
    assert 'sacct: error' in last.text
    assert sum(a[0] == 'sacct' for a in asked) == check.SACCT_TRIES
    assert [f for f in findings if f.text.startswith('sacct')] == [last]
    findings, _ = _site_check_here(monkeypatch, tmp_path, ('4242|RUNNING\n', 0))
    assert findings[-1].code == Exit.FAILED and "state 'RUNNING'" in findings[-1].text


def _saved(directory, outputs):
    directory.mkdir(parents=True)
    for name, text in outputs.items():
        (directory / name).write_text(text)
    return directory


def test_hostnames_name_every_login_node(monkeypatch, tmp_path, fake_slurm, capsys):
    '''--hostnames for a cluster of several login nodes: the file ReFrame
    picks on each of them and on no other host; --from the saved outputs
    writes the same file.'''
    from hpcnet.siteconfig.sites import matching_system
    given = ['--hostnames', '^hn[0-9]+$', '--hostnames', '^login-ext$']
    assert _site_init(monkeypatch, tmp_path / 'live', 'day1', *given) == 0, capsys.readouterr()
    live = (tmp_path / 'live' / 'systems' / 'day1.py').read_text()
    assert "'hostnames': ['^hn[0-9]+$', '^login-ext$'],  # --hostnames (site init ran on hn0)" \
        in live
    sites = load_site_files(tmp_path / 'live' / 'systems')
    for login in ('hn0', 'hn12', 'login-ext'):
        assert matching_system(sites, login)[0].system['name'] == 'day1', login
    for other in ('cn1', 'xhn0', 'login-ext2', 'hn'):
        assert matching_system(sites, other) is None, other
    saved = _saved(tmp_path / 'saved', _cluster_outputs())
    assert _site_init(monkeypatch, tmp_path / 'offline', 'day1', '--from', str(saved),
                      *given) == 0
    assert (tmp_path / 'offline' / 'systems' / 'day1.py').read_text() == live


@pytest.mark.parametrize('pattern, says', [
    ('^login[0-9$', "--hostnames '^login[0-9$': not a regular expression (unterminated "
                    'character set at position 6) (valid: a Python regex'),
    ('login.*|', "--hostnames 'login.*|': matches every host name (valid: "),
    ('^login[0-9]+$', "--hostnames '^login[0-9]+$': none matches 'hn0', the host site init "
                      'reads Slurm on (valid: '),
])
def test_a_hostnames_pattern_that_cannot_serve_is_one_line(monkeypatch, tmp_path, fake_slurm,
                                                           capsys, pattern, says):
    assert _site_init(monkeypatch, tmp_path, 'day1', '--hostnames', pattern) == 2
    err = capsys.readouterr().err
    assert err.startswith(f'hpcnet: error: {says}') and len(err.splitlines()) == 1, err
    assert fake_slurm.asked == [] and not (tmp_path / 'systems').exists()


#: `scontrol show config` of Slurm 22.05, the lines the PMIx fence rule reads.
_CONFIG = '''Configuration data as of 2026-12-07T04:00:00
TreeWidth               = {width}
MPI Plugins Configuration:
PMIxCollFence           = {fence}
'''


def _srun_system(env_vars=()):
    return {'name': 'day1', 'partitions': [{'name': 'eth-tcp', 'launcher': 'srun',
                                            'env_vars': list(env_vars)}]}


@pytest.mark.parametrize('width, fence, env_vars, code', [
    (50, '(null)', (), Exit.FAILED),                   # 22.05's default: the tree, no wait
    (50, 'ring', (), Exit.OK),                         # mpi.conf's workaround
    (2, '(null)', (), Exit.OK),                        # no step is narrower than the tree
    (50, '(null)', ((check.PMIX_FENCE_VARIABLE, 'ring'),), Exit.OK),   # the jobs' variable
])
def test_site_check_names_a_pmix_fence_that_does_not_wait(width, fence, env_vars, code):
    config = slurm.parse_config(_CONFIG.format(width=width, fence=fence))
    finding = check.check_pmix_fence(_srun_system(env_vars), config)
    assert finding.code == code, finding.text
    assert finding.text.startswith(f'Slurm PMIx fence: TreeWidth {width}, PMIxCollFence '
                                   f'{fence}'), finding.text
    if code == Exit.FAILED:
        assert 'PMIxCollFence=ring to mpi.conf' in finding.text


def test_the_pmix_fence_is_not_checked_without_srun():
    system = {'name': 'day1', 'partitions': [{'name': 'eth-tcp', 'launcher': 'mpirun'}]}
    assert check.check_pmix_fence(system, {}) is None


def test_a_partition_node_in_no_leaf_is_one_line_naming_scontrol(monkeypatch, tmp_path,
                                                                 fake_slurm, capsys):
    from hpcnet.siteinit import plan
    fake_slurm.by_argv[plan.SHOW_TOPOLOGY.argv] = (
        'SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=cn[1-3]\n'
        'SwitchName=spine Level=1 LinkSpeed=1 Nodes=cn[1-3] Switches=leaf1\n')
    assert _site_init(monkeypatch, tmp_path, 'day1') == 2
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if 'error' in ln]
    assert line == ('hpcnet: error: scontrol show topology: node cn4 of Slurm partition eth is in '
                    'no leaf switch (valid: every node of Slurm partition eth under one leaf; '
                    'leaves: leaf1)')


def test_a_slurm_without_a_tree_writes_none_and_says_so(monkeypatch, tmp_path, fake_slurm, capsys):
    from hpcnet.siteinit import plan
    fake_slurm.by_argv[plan.SHOW_TOPOLOGY.argv] = ''
    assert _site_init(monkeypatch, tmp_path, 'day1') == 0
    assert 'no switch tree recorded: scontrol show topology lists no switch' in \
        capsys.readouterr().err
    (site,) = load_site_files(tmp_path / 'systems')
    assert 'topology' not in site.system['partitions'][0]['extras']
