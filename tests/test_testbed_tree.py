"""The testbed's switch tree (hpcnet.testbed.tree, ``up --leaves``) without
root: who hangs off which leaf, Slurm's topology.conf and slurm.conf of it,
the namespaces, veths and tc command lines the build and the shaping run
(recorded, not run), the state and what the teardown removes, the testbed
partition's tree, and the pair matrix's naming of an uplink on two leaves.
The tree built for real is tests/test_testbed_tree_live.py.
"""
import json
import re
import runpy

import pytest

from hpcnet import topology
from hpcnet.checklib.analysis import CULPRITS_TYPE, RETEST_OUTLIER, Culprits, culprits
from hpcnet.commands.testbed import testbed_main as run_cli
from hpcnet.constants import CONFIG_DIR
from hpcnet.paths import DATA_DIR
from hpcnet.model import Partition
from hpcnet.testbed import Testbed, TestbedUsageError, shaping, teardown, tree
from hpcnet.testbed.config import ETHERNET_OVERHEAD
from hpcnet.variables import TESTBED_TOPOLOGY_ENV

NAME = 'treet'


def shaped(rate):
    '''A root qdisc's size table and tbf at ``rate`` with the testbed's bucket.'''
    return ['stab', 'overhead', str(ETHERNET_OVERHEAD), 'linklayer', 'ethernet',
            'tbf', 'rate', rate, 'burst', '8kb', 'latency', '50ms']


TBF = shaped('850mbit')


def test_nodes_spread_evenly_in_order():
    nodes = [f'cn{i}' for i in range(1, 8)]
    assert tree.spread(nodes[:4], 2) == {'leaf1': ['cn1', 'cn2'], 'leaf2': ['cn3', 'cn4']}
    assert tree.spread(nodes, 3) == {'leaf1': ['cn1', 'cn2', 'cn3'], 'leaf2': ['cn4', 'cn5'],
                                     'leaf3': ['cn6', 'cn7']}
    assert tree.spread(nodes[:3], 1) == {'leaf1': ['cn1', 'cn2', 'cn3']}


@pytest.mark.parametrize('leaves', [0, 5])
def test_a_leaf_without_a_node_is_a_usage_error(leaves):
    with pytest.raises(TestbedUsageError, match=rf'^--leaves {leaves}: valid: 1\.\.4 '):
        tree.check_leaves(leaves, 4)


def test_up_refuses_bad_leaves_in_one_line_before_anything(capsys):
    assert run_cli(['up', '--testbed-name', NAME, '--nodes', '4', '--leaves', '5']) == 2
    err = capsys.readouterr().err
    assert err.startswith('hpcnet testbed up: --leaves 5: valid: 1..4') and err.count('\n') == 1


def test_topology_conf_is_the_tree_slurm_and_hpcnet_read():
    leaves = tree.spread(['cn1', 'cn2', 'cn3', 'cn4', 'cn5', 'cn6'], 3)
    text = tree.topology_conf(leaves)
    assert text.splitlines()[1:] == ['SwitchName=leaf1 Nodes=cn1,cn2',
                                     'SwitchName=leaf2 Nodes=cn3,cn4',
                                     'SwitchName=leaf3 Nodes=cn5,cn6',
                                     'SwitchName=spine Switches=leaf1,leaf2,leaf3']
    parsed = topology.parse_topology(text, 'topology.conf')
    assert {leaf.name: leaf.nodes for leaf in parsed.leaves} == {
        leaf: tuple(nodes) for leaf, nodes in leaves.items()}
    assert all(leaf.spines == ('spine',) and leaf.capacity == 2 for leaf in parsed.leaves)


@pytest.fixture
def commands(monkeypatch):
    '''The argv of every command the testbed would run (none runs); a root
    qdisc removal is recorded as ('clear', netns, dev).'''
    ran = []
    monkeypatch.setattr(Testbed, '_cmd', lambda self, step, argv, **kw: ran.append(list(argv)))
    monkeypatch.setattr(shaping, 'clear_root',
                        lambda step, netns, dev: ran.append(['clear', netns, dev]))
    return ran


