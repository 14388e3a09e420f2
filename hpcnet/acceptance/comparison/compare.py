"""`hpcnet compare BEFORE AFTER`: did anything get worse, where, and why.

Each side is one or more stored sessions, the word ``baseline`` or a JSON
run report file (hpcnet.acceptance.comparison.sides reads them). Per test x
partition x environment x metric, the samples of each side (every passed
repeat) are judged by hpcnet.acceptance.comparison.metricjudge
(statcompare's rule); beside every regression stands what changed between
the sides (MPI library, transport proved, nodes, link rate, link errors);
hpcnet.acceptance.comparison.comparetext prints the outcome.

A comparison cannot be fooled: the sides may not share a session; a time
period leaves out the sessions of `hpcnet baseline` unless asked; environments renamed by an
upgrade are paired by partition, MPI family and compiler family where that
is unambiguous (``--pair OLD=NEW`` otherwise); a metric measured before and
missing after is a failure; a NaN or infinite sample is an error naming its
session and metric. The outcome's exit code follows hpcnet.exitcodes.
"""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field, replace

from hpcnet.acceptance.comparison import (failedrepeats, glitches, metricjudge, noisy_before,
                                          statcompare)
from hpcnet.acceptance.comparison.sides import CompareError, Side, case_key
from hpcnet.acceptance.references.baseline import measured_cases
from hpcnet.acceptance.references.casevalues import link_values, recorded_values
from hpcnet.acceptance.references.references import withheld, withheld_reason
from hpcnet.exitcodes import Exit

