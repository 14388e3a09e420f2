"""Baselines: references made from repeated good runs, with their provenance.

A baseline is made of one or more ReFrame run reports (sessions); each
report's ``runs`` are its ``--reruns`` repeats.  Per metric of a case key:

1. Outliers.  A sample farther from the median than OUTLIER_Z robust standard
   deviations (sigma = MAD x 1.4826, scipy's scale='normal') is left out and
   named in the provenance (metric, value, session, run): the Iglewicz-Hoaglin
   modified z-score rule, |0.6745 (x - median) / MAD| > 3.5.  It is the
   published rule for small samples, the MAD is not moved by the outlier it
   judges, and with at most half the samples able to be out it cannot eat a
   bimodal metric.  A sample within FLOOR of the median is never an outlier
   (the reference accepts it anyway: with MAD 0 every other value would be),
   nor, with several sessions, one within WORST_MARGIN x the largest drift
   of a session median: that is the drift between sessions, which the
   tolerance is there to cover.

2. Tolerance, of the samples kept::

       tolerance = max(FLOOR,
                       k(n) x robust CV of all samples,
                       K_SESSIONS x robust CV of the session medians,
                       WORST_MARGIN x largest deviation of a kept sample)

   robust CV = sigma / |median|.  k(n) = t(n-1, 1 - PREDICTION_ALPHA/2) x
   sqrt(1 + 1/n) is the factor of a prediction interval for one new sample
   from n (Student's t): few samples know sigma only roughly, so the factor
   is wide for them (11.4 at n=4, 7.9 at n=5, 4.5 at n=10, 3.6 at n=30) and
   a clean run right after the baseline stays inside.  The session medians
   carry the drift between sessions, which samples of one session never show
   (a machine's state, placement, clocks): a new session is one more draw of
   it.  With one session the per-run values stand for them; one session
   cannot show that drift, and the provenance says so.  The largest kept
   deviation times 1.5 keeps every sample of the baseline itself inside.
   FLOOR keeps a very stable metric from failing on a 3 % wobble.

3. Cap.  A metric needing a tolerance above CAP is not given a reference
   that would accept nearly anything: it goes to the file's `$not_asserted`
   section with its spread as the reason, so it is recorded and compared
   (hpcnet compare) but never fails a run.  CAP (0.4) stays clear of the
   validation's lower bound of -0.5 (hpcnet.acceptance.references.MIN_LOWER).

A zero median (counts such as errors) has absolute thresholds in ReFrame:
+/- max(FLOOR, WORST_MARGIN x largest kept deviation), no cap.

Bounds are symmetric: a metric that moved far either way has changed, and a
site wants to know before it re-baselines.  Only passed cases count, and
within them no variable whose result is ``xfail``.  merge() puts a baseline
of a selection into an existing file, replacing only what it measured.
"""
from __future__ import annotations

import datetime
import difflib
import math
import os
import platform
import re
import subprocess
from dataclasses import dataclass, field
from importlib import metadata

import numpy as np
import reframe
from scipy import stats

from hpcnet.constants import PROJECT_ROOT, REFERENCE_DIR_ENV
from hpcnet.acceptance.references import (NOT_ASSERTED, PROVENANCE, per_environment, reference_dir,
                                          reference_file)

#: A tolerance is never tighter than this (fraction of the median).
TOLERANCE_FLOOR = 0.03
#: A tolerance is never wider than this: the metric is not asserted instead.
TOLERANCE_CAP = 0.4
#: Modified z-score above which a sample is an outlier (Iglewicz-Hoaglin).
OUTLIER_Z = 3.5
#: Two-sided miss rate of the prediction interval that sets k(n).
PREDICTION_ALPHA = 0.002
#: Robust standard deviations of the session medians a new session may drift.
K_SESSIONS = 4.0
#: Margin over the largest deviation of a kept sample.
WORST_MARGIN = 1.5
#: Session extras key that tags a stored session as a baseline.
BASELINE_TAG = 'hpcnet_baseline'
#: How a `$not_asserted` reason written by a baseline starts (merge() replaces
#: these; a site's own reasons are kept).
SPREAD_REASON = 'baseline spread'


@dataclass
class MetricSamples:
    """Every passed sample of one metric of one case key, with its origin."""
    unit: str
    values: list = field(default_factory=list)
    sessions: list = field(default_factory=list)    #: session uuid of each value
    runs: list = field(default_factory=list)        #: run (repeat) number of each value

    def add(self, value: float, session: str = '?', run: int = 0) -> None:
        self.values.append(value)
        self.sessions.append(session)
        self.runs.append(run)


