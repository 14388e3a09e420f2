"""The testbed's switch tree built for real (``up --leaves 2 --nodes 4``):
Slurm shows the tree, a leaf's uplink shaped slows a cross-leaf pair and not
a leaf-local one, and down leaves no namespace.  Needs root, namespaces,
munge, Slurm and iperf3; skipped with the reason otherwise.  Its testbed is
named ``hpcnettr``, so it never touches another.
"""
import shutil
import subprocess

import pytest
from helpers import needs_testbed

from hpcnet import testbed as tbm
from hpcnet.commands.testbed import testbed_main as run_cli
from hpcnet.testbed import Testbed, wire
from hpcnet.topology import parse_topology

NAME = 'hpcnettr'
#: A path through an uplink at half the rate measures at most this share of
#: the wire's payload rate (the shaper's ceiling, with wire.py's tolerance).
HALF = 0.5 * (1 + wire.FASTER_TOLERANCE)
#: An unslowed path is the host's limit at most; on a busy host it falls
#: toward half the wire, so it is judged against the slowed one, measured in
#: the same test (as tests/test_testbed.py judges one slowed path).
FASTER_THAN_SLOWED = 1.15

pytestmark = [*needs_testbed(integration=False),
              pytest.mark.skipif(not shutil.which('iperf3'), reason='iperf3 not installed')]


@pytest.fixture(scope='module')
def tb():
    t = Testbed(name=NAME)
    t.down()            # leftovers of an interrupted earlier run, if any
    t.up_said = t.up(nodes=4, leaves=2)['wire']
    try:
        yield t
    finally:
        t.down()


def _netns() -> list:
    out = subprocess.run(['ip', 'netns', 'list'], text=True, stdout=subprocess.PIPE,
                         timeout=10).stdout
    return sorted(line.split()[0] for line in out.splitlines() if line.startswith(NAME + '-'))


def test_slurm_shows_the_tree(tb):
    assert _netns() == sorted(f'{NAME}-{n}' for n in ('spine', 'leaf1', 'leaf2', 'hn0', 'cn1',
                                                      'cn2', 'cn3', 'cn4'))
    shown = tb.run(tb.head, ['scontrol', 'show', 'topology'], cwd='/', check=True).stdout
    found = parse_topology(shown, 'scontrol show topology')
    assert found.leaf_of == {'cn1': 'leaf1', 'cn2': 'leaf1', 'cn3': 'leaf2', 'cn4': 'leaf2'}
    assert all(leaf.spines == ('spine',) for leaf in found.leaves), shown
    assert 'across the tree' in tb.up_said, tb.up_said


def test_an_uplink_slows_the_pairs_across_it_and_no_other(tb):
    assert run_cli(['shape', '--testbed-name', NAME, '--uplink', 'leaf2', '--rate', '500mbit']) == 0
    try:
        tb.load()                   # what the command saved
        (leaf2,) = [leaf for leaf in tb.status()['leaves'] if leaf['leaf'] == 'leaf2']
        assert leaf2['uplink_rate'] == '500mbit'
        assert all('500Mbit' in qdisc for qdisc in leaf2['uplink_qdisc'].values()), leaf2
        across = wire.measure(tb, 'cn3', 'cn1', '1gbit', tb.burst)
        back = wire.measure(tb, 'cn1', 'cn4', '1gbit', tb.burst)
        local = wire.measure(tb, 'cn2', 'cn1', '1gbit', tb.burst)
    finally:
        assert run_cli(['shape', '--testbed-name', NAME, '--uplink', 'leaf2', '--rate',
                        'none']) == 0
        tb.load()
    print(f'uplink leaf2 at 500mbit: cn3->cn1 {across.efficiency:.3f}, cn1->cn4 '
          f'{back.efficiency:.3f}, leaf-local cn2->cn1 {local.efficiency:.3f} of the 1gbit wire')
    assert across.efficiency <= HALF and back.efficiency <= HALF, (across, back)
    assert local.efficiency > FASTER_THAN_SLOWED * max(across.efficiency, back.efficiency), local
    assert all(leaf['uplink_rate'] is None for leaf in tb.status()['leaves'])


def test_down_leaves_no_namespace(tb):
    assert tb.down()['was_up']
    assert _netns() == []
    assert tbm.leftovers(NAME, tb.state_dir) == []
