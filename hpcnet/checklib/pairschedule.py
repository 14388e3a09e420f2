"""The pair matrix's schedule (src/pairs.c): N nodes, one rank each, meet in
rounds of disjoint pairs by the circle method (N-1 rounds of N/2 pairs, N
rounds of (N-1)/2 when N is odd, one node sitting each round out), all
rounds or a seeded sample of them, and the time the first pass is expected
to take.

A sample gives every node at least two pairs, the fewest with which a bad
node can be told from a bad partner (hpcnet.checklib.analysis: a node is named
when more than half its pairs are bad): each round of an even count holds
every node, and the rounds of an odd count each leave out a different node,
so two rounds (even) or three (odd) do.

With the partition's switch tree (hpcnet.topology) the rounds are the
tree's (hpcnet.checklib.treeschedule): leaf-local rounds apart from
cross-leaf ones, no leaf's uplinks carrying more concurrent pairs than they
can, every pair once.
"""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass

#: How the pairs of a round are measured: all at once (each on links of its
#: own, a real cluster), or one after the other (nodes sharing one host's
#: cores, where concurrent pairs would measure the CPU contention).
CONCURRENT, TURNS = 'concurrent', 'turns'


class ScheduleError(ValueError):
    '''A sample that cannot be drawn (too few or too many rounds).'''


def round_count(nodes: int) -> int:
    return nodes - 1 + nodes % 2


def pairs_per_round(nodes: int) -> int:
    return nodes // 2


#: Pairs each node needs in a sample: with one, a bad node and its healthy
#: partner are equally "mostly bad".
PAIRS_PER_NODE = 2


def min_sample_rounds(nodes: int) -> int:
    '''Rounds a sample needs to give every node PAIRS_PER_NODE pairs (a node
    sits out at most one round of an odd count); all rounds where there are
    fewer.'''
    return min(PAIRS_PER_NODE + nodes % 2, round_count(nodes))


@dataclass(frozen=True)
class Schedule:
    nodes: int
    order: str
    #: The rounds measured (0-based, as the kernel's --rounds), all of them
    #: unless sampled.
    rounds: tuple[int, ...]
    #: The seed the sample was drawn with (None: every round).
    seed: int | None = None
    #: Seconds one pair takes (stated), for the expected time; None: unknown
    #: before the run (the kernel prints it after its first round).
    pair_seconds: float | None = None
    #: The rounds of the switch tree's schedule (0: no tree, the circle
    #: method's rounds), and the tree it came from.
    tree_rounds: int = 0
    tree: str | None = None

    @property
    def pairs(self) -> int:
        if self.tree_rounds:
            return self.nodes * (self.nodes - 1) // 2
        return len(self.rounds) * pairs_per_round(self.nodes)

    def measured_pair_seconds(self, first_pass_seconds: float) -> float:
        '''One pair's time from a first pass that took ``first_pass_seconds``
        (the inverse of expected_seconds: what ``pair_seconds`` takes).'''
        return first_pass_seconds / (self.pairs if self.order == TURNS else len(self.rounds))

    @property
    def expected_seconds(self) -> float | None:
        '''The first pass: a round costs one pair's time when its pairs run
        at once, all its pairs' when they take turns.'''
        if self.pair_seconds is None:
            return None
        steps = self.pairs if self.order == TURNS else len(self.rounds)
        return steps * self.pair_seconds

    def describe(self) -> str:
        total = round_count(self.nodes)
        sample = (f', a sample of {len(self.rounds)} of {total} rounds (seed {self.seed}: '
                  f'{",".join(map(str, self.rounds))})' if self.seed is not None else '')
        expected = (f'; expected first pass {self.expected_seconds:.0f} s at '
                    f'{self.pair_seconds:g} s per pair' if self.pair_seconds is not None else
                    '; expected time: after the first round (job output)')
        rounds = (f'the switch tree\'s {self.tree_rounds} rounds of disjoint pairs, leaf-local '
                  f'apart from cross-leaf ({self.tree}; the circle method takes {total})'
                  if self.tree_rounds else
                  f'{len(self.rounds)} rounds of {pairs_per_round(self.nodes)} disjoint pairs')
        return (f'{self.nodes} nodes: {rounds}, {self.pairs} pairs, '
                f'{"one pair at a time" if self.order == TURNS else "the pairs of a round at once"}'
                f'{sample}{expected}')

    def as_dict(self) -> dict:
        return dict(asdict(self), rounds=list(self.rounds), pairs=self.pairs,
                    rounds_of_all_pairs=self.tree_rounds or round_count(self.nodes),
                    expected_seconds=self.expected_seconds,
                    **({'rounds_without_tree': round_count(self.nodes)} if self.tree_rounds else {}))


def plan(nodes: int, order: str, sample_rounds: int = 0, seed: int | None = None,
         pair_seconds: float | None = None, tree_rounds: int = 0,
         tree: str | None = None) -> Schedule:
    '''Every round (``sample_rounds`` 0), or ``sample_rounds`` of them drawn
    with ``seed`` (None: a seed is drawn, and recorded in the schedule);
    with a switch tree, its ``tree_rounds`` rounds, all of them.'''
    total = round_count(nodes)
    if tree_rounds:
        if sample_rounds:
            raise ScheduleError(f'sample_rounds={sample_rounds}: the partition has a switch tree '
                                f'({tree}), whose schedule is measured whole (valid: 0)')
        return Schedule(nodes, order, tuple(range(tree_rounds)), None, pair_seconds,
                        tree_rounds, tree)
    if not sample_rounds:
        return Schedule(nodes, order, tuple(range(total)), None, pair_seconds)
    least = min_sample_rounds(nodes)
    if not least <= sample_rounds <= total:
        raise ScheduleError(f'sample_rounds={sample_rounds}: {nodes} nodes have {total} rounds, '
                            f'and a sample covering every node needs at least {least} '
                            f'(valid: 0 for all, or {least}..{total})')
    if seed is None:
        seed = random.SystemRandom().randrange(1 << 31)
    rounds = tuple(sorted(random.Random(seed).sample(range(total), sample_rounds)))
    return Schedule(nodes, order, rounds, seed, pair_seconds)