@dataclass
class Estimate:
    """A metric's reference, or why it gets none."""
    median: float
    tolerance: float        #: fraction of the median (absolute for a zero median)
    reason: str             #: which term set the tolerance
    left_out: list          #: [(value, session, run)] outliers
    samples: int            #: kept
    sessions: int           #: distinct sessions among the kept samples

    @property
    def asserted(self) -> bool:
        return self.median == 0 or self.tolerance <= TOLERANCE_CAP


def _session_of(report: dict, number: int) -> str:
    return (report.get('session_info') or {}).get('uuid') or f'report {number + 1}'


def judged_cases(reports: list):
    """Every non-fixture test case of every run of ``reports`` that passed."""
    for _, _, tc in _judged_with_origin(reports):
        yield tc


def _judged_with_origin(reports: list):
    """(session, run number, case) of every passed non-fixture case."""
    for number, report in enumerate(reports):
        session = _session_of(report, number)
        for run in report.get('runs', []):
            for tc in run.get('testcases', []):
                if tc.get('fixture') or tc.get('result') != 'pass':
                    continue
                yield session, run.get('run_index', 0), tc


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


def _sigma(values) -> float:
    return float(stats.median_abs_deviation(values, scale='normal')) if len(values) > 1 else 0.0


def prediction_factor(n: int) -> float:
    """k(n): t(n-1, 1 - PREDICTION_ALPHA/2) x sqrt(1 + 1/n); infinite for n < 2
    (one sample says nothing of the spread)."""
    if n < 2:
        return math.inf
    return float(stats.t.ppf(1 - PREDICTION_ALPHA / 2, n - 1) * math.sqrt(1 + 1 / n))


def outliers(values: list, floor: float = TOLERANCE_FLOOR, sessions: list | None = None) -> list:
    """Indices of the samples outside median +/- OUTLIER_Z x sigma, outside
    the floor and, with several sessions, farther than WORST_MARGIN x the
    largest drift of a session median (a value no farther out than a whole
    session moved is drift the tolerance must cover, not a bad repeat) and
    far from its own session's other samples, where it has any; none with
    fewer than 3 samples."""
    if len(values) < 3:
        return []
    x = np.asarray(values, dtype=float)
    median = float(np.median(x))
    limit = max(OUTLIER_Z * _sigma(x), floor * abs(median))
    by_session: dict = {}
    if sessions is not None and len(set(sessions)) > 1:
        for v, s in zip(values, sessions):
            by_session.setdefault(s, []).append(v)
        # A session of one sample shows no drift, only itself: one bad
        # repeat that is a session of its own must stay an outlier.
        drift = [abs(float(np.median(v)) - median) for v in by_session.values() if len(v) > 1]
        limit = max(limit, WORST_MARGIN * max(drift, default=0.0))

    def near_its_session(i: int) -> bool:
        # Far from the whole but close to its own session's other samples:
        # the session drifted, the sample is not bad.
        own = by_session.get(sessions[i]) if by_session else None
        if not own or len(own) < 2:
            return False
        centre = float(np.median(own))
        return abs(x[i] - centre) <= max(OUTLIER_Z * _sigma(own), floor * abs(centre))

    return [int(i) for i in np.flatnonzero(np.abs(x - median) > limit)
            if not near_its_session(int(i))]


