"""The pair matrix on a switch tree at scale, by simulation.

    .venv/bin/python ci/benchmarks/topology_sim.py --nodes 1024 --leaves 32 --oversubscription 2

Builds a tree of equal leaves (hpcnet.topology.build_tree), plans the
check's schedule on it (hpcnet.checklib.treeschedule) and prints: the rounds
with the tree and without it (the circle method), the pairs per uplink (in
all, and at most at once: the leaf's capacity), and the first pass's wall
time at ``--pair-seconds`` per pair (default 0.9 s: the testbed's measured
0.81-0.98 s per pair, docs/measurements.md "How long the pair matrix takes";
on 100 Gbit/s that section's 8.5 ms).

Where the whole matrix takes longer than ``--night-hours`` (2 h), the trials
use the sampled schedule (treeschedule.sampled_rounds: two leaf-local rounds
and one shift of three leaf rounds, every node's cable and every uplink
covered) and say so.  On simulated evidence, each pair's bandwidth 1 +/-
``--noise`` (Gaussian), one bad uplink (every pair crossing it at
``--fault`` of its rate), one bad node (its pairs at ``--fault``), or none,
``--trials`` times each: the first pass calls a pair an outlier below
median - max(k x MAD, floor x median) (the kernel's mad rule,
src/pairs_outliers.h, k 3 and floor 0.10 as checks/pairs.py), the outliers
are measured twice more with fresh noise and are bad when the better of the
two is still below the bound, and the culprits are named by the check's own
code (hpcnet.checklib.analysis.culprits).  Right: the uplink named and no
node; the node named and no uplink; nothing named on a clean tree.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from hpcnet import topology
from hpcnet.checklib import analysis, pairschedule, treeschedule

#: The kernel's mad rule, as checks/pairs.py sets it.
MAD_K, OUTLIER_FLOOR = 3.0, 0.10
#: MAD scaled to a standard deviation (normal data).
MAD_SCALE = 1.4826
SCENARIOS = ('uplink', 'node', 'clean')


def build(nodes: int, leaves: int, oversubscription: float) -> topology.Tree:
    if nodes % leaves:
        raise SystemExit(f'--nodes {nodes} is not a multiple of --leaves {leaves}')
    m = nodes // leaves
    return topology.build_tree(
        {f'leaf{i}': {'nodes': [f'n{i * m + j}' for j in range(m)], 'spines': ['spine']}
         for i in range(leaves)}, 'simulated', oversubscription)


def judged(bandwidth: np.ndarray, retest: np.ndarray) -> tuple:
    '''(first-pass outliers, bad twice) of the pairs' bandwidths; ``retest``
    (pairs x 2) the second pass's two measurements.'''
    median = np.median(bandwidth)
    mad = MAD_SCALE * np.median(np.abs(bandwidth - median))
    bound = median - max(MAD_K * mad, OUTLIER_FLOOR * median)
    first = bandwidth < bound
    return first, first & (retest.max(axis=1) < bound)


def trial(tree, a, b, leaf_a, leaf_b, scenario: str, rng, noise: float, fault: float):
    '''The culprits named on one simulated matrix of pairs (a[i], b[i]), and
    the fault planted.'''
    n = len(a)
    slow = np.ones(n)
    planted = None
    if scenario == 'uplink':
        planted = tree.leaves[rng.integers(len(tree.leaves))].name
        slow[(leaf_a != leaf_b) & ((leaf_a == planted) | (leaf_b == planted))] = fault
    elif scenario == 'node':
        planted = tree.nodes[rng.integers(len(tree.nodes))]
        slow[(a == planted) | (b == planted)] = fault
    first, bad = judged(slow * rng.normal(1, noise, n),
                        slow[:, None] * rng.normal(1, noise, (n, 2)))
    rows = [{'host_a': x, 'host_b': y, 'retest': analysis.RETEST_OUTLIER if f else 0,
             'bw_outlier': int(f), 'bw_retest_outlier': int(t), 'lat_outlier': 0,
             'lat_retest_outlier': 0} for x, y, f, t in zip(a, b, first, bad)]
    return analysis.culprits(rows, 'bandwidth', tree), planted


def right(found, scenario: str, planted) -> bool:
    if scenario == 'uplink':
        return found.uplinks == (planted,) and not found.nodes
    if scenario == 'node':
        return found.nodes == (planted,) and not found.uplinks
    return not (found.nodes or found.uplinks or found.links)


def simulate(args) -> None:
    started = time.time()
    tree = build(args.nodes, args.leaves, args.oversubscription)
    m = args.nodes // args.leaves
    rounds = treeschedule.round_count(tree)
    full_seconds = rounds * args.pair_seconds
    sampled = full_seconds > args.night_hours * 3600
    schedule = treeschedule.sampled_rounds(tree) if sampled else treeschedule.tree_rounds(tree)
    pairs = [p for r in schedule for p in r]
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    leaf_a = np.array([tree.leaf_of[x] for x in a])
    leaf_b = np.array([tree.leaf_of[x] for x in b])
    crossing = leaf_a != leaf_b
    per_uplink = {leaf.name: int(np.sum(crossing & ((leaf_a == leaf.name) | (leaf_b == leaf.name))))
                  for leaf in tree.leaves}
    per_node = {n: int(np.sum((a == n) | (b == n))) for n in tree.nodes}
    print(f'{args.nodes} nodes, {args.leaves} leaves of {m}, {args.oversubscription:g}:1: uplink '
          f'capacity {tree.leaves[0].capacity} concurrent pairs per leaf')
    print(f'rounds: {rounds} with the tree, {pairschedule.round_count(args.nodes)} without '
          f'(the circle method); pairs per uplink: {m * (args.nodes - m)} in all, at most '
          f'{tree.leaves[0].capacity} at once')
    print(f'first pass at {args.pair_seconds:g} s per pair: {full_seconds:.0f} s '
          f'({full_seconds / 3600:.2f} h)')
    what = (f'the sampled schedule ({len(schedule)} rounds, {len(pairs)} pairs, '
            f'{len(schedule) * args.pair_seconds:.0f} s: the whole matrix is over '
            f'{args.night_hours:g} h)' if sampled else f'the whole matrix ({len(pairs)} pairs)')
    print(f'trials on {what}: pairs per node cable >= {min(per_node.values())}, per uplink >= '
          f'{min(per_uplink.values())}')
    rng = np.random.default_rng(args.seed)
    for scenario in SCENARIOS:
        hits = sum(_hit(tree, a, b, leaf_a, leaf_b, scenario, rng, args)
                   for _ in range(args.trials))
        print(f'{scenario}: named right in {hits} of {args.trials} trials '
              f'(fault at {args.fault:.0%}, noise {args.noise:.0%})' if scenario != 'clean' else
              f'clean: nothing named in {hits} of {args.trials} trials (noise {args.noise:.0%})')
    print(f'({time.time() - started:.0f} s)')


def _hit(tree, a, b, leaf_a, leaf_b, scenario, rng, args) -> bool:
    found, planted = trial(tree, a, b, leaf_a, leaf_b, scenario, rng, args.noise, args.fault)
    return right(found, scenario, planted)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--nodes', type=int, default=1024)
    p.add_argument('--leaves', type=int, default=32)
    p.add_argument('--oversubscription', type=float, default=2)
    p.add_argument('--pair-seconds', type=float, default=0.9)
    p.add_argument('--night-hours', type=float, default=2)
    p.add_argument('--trials', type=int, default=5)
    p.add_argument('--noise', type=float, default=0.03)
    p.add_argument('--fault', type=float, default=0.85)
    p.add_argument('--seed', type=int, default=1)
    simulate(p.parse_args())


if __name__ == '__main__':
    main()
