"""`hpcnet compare BEFORE AFTER`: did anything get worse, where, and why.

Each side is one or more stored sessions, selected as ReFrame selects them
(a session UUID, a time period such as ``now-1d:now``, any query
``reframe --describe-stored-sessions`` takes), the word ``baseline`` (the
sessions the reference file of the system the other side ran on names in
its provenance: the baseline the site accepted by writing it,
hpcnet.acceptance.references.accepted), or a JSON run report file. Per test
x partition x environment x metric, the samples of each side (every passed
repeat) are judged by hpcnet.acceptance.comparison.metricjudge
(statcompare's rule); beside every regression stands what changed between
the sides (MPI library, transport proved, nodes, link rate, link errors).

A comparison cannot be fooled: the sides may not share a session; a time
period leaves out the sessions of `hpcnet baseline` unless asked; environments renamed by an
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

from hpcnet.acceptance.comparison import metricjudge, statcompare, storedsessions
from hpcnet.acceptance.references import accepted
from hpcnet.acceptance.references.baseline import BASELINE_TAG, measured_cases
from hpcnet.acceptance.references.casevalues import recorded_values
from hpcnet.acceptance.references.references import (ReferenceFileError, load_report, withheld,
                                                     withheld_reason)
from hpcnet.constants import CONFIG_DIR
from hpcnet.exitcodes import Exit
from hpcnet.paths import reframe_executable

#: The floor of every metric's tolerance (statcompare.tolerance_of): a shift
#: smaller than this is not a change a site acts on, however steady the metric.
THRESHOLD = 0.03
#: One-sided level of the bounds of each metric's shift.
ALPHA = 0.05
#: The word that names the system's latest baseline as a side.
BASELINE = 'baseline'
#: A period that holds every stored session (ReFrame's period syntax).
ALL_TIME = 'now-3650d:now'


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
    database or from ``db`` (ReFrame's RFM_SQLITE_DB_FILE): a UUID or a
    period read in this process (hpcnet.acceptance.comparison.storedsessions), a
    session filter by ReFrame."""
    try:
        reports = storedsessions.read(query, db)
    except storedsessions.StoredSessionsError as err:
        raise CompareError(str(err)) from None
    if reports is not None:
        return reports
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


def is_baseline_run(report: dict) -> bool:
    """A session `hpcnet baseline` stored (ReFrame keeps --session-extras in
    the session's own information): a candidate, the baseline only while a
    reference file's provenance names it (hpcnet.acceptance.references.accepted)."""
    return BASELINE_TAG in report.get('session_info', {})


def accepted_baseline(system: str | None) -> list:
    """The sessions of the baseline of ``system``: those the provenance of
    its reference file names (hpcnet.acceptance.references.accepted), each fetched by
    its UUID.  A case measured by the sessions of a newer block comes from
    those alone: a merge replaced its references with theirs."""
    try:
        path, blocks = accepted.baseline_sessions(system)
    except accepted.NoAcceptedBaseline as err:
        raise CompareError(str(err)) from None
    found = {uuid: stored_sessions(uuid) for block in blocks for uuid in block}
    missing = [uuid for uuid, reports in found.items() if not reports]
    if missing:
        raise CompareError(f'baseline: {path} names session(s) {", ".join(missing)} that the '
                           'results database no longer holds (RFM_SQLITE_DB_FILE selects it); '
                           f'{accepted.HOW_TO_MAKE}')
    out, newer = [], set()
    for block in blocks:
        reports = [_without_cases(r, newer) for uuid in block for r in found[uuid]]
        newer |= {_case_key(tc) for tc in measured_cases(reports)}
        out += [r for r in reports if any(run.get('testcases') for run in r.get('runs', []))]
    return sorted(out, key=lambda r: r['session_info'].get('time_start_unix', 0))


def _without_cases(report: dict, keys: set) -> dict:
    """``report`` without the cases of ``keys``."""
    if not keys:
        return report
    return {**report, 'runs': [{**run, 'testcases': [tc for tc in run.get('testcases', [])
                                                      if _case_key(tc) not in keys]}
                               for run in report.get('runs', [])]}


