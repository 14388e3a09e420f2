"""One ReFrame session of the suite, as `hpcnet run`, `baseline`, `accept`
and the testbed run it: the command line, the retries of named known
issues, the kept report, and the closing summary with its exit code
(hpcnet.exitcodes)."""
from __future__ import annotations

import contextlib
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import socket
import subprocess
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from hpcnet import sites, stacks
from hpcnet.acceptance import baseline, references
from hpcnet.acceptance import report as hpcnet_report
from hpcnet.checklib.sanity import KNOWN_ISSUE_MARKER
from hpcnet.constants import (CHECKS_DIR, MEASUREMENT_WITHHELD, CONFIG_DIR, DEFAULT_REPORTS_DIR, KNOWN_ISSUE_RETRIES, WITHHELD_RETRIES,
                              REFERENCE_DIR, REFERENCE_DIR_ENV,
                              PERFLOG_DIR, REPORTS_DIR_ENV, WORK_DIR)
from hpcnet.exitcodes import WORDS, Exit, worst
from hpcnet.paths import reframe_executable
from hpcnet.reframeargs import (is_option, named_system, option_values, option_values_removed,
                                unmatched_prgenv)


def say(msg):
    print(f'hpcnet: {msg}', flush=True)


class SelectionError(ValueError):
    '''Options that select nothing, or something that does not exist.'''


def reports_dir() -> Path:
    '''reports/, or $HPCNET_REPORTS_DIR (tests keep theirs apart from the user's).'''
    return Path(os.environ.get(REPORTS_DIR_ENV) or DEFAULT_REPORTS_DIR)


#: ReFrame options that only list or describe the checks: they run nothing
#: and write no report.
LISTING_OPTIONS = ('-l', '-L', '--list', '--list-detailed', '--describe', '--list-tags')
#: ReFrame actions besides running; any of them replaces the default -r.
_ACTION_OPTIONS = ('-r', '--run', '--dry-run', *LISTING_OPTIONS)
#: ReFrame options that select test cases: a retry replaces them with its own.
_SELECTION_OPTIONS = ('-n', '--name', '-p', '--prgenv', '--system', '-x', '--exclude', '-t', '--tag')


def session_prefix(name: str, reframe_args: list) -> Path:
    '''ReFrame's --prefix of session ``name``: its own directory under the
    chosen system's sites.sessions_dir().'''
    site = sites.selected_site(sites.load_site_files(*sites.system_directories()),
                               named_system(reframe_args, os.environ),
                               socket.gethostname())
    return sites.sessions_dir(site) / name


def reframe_cmd(name: str, reframe_args: list) -> tuple:
    '''(command, report path) of one ReFrame session of the suite.'''
    reports = reports_dir()
    reports.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime('%Y%m%dT%H%M%S%f')
    report = reports / f'{name}-{stamp}.json'
    cmd = [reframe_executable(), '-C', str(CONFIG_DIR / 'settings.py'),
           '-c', str(CHECKS_DIR), '-R',
           '--prefix', str(session_prefix(name, reframe_args)),
           '--report-file', str(report), *reframe_args]
    if not any(is_option(a, _ACTION_OPTIONS) for a in reframe_args):
        cmd.append('-r')
    if not any(a.startswith('--exec-policy') for a in reframe_args):
        # Timed runs must never share cores with each other.
        cmd.append('--exec-policy=serial')
    # What no case records, kept with the session for `hpcnet history`
    # (ReFrame splits extras at commas).
    extras = {baseline.SUITE_COMMIT_TAG: baseline.suite_commit(),
              baseline.OS_KERNEL_TAG: platform.release()}
    cmd += ['--session-extras', ','.join(f'{k}={v.replace(",", ";")}' for k, v in extras.items())]
    return cmd, report


def repeats_args(repeats: int) -> list:
    '''K samples of every metric: ReFrame's --reruns K-1 (each rerun is a
    whole pass over the selection, so a case's samples are spread in time).'''
    return ['--reruns', str(repeats - 1)] if repeats > 1 else []


def final_cases(report: Path) -> dict:
    '''(name, system, partition, environ) -> last result of each case.'''
    return final_cases_of([references.load_report(report)])


def final_cases_of(reports: list) -> dict:
    '''final_cases() over run reports or stored sessions, later ones last.'''
    return {(tc['name'], tc['system'], tc['partition'], tc['environ']): tc
            for r in reports for run in r.get('runs', []) for tc in run['testcases']}


def failed_by_known_issue(tc: dict) -> bool:
    return tc['result'] == 'fail' and KNOWN_ISSUE_MARKER in (tc.get('fail_reason') or '')