def planned(tmp_path, nodes=4, leaves=2) -> Testbed:
    '''A testbed whose nodes and switches are planned as ``up`` plans them.'''
    tb = Testbed(state_dir=tmp_path / 'tb', name=NAME)
    tb.state_dir.mkdir(parents=True)
    tb._nodes_wanted, tb._leaves_wanted = nodes, leaves
    tb._state = {'name': NAME, 'resources': [], 'tree': None, 'rate': '1gbit', 'burst': '8kb',
                 'node_rates': {}, 'path_rates': {}, 'uplink_rates': {}}
    tb._plan_nodes()
    return tb


def test_the_head_node_hangs_off_the_spine_and_each_node_off_its_leaf(tmp_path):
    tb = planned(tmp_path, nodes=5, leaves=2)
    assert tb.leaves == {'leaf1': ['cn1', 'cn2', 'cn3'], 'leaf2': ['cn4', 'cn5']}
    assert {n: tb.switch_netns(n) for n in tb.nodes()} == {
        'hn0': 'treet-spine', 'cn1': 'treet-leaf1', 'cn2': 'treet-leaf1', 'cn3': 'treet-leaf1',
        'cn4': 'treet-leaf2', 'cn5': 'treet-leaf2'}
    assert tb.env({})[TESTBED_TOPOLOGY_ENV] == str(tb.state_dir / 'etc' / 'topology.conf')
    one = planned(tmp_path / 'one', nodes=2, leaves=1)
    assert one.leaves is None and {one.switch_netns(n) for n in one.nodes()} == {'treet-br'}
    assert TESTBED_TOPOLOGY_ENV not in one.env({TESTBED_TOPOLOGY_ENV: 'stale'})


def test_build_records_every_switch_and_uplink_and_teardown_removes_them(tmp_path, commands,
                                                                          monkeypatch):
    tb = planned(tmp_path)
    tb._step_create_network_namespaces()
    tb._step_create_bridge()
    tb._step_connect_nodes()
    tb._step_connect_uplinks()
    made = [c for c in commands if c[:3] == ['ip', 'netns', 'add']]
    assert [c[3] for c in made] == ['treet-spine', 'treet-leaf1', 'treet-leaf2', 'treet-hn0',
                                    'treet-cn1', 'treet-cn2', 'treet-cn3', 'treet-cn4']
    bridges = [c[2] for c in commands if c[3:7] == ['link', 'add', 'br0', 'type']]
    assert bridges == ['treet-spine', 'treet-leaf1', 'treet-leaf2']
    assert ['ip', '-n', 'treet-leaf2', 'link', 'add', 'v-cn3', 'type', 'veth', 'peer', 'name',
            'eth0', 'netns', 'treet-cn3'] in commands
    assert ['ip', '-n', 'treet-spine', 'link', 'add', 'v-hn0', 'type', 'veth', 'peer', 'name',
            'eth0', 'netns', 'treet-hn0'] in commands
    for leaf in ('leaf1', 'leaf2'):
        assert ['ip', '-n', 'treet-spine', 'link', 'add', f'v-{leaf}', 'type', 'veth', 'peer',
                'name', 'uplink', 'netns', f'treet-{leaf}'] in commands
        assert ['ip', '-n', f'treet-{leaf}', 'link', 'set', 'uplink', 'master', 'br0',
                'up'] in commands
    saved = json.loads(tb.state_file.read_text())
    assert [r for r in saved['resources'] if r.get('uplink')] == [
        {'kind': 'veth', 'netns': 'treet-spine', 'dev': 'v-leaf1', 'uplink': 'leaf1'},
        {'kind': 'veth', 'netns': 'treet-spine', 'dev': 'v-leaf2', 'uplink': 'leaf2'}]

    # The teardown of what was recorded: every namespace of the tree goes.
    netns_dir = tmp_path / 'netns'
    netns_dir.mkdir()
    for c in made:
        (netns_dir / c[3]).touch()
    removed = []

    def quiet(argv):
        removed.append(argv)
        if argv[:3] == ['ip', 'netns', 'del']:
            (netns_dir / argv[3]).unlink()
        return 0, ''
    monkeypatch.setattr(teardown, 'NETNS_DIR', netns_dir)
    monkeypatch.setattr(teardown, '_quiet', quiet)
    assert teardown._remove_in_reverse(saved['resources']) == []
    assert list(netns_dir.iterdir()) == []
    assert ['ip', '-n', 'treet-spine', 'link', 'del', 'v-leaf2'] in removed


