"""`hpcnet compare BEFORE AFTER`: did anything get worse, where, and why.

Each side is one or more stored sessions, selected as ReFrame selects them
(a session UUID, a time period such as ``now-1d:now``, any query
``reframe --describe-stored-sessions`` takes), the word ``baseline`` (the
latest session `hpcnet baseline` stored for the system the other side ran
on), or a JSON run report file. Per test x partition x environment x metric,
the samples of each side (every passed repeat) are compared by
hpcnet.acceptance.statcompare; beside every regression stands what changed between the
sides (MPI library, transport proved, nodes, link rate, link errors).

A comparison cannot be fooled: the sides may not share a session; a time
period leaves out baseline sessions unless asked; environments renamed by an
upgrade are paired by partition, MPI family and compiler family where that
is unambiguous (``--pair OLD=NEW`` otherwise); a metric measured before and
missing after is a failure; a NaN or infinite sample is an error naming its
session and metric. The outcome's exit code follows hpcnet.exitcodes.
"""
from __future__ import annotations

import json
import math
import os
import re
import statistics
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from hpcnet import metrics
from hpcnet.acceptance import statcompare
from hpcnet.acceptance.baseline import BASELINE_TAG, measured_cases
from hpcnet.acceptance.casevalues import recorded_values
from hpcnet.acceptance.references import Basis
from hpcnet.constants import CONFIG_DIR, HOST_OVERLOADED
from hpcnet.paths import reframe_executable
from hpcnet.exitcodes import Exit

#: Practical threshold: a shift smaller than this is not a change a site acts on.
THRESHOLD = 0.03
#: Significance level of the one-sided rank test.
ALPHA = 0.05
#: The word that names the system's latest baseline as a side.
BASELINE = 'baseline'
#: A period that holds every stored session (ReFrame's period syntax).
ALL_TIME = 'now-3650d:now'
_UUID = re.compile(r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}')


class CompareError(ValueError):
    """A side that selects nothing, or cannot be read, or sides that cannot
    be compared: a usage error (exit 2)."""


@dataclass(frozen=True)
class Side:
    """One side of a comparison: the reports it is made of."""
    spec: str
    reports: list

    @property
    def sessions(self) -> list:
        return [r.get('session_info', {}).get('uuid', '?') for r in self.reports]

    @property
    def systems(self) -> set:
        return {tc['system'] for tc in measured_cases(self.reports)}