#: Why `hpcnet run` runs a case again (hpcnet_retried's 'retried_for').
KNOWN_ISSUE = 'known issue'


def measured_on_overloaded_host(tc: dict) -> bool:
    return tc['result'] == 'pass' and references.withheld(tc)


def why_again(tc: dict, remeasure: bool = True) -> tuple | None:
    '''(why, attempts allowed in all) where a case is run again: a failure
    that names a known issue of its stack, or (``remeasure``: the run judges
    performance) a host too busy to judge it; None for every other case (a
    failure is final).'''
    if failed_by_known_issue(tc):
        return KNOWN_ISSUE, KNOWN_ISSUE_RETRIES + 1
    if remeasure and measured_on_overloaded_host(tc):
        return MEASUREMENT_WITHHELD, WITHHELD_RETRIES + 1
    return None


def _run_again(name: str, cases: dict, reframe_args: list, prefix, env,
               remeasure: bool) -> list:
    '''Run again each case why_again() names, as often as it allows while
    the reason holds.  Returns the final results of the cases run again.'''
    retried = []
    for key, first in sorted(cases.items()):
        tc, attempts, reason = first, 1, why_again(first, remeasure)
        while reason is not None and attempts < reason[1] and \
                (now := why_again(tc, remeasure)) is not None:
            attempts += 1
            say(f'retrying (attempt {attempts} of {reason[1]}), {now[0]}: '
                f'{tc["name"]} @{tc["system"]}:{tc["partition"]}+{tc["environ"]}')
            cmd, report = reframe_cmd(f'{name}-retry', [
                *option_values_removed(reframe_args, _SELECTION_OPTIONS), '-n', f'/{tc["hashcode"]}',
                '-p', f'^{re.escape(tc["environ"])}$',
                '--system', f'{tc["system"]}:{tc["partition"]}'])
            subprocess.run([*prefix, *cmd], cwd=WORK_DIR, env=env)
            again = final_cases(report).get(key) if report.exists() else None
            if again is None:       # the retry ran nothing: the last attempt is the last word
                break
            tc = again
        if attempts > 1:
            retried.append({**tc, 'first_attempt': first.get('fail_reason') or first.get('judgement'),
                            'attempts': attempts, 'retried_for': reason[0]})
    return retried


def check_selection(reframe_args: list, environments: list) -> None:
    '''A --system that exists and a -p that matches some environment: ReFrame
    itself would list no valid systems, or select nothing and pass.'''
    systems = sites.load_system_files(*sites.system_directories())
    valid = {s['name']: [p['name'] for p in s['partitions']] for s in systems}
    if not option_values(reframe_args, '--system'):
        unmatched = sites.unmatched_host(systems, socket.gethostname())
        if unmatched:
            raise SelectionError(unmatched)
    for chosen in option_values(reframe_args, '--system'):
        name, _, part = chosen.partition(':')
        if name not in valid:
            raise SelectionError(f'--system {chosen}: no such system (valid: '
                                 f'{", ".join(sorted(valid))}; a site is a file in '
                                 f'{CONFIG_DIR / "systems"})')
        if part and part not in valid[name]:
            raise SelectionError(f'--system {chosen}: system {name} has no partition {part!r} '
                                 f'(valid: {", ".join(valid[name])})')
    unmatched = unmatched_prgenv(reframe_args, environments + [stacks.BUILTIN_ENV])
    if unmatched:
        raise SelectionError(unmatched)


def rerun_command(tc: dict) -> str:
    '''The ReFrame command that runs one case again, with this suite's
    configuration (ReFrame's own hint lacks -C).'''
    return ' '.join(shlex.quote(a) for a in [
        reframe_executable(), '-C', str(CONFIG_DIR / 'settings.py'), '-c', str(CHECKS_DIR),
        '-n', f'/{tc.get("hashcode", "")}', '-p', f'^{tc["environ"]}$',
        '--system', f'{tc["system"]}:{tc["partition"]}', '-r', '--exec-policy=serial'])


def _case_name(tc: dict) -> str:
    return f'{tc["name"]} @{tc["system"]}:{tc["partition"]}+{tc["environ"]}'


