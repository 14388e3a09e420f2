"""Our point-to-point kernel against IMB and OSU, on this machine (prints figures).

    .venv/bin/python ci/benchmarks/crosscheck.py [--repeats 5] [-- REFRAME ARGS]

`hpcnet crosscheck` in a scratch history: one ReFrame session runs our kernel
(ping-pong, streaming, bidirectional) and every IMB PingPong / osu_latency /
osu_bw / osu_bibw the primary environments ship, --repeats times each
(interleaved by ReFrame's reruns, so drift of the host hits both sides), then
prints ours over theirs by median: latency at 0 and 8 B (target <= 1.03),
bandwidth at 1 and 4 MiB (target >= 0.97), per environment and partition.
Nothing is judged against references and nothing lands in the user's
results database, reports or perflogs.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from hpcnet import cli
from hpcnet.paths import isolate_history


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--repeats', type=int, default=5)
    ap.add_argument('reframe_args', nargs='*', help='after --: more ReFrame arguments')
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix='hpcnet-crosscheck-') as scratch:
        scratch = Path(scratch)
        isolate_history(scratch)
        start = time.monotonic()
        rc = cli.main(['crosscheck', '--repeats', str(args.repeats), *args.reframe_args])
        print(f'crosscheck: {args.repeats} repeats, {time.monotonic() - start:.0f} s, '
              f'exit {rc} (0: on target, 2: some ratio off target)')
    return rc


if __name__ == '__main__':
    raise SystemExit(main())
