"""The sides of `hpcnet compare BEFORE AFTER`: the reports each side spec
names (hpcnet.acceptance.comparison.compare states the comparison).

A side is one or more stored sessions, selected as ReFrame selects them (a
session UUID, a time period such as ``now-1d:now``, any query
``reframe --describe-stored-sessions`` takes), the word ``baseline`` (the
sessions the reference file of the system the other side ran on names in
its provenance: the baseline the site accepted by writing it,
hpcnet.acceptance.references.accepted), or a JSON run report file.  The
sides may not share a session; a time period leaves out the sessions of
`hpcnet baseline` unless asked.
"""
from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hpcnet.acceptance.comparison import storedsessions
from hpcnet.acceptance.references import accepted
from hpcnet.acceptance.references.baseline import BASELINE_TAG, measured_cases
from hpcnet.acceptance.references.references import ReferenceFileError, load_report
from hpcnet.constants import CONFIG_DIR
from hpcnet.paths import reframe_executable

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
        newer |= {case_key(tc) for tc in measured_cases(reports)}
        out += [r for r in reports if any(run.get('testcases') for run in r.get('runs', []))]
    return sorted(out, key=lambda r: r['session_info'].get('time_start_unix', 0))


def _without_cases(report: dict, keys: set) -> dict:
    """``report`` without the cases of ``keys``."""
    if not keys:
        return report
    return {**report, 'runs': [{**run, 'testcases': [tc for tc in run.get('testcases', [])
                                                      if case_key(tc) not in keys]}
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


def case_key(tc: dict) -> tuple:
    """(test, system:partition, environment) of a case of a run report."""
    return (tc['name'].split(' /')[0], f'{tc["system"]}:{tc["partition"]}', tc['environ'])


