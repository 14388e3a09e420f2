"""Baselines: references made from repeated good runs, with their provenance.

A baseline is made of one or more ReFrame run reports (sessions); each
report's ``runs`` are its ``--reruns`` repeats.  Per metric of a case key:

1-2. Outliers and tolerance: hpcnet.acceptance.references.spread states the rule and
   its constants.

3. One side.  A reference bounds the worse side only, as the metric
   catalogue (hpcnet.metrics) says: a run is asked whether it got worse, and
   a better value is shown by ``hpcnet compare``, not failed.  The file's
   ``$unbounded`` section says so for every case the baseline wrote.  A
   metric without a better side (an MTU), or not catalogued, is bounded on
   both.

4. Cap.  A metric needing a tolerance above CAP is not given a reference
   that would accept nearly anything: it goes to the file's `$not_asserted`
   section, "too noisy to judge" with its spread as the reason, so it is
   recorded and compared (hpcnet compare) but never fails a run; and it is
   a finding: `hpcnet baseline` names it and exits 3 (not decided), as
   `hpcnet run` does while the file leaves it so (hpcnet.session.verdict).  CAP (0.4) stays clear of the
   validation's lower bound of -0.5 (hpcnet.acceptance.references.references.MIN_LOWER).

5. A case judged over iperf3 on its own link (its ``*_over_iperf3``
   ratios: nodes that share one host's cores) asserts its ratios and its
   scale-free metrics (counts, ratios within the run); the figures that
   scale with the host (absolute MB/s, latencies: hpcnet.metrics.HOST_SCALED_UNITS)
   go to `$not_asserted`, as compare shows them
   (hpcnet.acceptance.comparison.metricjudge.calibrated_counterpart).

A zero median (counts such as errors) has absolute thresholds in ReFrame:
max(FLOOR, WORST_MARGIN x largest kept deviation), no cap.

Only passed cases count, and within them no variable whose result is
``xfail``, nor one the existing file's site `$not_asserted` declares: the
site's reason stands, and that metric's spread decides no group's prior
or modes (collect()).  hpcnet.acceptance.references.refmerge puts a baseline of a selection
into an existing file, replacing only what it measured.
"""
from __future__ import annotations

import dataclasses
import datetime
import math
import os
import platform
import re
import subprocess
from dataclasses import dataclass, field
from importlib import metadata

from hpcnet.metrics import CALIBRATED_SUFFIX, counterpart, higher_is_better, ratios_over_iperf3
from hpcnet.acceptance.references.casevalues import perf_samples
from hpcnet.paths import PROJECT_ROOT
from hpcnet.variables import REFERENCE_DIR_ENV
from hpcnet.acceptance.references.references import (NOT_ASSERTED, OVER_IPERF3_REASON, PROVENANCE,
                                                     SPREAD_REASON, UNBOUNDED, per_environment,
                                                     reference_dir, reference_file,
                                                     written_by_baseline)
from hpcnet.acceptance.references.spread import (EXCURSION_LIMIT, OUTLIER_Z, QUANTA, RUN_ALPHA,
                                                 TOLERANCE_CAP, TOLERANCE_FLOOR, WORST_MARGIN,
                                                 estimate, fit_prior, outliers, own_spread,
                                                 screened_samples)
from hpcnet.acceptance.references.outlying_sessions import TOO_NOISY

#: Session extras key that tags a stored session as a baseline.
BASELINE_TAG = 'hpcnet_baseline'
#: Session extras `hpcnet run` stores with every session (hpcnet.session.runner): what
#: no case records, read back by `hpcnet history`.
SUITE_COMMIT_TAG = 'hpcnet_suite_commit'
OS_KERNEL_TAG = 'hpcnet_os_kernel'
#: The `$unbounded` reason of every case a baseline wrote (refmerge.merge() replaces it
#: for the cases it measures; a site's own reasons are kept).
ONE_SIDED_REASON = ('baseline: only the worse side is bounded (a better value is not a failure; '
                    'hpcnet compare shows it)')


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


def _session_of(report: dict, number: int) -> str:
    return (report.get('session_info') or {}).get('uuid') or f'report {number + 1}'


def judged_cases(reports: list):
    """Every non-fixture test case of every run of ``reports`` that passed."""
    for _, _, tc in _judged_with_origin(reports):
        yield tc