def load_side(spec: str, *, system: str | None = None, include_baselines: bool = False) -> Side:
    """The reports a side spec names (module docstring). A time period or
    query leaves out the sessions of `hpcnet baseline` (accepted or
    candidates) unless ``include_baselines``: a baseline compared with a
    period that holds it compares it with itself."""
    path = Path(spec)
    if spec.endswith('.json') or path.is_file():
        try:
            return Side(spec, [load_report(path)])
        except ReferenceFileError as err:
            raise CompareError(str(err)) from None
    if spec == BASELINE:
        return Side(spec, accepted_baseline(system))
    reports = stored_sessions(spec)
    if not accepted.SESSION_UUID.fullmatch(spec) and not include_baselines:
        reports = [r for r in reports if not is_baseline_run(r)]
    if not reports:
        raise CompareError(f'{spec}: selects no stored session'
                           + ('' if include_baselines else ' other than those of '
                              '`hpcnet baseline` (--include-baselines counts those)')
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
    #: The same of the cases whose measurement was withheld (a testbed host
    #: too busy to emulate the wire): not judged by either side, and shown.
    withheld: dict = field(default_factory=dict)
    #: {key: {why withheld ("host busy"): how many samples}}
    why_withheld: dict = field(default_factory=dict)

    def keys(self) -> set:
        """Every metric the side measured, fairly or not."""
        return set(self.values) | set(self.withheld)


def compiler_family(environ: str) -> str:
    """The compiler an environment name starts with, without its version
    ('gcc12-openmpi4' -> 'gcc')."""
    match = re.match(r'[A-Za-z]+', environ)
    return match.group(0).lower() if match else environ


def samples(side: Side) -> Samples:
    """Every passed sample of a side, values kept but not asserted included
    (those of a case whose measurement was withheld apart, with why); a
    sample that is not a finite number is an error naming it."""
    values: dict = {}
    withheld_values: dict = {}
    why: dict = {}
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
                into = withheld_values if withheld(tc) else values
                into.setdefault((*key, var), (unit, []))[1].append(value)
                if withheld(tc):
                    reasons = why.setdefault((*key, var), {})
                    reasons[withheld_reason(tc)] = reasons.get(withheld_reason(tc), 0) + 1
    return Samples(values, families, withheld_values, why)


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


#: The facts of a case's own link: where one changed, a figure judged over
#: iperf3 is judged on its own too, since a slower wire slows iperf3 alike.
LINK_FACTS = ('link rate', 'link shaped (tc)')


def link_changed(changed: tuple) -> bool:
    """Whether the what_changed lines of a case name its link's rate or shaping."""
    return any(line.startswith(f'{fact}: ') for line in changed for fact in LINK_FACTS)


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
    #: How many samples of each side were withheld and why (withheld_note).
    withheld: str = ''


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
        """How many more samples of the after side would decide every
        undecided metric that more samples decide (the largest estimate
        among them), 0 when all are decided or none would be."""
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
        if self.count(v.SHOWN):
            parts.append(f'{self.count(v.SHOWN)} shown (judged over iperf3)')
        return ', '.join(parts)


def session_medians(side: Side) -> dict:
    """{metric key: [the median of each session of the side that measured
    it fairly]}: how far the metric moved from session to session."""
    medians: dict = {}
    for report in side.reports:
        for key, (_, values) in samples(Side(side.spec, [report])).values.items():
            medians.setdefault(key, []).append(statistics.median(values))
    return medians


def compare(before: Side, after: Side, alpha: float = ALPHA, threshold: float = THRESHOLD,
            pairs: dict | None = None) -> Outcome:
    """Every metric both sides have, judged against its tolerance (at least
    ``threshold``, wider where the before side's sessions moved more:
    statcompare.tolerance_of); the environments an upgrade renamed paired
    first (pair_environments, ``pairs`` = --pair OLD=NEW)."""
    s_before, s_after = samples(before), samples(after)
    moved_before = session_medians(before)
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
    values_after, withheld_after = as_before(s_after.values), as_before(s_after.withheld)
    why_after = as_before(s_after.why_withheld)
    measured_after = set(values_after) | set(withheld_after)
    p_before, p_after = provenance(before), provenance(after)
    rows = []
    ratios = metricjudge.calibrated_ratios(s_before.values, values_after)
    for key in sorted(measured_before & measured_after):
        new = renamed.get(key[1:3])
        after_case = (key[0], key[1], new or key[2])
        label = (*key[:2], f'{key[2]} -> {new}' if new else key[2], key[3])
        changed = tuple(what_changed(p_before.get(key[:3], {}), p_after.get(after_case, {})))
        if key in s_before.values and key in values_after:
            unit = s_before.values[key][0]
            result = metricjudge.judge(key[0], key[3], s_before.values[key], values_after[key],
                                       alpha, statcompare.tolerance_of(moved_before.get(key, []),
                                                                       threshold))
            decider = metricjudge.calibrated_counterpart(key, ratios)
            if decider is not None and not link_changed(changed):
                result = metricjudge.shown_for(result, decider)
        else:
            unit, values_before = s_before.values.get(key) or s_before.withheld[key]
            values_now = (values_after.get(key) or withheld_after[key])[1]
            result = metricjudge.not_fairly_measured(
                values_before, values_now, fair_before=key in s_before.values,
                fair_after=key in values_after,
                why=_reasons(s_before.why_withheld.get(key, {}), why_after.get(key, {})))
        rows.append(Row(*label, unit, result, changed,
                        withheld_note(s_before.why_withheld.get(key, {}), why_after.get(key, {}))))
    return Outcome(rows, sorted(measured_before - measured_after),
                   sorted(measured_after - measured_before), renamed)


def _reasons(*sides: dict) -> str:
    return ', '.join(sorted({why for side in sides for why in side}))


def withheld_note(before: dict, after: dict) -> str:
    '''"2 samples withheld after (host busy)": the samples of a metric whose
    measurement was withheld, per side, shown beside its verdict; '' when none.'''
    parts = [f'{sum(why.values())} sample{"s" if sum(why.values()) != 1 else ""} withheld {side} '
             f'({_reasons(why)})' for side, why in (('before', before), ('after', after)) if why]
    return '; '.join(parts) + (': shown, not judged' if parts else '')


def table(rows: list) -> str:
    """The verdict table, regressions first; what changed under each."""
    order = {statcompare.Verdict.REGRESSED: 0, statcompare.Verdict.INCONCLUSIVE: 1,
             statcompare.Verdict.IMPROVED: 2, statcompare.Verdict.UNCHANGED: 3,
             statcompare.Verdict.SHOWN: 4}
    lines = [f'{"verdict":12} {"ratio":>7} {"n":>5}  {"test @ partition + environment":60} metric']
    for row in sorted(rows, key=lambda r: (order[r.result.verdict], r.test, r.partition,
                                           r.environ, r.metric)):
        c = row.result
        lines.append(f'{c.verdict.upper():12} {c.ratio:7.3f} {c.n_before:>2}+{c.n_after:<2}  '
                     f'{row.test + " @" + row.partition + " +" + row.environ:60} '
                     f'{row.metric} [{row.unit}]')
        if c.verdict != statcompare.Verdict.UNCHANGED:
            lines.append(f'{"":28}{c.reason}')
        if row.withheld:
            lines.append(f'{"":28}{row.withheld}')
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
