"""The switch tree (hpcnet.topology): Slurm's recorded ``scontrol show
topology`` and ``topology.conf`` read, a site file's own tree, each bad input
one line naming it; the tree's pair schedule (hpcnet.checklib.treeschedule)
on trees of several shapes; and culprits put on the links a pair crosses."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpcnet import metrics, topology
from hpcnet.checklib import treeschedule
from hpcnet.checklib.analysis import RETEST_OUTLIER, Culprits, culprits
from hpcnet.fabrics import ConfigError
from hpcnet.paths import PROJECT_ROOT

DATA = Path(__file__).parent / 'data' / 'topology'


def test_a_recorded_scontrol_show_topology_is_read():
    tree = topology.parse_topology((DATA / 'scontrol-show-topology.txt').read_text(),
                                   'scontrol show topology', oversubscription=2)
    assert [leaf.name for leaf in tree.leaves] == ['s0', 's1', 's2', 's3']
    assert tree.leaves[1].nodes == ('tux4', 'tux5', 'tux6', 'tux7')
    assert all(leaf.spines == ('s4', 's5') and leaf.capacity == 2 for leaf in tree.leaves)
    assert tree.leaf_of['tux13'] == 's3'


def test_a_recorded_topology_conf_is_read():
    tree = topology.parse_topology((DATA / 'topology.conf').read_text(), 'topology.conf')
    assert [(leaf.name, len(leaf.nodes), leaf.spines, leaf.capacity) for leaf in tree.leaves] == [
        ('s0', 6, ('s3',), 6), ('s1', 6, ('s3',), 6), ('s2', 6, ('s3',), 6)]
    assert tree.links('dev0', 'dev1') == (('cable', 'dev0'), ('cable', 'dev1'))
    assert tree.links('dev0', 'dev7') == (('cable', 'dev0'), ('cable', 'dev7'),
                                          ('uplink', 's0'), ('uplink', 's1'))


def test_a_site_files_own_tree():
    tree = topology.from_site({
        'spines': ['spine1'], 'oversubscription': 2,
        'leaves': {'leaf1': {'nodes': 'cn[01-04]', 'spines': ['spine1']},
                   'leaf2': {'nodes': ['cn05', 'cn06', 'cn07'], 'spines': ['spine1'],
                             'capacity': 3}}}, 'site.py: partition x:y')
    assert tree.leaves[0].nodes == ('cn01', 'cn02', 'cn03', 'cn04')
    assert [leaf.capacity for leaf in tree.leaves] == [2, 3]
    assert topology.from_site(tree.as_site(), 'again') == topology.Tree(tree.leaves, 'again: '
                                                                       'extras.topology')
    assert topology.from_site(None, 'site.py') is None


@pytest.mark.parametrize('text, words', [
    ('SwitchName=s0 Nodes=a[1-2]\nSwitchName=s1 Nodes=a[2-3]\nSwitchName=s2 Switches=s[0-1]',
     ['topology.conf', 'node a2', 'leaf s0', 'leaf s1']),
    ('SwitchName=s0 Nodes=a[1-2]\nSwitchName=s1 Nodes=a[3-4]\nSwitchName=s2 Switches=s0',
     ['topology.conf', 'leaf s1 has no uplink']),
    ('SwitchName=s0 Nodes=a[1-2]\nSwitchName=s2 Switches=s[0-1]',
     ['topology.conf', 'switch s2', 'switch s1', 'not defined', 'valid: s0, s2']),
    ('SwitchName=s0 Nodes=a[1-2\n', ['topology.conf', 'switch s0', 'a[1-2']),
    ('Nodes=a[1-2]\n', ['topology.conf:1', 'SwitchName']),
])
def test_each_bad_slurm_tree_is_one_line_naming_it(text, words):
    with pytest.raises(ConfigError) as err:
        topology.parse_topology(text, 'topology.conf')
    message = str(err.value)
    assert '\n' not in message and all(w in message for w in words), message


@pytest.mark.parametrize('value, words', [
    ({'spines': ['sp'], 'leaves': {'l1': {'nodes': 'a[1-2]', 'spines': ['sp']},
                                   'l2': {'nodes': 'a[2-3]', 'spines': ['sp']}}},
     ['site.py', 'node a2', 'leaf l1', 'leaf l2']),
    ({'spines': ['sp'], 'leaves': {'l1': {'nodes': 'a[1-2]', 'spines': ['sp']},
                                   'l2': {'nodes': 'a[3-4]'}}},
     ['site.py', 'extras.topology', 'leaf l2 has no uplink']),
    ({'spines': ['sp'], 'leaves': {'l1': {'nodes': 'a[1-2]', 'spines': ['other']}}},
     ['site.py', 'extras.topology.leaves.l1.spines', "'other'", 'valid: one of']),
    ({'leaves': {'l1': {'nodes': 'a[1-2]', 'uplinks': 2}}},
     ['extras.topology.leaves.l1.uplinks', 'valid: nodes, spines']),
    ({'leaves': {'l1': {'nodes': 'a[1-2]', 'capacity': 0}}},
     ['extras.topology.leaves.l1.capacity', 'valid: an integer >= 1']),
])
def test_each_bad_site_tree_is_one_line_naming_it(value, words):
    with pytest.raises(ConfigError) as err:
        topology.from_site(value, 'site.py: partition x:y')
    message = str(err.value)
    assert '\n' not in message and all(w in message for w in words), message


def test_a_node_of_the_partition_in_no_leaf_is_one_line():
    tree = topology.parse_topology((DATA / 'topology.conf').read_text(), 'topology.conf')
    with pytest.raises(ConfigError, match=r'^topology.conf: node dev99 of partition p is in no '
                                          r'leaf switch .*leaves: s0, s1, s2\)$'):
        tree.check_covers(['dev1', 'dev99'], 'partition p')


def _tree(sizes, capacities=None, spines=('sp',)):
    capacities = capacities or [None] * len(sizes)
    return topology.build_tree(
        {f'leaf{i}': dict({'nodes': [f'n{i}x{j}' for j in range(size)], 'spines': list(spines)},
                          **({'capacity': cap} if cap else {}))
         for i, (size, cap) in enumerate(zip(sizes, capacities))}, 'test')


SHAPES = [([4, 4], [2, 2]), ([6, 6, 6], [3, 3, 3]), ([5, 3, 4, 2, 7], [2, 1, 3, 1, 3]),
          ([8], None), ([3, 3, 3, 3], [1, 1, 1, 1]), ([16, 16, 16, 16], [8, 8, 8, 8])]


@pytest.mark.parametrize('sizes, capacities', SHAPES)
def test_the_tree_schedule_measures_every_pair_once_within_capacity(sizes, capacities):
    tree = _tree(sizes, capacities)
    rounds = treeschedule.tree_rounds(tree)
    measured = [tuple(sorted(p)) for r in rounds for p in r]
    nodes = tree.nodes
    assert sorted(measured) == sorted(tuple(sorted((a, b))) for i, a in enumerate(nodes)
                                      for b in nodes[i + 1:])
    for pairs, load in zip(rounds, treeschedule.uplink_loads(tree, rounds)):
        ends = [n for p in pairs for n in p]
        assert len(ends) == len(set(ends)), 'a node twice in one round'
        crossing = [tree.leaf_of[a] != tree.leaf_of[b] for a, b in pairs]
        assert all(crossing) or not any(crossing), 'leaf-local and cross-leaf pairs mixed'
        assert all(n <= tree.capacity_of[leaf] for leaf, n in load.items()), load
    assert treeschedule.round_count(tree) == len(rounds)


def test_uplink_capacity_costs_rounds_by_the_bound():
    full, halved = _tree([8] * 4), _tree([8] * 4, [4] * 4)
    # 3 leaf rounds x 8 shifts, each shift cut in two at capacity 4; 7 local rounds.
    assert treeschedule.round_count(full) == 7 + 3 * 8
    assert treeschedule.round_count(halved) == 7 + 3 * 8 * 2


@pytest.mark.parametrize('sizes', [[8] * 6, [5, 6, 7, 6]])
def test_a_sample_covers_every_cable_and_uplink(sizes):
    tree = _tree(sizes, [2] * len(sizes))
    rounds = treeschedule.sampled_rounds(tree)
    pairs = [p for r in rounds for p in r]
    per_node = {n: sum(n in p for p in pairs) for n in tree.nodes}
    assert min(per_node.values()) >= treeschedule.SAMPLE_LOCAL_ROUNDS
    partners = {leaf.name: set() for leaf in tree.leaves}
    for a, b in pairs:
        if tree.leaf_of[a] != tree.leaf_of[b]:
            partners[tree.leaf_of[a]].add(tree.leaf_of[b])
            partners[tree.leaf_of[b]].add(tree.leaf_of[a])
    assert all(len(p) >= min(treeschedule.SAMPLE_LEAF_ROUNDS, len(sizes) - 1)
               for p in partners.values())


def _rows(tree, slow):
    '''Kernel rows of every pair of ``tree``, the pairs ``slow`` says bad in
    both passes.'''
    nodes = tree.nodes
    rows = []
    for i, a in enumerate(nodes):
        for b in nodes[i + 1:]:
            bad = slow(a, b)
            rows.append({'host_a': a, 'host_b': b, 'retest': RETEST_OUTLIER if bad else 0,
                         'bw_outlier': int(bad), 'bw_retest_outlier': int(bad),
                         'lat_outlier': 0, 'lat_retest_outlier': 0})
    return rows


@pytest.mark.parametrize('sizes', [[4, 4, 4], [4, 4, 4, 4], [6, 3, 5, 4]])
def test_a_bad_uplink_is_named_and_no_node(sizes):
    tree = _tree(sizes)
    found = culprits(_rows(tree, lambda a, b: 'leaf1' in {tree.leaf_of[a], tree.leaf_of[b]}
                           and tree.leaf_of[a] != tree.leaf_of[b]), 'bandwidth', tree)
    assert found == Culprits(uplinks=('leaf1',))
    assert found.describe() == 'uplink leaf1'


@pytest.mark.parametrize('sizes', [[4, 4], [4, 4, 4], [3, 5, 4, 4]])
def test_a_bad_node_is_named_as_the_node(sizes):
    tree = _tree(sizes)
    found = culprits(_rows(tree, lambda a, b: 'n1x2' in (a, b)), 'bandwidth', tree)
    assert found == Culprits(nodes=('n1x2',), uplinks=())


def test_a_bad_uplink_and_a_bad_node_elsewhere_are_both_named():
    tree = _tree([4, 4, 4, 4])
    uplink = lambda a, b: tree.leaf_of[a] != tree.leaf_of[b] and 'leaf0' in (
        tree.leaf_of[a], tree.leaf_of[b])
    found = culprits(_rows(tree, lambda a, b: uplink(a, b) or 'n2x1' in (a, b)), 'bandwidth', tree)
    assert found == Culprits(nodes=('n2x1',), uplinks=('leaf0',))


def test_a_clean_tree_names_nothing():
    tree = _tree([4, 4, 4])
    found = culprits(_rows(tree, lambda a, b: False), 'bandwidth', tree)
    assert found == Culprits(uplinks=()) and found.describe() == 'none'
    assert found.as_dict()['uplinks'] == []


SITE = '''\
from hpcnet.model import partition_extras
system = {{'name': 'treesite', 'hostnames': ['^login'], 'partitions': [
  {{'name': 'eth', 'scheduler': 'slurm', 'launcher': 'srun',
   'extras': partition_extras(fabric='tcp', iface='eno1', num_nodes=8, topology={tree!r})}}]}}
'''


def _validate(tmp_path, tree):
    (tmp_path / 'treesite.py').write_text(SITE.format(tree=tree))
    return subprocess.run([sys.executable, '-m', 'hpcnet.cli', 'fabrics', 'validate'],
                          env={**os.environ, 'HPCNET_SYSTEMS_DIRS': str(tmp_path)},
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)


def test_fabrics_validate_reads_a_site_files_tree(tmp_path):
    res = _validate(tmp_path, {'spines': ['sp'], 'oversubscription': 2, 'leaves': {
        'l1': {'nodes': 'cn[1-4]', 'spines': ['sp']}, 'l2': {'nodes': 'cn[5-8]', 'spines': ['sp']}}})
    assert res.returncode == 0, res.stderr
    assert 'ok: treesite:eth: switch tree of 2 leaves, 8 nodes, uplink capacity 2 concurrent ' \
           'pairs per leaf' in res.stdout


def test_fabrics_validate_names_a_bad_tree_in_one_line(tmp_path):
    res = _validate(tmp_path, {'spines': ['sp'], 'leaves': {
        'l1': {'nodes': 'cn[1-4]', 'spines': ['sp']}, 'l2': {'nodes': 'cn[4-8]', 'spines': ['sp']}}})
    assert res.returncode == 2
    assert res.stderr.splitlines() == [
        f"hpcnet: error: {tmp_path / 'treesite.py'}: partition treesite:eth: extras.topology: "
        'node cn4 is in leaf l1 and in leaf l2 (valid: each node under one leaf switch)']


def test_the_heat_map_draws_the_switch_boundaries_and_a_bad_uplinks_leaf():
    import matplotlib.pyplot as plt
    from hpcnet.acceptance.report import reportplots
    hosts = ['a1', 'a2', 'b1', 'b2', 'b3', 'c1']
    leaf_of = {'a1': 'l1', 'a2': 'l1', 'b1': 'l2', 'b2': 'l2', 'b3': 'l2', 'c1': 'l3'}
    fig, ax = plt.subplots()
    ax.imshow([[1.0] * 6] * 6)
    reportplots._mark_leaves(ax, hosts, leaf_of, ['l2'])
    boundaries = sorted({line.get_xdata()[0] for line in ax.lines if line.get_xdata()[0] ==
                         line.get_xdata()[-1]})
    assert boundaries == [1.5, 4.5]
    bands = sorted((p.get_x(), p.get_y(), p.get_width(), p.get_height()) for p in ax.patches)
    assert bands == [(-0.5, 1.5, 6, 3), (1.5, -0.5, 3, 6)]
    plt.close(fig)
    case = {'name': 'hpcnet_pairs', 'system': 's', 'partition': 'p', 'environ': 'e',
            'switch_leaves': leaf_of, 'culprits': {'bandwidth': {'uplinks': ['l2']}},
            'pair_table': [{'host_a': a, 'host_b': b, 'bw_median_MBps': 1.0, 'lat_mean_us': 1.0,
                            'lat_first_us': 1.0} for i, a in enumerate(hosts) for b in hosts[i + 1:]]}
    assert reportplots.pair_heatmaps([case]).count('<figure>') == 1


def test_the_uplink_counts_of_a_tree_are_in_the_metric_catalogue():
    # The pair matrix adds them on every partition with a tree: a count
    # missing from the catalogue failed every such case at setup.
    for quantity in ('latency', 'bandwidth'):
        entry = metrics.metric('hpcnet_pairs', f'{quantity}_outlier_uplinks')
        assert entry.unit == metrics.Unit.COUNT and entry.can_be_zero


def test_the_rounds_file_marks_the_leaf_local_rounds_as_reference(tmp_path):
    '''The kernel's --pair-rounds file: each leaf-local round's line begins
    with "reference" (src/pairs_tree.h), no cross-leaf round's does.'''
    tree = _tree([4, 4], [2, 2])
    rounds = treeschedule.tree_rounds(tree)
    path = tmp_path / 'pair-rounds.txt'
    treeschedule.write_rounds(rounds, path, tree)
    lines = path.read_text().splitlines()
    assert len(lines) == len(rounds)
    for line, pairs in zip(lines, rounds):
        local = all(tree.leaf_of[a] == tree.leaf_of[b] for a, b in pairs)
        words = line.split()
        assert (words[0] == treeschedule.REFERENCE_ROUND) == local, line
        assert words[local:] == [f'{a}:{b}' for a, b in pairs]
    assert sum(line.startswith('reference ') for line in lines) == 3   # 4 nodes a leaf


#: A C driver of the outlier rule (src/pairs_outliers.h): the pair matrix of
#: 8 nodes in 2 leaves of 4, its 12 leaf-local pairs at 100 MB/s (+-1) and its
#: 16 cross-leaf pairs through an uplink at 85 %; it prints the bandwidth
#: threshold and how many pairs fall below it, with and without the
#: leaf-local pairs as reference.
OUTLIER_DRIVER = r'''
#include "pairs_outliers.h"
#include <stdio.h>
int main(void)
{
    enum { N = 8, NPAIRS = N * (N - 1) / 2 };
    static double all[NPAIRS * NRES], scratch[NPAIRS];
    static unsigned char measured[NPAIRS], reference[NPAIRS];
    for (int a = 0; a < N; a++)
        for (int b = a + 1; b < N; b++) {
            const long p = pair_index(a, b, N);
            const int local = a / 4 == b / 4;
            measured[p] = 1;
            reference[p] = (unsigned char)local;
            all[p * NRES + R_LMEAN] = 30.0;
            all[p * NRES + R_BMED] = local ? 100.0 + (p % 3) - 1.0 : 85.0 + (p % 3) - 1.0;
        }
    const outlier_options mad = {RULE_MAD, 3.0, 0.10, 0.0};
    for (int with_reference = 0; with_reference < 2; with_reference++) {
        thresholds t = outlier_thresholds(all, measured, with_reference ? reference : NULL, NPAIRS,
                                          &mad, scratch);
        int below = 0;
        for (long p = 0; p < NPAIRS; p++)
            below += bandwidth_outlier(all + p * NRES, &t);
        printf("%d %ld %.3f %d\n", with_reference, t.reference_pairs, t.bw_MBps, below);
    }
    return 0;
}
'''


def test_a_slow_uplink_cannot_set_the_median_of_the_leaf_local_pairs(tmp_path):
    '''Most of the matrix crosses the slow uplink (16 of 28 pairs): judged
    against the median of every pair, none is an outlier; against the
    leaf-local pairs' (the reference lines), all 16 are.'''
    mpicc = shutil.which('mpicc')
    if mpicc is None:
        pytest.skip('mpicc not installed (the outlier rule is C: src/pairs_outliers.h)')
    source = tmp_path / 'driver.c'
    source.write_text(OUTLIER_DRIVER)
    binary = tmp_path / 'driver'
    subprocess.run([mpicc, '-O2', '-I', str(PROJECT_ROOT / 'src'), '-o', str(binary), str(source),
                    '-lm'], check=True)
    rows = [line.split() for line in subprocess.run(
        [str(binary)], check=True, text=True, stdout=subprocess.PIPE).stdout.splitlines()]
    (_, every_pair, _, below_every), (_, references, threshold, below_reference) = rows
    assert (every_pair, below_every) == ('0', '0')
    assert references == '12' and float(threshold) == pytest.approx(90.0)
    assert below_reference == '16'