def estimate(values: list, sessions: list | None = None, floor: float = TOLERANCE_FLOOR,
             runs: list | None = None) -> Estimate:
    """Median and tolerance of one metric (the module docstring's rule).
    ``sessions[i]`` is the session of ``values[i]`` (default: all one)."""
    sessions = list(sessions) if sessions is not None else ['?'] * len(values)
    runs = list(runs) if runs is not None else list(range(len(values)))
    out = set(outliers(values, floor, sessions))
    left_out = [(values[i], sessions[i], runs[i]) for i in sorted(out)]
    kept = [v for i, v in enumerate(values) if i not in out]
    kept_sessions = [s for i, s in enumerate(sessions) if i not in out]
    median = float(np.median(kept))
    worst = max(abs(v - median) for v in kept)
    if median == 0:
        tol = max(floor, WORST_MARGIN * worst)
        return Estimate(median, tol, 'zero median: absolute bounds', left_out, len(kept),
                        len(set(kept_sessions)))
    by_session: dict = {}
    for v, s in zip(kept, kept_sessions):
        by_session.setdefault(s, []).append(v)
    medians = ([float(np.median(v)) for v in by_session.values()] if len(by_session) > 1
               else kept)
    n = len(kept)
    cv_all = _sigma(kept) / abs(median)
    cv_sessions = _sigma(medians) / abs(median)
    k = prediction_factor(n) if cv_all > 0 else 0.0
    terms = [
        (floor, f'the {floor:.0%} floor'),
        (k * cv_all, f'robust CV {cv_all:.1%} of {n} samples x {k:.1f}'),
        (K_SESSIONS * cv_sessions,
         f'robust CV {cv_sessions:.1%} of {len(by_session)} session medians x {K_SESSIONS:g}'
         if len(by_session) > 1 else
         f'robust CV {cv_sessions:.1%} of the runs of one session x {K_SESSIONS:g}'),
        (WORST_MARGIN * worst / abs(median),
         f'largest deviation {worst / abs(median):.1%} x {WORST_MARGIN:g}'),
    ]
    if n < 2:
        # One sample: nothing is known of the spread but the floor.
        terms = terms[:1]
    tol, why = max(terms, key=lambda t: t[0])
    return Estimate(median, tol, why, left_out, n, len(by_session))


def tolerance(values: list, floor: float = TOLERANCE_FLOOR, sessions: list | None = None) -> float:
    """The relative tolerance of a metric from its samples (module docstring),
    before the cap."""
    return estimate(values, sessions, floor).tolerance


def index_keys(tc: dict) -> tuple:
    """The values of the attributes a case's references are indexed by."""
    index = per_environment(tc.get('reference_index') or ['$partition'])
    special = {'$partition': f'{tc["system"]}:{tc["partition"]}', '$system': tc['system'],
               '$environ': tc['environ']}
    return tuple(index), tuple(special[a] if a in special else str(tc.get(a)) for a in index)


def collect(reports: list, tests: set | None = None) -> dict:
    """{test class: (index, {index values: {variable: MetricSamples}})}."""
    out: dict = {}
    for session, run, tc in _judged_with_origin(reports):
        cls = tc['name'].split()[0]
        if tests is not None and cls not in tests:
            continue
        index, keys = index_keys(tc)
        by_key = out.setdefault(cls, (index, {}))[1]
        for var, value, unit in perf_samples(tc):
            by_key.setdefault(keys, {}).setdefault(var, MetricSamples(unit)).add(value, session, run)
    return out


def _literal(text: str) -> str:
    """``text`` as a regex matching only itself ('-' needs no escape)."""
    return re.escape(str(text)).replace('\\-', '-')


def entry_path(keys: tuple, var: str) -> str:
    """'local:tcp/gcc12-openmpi4/bw/bandwidth_4MiB': how testlib names a value."""
    return '/'.join((*map(str, keys), var))


@dataclass
class Baseline:
    """What a baseline measured: references, the metrics not asserted (with
    their reason), the outliers left out, and the entries it covers."""
    references: dict
    not_asserted: dict          #: {test: {literal pattern: reason}}
    left_out: list              #: [{'metric', 'value', 'session', 'run'}]
    measured: dict              #: {test: (index, [index values tuple, ...])}


def build(reports: list, floor: float = TOLERANCE_FLOOR, tests: set | None = None) -> Baseline:
    """The references of ``reports`` (ReFrame's external format, ``$index``
    per test) and everything said about them."""
    refs: dict = {}
    not_asserted: dict = {}
    left_out: list = []
    measured: dict = {}
    for cls, (index, by_key) in sorted(collect(reports, tests).items()):
        measured[cls] = (list(index), sorted(by_key))
        for keys, metrics in sorted(by_key.items()):
            for var, samples in sorted(metrics.items()):
                est = estimate(samples.values, samples.sessions, floor, samples.runs)
                name = f'{cls} {entry_path(keys, var)}'
                left_out += [{'metric': name, 'value': v, 'session': s, 'run': r}
                             for v, s, r in est.left_out]
                if not est.asserted:
                    pattern = '/'.join(_literal(k) for k in (*keys, var))
                    # The index of the patterns' paths: the test may have no
                    # entry of its own that says it.
                    not_asserted.setdefault(cls, {'$index': list(index)})[pattern] = (
                        f'{SPREAD_REASON}: needs +/-{est.tolerance:.0%} ({est.reason}), above the '
                        f'{TOLERANCE_CAP:.0%} cap: recorded and compared, not asserted')
                    continue
                leaf = refs.setdefault(cls, {'$index': list(index)})
                for k in keys:
                    leaf = leaf.setdefault(k, {})
                tol = round(est.tolerance, 4)
                leaf[var] = [float(f'{est.median:.6g}'), -tol, tol, samples.unit]
    return Baseline(refs, not_asserted, left_out, measured)


