"""A baseline against a clean session it did not see (prints figures).

    .venv/bin/python ci/benchmarks/baseline_holdout.py REPORT... [--after REPORT...]

The REPORTs are ReFrame JSON reports of clean sessions of one selection
(e.g. the timestamped `reports/baseline-*.json` of an `hpcnet baseline` and
the `reports/run-*.json` of the runs after it).  Without --after, each
session in turn is held out: the baseline is made of the others and the
held-out session is judged against it as ReFrame would (the bounds of
reframe.utility.sanity.reference_bounds).  With --after, the baseline is
made of the REPORTs and each --after report is judged.  Prints, per judged
session, the values asserted, not asserted and failed, each failure with its
reference and the term that set its tolerance; exits 1 when any value failed.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reframe.utility.sanity import reference_bounds

from hpcnet.acceptance.references import baseline, references


def judge(reports: list, after: dict) -> tuple:
    """(asserted, not asserted, [failure lines]) of ``after`` against a
    baseline of ``reports``."""
    built = baseline.build(reports)
    collected = baseline.collect(reports)
    estimates = baseline.shared_estimates(collected)
    asserted, not_asserted, failed = 0, 0, []
    for tc in baseline.judged_cases([after]):
        cls = tc['name'].split()[0]
        index, keys = baseline.index_keys(tc)
        for var, value, unit in baseline.perf_samples(tc):
            node = built.references.get(cls)
            for k in keys:
                node = (node or {}).get(k)
            ref = (node or {}).get(var)
            if ref is None:
                not_asserted += 1
                continue
            asserted += 1
            lo, hi = reference_bounds(ref[0], ref[1], ref[2])
            if lo <= value <= hi:
                continue
            samples = collected[cls][1][keys][var]
            failed.append(f'  {cls} {baseline.entry_path(keys, var)} = {value:g} {unit}, '
                          f'reference {ref[0]:g} ({ref[1]}, {ref[2]}); baseline samples '
                          f'{[round(v, 4) for v in samples.values]}; tolerance from '
                          f'{estimates[cls, keys, var].reason}')
    return asserted, not_asserted, failed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('reports', nargs='+', type=Path)
    ap.add_argument('--after', nargs='*', type=Path, default=[])
    args = ap.parse_args(argv)
    loaded = [references.load_report(p) for p in args.reports]
    if args.after:
        trials = [(loaded, p, references.load_report(p)) for p in args.after]
    else:
        trials = [(loaded[:i] + loaded[i + 1:], p, r) for i, (p, r) in
                  enumerate(zip(args.reports, loaded))]
    worst = 0
    for base, name, after in trials:
        asserted, not_asserted, failed = judge(base, after)
        print(f'{name.name}: against a baseline of {len(base)} sessions: {asserted} values '
              f'asserted, {not_asserted} not asserted, {len(failed)} failed')
        for line in failed:
            print(line)
        worst = max(worst, len(failed))
    return 1 if worst else 0


if __name__ == '__main__':
    sys.exit(main())