def summary(cases: dict, retried: list, judged_elsewhere: str = '') -> tuple:
    '''(lines, exit code) of a session's final cases: failures, skips and
    not-judged cases grouped by reason, cases that passed only on retry.
    Failed -> FAILED; nothing ran -> UNDECIDED; else OK (values recorded
    but not judged are said on the last line, not turned into a failure).'''
    lines, codes = [], [Exit.OK]
    final = {**cases, **{(tc['name'], tc['system'], tc['partition'], tc['environ']): tc
                         for tc in retried}}
    by_result = defaultdict(list)
    for tc in final.values():
        by_result[tc['result']].append(tc)
    retried_keys = {(tc['name'], tc['system'], tc['partition'], tc['environ']) for tc in retried}
    for tc in retried:
        if tc.get('retried_for') == MEASUREMENT_WITHHELD:
            verdict = (f'NOT JUDGED {tc["attempts"]} TIMES' if measured_on_overloaded_host(tc)
                       else f'MEASURED AGAIN (attempt {tc["attempts"]})' if tc['result'] == 'pass'
                       else f'FAILED WHEN MEASURED AGAIN (attempt {tc["attempts"]})')
        else:
            verdict = (f'PASSED ONLY ON RETRY (attempt {tc["attempts"]})' if tc['result'] == 'pass'
                       else f'FAILED {tc["attempts"]} TIMES')
        lines.append(f'{verdict}: {_case_name(tc)} (first attempt: {tc["first_attempt"]})')
    failed = [tc for tc in final.values() if tc['result'] not in ('pass', 'skip')]
    for tc in sorted(failed, key=_case_name):
        if (tc['name'], tc['system'], tc['partition'], tc['environ']) not in retried_keys:
            lines.append(f'FAILED: {_case_name(tc)}: {(tc.get("fail_reason") or tc["result"])[:300]}')
            lines.append(f'  rerun: {rerun_command(tc)}')
    if failed:
        codes.append(Exit.FAILED)
    skips = defaultdict(list)
    for tc in by_result.get('skip', []):
        skips[tc.get('skip_reason') or 'no reason recorded'].append(tc)
    for reason, tcs in sorted(skips.items(), key=lambda kv: -len(kv[1])):
        lines.append(f'SKIPPED ({len(tcs)}): {reason}')
    # A case the partition declares that could not run now (too few nodes
    # available) decides nothing about it.
    if any(tc.get('skip_undecided') for tc in by_result.get('skip', [])):
        codes.append(Exit.UNDECIDED)
    ran = [tc for tc in final.values() if tc['result'] != 'skip']
    if not ran:
        lines.append('NOTHING RAN: every selected case was skipped')
        codes.append(Exit.UNDECIDED)
    not_judged = defaultdict(int)
    basis = defaultdict(int)
    for tc in ran if not judged_elsewhere else []:
        if tc.get('judgement_basis') in references.Basis.NOT_JUDGED:
            not_judged[str(tc.get('judgement'))] += 1
            basis[tc['judgement_basis']] += 1
    for why, count in sorted(not_judged.items()):
        lines.append(f'NOT JUDGED ({count}): {why[len(references.NOT_JUDGED) + 2:]}')
    overloaded = sum(basis[b] for b in references.Basis.WITHHELD_AS)
    if overloaded:
        codes.append(Exit.UNDECIDED)
    code = worst(*codes)
    counts = ', '.join(f'{len(v)} {k}' for k, v in sorted(by_result.items()))
    last = f'{WORDS[code]}: {counts}'
    if overloaded:
        last += (f'; {overloaded} case(s) not judged: {MEASUREMENT_WITHHELD} (NOT JUDGED says why; '
                 'run again when that has passed)')
    elif code == Exit.OK and not_judged:
        unjudged = sum(not_judged.values())
        judged = sum(1 for tc in ran if tc.get('judgement_basis') == references.Basis.REFERENCES)
        no_file = basis[references.Basis.NO_FILE] > 0
        last += (f'; performance: {judged} case(s) judged against references, {unjudged} '
                 'recorded, not judged (NOT JUDGED says why'
                 + ('; `hpcnet baseline` makes references)' if no_file else ')'))
    if judged_elsewhere and code == Exit.OK:
        last += f'; performance is judged by {judged_elsewhere}'
    lines.append(last)
    return lines, code


def reports_summary(reports: list) -> tuple:
    """(lines, exit code) of summary() over the final cases of ``reports``
    (run reports or stored sessions, of hpcnet run or of plain reframe -r):
    the verdict `hpcnet run` gives the same cases."""
    final = final_cases_of(reports)
    # A report of an older hpcnet does not count a retried case's attempts.
    return summary(final, [{'attempts': '?', **tc} for r in reports
                           for tc in r.get('hpcnet_retried', [])])


@dataclass(frozen=True)
class Launch:
    '''Where ReFrame runs: under ``prefix`` (inside a testbed's head node),
    with an environment made from the caller's by ``environment``.'''
    prefix: tuple = ()
    environment: Callable[[dict], dict] | None = None