def references(reports: list, floor: float = TOLERANCE_FLOOR, tests: set | None = None) -> dict:
    """Reference data of ``reports``: the tests' entries and, where a metric
    needs more than the cap, a `$not_asserted` section."""
    b = build(reports, floor, tests)
    return {**b.references, **({NOT_ASSERTED: b.not_asserted} if b.not_asserted else {})}


def suite_commit() -> str:
    if PROJECT_ROOT is None:
        return f'unknown (installed hpcnet {metadata.version("hpcnet")}, not a git checkout)'
    try:
        res = subprocess.run(['git', '-C', str(PROJECT_ROOT), 'rev-parse', 'HEAD'], text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10)
    except OSError as err:
        return f'unknown (git: {err.strerror})'
    return res.stdout.strip() if res.returncode == 0 else 'unknown (not a git checkout)'


def provenance(reports: list, floor: float = TOLERANCE_FLOOR, measured: Baseline | None = None) \
        -> dict:
    """What produced a baseline: when, where, with what; which entries it
    measured, the outliers it left out and the metrics it did not assert."""
    b = measured or build(reports, floor)
    cases = list(judged_cases(reports))
    by_env: dict = {}
    for tc in cases:
        env = by_env.setdefault(tc['environ'], {'mpi_library': set(), 'transport': set()})
        for key in ('mpi_library', 'transport'):
            if tc.get(key) and tc[key] != 'none':
                env[key].add(tc[key])
    rates = sorted({tc['link_rate_bps'] for tc in cases if tc.get('link_rate_bps')})
    sessions = [_session_of(r, i) for i, r in enumerate(reports)]
    out = {
        'date': datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'),
        'sessions': sorted(set(sessions)),
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
        'suite_commit': suite_commit(),
        'tolerance': (f'max({floor:g}, k(n) x robust CV of the samples, {K_SESSIONS:g} x robust CV '
                      f'of the session medians, {WORST_MARGIN:g} x largest kept deviation); '
                      f'k(n) = t(n-1, {1 - PREDICTION_ALPHA / 2:g}) x sqrt(1 + 1/n); above '
                      f'{TOLERANCE_CAP:g}: not asserted; outliers: |x - median| > {OUTLIER_Z:g} x '
                      f'1.4826 MAD'),
        'updated': {cls: {'$index': index, 'cases': [entry_path(keys[:-1], keys[-1])
                                                     for keys in cases_]}
                    for cls, (index, cases_) in sorted(b.measured.items())},
        'left_out': b.left_out,
        'not_asserted': sum(len(v) - ('$index' in v) for v in b.not_asserted.values()),
    }
    if len(set(sessions)) < 2:
        out['note'] = ('one session: the drift between sessions is not measured (the per-run '
                       'spread stands for it); a baseline of several sessions covers it')
    return out


def document(reports: list, floor: float = TOLERANCE_FLOOR, tests: set | None = None) -> dict:
    """A whole reference file: provenance first, then the references, then
    the metrics not asserted; {} when nothing was measured."""
    b = build(reports, floor, tests)
    if not b.measured:
        return {}
    return {PROVENANCE: provenance(reports, floor, b), **b.references,
            **({NOT_ASSERTED: b.not_asserted} if b.not_asserted else {})}


_SPECIAL = (PROVENANCE, NOT_ASSERTED)


def _leaves(node: dict, depth: int, keys: tuple = ()):
    """(index keys, variable, reference) of a test's entries, ``depth`` index levels."""
    if depth == 0:
        for var, ref in node.items():
            yield keys, var, ref
        return
    for k, sub in node.items():
        if isinstance(sub, dict):
            yield from _leaves(sub, depth - 1, (*keys, k))


def _depth(node: dict) -> int:
    return len(node['$index']) if '$index' in node else 1


def _put(node: dict, keys: tuple, var: str, ref) -> None:
    for k in keys:
        node = node.setdefault(k, {})
    node[var] = ref


def _drop(node: dict, keys: tuple, var: str) -> None:
    path = [node]
    for k in keys:
        path.append(path[-1][k])
    del path[-1][var]
    for parent, k in zip(reversed(path[:-1]), reversed(keys)):
        if parent[k]:
            break
        del parent[k]