def _judged_with_origin(reports: list):
    """(session, run number, case) of every passed non-fixture case, of
    every repeat: one that passed only when run again for a known issue has
    its figures in ``hpcnet_retried`` (with its repeat's number)."""
    for number, report in enumerate(reports):
        session = _session_of(report, number)
        for run in report.get('runs', []):
            for tc in run.get('testcases', []):
                if tc.get('fixture') or tc.get('result') != 'pass':
                    continue
                yield session, run.get('run_index', 0), tc
        for tc in report.get('hpcnet_retried') or []:
            if not tc.get('fixture') and tc.get('result') == 'pass':
                yield session, int(tc.get('repeat') or len(report.get('runs', [])) or 1) - 1, tc


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


def bounds(tolerance: float, higher: bool | None) -> tuple:
    """(lower, upper) thresholds: the worse side only where the metric has a
    better side, ``higher`` (hpcnet.metrics.higher_is_better(); module docstring, 3)."""
    tol = round(tolerance, 4)
    return (-tol if higher in (True, None) else None, tol if higher in (False, None) else None)


def index_keys(tc: dict) -> tuple:
    """The values of the attributes a case's references are indexed by."""
    index = per_environment(tc.get('reference_index') or ['$partition'])
    special = {'$partition': f'{tc["system"]}:{tc["partition"]}', '$system': tc['system'],
               '$environ': tc['environ']}
    return tuple(index), tuple(special[a] if a in special else str(tc.get(a)) for a in index)


def site_not_asserted(existing: dict) -> dict:
    """{test: {pattern: reason}}: the `$not_asserted` entries a site wrote
    in a reference file (loaded), not those a baseline wrote
    (references.written_by_baseline)."""
    return {test: {p: r for p, r in entries.items()
                   if p != '$index' and not written_by_baseline(r)}
            for test, entries in (existing.get(NOT_ASSERTED) or {}).items()}


def collect(reports: list, tests: set | None = None, declared: dict | None = None) -> dict:
    """{test class: (index, {index values: {variable: MetricSamples}})},
    without the metrics ``declared`` ({test: {pattern: reason}}, a site's
    `$not_asserted`) says are not asserted: the site's reason stands, and
    their spread must not decide the groups' priors and modes."""
    out: dict = {}
    declared = declared or {}
    for session, run, tc in _judged_with_origin(reports):
        cls = tc['name'].split()[0]
        if tests is not None and cls not in tests:
            continue
        index, keys = index_keys(tc)
        by_key = out.setdefault(cls, (index, {}))[1]
        for var, value, unit in perf_samples(tc):
            if any(re.fullmatch(pattern, entry_path(keys, var)) for pattern in declared.get(cls, ())):
                continue
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
    unbounded: dict             #: {test: {case pattern: reason}} of the one-sided entries
    left_out: list              #: [{'metric', 'value', 'session', 'run'}]
    measured: dict              #: {test: (index, [index values tuple, ...])}
    #: [{'metric', 'session', 'median', 'others_median'}]: outlying sessions left out
    left_out_sessions: list = field(default_factory=list)
    #: ['<metric>: <why>']: metrics too noisy to judge (a finding: exit 3)
    too_noisy: list = field(default_factory=list)


def _group_of(cls: str, index: list, keys: tuple, unit: str) -> tuple:
    part = index.index('$partition') if '$partition' in index else None
    return cls, keys[part] if part is not None else '', unit


def priors(collected: dict) -> dict:
    """{(test, partition, unit): Prior or None} from every metric's own spread."""
    spreads: dict = {}
    for cls, (index, by_key) in collected.items():
        for keys, metrics in by_key.items():
            for samples in metrics.values():
                # An outlying session is left out of its group's prior as
                # of its metric: one noisy night must not widen its neighbours.
                values, sessions = screened_samples(samples.values, samples.sessions)
                out = set(outliers(values, TOLERANCE_FLOOR, sessions))
                kept = [i for i in range(len(values)) if i not in out]
                spread = own_spread([values[i] for i in kept], [sessions[i] for i in kept])
                spreads.setdefault(_group_of(cls, index, keys, samples.unit), []).append(spread)
    return {group: fit_prior([s.variance for s in got], [s.dof for s in got])
            for group, got in spreads.items()}


