"""The whole-partition cases (collectives, pairs, preflight at scale
``all_nodes``) run on the partition's nodes a job gets now, counted by
ReFrame's own Slurm backend (scontrol's node list, the partition's access
options, the node states of --flex-alloc-nodes) from recorded scontrol text:
one drained and one allocated node leave two; fewer than two is "not
decided", never a pass."""
from pathlib import Path
from types import SimpleNamespace

import pytest
from reframe.core.schedulers.slurm import SlurmJobScheduler, _create_nodes

from hpcnet.checklib import flexnodes
from hpcnet.checklib.flexnodes import TakesAvailableNodes
from hpcnet.exitcodes import Exit
from hpcnet.session.verdict import summary

DATA = Path(__file__).parent / 'data' / 'site-init'


class NotDecided(Exception):
    pass


def _set_up_test(scontrol_file: str, policy='idle', access=('--partition=eth', '--exclusive')):
    '''A stand-in for a set-up case: its job with ReFrame's Slurm backend
    reading ``scontrol_file`` as `scontrol -a show -o nodes`.'''
    sched = object.__new__(SlurmJobScheduler)     # its __init__ reads ReFrame's runtime
    text = (DATA / scontrol_file).read_text()
    sched.allnodes = lambda: _create_nodes(text.splitlines())
    # `scontrol show -o nodes cn1,cn3` (-w, -x): the named lines.
    sched._get_nodes_by_name = lambda spec: {n for n in sched.allnodes()
                                             if n.name in spec.split(',')}
    job = SimpleNamespace(sched_flex_alloc_nodes=policy, scheduler=sched,
                          sched_access=list(access), options=[], cli_options=[])

    def not_decided_because(reason):
        raise NotDecided(reason)
    return SimpleNamespace(job=job, nodes_left_out='', display_name='hpcnet_pairs',
                           current_partition=SimpleNamespace(fullname='s:eth-tcp'),
                           logger=SimpleNamespace(info=lambda msg: None),
                           not_decided_because=not_decided_because)


def test_a_drained_and_an_allocated_node_leave_two():
    case = _set_up_test('scontrol-show-node.testbed-drained.txt')
    assert TakesAvailableNodes.available_nodes(case, 4) == 2
    assert case.nodes_left_out == 'cn3 (DRAIN+IDLE), cn4 (ALLOCATED)'


def test_all_idle_is_the_declared_count():
    case = _set_up_test('scontrol-show-node.testbed.txt')
    assert TakesAvailableNodes.available_nodes(case, 4) == 4 and case.nodes_left_out == ''
    assert TakesAvailableNodes.available_nodes(_set_up_test('scontrol-show-node.testbed.txt'), 3) == 3


def test_flex_alloc_all_and_a_number():
    assert TakesAvailableNodes.available_nodes(
        _set_up_test('scontrol-show-node.testbed-drained.txt', policy='all'), 4) == 4
    assert TakesAvailableNodes.available_nodes(
        _set_up_test('scontrol-show-node.testbed-drained.txt', policy=3), 4) == 3


def test_below_the_floor_is_not_decided():
    case = _set_up_test('scontrol-show-node.testbed-drained.txt',
                        access=('--partition=eth', '--nodelist=cn1,cn3'))
    with pytest.raises(NotDecided, match=r'^1 node\(s\) of s:eth-tcp available '
                                         r'\(--flex-alloc-nodes=idle\), a whole-partition case '
                                         r'needs 2; left out: cn3 \(DRAIN\+IDLE\)$'):
        TakesAvailableNodes.available_nodes(case, 4)


def test_usable_states():
    assert flexnodes.usable_states('idle', False) == 'idle|idle+completing'
    assert 'idle+reserved' in flexnodes.usable_states('IDLE', True)
    assert flexnodes.usable_states('alloc*', True) == 'alloc*'


def test_a_case_not_decided_leaves_the_run_not_decided():
    ran = {'name': 'hpcnet_p2p', 'system': 's', 'partition': 'eth-tcp', 'environ': 'e',
           'result': 'pass'}
    skipped = dict(ran, name='hpcnet_pairs', result='skip', skip_undecided=True,
                   skip_reason='not decided: 1 node(s) of s:eth-tcp available')
    lines, code = summary({('a',): ran, ('b',): skipped}, [])
    assert code == Exit.UNDECIDED
    assert 'SKIPPED (1): not decided: 1 node(s) of s:eth-tcp available' in lines
    _, code = summary({('a',): ran, ('b',): dict(skipped, skip_undecided=False)}, [])
    assert code == Exit.OK
