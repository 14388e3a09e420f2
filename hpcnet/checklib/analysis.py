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

#: The pairs kernel's column prefix of each quantity it judges.
QUANTITY_PREFIX = {'bandwidth': 'bw', 'latency': 'lat'}
#: Why a pair was measured again (the kernel's ``retest`` column).
RETEST_OUTLIER, RETEST_CONTROL = 1, 2
#: Nodes it takes to put a bad pair on one node: with two, the one pair's
#: nodes are each other's only comparison.
NODES_FOR_ATTRIBUTION = 3


class AttributionError(ValueError):
    '''A matrix too small to attribute anything.'''


@dataclass(frozen=True)
class Culprits:
    '''What the bad pairs of one quantity blame: ``nodes`` (most of a node's
    pairs are bad), ``links`` (host pairs, the only bad pair of both its
    nodes) and ``inconclusive`` bad pairs that neither explains.'''

    nodes: tuple = ()
    links: tuple = ()
    inconclusive: tuple = ()

    def as_dict(self) -> dict:
        return {'nodes': list(self.nodes), 'links': [list(p) for p in self.links],
                'inconclusive': [list(p) for p in self.inconclusive]}

    def describe(self) -> str:
        '''"node cn3; link cn1-cn2; inconclusive cn4-cn5", or "none".'''
        parts = ([f'node {", ".join(self.nodes)}'] if self.nodes else []) + [
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


def culprits(rows, quantity: str) -> Culprits:
    '''Attribution of the bad pairs (``bad_twice``) of the kernel's ``rows``:
    a node when more than half of its pairs are bad; a link when the pair is
    the only bad pair of both its nodes, besides pairs with a named node, and
    neither node's control pair was an outlier when measured again (the node
    was steady then); every other bad pair not on a named node is
    inconclusive.'''
    prefix = QUANTITY_PREFIX[quantity]
    pairs_of, bad_of = defaultdict(int), defaultdict(int)
    bad, unsteady = [], set()
    for row in rows:
        ends = tuple(sorted((row['host_a'], row['host_b'])))
        for host in ends:
            pairs_of[host] += 1
        if bad_twice(row, quantity):
            bad.append(ends)
            for host in ends:
                bad_of[host] += 1
        elif row['retest'] == RETEST_CONTROL and row[f'{prefix}_retest_outlier']:
            unsteady.update(ends)
    if len(pairs_of) < NODES_FOR_ATTRIBUTION:
        raise AttributionError(f'{len(pairs_of)} nodes: putting a bad pair on a node or a link '
                               f'needs at least {NODES_FOR_ATTRIBUTION}')
    nodes = tuple(sorted(h for h, n in pairs_of.items() if bad_of[h] > n / 2))
    # A pair with a bad node is explained by it and says nothing of its
    # other node.
    unexplained = sorted(p for p in bad if not set(p) & set(nodes))
    bad_left = Counter(host for pair in unexplained for host in pair)
    links, inconclusive = [], []
    for a, b in unexplained:
        alone = bad_left[a] == 1 and bad_left[b] == 1 and not {a, b} & unsteady
        (links if alone else inconclusive).append((a, b))
    return Culprits(nodes, tuple(links), tuple(inconclusive))


def worst_median(values, worst):
    '''(median, worst, worst / median) of per-pair figures; ``worst`` is max
    for latency, min for bandwidth.'''
    median = statistics.median(values)
    w = worst(values)
    return median, w, w / median
