"""The pair matrix's rounds on a switch tree (hpcnet.topology): every pair of
the tree's nodes once, in rounds of disjoint pairs, each round either all
leaf-local (no uplink crossed) or all cross-leaf with no leaf's uplinks
carrying more concurrent pairs than its ``capacity``: concurrent pairs that
share an oversubscribed uplink would measure their own contention and look
like a fault.

- Leaf-local rounds: the circle method inside every leaf at once (round t
  holds round t of each leaf), as many as the largest leaf needs.
- Cross-leaf rounds: the leaves meet in rounds of the circle method over
  leaves; two leaves A and B (|A| >= |B|) meet in |A| shifts, shift s
  pairing B[q] with A[(q + s) mod |A|], which together are every pair of
  A x B once; a shift's |B| pairs load both uplinks by |B|, so it is cut
  into chunks of at most min(capacity A, capacity B) pairs, one round each.
  The leaf pairs of one leaf round share no leaf, so their chunks run
  together.  On L equal leaves of m nodes at capacity c that is
  (L - 1) x m x ceil(m / c) rounds (L even), the bound m (N - m) / c that a
  leaf's cross-leaf pairs over its capacity set.

A sampled schedule (:func:`sampled_rounds`) for trees too large for all
pairs nightly keeps every link covered: ``local`` leaf-local rounds (each
node's cable in that many pairs inside its leaf) and the first shift of
``leaf_rounds`` leaf rounds (each uplink crossed by that many shifts' pairs,
each to a different leaf, so that a bad uplink's pairs are told from its
partners': hpcnet.checklib.analysis).
"""
from __future__ import annotations

from itertools import chain, zip_longest
from math import ceil

from hpcnet.topology import Tree

#: A sampled schedule's rounds inside the leaves (each node's cable in that
#: many leaf-local pairs) and leaf rounds (each uplink's pairs reach that many
#: other leaves: three leave a partner leaf's uplink a third of them bad, so
#: the bad uplink alone has most of its pairs bad).
SAMPLE_LOCAL_ROUNDS = 2
SAMPLE_LEAF_ROUNDS = 3


def circle_rounds(items: list) -> list:
    '''The circle method: len(items) - 1 rounds (len(items) when odd, one item
    sitting out each round) of disjoint pairs, every pair once.'''
    slots = list(items) + ([None] if len(items) % 2 else [])
    n = len(slots)
    rounds = []
    for r in range(n - 1):
        order = [slots[0]] + slots[1:][-r:] + slots[1:][:-r] if r else slots
        pairs = [(order[i], order[n - 1 - i]) for i in range(n // 2)]
        rounds.append([p for p in pairs if None not in p])
    return rounds


def local_rounds(tree: Tree, count: int | None = None) -> list:
    '''The leaf-local rounds (the first ``count`` of them, None: all).'''
    per_leaf = [circle_rounds(list(leaf.nodes))[:count] for leaf in tree.leaves]
    return [list(chain.from_iterable(r for r in combined if r))
            for combined in zip_longest(*per_leaf)]


def _leaf_pair_rounds(tree: Tree, a, b, shifts: int | None) -> list:
    '''The rounds two leaves meet in: their shifts, each cut to capacity.'''
    big, small = (a, b) if len(a.nodes) >= len(b.nodes) else (b, a)
    chunk = min(big.capacity, small.capacity)
    rounds = []
    for s in range(len(big.nodes) if shifts is None else min(shifts, len(big.nodes))):
        shift = [(big.nodes[(q + s) % len(big.nodes)], node) for q, node in enumerate(small.nodes)]
        rounds += [shift[i:i + chunk] for i in range(0, len(shift), chunk)]
    return rounds


def cross_rounds(tree: Tree, leaf_rounds: int | None = None, shifts: int | None = None) -> list:
    '''The cross-leaf rounds (of the first ``leaf_rounds`` leaf rounds and
    ``shifts`` shifts of each leaf pair; None: all).'''
    out = []
    for meeting in circle_rounds(list(tree.leaves))[:leaf_rounds]:
        per_pair = [_leaf_pair_rounds(tree, a, b, shifts) for a, b in meeting]
        out += [list(chain.from_iterable(r for r in combined if r))
                for combined in zip_longest(*per_pair)]
    return out


def tree_rounds(tree: Tree) -> list:
    '''Every pair of the tree's nodes once: the leaf-local rounds, then the
    cross-leaf ones.'''
    return [r for r in local_rounds(tree) + cross_rounds(tree) if r]


def sampled_rounds(tree: Tree, local: int = SAMPLE_LOCAL_ROUNDS,
                   leaf_rounds: int = SAMPLE_LEAF_ROUNDS) -> list:
    '''A sample covering every link (module docstring); an odd leaf leaves a
    node out of each of its rounds, so it takes one local round more.'''
    odd = any(len(leaf.nodes) % 2 for leaf in tree.leaves)
    return [r for r in local_rounds(tree, local + odd) + cross_rounds(tree, leaf_rounds, 1) if r]


def round_count(tree: Tree) -> int:
    '''The rounds of tree_rounds, counted without listing them.'''
    local = max((len(leaf.nodes) - 1 + len(leaf.nodes) % 2 if len(leaf.nodes) > 1 else 0)
                for leaf in tree.leaves)
    cross = 0
    for meeting in circle_rounds(list(tree.leaves)):
        cross += max(max(len(a.nodes), len(b.nodes))
                     * ceil(min(len(a.nodes), len(b.nodes)) / min(a.capacity, b.capacity))
                     for a, b in meeting) if meeting else 0
    return local + cross


def uplink_loads(tree: Tree, rounds: list) -> list:
    '''{leaf: concurrent pairs on its uplinks} of each round.'''
    loads = []
    for pairs in rounds:
        load = {}
        for a, b in pairs:
            la, lb = tree.leaf_of[a], tree.leaf_of[b]
            if la != lb:
                load[la] = load.get(la, 0) + 1
                load[lb] = load.get(lb, 0) + 1
        loads.append(load)
    return loads


#: The first word of a --pair-rounds line whose pairs are the outlier
#: rule's reference (src/pairs_tree.h).
REFERENCE_ROUND = 'reference'


def write_rounds(rounds: list, path, tree: Tree) -> None:
    '''The rounds as the pairs kernel's --pair-rounds file: one round a
    line, its pairs as "hostA:hostB" separated by blanks; a leaf-local
    round's line first says REFERENCE_ROUND: its pairs cross no uplink, so
    a slow uplink, whose pairs may be most of the matrix, cannot set the
    median the outlier rule judges every pair against.'''
    with open(path, 'w') as out:
        for pairs in rounds:
            local = all(tree.leaf_of[a] == tree.leaf_of[b] for a, b in pairs)
            out.write(' '.join([REFERENCE_ROUND] * local + [f'{a}:{b}' for a, b in pairs]) + '\n')
