"""What the search's cap on candidates (hpcnet.acceptance.history.levels
MAX_CANDIDATES) changes: simulated years of nights, searched with the cap
and without it, and for each noise x step size x number of steps how many
steps each found at their night (within --near nights), how many changes
each named that are no step, and the search's CPU time.

Each series: --nights log-normal values of --noise spread; 0, 1, 3, 8 or
12 steps at random nights (at least MIN_SEGMENT from either end), each
moving the level up or down by the step size.  The seed is fixed, so the
table is the same on every run.

    .venv/bin/python ci/benchmarks/history_candidates.py [--series 15] [--nights 365]
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from hpcnet.acceptance.history import levels

NOISES = (0.01, 0.02, 0.04)
STEP_SIZES = (0.04, 0.08)
STEP_COUNTS = (1, 3, 8, 12)
UNCAPPED = 10 ** 6


def simulated(series: int, nights: int, seed: int = 7) -> list:
    """(noise, step size, step nights, values) of every simulated series."""
    rng = np.random.default_rng(seed)
    ends = levels.MIN_SEGMENT
    out = []
    for noise in NOISES:
        plans = [(0.0, 0)] + [(size, count) for size in STEP_SIZES for count in STEP_COUNTS]
        for size, count in plans:
            for _ in range(series):
                nights_of_steps = sorted(int(p) for p in rng.choice(
                    np.arange(ends, nights - ends), size=count, replace=False))
                level = np.ones(nights)
                for night in nights_of_steps:
                    level[night:] *= (1 + size) if rng.random() < 0.5 else 1 / (1 + size)
                values = 100.0 * level * np.exp(rng.normal(0.0, noise, nights))
                out.append((noise, size, tuple(nights_of_steps), values.tolist()))
    return out


def score(cases: list, max_candidates: int, near: int) -> tuple:
    """(CPU seconds, {(noise, size, count): [steps found, steps, other changes]})."""
    start = time.process_time()
    findings = levels.find_all([values for *_, values in cases], max_candidates=max_candidates,
                               workers=1)
    seconds = time.process_time() - start
    table: dict = {}
    for (noise, size, steps, _), finding in zip(cases, findings):
        found = [c.position for c in finding.changes]
        row = table.setdefault((noise, size, len(steps)), [0, 0, 0])
        row[0] += sum(any(abs(f - s) <= near for f in found) for s in steps)
        row[1] += len(steps)
        row[2] += sum(not any(abs(f - s) <= near for s in steps) for f in found)
    return seconds, table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--series', type=int, default=15, help='series of each kind')
    parser.add_argument('--nights', type=int, default=365)
    parser.add_argument('--near', type=int, default=2,
                        help='a step counts as found by a change this many nights from it')
    args = parser.parse_args()
    cases = simulated(args.series, args.nights)
    capped = score(cases, levels.MAX_CANDIDATES, args.near)
    uncapped = score(cases, UNCAPPED, args.near)
    print(f'{len(cases)} series of {args.nights} nights; CPU of the search: '
          f'{capped[0]:.1f} s with at most {levels.MAX_CANDIDATES} candidates, '
          f'{uncapped[0]:.1f} s with every one that fits')
    print(f'| noise | step | steps | found, cap {levels.MAX_CANDIDATES} | found, no cap '
          f'| other changes, cap | other changes, no cap |')
    print('|---|---|---|---|---|---|---|')
    for key, (found, steps, other) in capped[1].items():
        found_all, _, other_all = uncapped[1][key]
        noise, size, count = key
        print(f'| {noise:.0%} | {size:.0%} | {count} | {found}/{steps} | {found_all}/{steps} '
              f'| {other} | {other_all} |')
    capped_sum, uncapped_sum = (np.sum(list(t.values()), axis=0) for t in (capped[1], uncapped[1]))
    print(f'| all | | | {capped_sum[0]}/{capped_sum[1]} | {uncapped_sum[0]}/{uncapped_sum[1]} '
          f'| {capped_sum[2]} | {uncapped_sum[2]} |')
    return 0


if __name__ == '__main__':
    sys.exit(main())
