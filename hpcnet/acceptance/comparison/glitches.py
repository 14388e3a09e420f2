"""One slow sample after: a glitch of one measurement, or the first sample
of a slower mode (hpcnet.acceptance.comparison.statcompare, "Slow modes")?

A mode is a property of runs: a slow run (a bad node in its allocation, a
flapping link, an MPI that picked a slower path) slows every figure of its
case that the fault reaches. A host's phase in one size's measuring window
slows that figure alone. So one slow sample is a glitch where its run
measured other figures of the case (hpcnet.metrics.figure: a ratio over
iperf3 and an efficiency are their bandwidth's figure) and none of them was
slow in it; statcompare then leaves it out, named, and the other samples
decide at once. Where its run measured no other figure, or another figure
slow too, it waits for enough runs to tell (LONE_SAMPLE_RUNS).  What this
cannot see: a fault that reaches a single figure of a case in a minority of
its runs is taken for glitches until it shows twice in one comparison.
"""
from __future__ import annotations

from hpcnet import metrics

#: The figures named beside a glitch: enough to check, one line.
NAMES_SHOWN = 4


def lone_glitches(results: dict, runs: dict) -> dict:
    '''{metric key: why its one slow sample is a glitch of one measurement}
    of the metrics ``results`` (key -> Comparison) left undecided on one
    slow sample (statcompare, "Slow modes") whose run (``runs``: key -> the
    run of each after sample) measured other figures of the case
    (hpcnet.metrics.figure), none of them slow in it: a slow run (a bad node
    in its allocation, a flapping link) slows the other figures it reaches
    too, a host's phase in one size's window does not.  A metric whose run
    measured no other figure, or another figure slow too, stays undecided.'''
    found = {}
    for key, result in results.items():
        if not result.held_on_lone_sample:
            continue
        run = runs[key][result.slow_after[0]]
        figure = metrics.figure(key[0], key[3])
        others = {other: [runs[other][i] for i in got.slow_after]
                  for other, got in results.items()
                  if other[:3] == key[:3] and got.slow_after is not None
                  and metrics.figure(other[0], other[3]) != figure and run in runs.get(other, ())}
        if others and not any(run in slow_runs for slow_runs in others.values()):
            names = sorted(other[3] for other in others)
            beside = ', '.join(names[:NAMES_SHOWN]) + (
                f', ... {len(names)} in all' if len(names) > NAMES_SHOWN else '')
            found[key] = (f'the figures its run measured beside it ({beside}) were at their '
                          'level, as in no slow run: a glitch of one measurement')
    return found
