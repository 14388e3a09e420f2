"""Baselines: references made from repeated good runs, with their provenance.

A baseline is K sessions' worth of samples of every performance variable
(`hpcnet baseline` runs the selected checks K times, each repeat its own
jobs).  Per metric it keeps the median and a tolerance derived from the
observed spread, never tighter than a practical floor:

    tolerance = max(floor, 3 x robust CV, 1.2 x worst sample's deviation)

where robust CV = 1.4826 x MAD / median (the standard deviation a normal
spread would have, insensitive to one outlier).  Three robust standard
deviations keep a healthy run inside the bounds; the worst sample seen keeps
a metric that is bimodal on this machine from failing on its other mode.
The floor (3 %, as `hpcnet compare`'s practical threshold) keeps a metric
that happened to be very stable from failing on a 1 % wobble.  Bounds are
symmetric: a metric that moved far either way has changed, and a site wants
to know before it re-baselines.

Only passed cases count, and within them no variable whose result is
``xfail``.  The provenance block records what produced the numbers.
"""
from __future__ import annotations

import datetime
import difflib
import os
import platform
import statistics
import subprocess
from dataclasses import dataclass, field
from importlib import metadata

import reframe

from hpcnet.constants import PROJECT_ROOT, REFERENCE_DIR_ENV
from hpcnet.references import PROVENANCE, per_environment, reference_dir, reference_file

#: A tolerance is never tighter than this (fraction of the median).
TOLERANCE_FLOOR = 0.03
#: Session extras key that tags a stored session as a baseline.
BASELINE_TAG = 'hpcnet_baseline'


@dataclass
class MetricSamples:
    """Every passed sample of one metric of one case key."""
    unit: str
    values: list = field(default_factory=list)


def judged_cases(reports: list):
    """Every non-fixture test case of every run of ``reports`` that passed."""
    for report in reports:
        for run in report.get('runs', []):
            for tc in run.get('testcases', []):
                if tc.get('fixture') or tc.get('result') != 'pass':
                    continue
                yield tc


def measured_cases(reports: list):
    """Every case whose figures are valid measurements: passed, or failed
    only on its references (a regression is a sample too, for a comparison)."""
    for report in reports:
        for run in report.get('runs', []):
            for tc in run.get('testcases', []):
                if tc.get('fixture'):
                    continue
                if tc.get('result') == 'pass' or (tc.get('result') == 'fail'
                                                  and tc.get('fail_phase') == 'performance'):
                    yield tc


def perf_samples(tc: dict):
    """(variable, value, unit) of a case, without xfail or missing values."""
    for key, val in (tc.get('perfvalues') or {}).items():
        value, unit, result = val[0], val[4], val[5] if len(val) > 5 else None
        if value is None or result == 'xfail':
            continue
        yield key.split(':')[-1], float(value), unit


def tolerance(values: list, floor: float = TOLERANCE_FLOOR) -> float:
    """The relative tolerance of a metric from its samples (module docstring)."""
    median = statistics.median(values)
    if median == 0:
        return floor
    mad = statistics.median(abs(v - median) for v in values)
    robust_cv = 1.4826 * mad / abs(median)
    worst = max(abs(v - median) for v in values) / abs(median)
    return max(floor, 3 * robust_cv, 1.2 * worst)


def index_keys(tc: dict) -> tuple:
    """The values of the attributes a case's references are indexed by."""
    index = per_environment(tc.get('reference_index') or ['$partition'])
    special = {'$partition': f'{tc["system"]}:{tc["partition"]}', '$system': tc['system'],
               '$environ': tc['environ']}
    return tuple(index), tuple(special[a] if a in special else str(tc.get(a)) for a in index)


def collect(reports: list, tests: set | None = None) -> dict:
    """{test class: (index, {index values: {variable: MetricSamples}})}."""
    out: dict = {}
    for tc in judged_cases(reports):
        cls = tc['name'].split()[0]
        if tests is not None and cls not in tests:
            continue
        index, keys = index_keys(tc)
        by_key = out.setdefault(cls, (index, {}))[1]
        for var, value, unit in perf_samples(tc):
            by_key.setdefault(keys, {}).setdefault(var, MetricSamples(unit)).values.append(value)
    return out


