"""Does `hpcnet accept` pass a healthy testbed and fail a degraded one, and
how long does it take?  Measured on the testbed (root).

A testbed of two compute nodes at --rate; one selection (--select, one
environment --env): a baseline of --baseline-sessions sessions written into
a scratch reference directory, a run of the selection with accept's first
round's repeats (the nightly run: the time a verdict is measured against)
and one of 1 repeat, then --trials trials of each scenario:

- clean: nothing changed -> right when accept exits 0;
- path: the cn1-cn2 path at --path-fault of the rate, both directions
  (``hpcnet testbed shape --node cn1 --peer cn2``) -> right when accept
  exits 1 naming the selected check: a regressed metric in its table, or
  the case FAILED in a round's summary;
- intermittent: the same path at --intermittent-fault of the rate for one
  repeat's time out of every three (a flapping link), the rest clean ->
  right as for path.

It prints one line per trial and a table: right / trials, the time to each
verdict against one run of the selection, and the false-alarm and
missed-regression rates beside those published for Mozilla's Perfherder
(12.5 % false-positive alert groups, 6.8 % missed regressions); it asserts
nothing.

    .venv/bin/python ci/benchmarks/accept_trials.py --trials 5

Nothing lands in the user's history: its own results database, reports and
reference directory, all in a temporary directory.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import re
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from hpcnet import argtypes
from hpcnet import testbed as tbm
from hpcnet.testbed import wire
from hpcnet.commands.accept import FIRST_ROUND_REPEATS
from hpcnet.commands.testbed import parse_on_testbed, run_on
from hpcnet.exitcodes import Exit
from hpcnet.paths import isolate_history

SCENARIOS = ('clean', 'path', 'intermittent')
#: The run of the selection a verdict's time is measured against: accept's
#: first round, the nightly templates' run (a 1-repeat run is shown too).
ACCEPT_REPEATS = FIRST_ROUND_REPEATS
#: Perfherder's rates (a 2026 study of Mozilla's alerting), printed beside ours.
PERFHERDER_FALSE_POSITIVE = 0.125
PERFHERDER_MISSED = 0.068


class Flapping:
    '''Slows the cn1-cn2 path to ``rate`` for ``slow_s`` out of every
    ``3 * slow_s`` seconds until stopped, then restores it.'''

    def __init__(self, tb, rate: str, slow_s: float):
        self.tb, self.rate, self.slow_s = tb, rate, slow_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.tb.shape_path('cn1', 'cn2', self.rate)
            if self._stop.wait(self.slow_s):
                break
            self.tb.shape_path('cn1', 'cn2', None)
            self._stop.wait(2 * self.slow_s)
        self.tb.shape_path('cn1', 'cn2', None)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def hpcnet_on_testbed(tb, argv: list) -> tuple:
    '''(exit code, what it printed) of `hpcnet testbed CMD ARGS` on the
    testbed ``tb``, which stays up between them.'''
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = run_on(tb, parse_on_testbed(argv[0], argv[1:]))
    text = out.getvalue()
    sys.stdout.write(text)
    return int(code), text


def fault_lines(text: str, check: str) -> list:
    '''What accept printed naming ``check`` as at fault: a row of its verdict
    table with a regressed metric, or a FAILED line of a round's summary (a
    case that failed, e.g. on the shaper it found on its path).'''
    return [line for line in text.splitlines() if check in line
            and ('regressed' in line or line.startswith('hpcnet: FAILED'))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--trials', type=int, default=5, help='trials per scenario')
    ap.add_argument('--scenarios', default=list(SCENARIOS),
                    type=argtypes.comma_list(SCENARIOS),
                    help=f'comma-separated, of {", ".join(SCENARIOS)}')
    ap.add_argument('--select', default=r'hpcnet_p2p.*scale=2_nodes.*mode=bw$',
                    help='the cases (-n regex of ReFrame)')
    ap.add_argument('--env', default='^gcc12-openmpi4$', help='environment (-p regex of ReFrame)')
    ap.add_argument('--rate', default='1gbit')
    ap.add_argument('--baseline-sessions', type=int, default=5)
    ap.add_argument('--path-fault', type=float, default=0.9,
                    help="the slowed path's share of the rate (path scenario)")
    ap.add_argument('--intermittent-fault', type=float, default=0.7,
                    help="the path's share of the rate while it flaps")
    args = ap.parse_args(argv)
    scenarios = args.scenarios
    check = args.select.split('.')[0].split(' ')[0]
    selection = ['-n', args.select, '-p', args.env]
    rate_bps = tbm.rate_bps(args.rate)
    path_rate = f'{round(rate_bps * args.path_fault / 1e6)}mbit'
    flap_rate = f'{round(rate_bps * args.intermittent_fault / 1e6)}mbit'

    scratch = Path(tempfile.mkdtemp(prefix='hpcnet-accept-trials-'))
    isolate_history(scratch)
    tb = tbm.Testbed(name='hpcnetacc')
    tb.down()
    tb.up(nodes=2, rate=args.rate)
    results = {s: [] for s in scenarios}
    began_all = time.monotonic()
    try:
        print(f'clean link {wire.require_wire_true(tb).line()}', flush=True)
        began = time.monotonic()
        code, _ = hpcnet_on_testbed(tb, ['baseline', '--sessions', str(args.baseline_sessions),
                                         '--write', *selection])
        baseline_s = time.monotonic() - began
        if code != Exit.OK:
            raise SystemExit(f'the baseline did not pass (exit {code}): no trial is meaningful')
        began = time.monotonic()
        code, _ = hpcnet_on_testbed(tb, ['run', *selection])
        one_run_s = time.monotonic() - began
        began = time.monotonic()
        nightly_code, _ = hpcnet_on_testbed(tb, ['run', '--repeats', str(ACCEPT_REPEATS),
                                                 *selection])
        nightly_s = time.monotonic() - began
        print(f'baseline: {args.baseline_sessions} sessions in {baseline_s:.0f} s; one run of '
              f'the selection: {one_run_s:.0f} s (exit {code}); with --repeats '
              f'{ACCEPT_REPEATS}: {nightly_s:.0f} s (exit {nightly_code})', flush=True)
        for trial in range(args.trials):
            for scenario in scenarios:
                began = time.monotonic()
                if scenario == 'path':
                    tb.shape_path('cn1', 'cn2', path_rate)
                flapping = (Flapping(tb, flap_rate, one_run_s) if scenario == 'intermittent'
                            else contextlib.nullcontext())
                try:
                    with flapping:
                        code, text = hpcnet_on_testbed(tb, ['accept', *selection])
                finally:
                    if scenario == 'path':
                        tb.shape_path('cn1', 'cn2', None)
                seconds = time.monotonic() - began
                named = fault_lines(text, check)
                ok = (code == Exit.OK if scenario == 'clean'
                      else code == Exit.FAILED and bool(named))
                found = re.search(r'^after: .*: (\d+) repeats in (\d+) sessions', text, re.M)
                rounds = f'{found[1]} repeats, {found[2]} rounds' if found else 'no round'
                results[scenario].append({'ok': ok, 'code': code, 'seconds': seconds})
                print(f'trial {trial + 1} {scenario:12} exit {code} in {seconds:.0f} s '
                      f'({seconds / nightly_s:.1f} nightly runs, {seconds / one_run_s:.1f} '
                      f'1-repeat runs; {rounds}): '
                      f'{"right" if ok else "WRONG"}; '
                      f'{named[0].strip()[:200] if named else "nothing named at fault"}', flush=True)
    finally:
        tb.down()

    print(f'\nhpcnet accept on 2 testbed nodes at {args.rate}: {args.select} {args.env}; '
          f'baseline of {args.baseline_sessions} sessions; a run of the selection '
          f'{nightly_s:.0f} s with --repeats {ACCEPT_REPEATS} (the nightly run, accept\'s first '
          f'round), {one_run_s:.0f} s with 1; path fault {path_rate}, intermittent {flap_rate} '
          f'one repeat in 3')
    print(f'{"scenario":13} {"right":>6} {"s to verdict (median, max)":>27} '
          f'{"x nightly run (max)":>20} {"x 1-repeat run (max)":>21} {"exit codes":>12}')
    for scenario, rows in results.items():
        if not rows:
            continue
        secs = [r['seconds'] for r in rows]
        codes = ','.join(str(r['code']) for r in rows)
        print(f'{scenario:13} {sum(r["ok"] for r in rows)}/{len(rows):<4} '
              f'{f"{statistics.median(secs):.0f}, {max(secs):.0f}":>27} '
              f'{max(secs) / nightly_s:>20.1f} {max(secs) / one_run_s:>21.1f} '
              f'{codes:>12}')
    clean = results.get('clean', [])
    faults = [r for s in ('path', 'intermittent') for r in results.get(s, [])]
    if clean:
        print(f'false alarms: {sum(not r["ok"] for r in clean)}/{len(clean)} clean trials '
              f'(Perfherder: {PERFHERDER_FALSE_POSITIVE:.1%} of alert groups)')
    if faults:
        print(f'missed regressions: {sum(not r["ok"] for r in faults)}/{len(faults)} fault '
              f'trials (Perfherder: {PERFHERDER_MISSED:.1%})')
    print(f'\nwall time {time.monotonic() - began_all:.0f} s; sessions kept in {scratch}')
    return Exit.OK


if __name__ == '__main__':
    sys.exit(main())