def stored_sessions(query: str, db: Path | None = None) -> list:
    """The stored sessions ``query`` selects, as ReFrame's storage gives them
    (`reframe --describe-stored-sessions`), from its configured results
    database or from ``db`` (ReFrame's RFM_SQLITE_DB_FILE)."""
    env = {**os.environ, 'RFM_SQLITE_DB_FILE': str(db)} if db is not None else None
    res = subprocess.run([reframe_executable(), '-C', str(CONFIG_DIR / 'settings.py'),
                          '--describe-stored-sessions', query], text=True, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if res.returncode != 0:
        raise CompareError(f'{query}: reframe --describe-stored-sessions failed: '
                           f'{(res.stderr or res.stdout).strip()[-500:]}')
    try:
        return json.loads(res.stdout)
    except ValueError as err:
        raise CompareError(f'{query}: reframe printed no session JSON ({err})') from None


def is_baseline(report: dict) -> bool:
    """A session `hpcnet baseline` stored (ReFrame keeps --session-extras in
    the session's own information)."""
    return BASELINE_TAG in report.get('session_info', {})


def latest_baseline(system: str | None, reports: list | None = None) -> list:
    """The sessions of the latest baseline of ``system`` (of any system when
    None and only one system has baselines), among ``reports`` or every
    stored session. `hpcnet baseline` tags each of its K sessions with one
    baseline id; a baseline is all the sessions of its id."""
    tagged = [s for s in (reports if reports is not None else stored_sessions(ALL_TIME))
              if is_baseline(s)]
    if not tagged:
        raise CompareError(f'{BASELINE}: no stored session was made by `hpcnet baseline` '
                           '(valid: a session UUID, a time period such as now-1d:now, a report file)')
    by_system: dict = {}
    for s in tagged:
        for name in Side(BASELINE, [s]).systems:
            by_system.setdefault(name, []).append(s)
    if system is None:
        if len(by_system) != 1:
            raise CompareError(f'{BASELINE}: baselines exist for systems {", ".join(sorted(by_system))}; '
                               'say which with --system NAME')
        system = next(iter(by_system))
    if system not in by_system:
        raise CompareError(f'{BASELINE}: no baseline of system {system!r} (baselines exist for: '
                           f'{", ".join(sorted(by_system)) or "none"}); make one with '
                           f'`hpcnet baseline --system {system}`')
    def start(s):
        return s['session_info'].get('time_start_unix', 0)
    latest = max(by_system[system], key=start)
    baseline_id = latest['session_info'][BASELINE_TAG]
    return sorted((s for s in by_system[system] if s['session_info'][BASELINE_TAG] == baseline_id),
                  key=start)


def load_side(spec: str, *, system: str | None = None, include_baselines: bool = False) -> Side:
    """The reports a side spec names (module docstring). A time period or
    query leaves out baseline sessions unless ``include_baselines``: a
    baseline compared with a period that holds it compares it with itself."""
    path = Path(spec)
    if spec.endswith('.json') or path.is_file():
        try:
            return Side(spec, [json.loads(path.read_text())])
        except (OSError, ValueError) as err:
            raise CompareError(f'{spec}: not a readable ReFrame JSON report ({err})') from None
    if spec == BASELINE:
        return Side(spec, latest_baseline(system))
    reports = stored_sessions(spec)
    if not _UUID.fullmatch(spec) and not include_baselines:
        reports = [r for r in reports if not is_baseline(r)]
    if not reports:
        raise CompareError(f'{spec}: selects no stored session'
                           + ('' if include_baselines else ' other than baselines '
                              '(--include-baselines counts those)')
                           + ' (see reframe --list-stored-sessions)')
    return Side(spec, reports)


def load_sides(before: str, after: str, *, system: str | None = None,
               include_baselines: bool = False) -> tuple:
    """Both sides; ``baseline`` on one side is the baseline of the system
    the other side ran on. Sides that share a session are refused."""
    kw = {'include_baselines': include_baselines}
    if before == BASELINE and after != BASELINE:
        after_side = load_side(after, **kw)
        before_side = load_side(before, system=system or _one_system(after_side), **kw)
    else:
        before_side = load_side(before, system=system, **kw)
        after_side = load_side(after, system=system or _one_system(before_side), **kw)
    shared = sorted(set(before_side.sessions) & set(after_side.sessions))
    if shared:
        raise CompareError(f'{before} and {after} share session(s) {", ".join(shared)}: a '
                           'session compared with itself proves nothing; choose sides that do '
                           'not overlap')
    return before_side, after_side


def _one_system(side: Side) -> str | None:
    systems = side.systems
    return next(iter(systems)) if len(systems) == 1 else None


def _case_key(tc: dict) -> tuple:
    return (tc['name'].split(' /')[0], f'{tc["system"]}:{tc["partition"]}', tc['environ'])


@dataclass(frozen=True)
class Samples:
    """The samples of a side: {(test, partition, environment, metric): (unit,
    [values])}, and per (partition, environment) what pairs it across an
    upgrade: (MPI family, compiler family)."""
    values: dict
    families: dict
    #: The same of the cases a testbed host was too busy to judge (their
    #: calibration fell below the wire): they measured the host, not the
    #: link, so they are kept out of every comparison.
    overloaded: dict = field(default_factory=dict)

    def keys(self) -> set:
        """Every metric the side measured, fairly or not."""
        return set(self.values) | set(self.overloaded)


def compiler_family(environ: str) -> str:
    """The compiler an environment name starts with, without its version
    ('gcc12-openmpi4' -> 'gcc')."""
    match = re.match(r'[A-Za-z]+', environ)
    return match.group(0).lower() if match else environ


def samples(side: Side) -> Samples:
    """Every passed sample of a side, values kept but not asserted included
    (those of a case the host was too busy to judge apart); a sample that
    is not a finite number is an error naming it."""
    values: dict = {}
    overloaded: dict = {}
    families: dict = {}
    for report in side.reports:
        session = report.get('session_info', {}).get('uuid', side.spec)
        # A case that passed only on a known-issue retry has its figures there.
        retried = [tc for tc in report.get('hpcnet_retried') or [] if tc.get('result') == 'pass']
        for tc in [*measured_cases([report]), *retried]:
            key = _case_key(tc)
            families[key[1:]] = (tc.get('mpi_family') or '?', compiler_family(tc['environ']))
            for var, value, unit, _ in recorded_values(tc):
                if not math.isfinite(value):
                    raise CompareError(f'{side.spec}: session {session}: {key[0]} @{key[1]} '
                                       f'+{key[2]}: {var} is {value}: not a measurement '
                                       '(a benchmark figure must be a finite number)')
                into = overloaded if tc.get('judgement_basis') == Basis.HOST_OVERLOADED else values
                into.setdefault((*key, var), (unit, []))[1].append(value)
    return Samples(values, families, overloaded)


def pair_environments(before: Samples, after: Samples, explicit: dict | None = None) -> dict:
    """{(partition, old environment): new environment} for the environments
    an upgrade renamed: ``explicit`` (OLD -> NEW, on every partition with
    both), then each old environment whose MPI family and compiler family
    one new environment of the same partition shares, and no other old one
    does. An OLD or NEW of ``explicit`` that no side has is an error."""
    explicit = explicit or {}
    old_envs = {k[1:3] for k in before.keys()}
    new_envs = {k[1:3] for k in after.keys()}
    for old, new in explicit.items():
        if not any(env == old for _, env in old_envs):
            raise CompareError(f'--pair {old}={new}: {old} is not an environment of the before side '
                               f'(valid: {", ".join(sorted({e for _, e in old_envs}))})')
        if not any(env == new for _, env in new_envs):
            raise CompareError(f'--pair {old}={new}: {new} is not an environment of the after side '
                               f'(valid: {", ".join(sorted({e for _, e in new_envs}))})')
    only_old, only_new = old_envs - new_envs, new_envs - old_envs
    pairs = {}
    for partition, old in sorted(only_old):
        if old in explicit and (partition, explicit[old]) in only_new:
            pairs[(partition, old)] = explicit[old]
    taken = {(p, new) for (p, _), new in pairs.items()}
    free_old = [k for k in sorted(only_old) if k not in pairs]
    free_new = [k for k in sorted(only_new) if k not in taken]
    for partition, old in free_old:
        sig = before.families.get((partition, old))
        matches = [env for p, env in free_new if p == partition and after.families.get((p, env)) == sig]
        rivals = [o for p, o in free_old if p == partition and before.families.get((p, o)) == sig]
        if len(matches) == 1 and rivals == [old]:
            pairs[(partition, old)] = matches[0]
    return pairs


def _link_errors(tc: dict) -> int:
    return sum(int(lc.get(c) or 0) for lc in tc.get('link_counters') or []
               for c in ('tx_errors', 'rx_errors', 'tx_dropped', 'rx_dropped'))


def _shaped(tc: dict) -> list:
    """The rates of the tc shapers a calibrated case found on its nodes
    ('900 Mbit/s', 'unshaped'), without the hosts: a run on other nodes
    of the same links is no change."""
    shaped = (tc.get('link_calibration') or {}).get('shaped_bps') or {}
    return sorted({f'{rate / 1e6:g} Mbit/s' if rate else 'unshaped' for rate in shaped.values()})


def provenance(side: Side) -> dict:
    """{(test, partition, environment): {what: sorted values}} of a side."""
    out: dict = {}
    for tc in measured_cases(side.reports):
        facts = out.setdefault(_case_key(tc), {'MPI library': set(), 'transport': set(),
                                                'nodes': set(), 'link rate': set(),
                                                'link shaped (tc)': set(),
                                                'link errors+drops': set()})
        for what, value in (('MPI library', tc.get('mpi_library')),
                            ('transport', tc.get('transport')),
                            ('nodes', ','.join(tc.get('job_nodelist') or []) or None),
                            ('link rate', tc.get('link_rate_bps')),
                            ('link shaped (tc)', ', '.join(_shaped(tc)) or None),
                            ('link errors+drops', _link_errors(tc))):
            if value not in (None, '', 'none'):
                facts[what].add(str(value))
    return {k: {w: sorted(v) for w, v in facts.items()} for k, facts in out.items()}


def what_changed(before: dict, after: dict) -> list:
    """'transport: X -> Y' for every fact that differs between two sides."""
    return [f'{what}: {"; ".join(before.get(what, [])) or "-"} -> '
            f'{"; ".join(after.get(what, [])) or "-"}'
            for what in sorted(set(before) | set(after))
            if before.get(what) != after.get(what)
            and not (what == 'link errors+drops' and after.get(what) in ([], ['0']))]


@dataclass(frozen=True)
class Row:
    test: str
    partition: str
    environ: str          #: 'old -> new' where an upgrade renamed the environment
    metric: str
    unit: str
    result: statcompare.Comparison
    changed: tuple


@dataclass
class Outcome:
    """What a comparison found, and its exit code."""
    rows: list
    #: Metrics measured before and missing after (the case crashed, or was
    #: not run): failures, since a broken case must not pass by vanishing.
    missing_after: list = field(default_factory=list)
    #: Metrics only the after side has: new, so not decided.
    only_after: list = field(default_factory=list)
    #: {(partition, old environment): new environment} paired across an upgrade.
    pairs: dict = field(default_factory=dict)

    def count(self, verdict: str) -> int:
        return sum(r.result.verdict == verdict for r in self.rows)

    @property
    def exit_code(self) -> Exit:
        if self.count(statcompare.Verdict.REGRESSED) or self.missing_after:
            return Exit.FAILED
        if (not self.rows or self.only_after
                or self.count(statcompare.Verdict.INCONCLUSIVE)):
            return Exit.UNDECIDED
        return Exit.OK

    def undecided(self) -> list:
        return [r for r in self.rows if r.result.verdict == statcompare.Verdict.INCONCLUSIVE]

    def more_samples(self) -> int:
        """How many more samples per side would decide every undecided metric
        (the largest estimate among them), 0 when all are decided."""
        return max((r.result.more_samples or 0 for r in self.undecided()), default=0)

    def samples_needed(self) -> int:
        """Samples the after side would need in all (what it has plus
        more_samples), for `hpcnet run --repeats`."""
        return max((r.result.n_after + (r.result.more_samples or 0) for r in self.undecided()),
                   default=0)

    def summary(self) -> str:
        """One line: the counts, then the verdict in the contract's words."""
        v = statcompare.Verdict
        parts = [f'{self.count(v.REGRESSED)} regressed', f'{len(self.missing_after)} missing after',
                 f'{self.count(v.INCONCLUSIVE)} not decided', f'{len(self.only_after)} only after',
                 f'{self.count(v.UNCHANGED)} unchanged', f'{self.count(v.IMPROVED)} improved']
        return ', '.join(parts)


def _not_compared(before: list, after: list, why: str,
                  more_samples: int | None = None) -> statcompare.Comparison:
    return statcompare.Comparison(
        verdict=statcompare.Verdict.INCONCLUSIVE, ratio=float('nan'), ci_low=float('nan'),
        ci_high=float('nan'), p_value=float('nan'), n_before=len(before), n_after=len(after),
        reason=f'not compared: {why}', more_samples=more_samples)


def _compare_exact(before: list, after: list) -> statcompare.Comparison:
    '''A configuration value (an MTU): any change of it is a regression.'''
    same = sorted(set(before)) == sorted(set(after))
    median_before, median_after = statistics.median(before), statistics.median(after)
    ratio = median_after / median_before if median_before else float('nan')
    return statcompare.Comparison(
        verdict=statcompare.Verdict.UNCHANGED if same else statcompare.Verdict.REGRESSED,
        ratio=ratio, ci_low=ratio, ci_high=ratio, p_value=float('nan'),
        n_before=len(before), n_after=len(after),
        reason=f'configured value {", ".join(f"{v:g}" for v in sorted(set(before)))} -> '
               f'{", ".join(f"{v:g}" for v in sorted(set(after)))}', more_samples=None)


def _compare_counts(before: list, after: list, higher_better: bool) -> statcompare.Comparison:
    '''Counts that are 0 when healthy (link errors, outlier nodes), and any
    side with a zero: a ratio and a rank test mean nothing there; any change
    of the median is the verdict, and one error where there were none is a
    regression.  Never below statcompare.MIN_SAMPLES on a side: a median of
    fewer is not a level.'''
    short = statcompare.MIN_SAMPLES - min(len(before), len(after))
    if short > 0:
        return _not_compared(before, after, f'{len(before)}+{len(after)} samples: fewer than '
                             f'{statcompare.MIN_SAMPLES} on a side cannot be judged', short)
    median_before, median_after = statistics.median(before), statistics.median(after)
    if median_after == median_before:
        verdict = statcompare.Verdict.UNCHANGED
    elif (median_after > median_before) == higher_better:
        verdict = statcompare.Verdict.IMPROVED
    else:
        verdict = statcompare.Verdict.REGRESSED
    ratio = median_after / median_before if median_before else (1.0 if not median_after
                                                                 else float('inf'))
    return statcompare.Comparison(
        verdict=verdict, ratio=ratio, ci_low=ratio, ci_high=ratio, p_value=float('nan'),
        n_before=len(before), n_after=len(after),
        reason=f'median count {median_before:g} -> {median_after:g}', more_samples=None)


def compare(before: Side, after: Side, alpha: float = ALPHA, threshold: float = THRESHOLD,
            pairs: dict | None = None) -> Outcome:
    """Every metric both sides have, judged; the environments an upgrade
    renamed paired first (pair_environments, ``pairs`` = --pair OLD=NEW)."""
    s_before, s_after = samples(before), samples(after)
    renamed = pair_environments(s_before, s_after, pairs)
    measured_before = s_before.keys()

    def as_before(after_values: dict) -> dict:
        '''``after_values`` keyed by the environments' names before the upgrade.'''
        out = dict(after_values)
        for test, partition, environ, metric in measured_before:
            new = renamed.get((partition, environ))
            if new is not None and (test, partition, new, metric) in out:
                out[test, partition, environ, metric] = out.pop((test, partition, new, metric))
        return out
    values_after, overloaded_after = as_before(s_after.values), as_before(s_after.overloaded)
    measured_after = set(values_after) | set(overloaded_after)
    p_before, p_after = provenance(before), provenance(after)
    rows = []
    for key in sorted(measured_before & measured_after):
        new = renamed.get(key[1:3])
        after_case = (key[0], key[1], new or key[2])
        label = (*key[:2], f'{key[2]} -> {new}' if new else key[2], key[3])
        changed = tuple(what_changed(p_before.get(key[:3], {}), p_after.get(after_case, {})))
        if key in s_before.values and key in values_after:
            unit = s_before.values[key][0]
            result = _judge(key[0], key[3], s_before.values[key], values_after[key], alpha,
                            threshold)
        else:
            unit, values_before = s_before.values.get(key) or s_before.overloaded[key]
            values_now = (values_after.get(key) or overloaded_after[key])[1]
            result = _not_fairly_measured(values_before, values_now,
                                          fair_before=key in s_before.values,
                                          fair_after=key in values_after)
        rows.append(Row(*label, unit, result, changed))
    return Outcome(rows, sorted(measured_before - measured_after),
                   sorted(measured_after - measured_before), renamed)


def _not_fairly_measured(before: list, after: list, fair_before: bool,
                         fair_after: bool) -> statcompare.Comparison:
    '''A metric a side measured only while the testbed host was too busy
    to emulate the wire: not decided; where only the after side lacks fair
    samples, samples of a quieter moment decide it.'''
    side = 'before' if fair_after else 'after' if fair_before else 'before and after'
    return _not_compared(before, after, f'{HOST_OVERLOADED} whenever it was measured {side} (its '
                         'iperf3 calibration below the wire): those samples measure the host, not '
                         'the link', statcompare.MIN_SAMPLES if fair_before else None)


def _in_unit(side: str, unit: str, values: list, entry: metrics.Metric) -> list:
    """``values`` (in ``unit``) in the catalogue's unit of ``entry``;
    metrics.UnitError naming the side where they cannot be."""
    try:
        factor = metrics.conversion(unit, entry.unit)
    except metrics.UnitError as err:
        raise metrics.UnitError(f"the {side} side's unit {err}") from None
    return [v * factor for v in values]


def _judge(test: str, metric: str, before_side: tuple, after_side: tuple, alpha: float,
           threshold: float) -> statcompare.Comparison:
    """One metric judged: its direction and unit from the metric catalogue
    (never from a unit's spelling), each side's (unit, values) converted
    to the catalogue's unit first."""
    (unit_before, before), (unit_after, after) = before_side, after_side
    entry = metrics.lookup(test, metric)
    if entry is None:
        return _not_compared(before, after, metrics.not_in_catalogue(test, metric))
    try:
        before = _in_unit('before', unit_before, before, entry)
        after = _in_unit('after', unit_after, after, entry)
    except metrics.UnitError as err:
        return _not_compared(before, after, str(err))
    if entry.better == metrics.Better.NONE:
        return _compare_exact(before, after)
    higher_better = entry.better == metrics.Better.HIGHER
    if min(before + after) <= 0:
        return _compare_counts(before, after, higher_better)
    return statcompare.compare_samples(before, after, higher_better=higher_better,
                                       alpha=alpha, threshold=threshold)


def table(rows: list) -> str:
    """The verdict table, regressions first; what changed under each."""
    order = {statcompare.Verdict.REGRESSED: 0, statcompare.Verdict.INCONCLUSIVE: 1,
             statcompare.Verdict.IMPROVED: 2, statcompare.Verdict.UNCHANGED: 3}
    lines = [f'{"verdict":12} {"ratio":>7} {"n":>5}  {"test @ partition + environment":60} metric']
    for row in sorted(rows, key=lambda r: (order[r.result.verdict], r.test, r.partition,
                                           r.environ, r.metric)):
        c = row.result
        lines.append(f'{c.verdict.upper():12} {c.ratio:7.3f} {c.n_before:>2}+{c.n_after:<2}  '
                     f'{row.test + " @" + row.partition + " +" + row.environ:60} '
                     f'{row.metric} [{row.unit}]')
        if c.verdict != statcompare.Verdict.UNCHANGED:
            lines.append(f'{"":28}{c.reason}')
        if c.verdict == statcompare.Verdict.REGRESSED and row.changed:
            lines.append(f'{"":28}what changed: ' + ' | '.join(row.changed))
    return '\n'.join(lines)


def _keys_line(what: str, keys: list) -> str:
    shown = ', '.join(f'{k[3]} of {k[0]} @{k[1]} +{k[2]}' for k in keys[:10])
    return f'{what} ({len(keys)}): {shown}' + (' ...' if len(keys) > 10 else '')


def text(outcome: Outcome) -> str:
    """What `hpcnet compare` prints: the pairing, the verdict table, what is
    missing after (failures) and what only the after side has."""
    lines = [f'environment renamed by the upgrade, paired: {p} {old} -> {new}'
             for (p, old), new in sorted(outcome.pairs.items())]
    lines.append(table(outcome.rows))
    if outcome.missing_after:
        lines.append('FAILED: ' + _keys_line('measured before, missing after', outcome.missing_after)
                     + ' (the case failed or did not run; an environment renamed ambiguously '
                       'pairs with --pair OLD=NEW)')
    if outcome.only_after:
        lines.append('not decided: ' + _keys_line('only after', outcome.only_after))
    return '\n'.join(lines)