def test_an_uplink_is_shaped_both_ways_kept_and_cleared(tmp_path, commands):
    tb = planned(tmp_path)
    tb.shape_uplink('leaf2', '850mbit')
    assert commands == [
        ['tc', '-n', 'treet-spine', 'qdisc', 'replace', 'dev', 'v-leaf2', 'root', *TBF],
        ['tc', '-n', 'treet-leaf2', 'qdisc', 'replace', 'dev', 'uplink', 'root', *TBF]]
    assert json.loads(tb.state_file.read_text())['uplink_rates'] == {'leaf2': '850mbit'}
    commands.clear()
    tb.shape_uplink('leaf2', 'none')
    assert commands == [['clear', 'treet-spine', 'v-leaf2'], ['clear', 'treet-leaf2', 'uplink']]
    assert tb.state['uplink_rates'] == {}


def test_every_link_shaped_ends_the_uplinks_own_rate(tmp_path, commands):
    tb = planned(tmp_path)
    tb.shape_uplink('leaf1', '850mbit')
    commands.clear()
    tb.shape('1gbit')
    assert ['clear', 'treet-spine', 'v-leaf1'] in commands
    assert ['clear', 'treet-leaf1', 'uplink'] in commands
    assert ['clear', 'treet-leaf2', 'v-cn3'] in commands     # a node's port on its leaf
    assert tb.state['uplink_rates'] == {}


def test_one_nodes_link_is_shaped_on_its_own_leaf(tmp_path, commands):
    tb = planned(tmp_path)
    tb.shape('500mbit', node='cn4')
    assert ['tc', '-n', 'treet-leaf2', 'qdisc', 'replace', 'dev', 'v-cn4', 'root',
            *shaped('500mbit')] in commands


@pytest.mark.parametrize('leaves, leaf, named', [
    (2, 'leaf3', "--uplink leaf3: no such leaf (valid: leaf1, leaf2)"),
    (1, 'leaf1', '--uplink leaf1: testbed treet has one bridge and no uplink'),
])
def test_an_unknown_uplink_is_a_usage_error(tmp_path, commands, leaves, leaf, named):
    tb = planned(tmp_path, leaves=leaves)
    with pytest.raises(TestbedUsageError, match=f'^{re.escape(named)}'):
        tb.shape_uplink(leaf, '850mbit')
    assert commands == []


def test_uplink_with_node_is_a_usage_error(capsys):
    assert run_cli(['shape', '--testbed-name', 'hpcnetnone', '--uplink', 'leaf1', '--node', 'cn1',
                    '--rate', '700mbit']) == 2
    err = capsys.readouterr().err
    assert err.startswith('hpcnet testbed shape: --uplink') and err.count('\n') == 1


@pytest.mark.parametrize('leaves', [1, 2])
def test_slurm_conf_takes_the_tree_plugin_only_with_a_tree(tmp_path, leaves):
    tb = planned(tmp_path, leaves=leaves)
    for sub in ('etc', 'bin', 'munge-key'):
        (tb.state_dir / sub).mkdir()
    tb._hw = {'CPUs': '2'}
    tb._step_write_configuration()
    conf = tb.slurm_conf.read_text()
    assert ('TopologyPlugin=topology/tree' in conf.splitlines()) == (leaves > 1)
    assert tb.topology_conf.exists() == (leaves > 1)
    if leaves > 1:
        assert 'SwitchName=spine Switches=leaf1,leaf2' in tb.topology_conf.read_text()