_launch = Launch()


@contextlib.contextmanager
def launched_through(prefix: list, environment: Callable[[dict], dict]):
    '''Every run_suite() inside runs ReFrame under ``prefix`` with
    ``environment(its environment)``: `hpcnet testbed baseline|accept` run
    the commands of the same names on the testbed this way.'''
    global _launch
    saved, _launch = _launch, Launch(tuple(prefix), environment)
    try:
        yield
    finally:
        _launch = saved


def run_suite(name: str, reframe_args: list, prefix: list = (), env: dict | None = None,
              judged_elsewhere: str = '') -> int:
    '''Run ReFrame (under ``prefix``, e.g. inside a testbed node), keep the
    JSON report as reports/<name>-latest.json, print where things are and
    the closing summary; return the exit code by the contract.  Failures
    are final, except those a stack's named known issue explains, and a case
    the testbed host was too busy to judge is measured again (why_again());
    a case decided only then is listed as such.  ``judged_elsewhere`` names what judges performance
    when the runs are not held to references (a baseline's, an acceptance's
    runs).'''
    if _launch.environment is not None and not prefix:
        prefix = list(_launch.prefix)
        env = _launch.environment(dict(env if env is not None else os.environ))
    cmd, report = reframe_cmd(name, reframe_args)
    say('discovering the compiler x MPI environments')
    found = stacks.discover()
    check_selection(reframe_args, [e.name for e in found.environments])
    # A broken reference file stops the session before anything runs (else
    # every case of its system fails on it, one by one).
    refdir = Path((env or os.environ).get(REFERENCE_DIR_ENV) or REFERENCE_DIR)
    if refdir.is_dir():
        references.validate_directory(refdir)
    for what, why in found.rejected:
        say(f'left out: {what}: {why}')
    if not found.environments:
        raise SelectionError('no compiler x MPI environment was found: `hpcnet stacks` says why '
                             'each candidate was left out')
    say(f'{len(found.environments)} environments: '
        f'{", ".join(e.name for e in found.environments)}')
    say('running: ' + ' '.join(cmd))
    start = time.monotonic()
    rc = subprocess.run([*prefix, *cmd], cwd=WORK_DIR, env=env).returncode
    listing = any(is_option(a, LISTING_OPTIONS) for a in reframe_args)
    if listing:
        return rc   # a listing runs nothing and writes no report
    if not report.exists():
        if rc == Exit.USAGE:
            # argparse's exit code: ReFrame rejected an option (its message is above).
            say(f'reframe rejected its command line (exit code {rc}, its message above); '
                'nothing ran')
            return Exit.USAGE
        say(f'no report was written ({report}); reframe exit code {rc}')
        return Exit.FAILED
    cases = final_cases(report)
    if not cases:
        say(f'no test case was selected by: {" ".join(reframe_args) or "(no options)"}; '
            'see `hpcnet run -l` for what exists')
        return Exit.UNDECIDED
    if '--dry-run' in cmd:
        say(f'dry run: {len(cases)} cases generated their job scripts under '
            f'{session_prefix(name, reframe_args)}; nothing was submitted (reframe exit code {rc})')
        return Exit.FAILED if rc else Exit.OK
    retried = _run_again(name, cases, reframe_args, prefix, env,
                         remeasure=not judged_elsewhere)
    wall = time.monotonic() - start
    data = references.load_report(report)
    data['hpcnet_retried'] = retried
    report.write_text(json.dumps(data, indent=1))
    latest = report.with_name('latest.json' if name == 'run' else f'{name}-latest.json')
    shutil.copyfile(report, latest)
    say(f'report: {latest} (copy of {report})')
    lines, code = summary(cases, retried, judged_elsewhere)
    if rc != 0 and code == Exit.OK and not retried:
        # ReFrame failed without a failed case (an error before or between
        # cases): never a pass.
        lines[-1] = f'{WORDS[Exit.FAILED]}: reframe exited {rc} with no failed case in the report'
        code = Exit.FAILED
    page = latest.with_suffix('.html')
    say('rendering the HTML report')
    page.write_text(hpcnet_report.render([data], hpcnet_report.retried_keys(data),
                                         verdict=lines[-1],
                                         title=' '.join(['hpcnet', name, *reframe_args])))
    say(f'HTML report: {page}')
    say(f'perflogs: {PERFLOG_DIR}')
    say(f'wall time: {wall:.0f} s ({wall / 60:.1f} min)')
    for line in lines:
        say(line)
    say(f'exit code {int(code)}')
    return code
