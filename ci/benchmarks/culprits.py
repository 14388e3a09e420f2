"""Does the pair matrix name the bad node or link, and nothing on a clean
testbed?  Measured on the testbed (root).

A testbed of --nodes compute nodes at 1 Gbit/s; --trials trials of each
scenario, each with its own culprit drawn at random (--seed; the draws are
printed):

- node: one node's link at --fault of the rate (``hpcnet testbed shape --node``)
  -> right when that node, and nothing else, is named;
- link: one pair's path at --fault of the rate, both directions
  (``hpcnet testbed shape --node A --peer B``) -> right when that link is
  named, and neither of its nodes nor anything else;
- uplink (needs --leaves 2 or more): one leaf's uplink at --fault of the
  rate, both directions (``hpcnet testbed shape --uplink leafK``) -> right
  when that uplink, and no node, link or other uplink, is named.  With two
  leaves every cross-leaf pair crosses both uplinks, so no pair evidence
  tells leaf1's from leaf2's: the check names "uplink leaf1 or leaf2" (both,
  marked alike) and that counts as right; from three leaves on it must be the
  one uplink;
- clean: nothing slowed -> right when nothing is named.

With --leaves L > 1 the testbed is a switch tree (``hpcnet testbed up
--leaves``): the check gets it from the testbed's topology.conf, schedules by
leaf and names uplinks; in every scenario no uplink may be named but the
uplink scenario's.

Every trial is one ReFrame session of ``hpcnet_pairs`` (one environment,
--env), judged by the check's own bandwidth ``culprits`` (the faults are
rate limits; latency on the testbed is the host's, not a wire's, and what it
named is counted apart).  It prints
a table (right / trials per scenario), the time per trial, the rounds the
check ran (first pass + second pass) and the first pass's seconds per pair
(the figure docs/measurements.md's time model starts from); it asserts nothing.

    .venv/bin/python ci/benchmarks/culprits.py --nodes 8 --trials 10
    .venv/bin/python ci/benchmarks/culprits.py --leaves 3 --nodes 12 --trials 5

Nothing lands in the user's history: its own results database, reports and
(empty) reference directory, all in a temporary directory.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from hpcnet import argtypes, testbed as tbm
from hpcnet.testbed import wire
from hpcnet.paths import WORK_DIR
from hpcnet.paths import isolate_history
from hpcnet.session.runner import run_suite
from hpcnet.session.verdict import final_cases_of

SCENARIOS = ('node', 'link', 'uplink', 'clean')
#: What the check names, by kind.
KINDS = ('nodes', 'links', 'inconclusive', 'uplinks')


def named(case: dict, quantity: str) -> dict:
    '''{'nodes': {...}, 'links': {...}, 'inconclusive': {...}, 'uplinks':
    {...}} of one quantity.'''
    by_kind = case.get('culprits', {}).get(quantity, {})
    return {kind: {tuple(i) if isinstance(i, list) else i for i in by_kind.get(kind, [])}
            for kind in KINDS}


def expected_uplinks(culprit: str, leaves: list) -> set:
    '''The uplinks a right answer names for a slow ``culprit`` uplink: itself;
    with two leaves both, as the pairs cannot tell them apart.'''
    return set(leaves) if len(leaves) == 2 else {culprit}


def right(scenario: str, culprit, found: dict, leaves: list | None = None) -> bool:
    expected = {'node': ({culprit}, set(), set()), 'link': (set(), {culprit}, set()),
                'uplink': (set(), set(), expected_uplinks(culprit, leaves or [])),
                'clean': (set(), set(), set())}[scenario]
    return (found['nodes'], found['links'], found['uplinks']) == expected \
        and not found['inconclusive']


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--nodes', type=int, default=8)
    ap.add_argument('--leaves', type=int, default=1,
                    help='leaf switches of the testbed (hpcnet testbed up --leaves; default 1: '
                         'one bridge, no uplink scenario)')
    ap.add_argument('--trials', type=int, default=10, help='trials per scenario')
    ap.add_argument('--scenarios', default=None,
                    type=argtypes.comma_list(SCENARIOS),
                    help=f'comma-separated, of {", ".join(SCENARIOS)} (uplink: with --leaves 2 '
                         'or more; default: all that apply)')
    ap.add_argument('--fault', type=float, default=0.7,
                    help="the slowed node's, path's or uplink's share of the rate")
    ap.add_argument('--seed', type=int, default=None, help='default: drawn, and printed')
    ap.add_argument('--env', default='^gcc12-openmpi4$', help='environment (-p regex of ReFrame)')
    ap.add_argument('--rate', default='1gbit')
    args = ap.parse_args(argv)
    # One bridge has no uplink to slow.
    scenarios = args.scenarios or [s for s in SCENARIOS if args.leaves > 1 or s != 'uplink']
    if args.leaves < 2 and 'uplink' in scenarios:
        ap.error('--scenarios uplink: needs --leaves 2 or more (one bridge has no uplink)')
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    draw = random.Random(seed)
    fault_rate = f'{round(tbm.rate_bps(args.rate) * args.fault / 1e6)}mbit'
    print(f'seed {seed}; {args.nodes} nodes in {args.leaves} leaves at {args.rate}, '
          f'fault {fault_rate}', flush=True)

    scratch = Path(tempfile.mkdtemp(prefix='hpcnet-culprits-'))
    isolate_history(scratch)
    tb = tbm.Testbed(name='hpcnetcul')
    tb.down()
    tb.up(nodes=args.nodes, rate=args.rate, leaves=args.leaves)
    nodes = tb.compute_nodes()
    leaves = list(tb.leaves or {})
    results = {s: [] for s in scenarios}
    start = time.monotonic()
    try:
        print(f'clean link {wire.require_wire_true(tb).line()}', flush=True)
        for trial in range(args.trials):
            for scenario in scenarios:
                culprit = {'node': lambda: draw.choice(nodes),
                           'link': lambda: tuple(sorted(draw.sample(nodes, 2))),
                           'uplink': lambda: draw.choice(leaves),
                           'clean': lambda: None}[scenario]()
                if scenario == 'node':
                    tb.shape(fault_rate, node=culprit)
                elif scenario == 'link':
                    tb.shape_path(*culprit, fault_rate)
                elif scenario == 'uplink':
                    tb.shape_uplink(culprit, fault_rate)
                name = f'culprits-{trial}-{scenario}'
                began = time.monotonic()
                try:
                    run = run_suite(name, ['--system', 'testbed:eth', '-c', 'checks/pairs.py',
                                           '-n', 'hpcnet_pairs', '-p', args.env],
                                    prefix=tb.head_prefix(cwd=str(WORK_DIR)), env=tb.env())
                finally:
                    if scenario == 'node':
                        tb.shape(args.rate, node=culprit)
                    elif scenario == 'link':
                        tb.shape_path(*culprit, None)
                    elif scenario == 'uplink':
                        tb.shape_uplink(culprit, None)
                seconds = time.monotonic() - began
                if run.report is None:
                    raise SystemExit(f'{name}: the session wrote no report (exit {int(run.code)})')
                report = json.loads(run.report.read_text())
                # The result that decides it: its first failed repeat, else its last.
                (case,) = [c for c in final_cases_of([report]).values()
                           if c['name'].startswith('hpcnet_pairs')]
                found = named(case, 'bandwidth')
                # A session that measured nothing (the job failed) names
                # nothing: a miss, with the check's reason.
                measured = 'first_pass_seconds' in case.get('schedule', {})
                ok = measured and right(scenario, culprit, found, leaves)
                latency_named = any(named(case, 'latency').values())
                schedule = case.get('schedule', {})
                results[scenario].append({'culprit': culprit, 'ok': ok, 'seconds': seconds,
                                          'rounds': len(schedule.get('rounds', ())),
                                          'pair_seconds': schedule['measured_pair_seconds']
                                          if measured else None,
                                          'retest_rounds': schedule.get('retest_rounds'),
                                          'latency_named': latency_named,
                                          'found': found, 'attribution': case['attribution']})
                said = case['attribution'] if measured else f'NOT MEASURED: {case["fail_reason"]}'
                print(f'trial {trial + 1} {scenario:5} culprit {culprit}: '
                      f'{"right" if ok else "WRONG"} in {seconds:.0f} s; {said}', flush=True)
    finally:
        tb.down()

    print(f'\nhpcnet_pairs on {args.nodes} testbed nodes in {args.leaves} leaves at {args.rate}, '
          'fault at '
          f'{args.fault:.0%} ({fault_rate}), environment {args.env}, seed {seed}')
    print(f'{"scenario":10} {"right":>7} {"s/trial (median, max)":>22} {"rounds (1st + 2nd)":>20} '
          f'{"s/pair (1st pass)":>18} {"latency named":>14}')
    for scenario, rows in results.items():
        if not rows:
            continue
        hits = sum(r['ok'] for r in rows)
        secs = [r['seconds'] for r in rows]
        rounds = sorted({f'{r["rounds"]} + {r["retest_rounds"]}' for r in rows
                         if r['pair_seconds'] is not None})
        latency = f'{sum(r["latency_named"] for r in rows)}/{len(rows)}'
        per_pair = statistics.median(r['pair_seconds'] for r in rows
                                     if r['pair_seconds'] is not None)
        print(f'{scenario:10} {f"{hits}/{len(rows)}":>7} '
              f'{f"{statistics.median(secs):.0f}, {max(secs):.0f}":>22} {"; ".join(rounds):>20} '
              f'{per_pair:>18.2f} {latency:>14}')
    print(f'\nwall time {time.monotonic() - start:.0f} s; sessions kept in {scratch}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