def test_the_testbed_partition_carries_the_tree(tmp_path, monkeypatch):
    conf = tmp_path / 'topology.conf'
    conf.write_text(tree.topology_conf(tree.spread(['cn1', 'cn2', 'cn3', 'cn4'], 2)))
    monkeypatch.setenv(TESTBED_TOPOLOGY_ENV, str(conf))
    system = runpy.run_path(str(CONFIG_DIR / 'systems' / 'testbed.py'))['system']
    (eth,) = [p for p in system['partitions'] if p['name'] == 'eth']
    found = Partition.from_extras('testbed:eth', eth['extras']).topology
    assert found.leaf_of == {'cn1': 'leaf1', 'cn2': 'leaf1', 'cn3': 'leaf2', 'cn4': 'leaf2'}
    monkeypatch.delenv(TESTBED_TOPOLOGY_ENV)
    system = runpy.run_path(str(CONFIG_DIR / 'systems' / 'testbed.py'))['system']
    assert all('topology' not in p['extras'] for p in system['partitions'])


def _rows(leaf_of, slow):
    nodes = sorted(leaf_of)
    return [{'host_a': a, 'host_b': b, 'retest': RETEST_OUTLIER if slow(a, b) else 0,
             'bw_outlier': int(slow(a, b)), 'bw_retest_outlier': int(slow(a, b)),
             'lat_outlier': 0, 'lat_retest_outlier': 0}
            for i, a in enumerate(nodes) for b in nodes[i + 1:]]


def test_two_leaves_name_both_uplinks_as_alike_three_the_one():
    '''With two leaves every cross-leaf pair crosses both uplinks: the pairs
    cannot tell them apart, and the check says so; with three the one.'''
    for leaves, expected in ((2, Culprits(uplinks=('leaf1', 'leaf2'), uplinks_alike=True)),
                             (3, Culprits(uplinks=('leaf2',)))):
        nodes = [f'cn{i}' for i in range(1, 2 * leaves + 1)]
        placed = tree.spread(nodes, leaves)
        found_tree = topology.parse_topology(tree.topology_conf(placed), 'topology.conf')
        leaf_of = found_tree.leaf_of
        found = culprits(_rows(leaf_of, lambda a, b: leaf_of[a] != leaf_of[b] and 'leaf2' in (
            leaf_of[a], leaf_of[b])), 'bandwidth', found_tree)
        assert found == expected
    two = Culprits(uplinks=('leaf1', 'leaf2'), uplinks_alike=True)
    assert two.describe().startswith('uplink leaf1 or leaf2 (the pairs cannot tell them apart')
    assert two.as_dict()['uplinks_alike'] == ['leaf1', 'leaf2']
    assert 'uplinks_alike' not in Culprits(uplinks=('leaf2',)).as_dict()
    # What the check sets its culprits variable to, of the type it declares
    # (a bool there failed every trial of two leaves in sanity).
    for found in (two, Culprits(uplinks=('leaf2',)), Culprits(nodes=('cn3',))):
        assert isinstance({'bandwidth': found.as_dict()}, CULPRITS_TYPE), found


def test_the_benchmark_counts_either_uplink_right_on_two_leaves_only():
    bench = runpy.run_path(str(DATA_DIR / 'ci' / 'benchmarks' / 'culprits.py'))
    right = bench['right']
    found = {'nodes': set(), 'links': set(), 'inconclusive': set(), 'uplinks': {'leaf1', 'leaf2'}}
    assert right('uplink', 'leaf2', found, ['leaf1', 'leaf2'])
    assert not right('uplink', 'leaf2', found, ['leaf1', 'leaf2', 'leaf3'])
    assert right('uplink', 'leaf2', dict(found, uplinks={'leaf2'}), ['leaf1', 'leaf2', 'leaf3'])
    assert not right('uplink', 'leaf2', dict(found, uplinks={'leaf2'}, nodes={'cn3'}),
                     ['leaf1', 'leaf2', 'leaf3'])
    assert not right('node', 'cn3', dict(found, nodes={'cn3'}), ['leaf1', 'leaf2', 'leaf3'])