#: The floor of every metric's tolerance (statcompare.tolerance_of): a shift
#: smaller than this is not a change a site acts on, however steady the metric.
THRESHOLD = 0.03
#: One-sided level of the bounds of each metric's shift.
ALPHA = 0.05


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
    #: {key: [the run of each of its values]}: (the report's number, the
    #: case's repeat in it), so the figures one run of a case measured can be told.
    runs: dict = field(default_factory=dict)

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
    runs: dict = {}
    for number, report in enumerate(side.reports):
        session = report.get('session_info', {}).get('uuid', side.spec)
        # A case that passed only on a known-issue retry has its figures there.
        retried = [tc for tc in report.get('hpcnet_retried') or [] if tc.get('result') == 'pass']
        repeats_seen: dict = {}
        for tc in [*measured_cases([report]), *retried]:
            key = case_key(tc)
            repeats_seen[key] = repeats_seen.get(key, 0) + 1
            run = (number, repeats_seen[key])
            families[key[1:]] = (tc.get('mpi_family') or '?', compiler_family(tc['environ']))
            for var, value, unit, _ in (*recorded_values(tc), *link_values(tc)):
                if not math.isfinite(value):
                    raise CompareError(f'{side.spec}: session {session}: {key[0]} @{key[1]} '
                                       f'+{key[2]}: {var} is {value}: not a measurement '
                                       '(a benchmark figure must be a finite number)')
                into = withheld_values if withheld(tc) else values
                into.setdefault((*key, var), (unit, []))[1].append(value)
                if withheld(tc):
                    reasons = why.setdefault((*key, var), {})
                    reasons[withheld_reason(tc)] = reasons.get(withheld_reason(tc), 0) + 1
                else:
                    runs.setdefault((*key, var), []).append(run)
    return Samples(values, families, withheld_values, why, runs)


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
        facts = out.setdefault(case_key(tc), {'MPI library': set(), 'transport': set(),
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
#: iperf3 is judged on its own too, since a slower wire slows iperf3 alike
#: (the figure's own samples decide; the link's measured figure,
#: hpcnet.metrics.LINK_OVER_WIRE, is judged besides, and needs no fact).
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
    #: The outlying session of the before side left out (noisy_before).
    left_out: str = ''


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
    #: Repeats of the after side that failed (failedrepeats.FailedRepeat):
    #: each fails its case, whatever its other repeats measured.
    failed_after: list = field(default_factory=list)
    #: Repeats of the before side that failed: named, their case's samples
    #: taken from its other repeats.
    failed_before: list = field(default_factory=list)

    def count(self, verdict: str) -> int:
        return sum(r.result.verdict == verdict for r in self.rows)

    @property
    def exit_code(self) -> Exit:
        if self.count(statcompare.Verdict.REGRESSED) or self.missing_after or self.failed_after:
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
                 *([f'{len(self.failed_after)} failed repeat(s) after'] if self.failed_after else []),
                 f'{self.count(v.INCONCLUSIVE)} not decided', f'{len(self.only_after)} only after',
                 f'{self.count(v.UNCHANGED)} unchanged', f'{self.count(v.IMPROVED)} improved']
        if self.count(v.SHOWN):
            parts.append(f'{self.count(v.SHOWN)} shown (judged over iperf3)')
        return ', '.join(parts)


def session_medians(side: Side) -> dict:
    """{metric key: [the median of each session of the side that measured
    it fairly]}: how far the metric moved from session to session."""
    medians: dict = {}
    for values in per_session(side).values():
        for key, (_, got) in values.items():
            medians.setdefault(key, []).append(statistics.median(got))
    return medians


def per_session(side: Side) -> dict:
    """{session: {metric key: (unit, [values])}} of the fair samples of a side."""
    out: dict = {}
    for number, report in enumerate(side.reports):
        name = report.get('session_info', {}).get('uuid') or f'report {number + 1}'
        out[name if name not in out else f'{name} ({number + 1})'] = \
            samples(Side(side.spec, [report])).values
    return out


def compare(before: Side, after: Side, alpha: float = ALPHA, threshold: float = THRESHOLD,
            pairs: dict | None = None) -> Outcome:
    """Every metric both sides have, judged against its tolerance (at least
    ``threshold``, wider where the before side's sessions moved more:
    statcompare.tolerance_of); the environments an upgrade renamed paired
    first (pair_environments, ``pairs`` = --pair OLD=NEW)."""
    s_before, s_after = samples(before), samples(after)
    screened = noisy_before.screened(per_session(before), threshold)
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
    why_after, runs_after = as_before(s_after.why_withheld), as_before(s_after.runs)
    measured_after = set(values_after) | set(withheld_after)
    p_before, p_after = provenance(before), provenance(after)
    rows = []
    ratios = metricjudge.calibrated_ratios(s_before.values, values_after)
    changes = {}

    def judged(key: tuple, glitch: str = '') -> statcompare.Comparison:
        '''The verdict on a metric both sides measured fairly.'''
        result = noisy_before.too_noisy(metricjudge.judge(
            key[0], key[3], screened.values[key], values_after[key], alpha,
            statcompare.tolerance_of(screened.medians[key], threshold), glitch=glitch),
            screened.refused.get(key))
        decider = metricjudge.calibrated_counterpart(key, ratios)
        if decider is not None and not link_changed(changes[key]):
            result = metricjudge.shown_for(result, decider)
        return result
    for key in sorted(measured_before & measured_after):
        new = renamed.get(key[1:3])
        after_case = (key[0], key[1], new or key[2])
        label = (*key[:2], f'{key[2]} -> {new}' if new else key[2], key[3])
        changed = changes[key] = tuple(what_changed(p_before.get(key[:3], {}),
                                                    p_after.get(after_case, {})))
        if key in s_before.values and key in values_after:
            unit = s_before.values[key][0]
            result = judged(key)
        else:
            unit, values_before = s_before.values.get(key) or s_before.withheld[key]
            values_now = (values_after.get(key) or withheld_after[key])[1]
            result = metricjudge.not_fairly_measured(
                values_before, values_now, fair_before=key in s_before.values,
                fair_after=key in values_after,
                why=_reasons(s_before.why_withheld.get(key, {}), why_after.get(key, {})))
        rows.append(Row(*label, unit, result, changed,
                        withheld_note(s_before.why_withheld.get(key, {}), why_after.get(key, {})),
                        screened.notes.get(key, '')))
    keys = sorted(measured_before & measured_after)
    glitched = glitches.lone_glitches({key: row.result for key, row in zip(keys, rows)},
                                      runs_after)
    rows = [replace(row, result=judged(key, glitched[key])) if key in glitched else row
            for key, row in zip(keys, rows)]
    return Outcome(rows, sorted(measured_before - measured_after),
                   sorted(measured_after - measured_before), renamed,
                   failedrepeats.of_side(after), failedrepeats.of_side(before))


def _reasons(*sides: dict) -> str:
    return ', '.join(sorted({why for side in sides for why in side}))


def withheld_note(before: dict, after: dict) -> str:
    '''"2 samples withheld after (host busy)": the samples of a metric whose
    measurement was withheld, per side, shown beside its verdict; '' when none.'''
    parts = [f'{sum(why.values())} sample{"s" if sum(why.values()) != 1 else ""} withheld {side} '
             f'({_reasons(why)})' for side, why in (('before', before), ('after', after)) if why]
    return '; '.join(parts) + (': shown, not judged' if parts else '')
