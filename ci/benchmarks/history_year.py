"""A year of nights: how long `hpcnet index build`, `hpcnet history`, the
trend page (`hpcnet history --output`) and `hpcnet compare baseline
now-1d:now` take, and how much memory, over a results database of 365
nightly sessions, and whether history finds what was planted.

Each night is a copy of a recorded real session (tests/data/reports/
local-run.json, 85 cases), its cases copied under renamed environments up to
--cases (147, the testbed suite's size; 1470 for a site ten times that),
every value with 1 % log-normal noise, and planted:

- a step: every bandwidth of hpcnet_p2p %scale=1_node %mode=bw @local:tcp
  +gcc12-openmpi4 8 % lower from night 301;
- a slow drift: every latency of hpcnet_p2p %scale=1_node %mode=pingpong
  @local:tcp +gcc12-mpich5 up 15 % over the year;
- outliers: hpcnet_p2p %scale=1_node %mode=bw @local:shm +gcc12-mpich4 at
  60 % on nights 100, 200 and 250.

The nights named are those of 365; with --nights N each sits at the same
fraction of the N nights (night 301 of 365 is night 25 of 30), and the drift
is 15 % over the N nights, so a short run checks the same finding.

Each step runs in a process of its own and prints its wall time and peak
resident memory (getrusage of that process and its children).  Nothing on the
testbed; everything in a temporary directory.

    .venv/bin/python ci/benchmarks/history_year.py [--cases 1470] [--nights 365]
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import random
import re
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hpcnet.acceptance.history import metricindex

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / 'tests' / 'data' / 'reports' / 'local-run.json'
HPCNET = Path(sys.executable).with_name('hpcnet')
DAY = 86400.0
STEP = ('hpcnet_p2p %scale=1_node %mode=bw', 'local:tcp', 'gcc12-openmpi4', 'bandwidth')
DRIFT = ('hpcnet_p2p %scale=1_node %mode=pingpong', 'local:tcp', 'gcc12-mpich5', 'latency')
OUTLIER = ('hpcnet_p2p %scale=1_node %mode=bw', 'local:shm', 'gcc12-mpich4', 'bandwidth')
YEAR, STEP_NIGHT, OUTLIER_NIGHTS, DRIFT_SIZE = 365, 301, (100, 200, 250), 0.15
#: The nights the accepted baseline of `compare baseline` names.
BASELINE_NIGHTS = 5
# Run in a child: its own peak memory and time, printed as JSON.
_MEASURE = ('import json, resource, subprocess, sys, time; t = time.monotonic(); '
            'r = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, text=True); '
            'print(json.dumps({"seconds": time.monotonic() - t, "rc": r.returncode, '
            '"max_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, '
            '"stdout": r.stdout}))')


def _template(cases: int) -> dict:
    report = json.loads(RECORDED.read_text())
    recorded = [tc for run in report['runs'] for tc in run['testcases']]
    out = []
    for copy_number in range(math.ceil(cases / len(recorded))):
        for tc in recorded:
            tc = copy.deepcopy(tc)
            if copy_number:
                tc['environ'] = f'{tc["environ"]}-copy{copy_number}'
            out.append(tc)
    report['runs'] = [{**report['runs'][0], 'testcases': out[:cases]}]
    report.pop('hpcnet_retried', None)
    return report


def planted_nights(nights: int) -> tuple:
    """(the step's night, the outliers' nights) of a run of ``nights``: at
    the fraction of the nights they are of a year."""
    def scaled(night: int) -> int:
        return max(1, round(night * nights / YEAR))
    return scaled(STEP_NIGHT), tuple(scaled(n) for n in OUTLIER_NIGHTS)


def _planted(tc: dict, var: str, night: int, nights: int) -> float:
    case = (tc['name'].split(' /')[0], f'{tc["system"]}:{tc["partition"]}', tc['environ'])
    step_night, outlier_nights = planted_nights(nights)
    if case == STEP[:3] and var.startswith(STEP[3]) and night >= step_night:
        return 0.92
    if case == DRIFT[:3] and var.startswith(DRIFT[3]):
        return 1 + DRIFT_SIZE * night / nights
    if case == OUTLIER[:3] and var.startswith(OUTLIER[3]) and night in outlier_nights:
        return 0.6
    return 1.0


def _check_planted(template: dict) -> None:
    """Each planted case has values of its metric in the recorded session:
    a plant on a case without them would plant nothing."""
    have = {(tc['name'].split(' /')[0], f'{tc["system"]}:{tc["partition"]}', tc['environ'],
             key.split(':')[-1]) for tc in template['runs'][0]['testcases']
            for key in tc['perfvalues']}
    for plant in (STEP, DRIFT, OUTLIER):
        if not any(h[:3] == plant[:3] and h[3].startswith(plant[3]) for h in have):
            raise SystemExit(f'{RECORDED}: no {plant[3]} values of {" ".join(plant[:3])} '
                             f'to plant a change on')


def build_db(path: Path, nights: int, cases: int) -> None:
    template = _template(cases)
    _check_planted(template)
    recorded = {id(tc): copy.deepcopy(tc['perfvalues'])
                for tc in template['runs'][0]['testcases']}
    rng = random.Random(1)
    # The last night half a day ago: the period now-1d:now holds it alone.
    start = time.time() - (nights + 0.5) * DAY

    def night_reports():
        for night in range(1, nights + 1):
            when = start + night * DAY
            template['session_info'].update(uuid=f'{night:08d}-0000-4000-8000-000000000000',
                                            time_start_unix=when, time_end_unix=when + 600)
            for tc in template['runs'][0]['testcases']:
                for key, value in recorded[id(tc)].items():
                    if isinstance(value[0], (int, float)) and value[0]:
                        planted = _planted(tc, key.split(':')[-1], night, nights)
                        tc['perfvalues'][key][0] = (value[0] * math.exp(0.01 * rng.gauss(0, 1))
                                                    * planted)
            yield template
    metricindex.store_reports(path, night_reports())


def measure(*cmd, env: dict | None = None) -> dict:
    res = subprocess.run([sys.executable, '-c', _MEASURE, *map(str, cmd)], text=True,
                         stdout=subprocess.PIPE, check=True,
                         env={**os.environ, **env} if env else None)
    return json.loads(res.stdout)


def accepted_baseline(refdir: Path, sessions: int) -> None:
    """A reference file of system local whose provenance names the first
    ``sessions`` nights: the baseline `compare baseline` reads."""
    refdir.mkdir(exist_ok=True)   # --keep: the file is written again
    uuids = ', '.join(f'{night:08d}-0000-4000-8000-000000000000'
                      for night in range(1, sessions + 1))
    (refdir / 'local.yaml').write_text(f'$provenance: {{sessions: [{uuids}]}}\n')


def found(stdout: str, nights: int) -> dict:
    """Whether each planted change was found, and what else was called a change."""
    step_night, outlier_nights = planted_nights(nights)
    def lines(word: str, case: tuple) -> list:
        name = re.escape(f'{case[0]} @{case[1]} +{case[2]} {case[3]}')
        return [ln for ln in stdout.splitlines() if ln.startswith(word) and re.search(name, ln)]
    step = lines('CHANGED WORSE', STEP)
    changes = [ln for ln in stdout.splitlines() if ln.startswith('CHANGED')]
    planted = set(step) | set(lines('CHANGED', DRIFT))
    return {f'step found at night {step_night}': bool(step) and all(
                f'session {step_night} (' in ln for ln in step),
            'step series': len(step),
            'drift found (changes or worse lately)': len(lines('CHANGED', DRIFT)
                                                         + lines('WORSE LATELY', DRIFT)),
            'outliers found at the planted nights': len([
                ln for ln in lines('OUTLIER', OUTLIER)
                if any(f'session {n} (' in ln for n in outlier_nights)]),
            'other changes (false alarms)': len([ln for ln in changes if ln not in planted]),
            'other series worse lately or cut short (not changes)': len([
                ln for ln in stdout.splitlines() if ln.startswith(('WORSE LATELY', 'CUT SHORT'))
                and ln not in lines('WORSE LATELY', DRIFT)]),
            'summary': stdout.strip().splitlines()[-1] if stdout.strip() else ''}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--nights', type=int, default=365)
    parser.add_argument('--cases', type=int, default=147)
    parser.add_argument('--keep', type=Path, metavar='DIR',
                        help='make the database in DIR and keep it; a database already there '
                             '(of a run with the same --nights and --cases) is used again')
    args = parser.parse_args()
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        return run_all(args.keep, args.nights, args.cases)
    with tempfile.TemporaryDirectory() as scratch:
        return run_all(Path(scratch), args.nights, args.cases)


def run_all(scratch: Path, nights: int, cases: int) -> int:
    """Every step over the database in ``scratch``, made there unless it is."""
    db = scratch / 'year.db'
    if db.exists():
        print(f'results database: {db}, {db.stat().st_size / 1e6:.0f} MB, made before')
    else:
        t = time.monotonic()
        build_db(db, nights, cases)
        print(f'results database: {nights} nights x {cases} cases, '
              f'{db.stat().st_size / 1e6:.0f} MB, made in {time.monotonic() - t:.0f} s')
    build = measure(HPCNET, 'index', 'build', '--db', db)
    print(f'hpcnet index build: {build["seconds"]:.1f} s, peak {build["max_rss_mb"]:.0f} MB, '
          f'index {Path(str(db) + ".index.sqlite").stat().st_size / 1e6:.0f} MB')
    for label, extra in (('-n hpcnet_p2p.*mode=bw', ['-n', 'hpcnet_p2p.*mode=bw']),
                         ('whole suite', [])):
        run = measure(HPCNET, 'history', '--db', db, '--system', 'local', *extra)
        print(f'hpcnet history {label}: {run["seconds"]:.1f} s, peak '
              f'{run["max_rss_mb"]:.0f} MB, exit {run["rc"]}')
        for what, value in found(run['stdout'], nights).items():
            print(f'    {what}: {value}')
    page = scratch / 'trend.html'
    run = measure(HPCNET, 'history', '--db', db, '--system', 'local', '--output', page)
    print(f'hpcnet history --output (the trend page, whole suite): {run["seconds"]:.1f} s, '
          f'peak {run["max_rss_mb"]:.0f} MB, exit {run["rc"]}, '
          f'page {page.stat().st_size / 1e6:.1f} MB')
    accepted_baseline(scratch / 'reference', BASELINE_NIGHTS)
    run = measure(HPCNET, 'compare', 'baseline', 'now-1d:now',
                  env={'RFM_SQLITE_DB_FILE': str(db),
                       'HPCNET_REFERENCE_DIR': str(scratch / 'reference')})
    print(f'hpcnet compare baseline now-1d:now (baseline: nights 1-{BASELINE_NIGHTS}): '
          f'{run["seconds"]:.1f} s, peak {run["max_rss_mb"]:.0f} MB, exit {run["rc"]}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
