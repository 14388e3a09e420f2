"""Sensitivity of `hpcnet compare`, measured on the testbed (root).

A baseline of --baseline-repeats sessions' worth of samples on the clean
1 Gbit/s link, then --trials rounds of three sessions each (--repeats
samples per session): the link clean, cut 10 % (900 Mbit/s) and cut 5 %
(950 Mbit/s), interleaved so that slow drift of the host hits all three
alike.  Each session is compared with the baseline exactly as `hpcnet
compare` does; the script prints, per environment and metric, how often a
cut was detected (verdict regressed) and how often a clean session raised a
false alarm.  It prints figures; it asserts nothing.

    .venv/bin/python ci/benchmarks/sensitivity.py --trials 10 --repeats 3

Nothing lands in the user's history: its own results database, reports and
(empty) reference directory, all in a temporary directory.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from hpcnet.session import runner
from hpcnet.acceptance.comparison import compare, sides, statcompare
from hpcnet import testbed as tbm
from hpcnet.paths import WORK_DIR
from hpcnet.variables import TESTBED_RATE_ENV
from hpcnet.paths import isolate_history

CONDITIONS = (('clean', '1gbit'), ('cut 10 %', '900mbit'), ('cut 5 %', '950mbit'))
METRICS = ('bandwidth_4MiB', 'latency_8B')


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--trials', type=int, default=10)
    ap.add_argument('--repeats', type=int, default=3, help='samples per compared session')
    ap.add_argument('--baseline-repeats', type=int, default=5)
    ap.add_argument('--mode', default='pingpong', choices=('pingpong', 'bw'),
                    help='p2p mode: a ping-pong pays a turnaround per message, so a cut '
                         'of the link shows less in it than in streaming (bw)')
    ap.add_argument('--envs', default='^gcc12-(openmpi4|mpich5|impi2021)$',
                    help='environments (-p regex of ReFrame)')
    ap.add_argument('--node', default=None,
                    help="cut only this node's link (e.g. cn2, one end of the pair); "
                         'default: every link')
    args = ap.parse_args(argv)

    scratch = Path(tempfile.mkdtemp(prefix='hpcnet-sensitivity-'))
    isolate_history(scratch)
    tb = tbm.Testbed(name='hpcnetsen')
    tb.down()
    tb.up()
    select = ['--system', 'testbed:eth', '-n', f'hpcnet_p2p.*scale=2_nodes.*mode={args.mode}$',
              '-p', args.envs]

    def session(name: str, rate: str, repeats: int) -> sides.Side:
        tb.shape(rate, node=args.node)
        env = tb.env(dict(os.environ))
        # The partition declares the cut rate: the sessions then differ in their
        # figures alone, which is what compare is measured on (declared 1 Gbit/s,
        # the calibration would name the shaped link and fail the case).
        env[TESTBED_RATE_ENV] = str(tbm.rate_bps(rate))
        run = runner.run_suite(name, [*select, '--reruns', str(repeats - 1)],
                            prefix=tb.head_prefix(cwd=str(WORK_DIR)), env=env)
        if run.report is None:
            raise SystemExit(f'{name}: the session wrote no report (exit {int(run.code)})')
        kept = scratch / f'{name}.json'
        shutil.copyfile(run.report, kept)
        return sides.load_side(str(kept))

    verdicts = defaultdict(list)     # (condition, environment, metric) -> [verdict, ...]
    start = time.monotonic()
    try:
        base = session('sens-baseline', '1gbit', args.baseline_repeats)
        for trial in range(args.trials):
            for condition, rate in CONDITIONS:
                side = session(f'sens-{trial}-{rate}', rate, args.repeats)
                for row in compare.compare(base, side).rows:
                    if row.metric in METRICS:
                        verdicts[(condition, row.environ, row.metric)].append(row.result.verdict)
            print(f'trial {trial + 1}/{args.trials} done, {time.monotonic() - start:.0f} s',
                  flush=True)
    finally:
        tb.shape('1gbit', node=args.node)
        tb.down()

    print(f'\np2p {args.mode}: baseline {args.baseline_repeats} samples, each session {args.repeats} samples, '
          f'{args.trials} trials; one-sided Mann-Whitney U at alpha {compare.ALPHA}, '
          f'threshold {compare.THRESHOLD:.0%}')
    print(f'{"environment":18} {"metric":16} {"clean: false alarms":>20} '
          f'{"cut 10 %: detected":>20} {"cut 5 %: detected":>20}')
    envs = sorted({env for (_, env, _) in verdicts})
    for env in envs:
        for metric in METRICS:
            cells = []
            for condition, _ in CONDITIONS:
                got = verdicts.get((condition, env, metric), [])
                hits = sum(v == statcompare.Verdict.REGRESSED for v in got)
                cells.append(f'{hits}/{len(got)}')
            print(f'{env:18} {metric:16} {cells[0]:>20} {cells[1]:>20} {cells[2]:>20}')
    print(f'\nwall time {time.monotonic() - start:.0f} s; sessions kept in {scratch}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