def _estimates(collected: dict, group_priors: dict, floor: float, alpha: float) -> dict:
    return {(cls, keys, var): estimate(samples.values, samples.sessions, floor, samples.runs,
                                       alpha, group_priors.get(_group_of(cls, index, keys,
                                                                         samples.unit)),
                                       higher_is_better(cls, var))
            for cls, (index, by_key) in collected.items()
            for keys, metrics in by_key.items() for var, samples in metrics.items()}


def _with_modes_unasserted(collected: dict, estimates: dict) -> dict:
    """``estimates`` with every metric of a group whose samples fell to a
    slower mode more often than EXCURSION_LIMIT made not asserted, saying
    how often."""
    excursions, samples = {}, {}
    for cls, (index, by_key) in collected.items():
        for keys, metrics in by_key.items():
            for var, got in metrics.items():
                group = _group_of(cls, index, keys, got.unit)
                excursions[group] = excursions.get(group, 0) + estimates[cls, keys, var].excursions
                samples[group] = samples.get(group, 0) + len(got.values)
    out = dict(estimates)
    for (cls, keys, var), est in estimates.items():
        index = collected[cls][0]
        group = _group_of(cls, index, keys, collected[cls][1][keys][var].unit)
        rate = excursions[group] / samples[group]
        if rate > EXCURSION_LIMIT and est.median != 0 and est.asserted:
            out[cls, keys, var] = dataclasses.replace(est, tolerance=math.inf, reason=(
                f'{excursions[group]} of the {samples[group]} samples of {cls} on {group[1]} '
                f'in {group[2]} fell to a slower mode ({rate:.1%}, above '
                f'{EXCURSION_LIMIT:.0%}): the group has modes a clean run visits'))
    return out


def shared_estimates(collected: dict, floor: float = TOLERANCE_FLOOR) -> dict:
    """{(test, keys, variable): Estimate} with RUN_ALPHA shared out over the
    values the baseline asserts (Bonferroni): the fewest shares N whose
    estimates assert at most N values, found by bisection (fewer shares
    widen nothing, so the asserted count falls as N grows)."""
    group_priors = priors(collected)
    total = sum(len(m) for _, by_key in collected.values() for m in by_key.values())

    def at(shares: int) -> tuple:
        found = _with_modes_unasserted(
            collected, _estimates(collected, group_priors, floor, RUN_ALPHA / shares))
        return found, sum(e.asserted for e in found.values())
    low, high = 1, max(total, 1)
    best = at(high)[0]
    while low < high:
        mid = (low + high) // 2
        found, asserted = at(mid)
        if asserted <= mid:
            high, best = mid, found
        else:
            low = mid + 1
    return best


def build(reports: list, floor: float = TOLERANCE_FLOOR, tests: set | None = None,
          declared: dict | None = None) -> Baseline:
    """The references of ``reports`` (ReFrame's external format, ``$index``
    per test) and everything said about them; ``declared``: collect()."""
    refs: dict = {}
    not_asserted: dict = {}
    unbounded: dict = {}
    left_out: list = []
    left_out_sessions: list = []
    too_noisy: list = []
    measured: dict = {}
    collected = collect(reports, tests, declared)
    estimates = shared_estimates(collected, floor)
    for cls, (index, by_key) in sorted(collected.items()):
        measured[cls] = (list(index), sorted(by_key))
        for keys, metrics in sorted(by_key.items()):
            over_iperf3 = ratios_over_iperf3(cls, metrics)
            for var, samples in sorted(metrics.items()):
                est = estimates[cls, keys, var]
                name = f'{cls} {entry_path(keys, var)}'
                left_out += [{'metric': name, 'value': v, 'session': s, 'run': r}
                             for v, s, r in est.left_out]
                if est.left_out_session:
                    session, median, others = est.left_out_session
                    left_out_sessions.append({'metric': name, 'session': session,
                                              'median': float(f'{median:.6g}'),
                                              'others_median': float(f'{others:.6g}')})
                pattern = '/'.join(_literal(k) for k in (*keys, var))
                if over_iperf3 and counterpart(cls, var, over_iperf3) is not None:
                    # As compare judges it (metricjudge.calibrated_counterpart).
                    not_asserted.setdefault(cls, {'$index': list(index)})[pattern] = (
                        f'{OVER_IPERF3_REASON}: the case\'s nodes share one host\'s cores, its '
                        f'*{CALIBRATED_SUFFIX} ratios are asserted; the absolute figures and '
                        'latencies scale with the host: recorded and compared, not asserted')
                    continue
                if not est.asserted:
                    # The index of the patterns' paths: the test may have no
                    # entry of its own that says it.
                    needs = (f'needs +/-{est.tolerance:.0%} ({est.reason}), above the '
                             f'{TOLERANCE_CAP:.0%} cap' if math.isfinite(est.tolerance)
                             else est.reason)
                    not_asserted.setdefault(cls, {'$index': list(index)})[pattern] = (
                        f'{SPREAD_REASON}: {TOO_NOISY}: {needs}: recorded and compared, not '
                        'asserted')
                    too_noisy.append(f'{name}: {needs}')
                    continue
                leaf = refs.setdefault(cls, {'$index': list(index)})
                for k in keys:
                    leaf = leaf.setdefault(k, {})
                lower, upper = bounds(est.tolerance, higher_is_better(cls, var))
                leaf[var] = [float(f'{est.median:.6g}'), lower, upper, samples.unit]
                if lower is None or upper is None:
                    unbounded.setdefault(cls, {})['/'.join(_literal(k) for k in keys) + '/.*'] = \
                        ONE_SIDED_REASON
    return Baseline(refs, not_asserted, unbounded, left_out, measured, left_out_sessions,
                    too_noisy)


