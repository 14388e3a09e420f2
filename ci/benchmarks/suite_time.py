"""Where a ReFrame session of the suite spends its time, from its JSON run report.

    .venv/bin/python ci/benchmarks/suite_time.py reports/latest.json

Prints, per check (fixtures apart) and in total: cases, and seconds in
setup, build, run (the job: launch, the MPI's start-up, the kernel, the
link-counter snapshots), sanity and performance (their sum is the total);
then the session's wall time and what lies outside these phases (discovery,
loading the checks, ReFrame's own bookkeeping between cases).  It prints figures; it asserts nothing.
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

PHASES = ('time_setup', 'time_compile', 'time_run', 'time_sanity', 'time_performance')


def check_name(tc: dict) -> str:
    base = tc['name'].split(' /')[0].split(' ~')[0].split(' %')[0]
    return f'{base} (fixture)' if tc.get('fixture') else base


def breakdown(report: dict) -> tuple:
    '''({check: {'cases': n, phase: seconds, 'time_total': seconds}}, session seconds).'''
    rows = defaultdict(lambda: defaultdict(float))
    for run in report['runs']:
        for tc in run['testcases']:
            row = rows[check_name(tc)]
            row['cases'] += 1
            phases = {key: tc.get(key) or 0.0 for key in PHASES}
            if tc.get('fixture'):
                # A build fixture's stage is kept until its last dependent ran:
                # ReFrame's run and total times of it span those runs.
                phases['time_run'] = 0.0
            for key, value in phases.items():
                row[key] += value
            row['time_total'] += sum(phases.values())
    info = report['session_info']
    return rows, float(info.get('time_elapsed') or 0.0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('report', type=Path)
    args = ap.parse_args(argv)
    rows, elapsed = breakdown(json.loads(args.report.read_text()))
    header = f'{"check":34} {"cases":>5} ' + ' '.join(f'{p[5:]:>11}' for p in PHASES) \
        + f' {"total":>9} {"per case":>8}'
    print(header)
    totals = defaultdict(float)
    for name, row in sorted(rows.items(), key=lambda kv: -kv[1]['time_total']):
        print(f'{name:34} {int(row["cases"]):5d} '
              + ' '.join(f'{row[p]:11.1f}' for p in PHASES)
              + f' {row["time_total"]:9.1f} {row["time_total"] / row["cases"]:8.2f}')
        for key, value in row.items():
            totals[key] += value
    print(f'{"all cases":34} {int(totals["cases"]):5d} '
          + ' '.join(f'{totals[p]:11.1f}' for p in PHASES) + f' {totals["time_total"]:9.1f}')
    print(f'session wall time {elapsed:.1f} s; outside the cases (discovery, loading, '
          f'bookkeeping): {elapsed - totals["time_total"]:.1f} s')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