def references(reports: list, floor: float = TOLERANCE_FLOOR, tests: set | None = None) -> dict:
    """Reference data (ReFrame's external format, ``$index`` per test) from
    the passed samples of ``reports``: median and spread-derived tolerance."""
    out = {}
    for cls, (index, by_key) in sorted(collect(reports, tests).items()):
        node = out.setdefault(cls, {'$index': list(index)})
        for keys, metrics in by_key.items():
            leaf = node
            for k in keys:
                leaf = leaf.setdefault(k, {})
            for var, samples in sorted(metrics.items()):
                tol = tolerance(samples.values, floor)
                leaf[var] = [float(f'{statistics.median(samples.values):.6g}'),
                             # ReFrame's lower bound is at least -1 (a value of 0)
                             -min(round(tol, 4), 1.0), round(tol, 4), samples.unit]
    return out


def _suite_commit() -> str:
    if PROJECT_ROOT is None:
        return f'unknown (installed hpcnet {metadata.version("hpcnet")}, not a git checkout)'
    try:
        res = subprocess.run(['git', '-C', str(PROJECT_ROOT), 'rev-parse', 'HEAD'], text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10)
    except OSError as err:
        return f'unknown (git: {err.strerror})'
    return res.stdout.strip() if res.returncode == 0 else 'unknown (not a git checkout)'


def provenance(reports: list, floor: float = TOLERANCE_FLOOR) -> dict:
    """What produced a baseline: when, where, with what."""
    cases = list(judged_cases(reports))
    by_env: dict = {}
    for tc in cases:
        env = by_env.setdefault(tc['environ'], {'mpi_library': set(), 'transport': set()})
        for key in ('mpi_library', 'transport'):
            if tc.get(key) and tc[key] != 'none':
                env[key].add(tc[key])
    rates = sorted({tc['link_rate_bps'] for tc in cases if tc.get('link_rate_bps')})
    return {
        'date': datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'),
        'sessions': sorted({r.get('session_info', {}).get('uuid', '?') for r in reports}),
        'repeats': sum(len(r.get('runs', [])) for r in reports),
        'passed_cases': len(cases),
        'nodes': sorted({n for tc in cases for n in (tc.get('job_nodelist') or [])}),
        'environments': {env: {k: sorted(v) for k, v in info.items()}
                         for env, info in sorted(by_env.items())},
        'link_rates_bps': rates,
        'os_kernel': f'{platform.system()} {platform.release()} (host running ReFrame)',
        # reframe.VERSION, not the pip metadata: Spack's and EasyBuild's
        # ReFrame are not pip installs.
        'reframe': reframe.VERSION,
        'hpcnet': metadata.version('hpcnet'),
        'suite_commit': _suite_commit(),
        'tolerance': f'max({floor:g}, 3 x robust CV, 1.2 x worst deviation) of the samples',
    }


def document(reports: list, floor: float = TOLERANCE_FLOOR) -> dict:
    """A whole reference file: provenance first, then the references."""
    refs = references(reports, floor)
    return {PROVENANCE: provenance(reports, floor), **refs} if refs else {}


def diff(old_text: str, new_text: str, path: str) -> str:
    """What writing ``new_text`` over ``path`` would change, ignoring the
    provenance block (it always changes)."""
    def body(text):
        lines, skipping = [], False
        for line in text.splitlines(keepends=True):
            if line.startswith(PROVENANCE + ':'):
                skipping = True
                continue
            if skipping and (line.startswith(' ') or not line.strip()):
                continue
            skipping = False
            lines.append(line)
        return lines
    return ''.join(difflib.unified_diff(body(old_text), body(new_text), f'{path} (now)',
                                        f'{path} (baseline)'))


def reference_path_for(system: str) -> str:
    """Where `hpcnet baseline` writes: HPCNET_REFERENCE_DIR or reference/."""
    return str(reference_file(system, reference_dir()))


def environment_for_baseline_runs(scratch_refdir: str) -> dict:
    """The runs of a baseline are not judged against the references they
    will replace: ReFrame reads an empty reference directory meanwhile."""
    return {**os.environ, REFERENCE_DIR_ENV: scratch_refdir}
