"""Figures of merit computed from whole tables: the pair matrix's median and
worst pair, and what its bad pairs blame.

Which pairs are outliers, in the first pass and when measured again, is
decided by the pairs kernel (src/pairs_outliers.h, the one place of that
rule); here its decisions are read: a pair is bad when it was an outlier in
the first pass and again in the second (at the better of its two
measurements), and the bad pairs are put on a node, on a link, or on nothing
certain.
"""
from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass

import reframe.utility.typecheck as typ

#: The pairs kernel's column prefix of each quantity it judges.
QUANTITY_PREFIX = {'bandwidth': 'bw', 'latency': 'lat'}
#: Why a pair was measured again (the kernel's ``retest`` column).
RETEST_OUTLIER, RETEST_CONTROL = 1, 2
#: Nodes it takes to put a bad pair on one node: with two, the one pair's
#: nodes are each other's only comparison.
NODES_FOR_ATTRIBUTION = 3


class AttributionError(ValueError):
    '''A matrix too small to attribute anything.'''


#: The check's ``culprits`` variable: by quantity, Culprits.as_dict().
CULPRITS_TYPE = typ.Dict[str, typ.Dict[str, typ.List[object]]]


@dataclass(frozen=True)
class Culprits:
    '''What the bad pairs of one quantity blame: ``nodes`` (most of a node's
    pairs are bad: the node or its cable), ``links`` (host pairs, the only bad
    pair of both its nodes), ``inconclusive`` bad pairs that neither explains,
    and with a switch tree ``uplinks`` (leaves most of whose cross-leaf pairs
    are bad; None: no tree), ``uplinks_alike`` when they are crossed by the
    same pairs (two leaves), which then cannot tell which of them is slow.'''

    nodes: tuple = ()
    links: tuple = ()
    inconclusive: tuple = ()
    uplinks: tuple | None = None
    uplinks_alike: bool = False

    def as_dict(self) -> dict:
        found = {'nodes': list(self.nodes), 'links': [list(p) for p in self.links],
                 'inconclusive': [list(p) for p in self.inconclusive]}
        # The uplinks the pairs cannot tell apart, a list as every value is.
        alike = {'uplinks_alike': list(self.uplinks)} if self.uplinks_alike else {}
        return found if self.uplinks is None else dict(found, uplinks=list(self.uplinks), **alike)

    def describe(self) -> str:
        '''"uplink leaf2; node cn3; link cn1-cn2; inconclusive cn4-cn5", or "none".'''
        uplinks = (f'uplink {" or ".join(self.uplinks)} (the pairs cannot tell them apart)'
                   if self.uplinks_alike else f'uplink {", ".join(self.uplinks or ())}')
        parts = ([uplinks] if self.uplinks else []) + (
            [f'node {", ".join(self.nodes)}'] if self.nodes else []) + [
            f'{what} {", ".join(f"{a}-{b}" for a, b in pairs)}'
            for what, pairs in (('link', self.links), ('inconclusive', self.inconclusive))
            if pairs]
        return '; '.join(parts) or 'none'


def bad_twice(row: dict, quantity: str) -> bool:
    '''An outlier in the first pass and again when measured again (at the
    better of the second pass's two measurements): the only pairs reported
    bad (a pair slow once may have met a passing load).'''
    prefix = QUANTITY_PREFIX[quantity]
    return bool(row[f'{prefix}_outlier'] and row['retest'] == RETEST_OUTLIER
                and row[f'{prefix}_retest_outlier'])


def _judged(rows, quantity: str) -> tuple:
    '''([(host pair, bad)], {hosts whose control pair was an outlier when
    measured again}) of the kernel's rows.'''
    prefix = QUANTITY_PREFIX[quantity]
    pairs, unsteady = [], set()
    for row in rows:
        ends = tuple(sorted((row['host_a'], row['host_b'])))
        bad = bad_twice(row, quantity)
        pairs.append((ends, bad))
        if not bad and row['retest'] == RETEST_CONTROL and row[f'{prefix}_retest_outlier']:
            unsteady.update(ends)
    return pairs, unsteady


def bad_uplinks(pairs: list, tree) -> tuple:
    '''(The leaves of ``tree`` more than half of whose cross-leaf pairs (the
    pairs crossing their uplinks) are bad, whether two or more of them are
    crossed by the same pairs).  A bad node's pairs are 1 / m of its leaf's
    cross-leaf pairs (m nodes), a bad uplink's partners see a share of it by
    leaf they meet: neither is most.'''
    crossing, bad_of = defaultdict(set), defaultdict(int)
    for ends, bad in pairs:
        for kind, leaf in tree.links(*ends)[2:]:
            crossing[leaf].add(ends)
            bad_of[leaf] += bad
    named = tuple(sorted(leaf for leaf, seen in crossing.items() if bad_of[leaf] > len(seen) / 2))
    return named, len(named) > 1 and all(crossing[leaf] == crossing[named[0]] for leaf in named)


def culprits(rows, quantity: str, tree=None) -> Culprits:
    '''Attribution of the bad pairs (``bad_twice``) of the kernel's ``rows``.
    With a switch tree (hpcnet.topology) first the uplinks (bad_uplinks),
    whose pairs then say nothing of their nodes.  Then a node when more than
    half of its pairs left are bad; a link when the pair is the only bad pair
    of both its nodes, besides pairs with a named node, and neither node's
    control pair was an outlier when measured again (the node was steady
    then); every other bad pair not on a named node is inconclusive.'''
    pairs, unsteady = _judged(rows, quantity)
    hosts = {host for ends, _ in pairs for host in ends}
    if len(hosts) < NODES_FOR_ATTRIBUTION:
        raise AttributionError(f'{len(hosts)} nodes: putting a bad pair on a node or a link '
                               f'needs at least {NODES_FOR_ATTRIBUTION}')
    uplinks, uplinks_alike = None, False
    if tree is not None:
        tree.check_covers(hosts, 'the pair matrix')
        uplinks, uplinks_alike = bad_uplinks(pairs, tree)
        named = set(uplinks)
        pairs = [(ends, bad) for ends, bad in pairs
                 if not {leaf for _, leaf in tree.links(*ends)[2:]} & named]
    pairs_of, bad_of = defaultdict(int), defaultdict(int)
    for ends, bad in pairs:
        for host in ends:
            pairs_of[host] += 1
            bad_of[host] += bad
    nodes = tuple(sorted(h for h, n in pairs_of.items() if bad_of[h] > n / 2))
    # A pair with a bad node is explained by it and says nothing of its
    # other node.
    unexplained = sorted(ends for ends, bad in pairs if bad and not set(ends) & set(nodes))
    bad_left = Counter(host for pair in unexplained for host in pair)
    links, inconclusive = [], []
    for a, b in unexplained:
        alone = bad_left[a] == 1 and bad_left[b] == 1 and not {a, b} & unsteady
        (links if alone else inconclusive).append((a, b))
    return Culprits(nodes, tuple(links), tuple(inconclusive), uplinks, uplinks_alike)


def worst_median(values, worst):
    '''(median, worst, worst / median) of per-pair figures; ``worst`` is max
    for latency, min for bandwidth.'''
    median = statistics.median(values)
    w = worst(values)
    return median, w, w / median
