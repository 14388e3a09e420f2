"""How many nodes a whole-partition case (scale ``all_nodes``) runs on: the
partition's nodes a job gets when the case is set up, counted as ReFrame's
flexible node allocation counts them (``--flex-alloc-nodes``: ``idle`` by
default, ``all``, a state, or a number; the partition's access options
narrow them: ``--partition``, ``--reservation``, ``-w``, ``-C``, ``-x``),
never more than the partition declares.  One drained or busy node does not
stop the case; fewer nodes than its floor make it "not decided", never a
pass (ReFrame itself would skip it silently, or fail it with
``--flex-alloc-strict``)."""
from __future__ import annotations

import reframe as rfm
from reframe.core.builtins import variable

#: The least nodes a whole-partition case runs on: one link between two.
MIN_NODES = 2
#: Schedulers whose nodes ReFrame can list (scontrol).
_LISTS_NODES = ('slurm', 'squeue')


def usable_states(policy: str, reservation: bool) -> str:
    '''The node states (ReFrame's ``filternodes_by_state`` syntax) a case
    takes under ``--flex-alloc-nodes=policy``: ``idle`` also takes a node
    still completing the previous case's job (serial runs follow each other
    by a moment), and, in a reservation, a node the reservation holds.'''
    if policy.lower() != 'idle':
        return policy.lower()
    states = ['idle', 'idle+completing']
    if reservation:
        states += ['idle+reserved', 'idle+maint', 'idle+reserved+maint']
    return '|'.join(states)


def describe(nodes) -> str:
    '''``cn3 (DRAIN+IDLE), cn4 (ALLOCATED)`` of ReFrame scheduler nodes.'''
    return ', '.join(f'{n.name} ({"+".join(sorted(n.states))})'
                     for n in sorted(nodes, key=lambda n: n.name))


class TakesAvailableNodes(rfm.RegressionTestPlugin):
    '''A case that spans the nodes of its partition available at setup.'''

    #: The partition's nodes left out and their states ('' when none was).
    nodes_left_out = variable(str, value='', loggable=True)

    def available_nodes(self, declared: int) -> int:
        '''How many of the partition's ``declared`` nodes this case runs on
        (after its job is set up); below MIN_NODES the case is not decided.'''
        job = self.job
        policy = job.sched_flex_alloc_nodes
        if policy is None or job.scheduler.registered_name not in _LISTS_NODES:
            return declared
        if isinstance(policy, int):
            count = min(policy, declared)
        else:
            sched = job.scheduler
            mine = set(sched.filternodes(job, sched.allnodes()))
            reservation = any('--reservation' in opt for opt in [*job.sched_access, *job.options,
                                                                *job.cli_options])
            usable = set(sched.filternodes_by_state(mine, usable_states(policy, reservation)))
            self.nodes_left_out = describe(mine - usable)
            count = min(len(usable), declared)
            if self.nodes_left_out:
                self.logger.info(f'{self.display_name}: {count} node(s) of '
                                 f'{self.current_partition.fullname}; left out: '
                                 f'{self.nodes_left_out}')
        if count < MIN_NODES:
            self.not_decided_because(
                f'{count} node(s) of {self.current_partition.fullname} available '
                f'(--flex-alloc-nodes={policy}), a whole-partition case needs {MIN_NODES}'
                + (f'; left out: {self.nodes_left_out}' if self.nodes_left_out else ''))
        return count