def references(reports: list, floor: float = TOLERANCE_FLOOR, tests: set | None = None) -> dict:
    """Reference data of ``reports``: the tests' entries and, where a metric
    needs more than the cap, a `$not_asserted` section."""
    b = build(reports, floor, tests)
    return {**b.references, **({NOT_ASSERTED: b.not_asserted} if b.not_asserted else {}),
            **({UNBOUNDED: b.unbounded} if b.unbounded else {})}


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
    import reframe   # its version alone: the suite's readers start without ReFrame's test pipeline
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
        'tolerance': (f'max({floor:g}, {QUANTA} print steps, {WORST_MARGIN:g} x largest kept '
                      f'deviation, expm1(t(dof, 1 - {RUN_ALPHA:g}/asserted values) x sqrt(1 + 1/m) x s)); '
                      f's: sd of log(session medians), moderated by the metrics of the same test, '
                      f'partition and unit (empirical Bayes, limma squeezeVar); the worse side '
                      f'only; above {TOLERANCE_CAP:g}: not asserted; outliers: |x - median| > '
                      f'{OUTLIER_Z:g} x 1.4826 MAD; a session whose median is more than '
                      f'3.5 modified z-scores (MAD of the session medians) from the others\' '
                      f'is left out, more than one such: not asserted'),
        'updated': {cls: {'$index': index, 'cases': [entry_path(keys[:-1], keys[-1])
                                                     for keys in cases_]}
                    for cls, (index, cases_) in sorted(b.measured.items())},
        'left_out': b.left_out,
        'left_out_sessions': b.left_out_sessions,
        'not_asserted': sum(len(v) - ('$index' in v) for v in b.not_asserted.values()),
        'too_noisy': b.too_noisy,
    }
    if len(set(sessions)) < 2:
        out['note'] = ('one session: the drift between sessions is not measured (the per-run '
                       'spread stands for it); a baseline of several sessions covers it')
    return out


def document(reports: list, floor: float = TOLERANCE_FLOOR, tests: set | None = None,
             declared: dict | None = None) -> dict:
    """A whole reference file: provenance first, then the references, then
    the metrics not asserted; {} when nothing was measured.  ``declared``:
    collect()."""
    b = build(reports, floor, tests, declared)
    if not b.measured:
        return {}
    return {PROVENANCE: provenance(reports, floor, b), **b.references,
            **({NOT_ASSERTED: b.not_asserted} if b.not_asserted else {}),
            **({UNBOUNDED: b.unbounded} if b.unbounded else {})}


def reference_path_for(system: str) -> str:
    """Where `hpcnet baseline` writes: HPCNET_REFERENCE_DIR or reference/."""
    return str(reference_file(system, reference_dir()))


def environment_for_baseline_runs(scratch_refdir: str) -> dict:
    """The runs of a baseline are not judged against the references they
    will replace: ReFrame reads an empty reference directory meanwhile."""
    return {**os.environ, REFERENCE_DIR_ENV: scratch_refdir}
