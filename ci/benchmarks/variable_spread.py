"""How much a check's figures move from run to run, for each value of one of
its variables: runs of one selection on the testbed (root), alternating the
values (so a host that slows down slows each alike), each run its own ReFrame
session, and per value and metric the median and the standard deviation of
log(value) between runs (the between-session spread a baseline's tolerance is
made from).

    .venv/bin/python ci/benchmarks/variable_spread.py --set time_per_size_ms=40,160 --runs 6

Nothing lands in the user's history: its own results database, reports,
perflogs and reference directory, in a temporary directory.  It asserts
nothing.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
from pathlib import Path

from hpcnet import testbed as tbm
from hpcnet.acceptance.comparison import compare, sides
from hpcnet.acceptance.references import references
from hpcnet.commands.testbed import parse_on_testbed, run_on
from hpcnet.paths import isolate_history


def run_values(report_path: Path) -> dict:
    '''{metric: median of its samples} of one run's report, read as compare
    reads a side (asserted or not; a withheld measurement left out).'''
    report = references.load_report(report_path)
    got = compare.samples(sides.Side(str(report_path), [report]))
    return {key[-1]: statistics.median(samples) for key, (_, samples) in got.values.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--set', required=True, metavar='VAR=V1,V2,...',
                    help="a check variable and the values to compare (ReFrame's -S)")
    ap.add_argument('--runs', type=int, default=6, help='runs of each value')
    ap.add_argument('--select', default=r'hpcnet_p2p.*scale=2_nodes.*mode=bw$',
                    help='the cases (-n regex of ReFrame); one check')
    ap.add_argument('--env', default='^gcc12-openmpi4$', help='environment (-p regex of ReFrame)')
    ap.add_argument('--rate', default='1gbit')
    args = ap.parse_args(argv)
    variable, _, listed = args.set.partition('=')
    values = [v for v in listed.split(',') if v]
    if not variable or len(values) < 2:
        ap.error('--set needs a variable and at least two values: VAR=V1,V2')
    scratch = isolate_history(Path(tempfile.mkdtemp(prefix='hpcnet-variable-spread-')))
    # `hpcnet testbed run` copies each run's report there.
    latest = scratch / 'reports' / 'testbed-latest.json'
    tb = tbm.Testbed(name='hpcnetvar')
    tb.down()
    tb.up(nodes=2, rate=args.rate)
    runs = {value: [] for value in values}
    try:
        for run in range(1, args.runs + 1):
            for value in values:
                latest.unlink(missing_ok=True)     # never the report of an earlier run
                code = run_on(tb, parse_on_testbed('run', ['-n', args.select, '-p', args.env,
                                                           '-S', f'{variable}={value}']))
                got = run_values(latest) if latest.exists() else {}
                runs[value].append(got)
                print(f'run {run} {variable}={value}: exit {int(code)}, {len(got)} figures',
                      flush=True)
    finally:
        tb.down()
    print(f'\n{args.select} {args.env} on 2 testbed nodes at {args.rate}, {args.runs} runs each')
    print(f'{"metric":34} ' + ' '.join(f'{f"{variable}={v}":>28}' for v in values))
    metrics = sorted({name for got in runs[values[0]] for name in got})
    for name in metrics:
        cells = []
        for value in values:
            xs = [got[name] for got in runs[value] if name in got]
            if len(xs) < 2 or min(xs) <= 0:
                cells.append(f'{"-":>28}')
                continue
            spread = statistics.stdev(math.log(x) for x in xs)
            cells.append(f'{f"{statistics.median(xs):.4g}, sd {spread * 100:.1f} %":>28}')
        print(f'{name:34} ' + ' '.join(cells))
    return 0


if __name__ == '__main__':
    sys.exit(main())
