"""`hpcnet compare BEFORE AFTER`: did anything get worse, where, and why.

Each side is one or more stored sessions, selected as ReFrame selects them
(a session UUID, a time period such as ``now-1d:now``, any query
``reframe --describe-stored-sessions`` takes), the word ``baseline`` (the
latest session stored by `hpcnet baseline`), or a JSON run report file.
Per test x partition x environment x metric, the samples of each side
(every passed repeat) are compared by hpcnet.statcompare; beside every
regression stands what changed between the sides (MPI library, transport
proved, nodes, link rate, link errors).
"""
from __future__ import annotations

import json
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hpcnet import statcompare
from hpcnet.baseline import BASELINE_TAG, measured_cases, perf_samples
from hpcnet.constants import CONFIG_DIR, Unit, reframe_executable

#: Practical threshold: a shift smaller than this is not a change a site acts on.
THRESHOLD = 0.03
#: Significance level of the one-sided rank test.
ALPHA = 0.05


class CompareError(ValueError):
    """A side that selects nothing, or cannot be read."""


@dataclass(frozen=True)
class Side:
    """One side of a comparison: the reports it is made of."""
    spec: str
    reports: list

    @property
    def sessions(self) -> list:
        return [r.get('session_info', {}).get('uuid', '?') for r in self.reports]


def _stored_sessions(query: str) -> list:
    res = subprocess.run([reframe_executable(), '-C', str(CONFIG_DIR / 'settings.py'),
                          '--describe-stored-sessions', query], text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if res.returncode != 0:
        raise CompareError(f'{query}: reframe --describe-stored-sessions failed: '
                           f'{(res.stderr or res.stdout).strip()[-500:]}')
    try:
        return json.loads(res.stdout)
    except ValueError as err:
        raise CompareError(f'{query}: reframe printed no session JSON ({err})') from None


def _latest_baseline() -> list:
    # ReFrame keeps --session-extras in the session's own information.
    tagged = [s for s in _stored_sessions('now-3650d:now')
              if BASELINE_TAG in s.get('session_info', {})]
    if not tagged:
        raise CompareError('baseline: no stored session was made by `hpcnet baseline` '
                           '(valid: a session UUID, a time period such as now-1d:now, a report file)')
    return [max(tagged, key=lambda s: s['session_info'].get('time_start_unix', 0))]


def load_side(spec: str) -> Side:
    """The reports a side spec names (module docstring)."""
    path = Path(spec)
    if spec.endswith('.json') or path.is_file():
        try:
            return Side(spec, [json.loads(path.read_text())])
        except (OSError, ValueError) as err:
            raise CompareError(f'{spec}: not a readable ReFrame JSON report ({err})') from None
    reports = _latest_baseline() if spec == 'baseline' else _stored_sessions(spec)
    if not reports:
        raise CompareError(f'{spec}: selects no stored session (see reframe --list-stored-sessions)')
    return Side(spec, reports)


def _case_key(tc: dict) -> tuple:
    return (tc['name'].split(' /')[0], f'{tc["system"]}:{tc["partition"]}', tc['environ'])


def samples(side: Side) -> dict:
    """{(test, partition, environment, metric): (unit, [values])}."""
    out: dict = {}
    for tc in measured_cases(side.reports):
        for var, value, unit in perf_samples(tc):
            out.setdefault((*_case_key(tc), var), (unit, []))[1].append(value)
    return out


def _link_errors(tc: dict) -> int:
    return sum(int(lc.get(c) or 0) for lc in tc.get('link_counters') or []
               for c in ('tx_errors', 'rx_errors', 'tx_dropped', 'rx_dropped'))


def provenance(side: Side) -> dict:
    """{(test, partition, environment): {what: sorted values}} of a side."""
    out: dict = {}
    for tc in measured_cases(side.reports):
        facts = out.setdefault(_case_key(tc), {'MPI library': set(), 'transport': set(),
                                                'nodes': set(), 'link rate': set(),
                                                'link errors+drops': set()})
        for what, value in (('MPI library', tc.get('mpi_library')),
                            ('transport', tc.get('transport')),
                            ('nodes', ','.join(tc.get('job_nodelist') or []) or None),
                            ('link rate', tc.get('link_rate_bps')),
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
    environ: str
    metric: str
    unit: str
    result: statcompare.Comparison
    changed: tuple


def _not_compared(before: list, after: list, why: str) -> statcompare.Comparison:
    return statcompare.Comparison(
        verdict=statcompare.Verdict.INCONCLUSIVE, ratio=float('nan'), ci_low=float('nan'),
        ci_high=float('nan'), p_value=float('nan'), n_before=len(before), n_after=len(after),
        reason=f'not compared: {why}', more_samples=None)


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
    '''Counts that are 0 when healthy (link errors, outlier nodes): a ratio
    and a rank test mean nothing there; any change of the median is the
    verdict, and one error where there were none is a regression.'''
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


def compare(before: Side, after: Side, alpha: float = ALPHA,
            threshold: float = THRESHOLD) -> tuple:
    """(rows, only_before, only_after): a Row per metric both sides have."""
    s_before, s_after = samples(before), samples(after)
    p_before, p_after = provenance(before), provenance(after)
    rows = []
    for key in sorted(set(s_before) & set(s_after)):
        unit, values_before = s_before[key]
        _, values_after = s_after[key]
        changed = tuple(what_changed(p_before.get(key[:3], {}), p_after.get(key[:3], {})))
        if unit == Unit.BYTES:
            rows.append(Row(*key, unit, _compare_exact(values_before, values_after), changed))
            continue
        try:
            higher_better = statcompare.higher_is_better(unit)
        except ValueError as err:
            # Not guessed: a wrong direction turns a regression into an improvement.
            rows.append(Row(*key, unit, _not_compared(values_before, values_after, str(err)), ()))
            continue
        if min(values_before + values_after) <= 0:
            result = _compare_counts(values_before, values_after, higher_better)
        else:
            result = statcompare.compare_samples(
                values_before, values_after, higher_better=higher_better,
                alpha=alpha, threshold=threshold)
        rows.append(Row(*key, unit, result, changed))
    return rows, sorted(set(s_before) - set(s_after)), sorted(set(s_after) - set(s_before))


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