def _unliteral(pattern: str) -> str:
    """The path a _literal() pattern matches."""
    return re.sub(r'\\(.)', r'\1', str(pattern))


def merge(existing: dict, new: dict) -> dict:
    """``new`` (a document()) put into ``existing`` (a reference file as
    loaded): the entries (metrics) ``new`` measured are replaced, every other one is
    kept: other tests, other partitions and environments, their
    `$not_asserted` entries, and a site's own `$not_asserted` reasons for
    the measured ones (a site's decision stands; a baseline's own spread
    reasons are renewed).  A test whose ``$index`` differs is replaced
    wholly.  The provenance is the new block, with what was kept and
    replaced, and the earlier blocks under 'earlier', each listing only the
    cases whose entries still come from it."""
    if not existing:
        return new
    if not new:
        return existing
    prov = dict(new.get(PROVENANCE) or {})
    updated = prov.get('updated') or {}
    old_na = existing.get(NOT_ASSERTED) or {}
    new_na = new.get(NOT_ASSERTED) or {}
    out: dict = {PROVENANCE: prov}
    not_asserted: dict = {}
    kept: dict = {}
    replaced: dict = {}
    tests = [t for t in existing if t not in _SPECIAL]
    tests += [t for t in new if t not in _SPECIAL and t not in tests]
    tests += [t for t in (*updated, *old_na) if t not in tests]
    for test in tests:
        old, nw = existing.get(test), new.get(test)
        site_na = {p: r for p, r in (old_na.get(test) or {}).items()
                   if not str(r).startswith(SPREAD_REASON)}
        if test not in updated:
            if old is not None:
                out[test] = old
                kept[test] = 'all entries'
            if test in old_na:
                not_asserted[test] = dict(old_na[test])
            continue
        index = updated[test]['$index']
        if old is not None and list(old.get('$index') or ['$partition']) != list(index):
            replaced[test] = (f"$index {old.get('$index') or '[$partition]'} -> {index}: every "
                              f"entry of the test is this baseline's")
            old = None
        na = dict(site_na)
        new_entries = {'/'.join(map(str, (*keys, var))) for keys, var, _ in _leaves(
            {k: v for k, v in (nw or {}).items() if k != '$index'}, len(index))}
        new_entries |= {_unliteral(p) for p in new_na.get(test) or {}}
        if old is not None:
            merged = {'$index': list(index)} if '$index' in old else {}
            n_kept = 0
            for keys, var, ref in _leaves({k: v for k, v in old.items() if k != '$index'},
                                          _depth(old)):
                if '/'.join(map(str, (*keys, var))) not in new_entries:
                    _put(merged, keys, var, ref)
                    n_kept += 1
            for p, r in (old_na.get(test) or {}).items():
                if str(r).startswith(SPREAD_REASON) and _unliteral(p) not in new_entries:
                    na[p] = r
            if n_kept:
                kept[test] = f'{n_kept} entries'
        else:
            merged = {'$index': list(index)}
        for keys, var, ref in _leaves({k: v for k, v in (nw or {}).items() if k != '$index'},
                                      len(index)):
            _put(merged, keys, var, ref)
        for p, r in (new_na.get(test) or {}).items():
            if not any(re.fullmatch(sp, _unliteral(p)) for sp in site_na):
                na[p] = r
        if len(merged) > ('$index' in merged):
            out[test] = merged
        if na:
            not_asserted[test] = na
    if kept:
        prov['kept'] = kept
    if replaced:
        prov['replaced'] = replaced
    earlier = _earlier(existing.get(PROVENANCE), updated, replaced)
    if earlier:
        prov['earlier'] = earlier
    if not_asserted:
        out[NOT_ASSERTED] = not_asserted
    return out


def _earlier(old: dict | None, updated: dict, replaced: dict) -> list:
    """The provenance blocks of ``old`` (a block and its 'earlier' list),
    without the cases now updated; a block with none left is dropped."""
    if not isinstance(old, dict):
        return []
    blocks = [{k: v for k, v in old.items() if k != 'earlier'}, *(old.get('earlier') or [])]
    out = []
    for block in blocks:
        if 'updated' not in block:          # written by hand or before per-case provenance
            out.append(block)
            continue
        left = {}
        for test, info in block['updated'].items():
            if test in replaced:
                continue
            now = set((updated.get(test) or {}).get('cases') or [])
            cases = [c for c in info.get('cases', []) if c not in now]
            if cases:
                left[test] = {**info, 'cases': cases}
        if left:
            out.append({**block, 'updated': left})
    return out


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
