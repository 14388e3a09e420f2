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
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from hpcnet import stacks
from hpcnet.acceptance.history import metricindex
from hpcnet.acceptance.references import baseline, references
from hpcnet.acceptance.report import report as hpcnet_report
from hpcnet.constants import (BUILTIN_ENV, CHECKS_DIR, CONFIG_DIR, DEFAULT_REPORTS_DIR,
                              KNOWN_ISSUE_RETRIES, MEASUREMENT_WITHHELD, PERFLOG_DIR,
                              REFERENCE_DIR, WITHHELD_RETRIES)
from hpcnet.paths import WORK_DIR
from hpcnet.variables import REFERENCE_DIR_ENV, REPORTS_DIR_ENV
from hpcnet.exitcodes import WORDS, Exit, worst
from hpcnet.paths import reframe_executable
from hpcnet.session.reframeoutput import passed_on, reframe_environment
from hpcnet.session.verdict import (NOT_FAILED, case_name, case_repeats_of, failed_by_known_issue,
                                    final_cases_of, passed_with_measurement_withheld, summary)
from hpcnet.siteconfig import sites
from hpcnet.siteconfig.reframeargs import (display_names_as_patterns, is_option, named_system,
                                           option_values, option_values_removed, unmatched_prgenv)


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
#: ReFrame options that select test cases, and those that repeat them: a
#: retry of one repeat replaces them with its own, and runs once.
_SELECTION_OPTIONS = ('-n', '--name', '-p', '--prgenv', '--system', '-x', '--exclude', '-t', '--tag',
                      '--reruns', '--duration')
#: ReFrame options that write a file of the whole session (the CI's JUnit
#: view): a retry of one repeat leaves them out, or it would overwrite it.
_SESSION_FILE_OPTIONS = ('--report-junit',)


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
           '--report-file', str(report), *display_names_as_patterns(reframe_args)]
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


#: Why `hpcnet run` runs a case again (hpcnet_retried's 'retried_for').
KNOWN_ISSUE = 'known issue'


def why_again(tc: dict, remeasure: bool = True) -> tuple | None:
    '''(why, attempts allowed in all) where a case is run again: a failure
    that names a known issue of its stack, or (``remeasure``: the run judges
    performance) a host too busy to judge it; None for every other case (a
    failure is final).'''
    if failed_by_known_issue(tc):
        return KNOWN_ISSUE, KNOWN_ISSUE_RETRIES + 1
    if remeasure and passed_with_measurement_withheld(tc):
        return MEASUREMENT_WITHHELD, WITHHELD_RETRIES + 1
    return None


@dataclass(eq=False)
class _Again:
    '''One repeat of a case that why_again() names: its latest result and
    the attempts it has had.'''
    key: tuple
    number: int             #: the repeat's number, 1-based
    repeats: int            #: the case's repeats
    first: dict             #: its first attempt
    allowed: int            #: attempts allowed in all
    tc: dict = None         #: its latest attempt
    attempts: int = 1
    ran_nothing: bool = False

    @property
    def target(self) -> tuple:
        return self.tc['system'], self.tc['partition'], self.tc['environ']

    def where(self) -> str:
        return f' (repeat {self.number} of {self.repeats})' if self.repeats > 1 else ''


def _run_again(name: str, repeats: dict, reframe_args: list, prefix, env,
               remeasure: bool) -> list:
    '''Run again each repeat of a case why_again() names, as often as it
    allows while the reason holds (``repeats``: case key -> its result in
    each repeat).  The repeats run again together: one ReFrame session per
    partition and environment in each round, a case at most once a session
    (a second repeat of it waits for the next round), since a session's
    start and its build fixtures cost more than a case.  Returns the last
    attempt of each repeat run again, with its repeat's number (1-based)
    and the count of repeats.'''
    pending = [_Again(key, number, len(results), first, reason[1], first)
               for key, results in sorted(repeats.items())
               for number, first in enumerate(results, 1)
               if (reason := why_again(first, remeasure)) is not None]
    finished = []
    while pending:
        batch, later, keys = [], [], set()
        for again in pending:
            (later if again.key in keys else batch).append(again)
            keys.add(again.key)
        sessions: dict = {}
        for again in batch:
            sessions.setdefault(again.target, []).append(again)
        for (system, partition, environ), group in sessions.items():
            _attempt_together(name, group, f'{system}:{partition}', environ, reframe_args,
                              prefix, env, remeasure)
        still = [a for a in batch if not a.ran_nothing and a.attempts < a.allowed
                 and why_again(a.tc, remeasure) is not None]
        finished += [a for a in batch if a not in still]
        pending = still + later
    return [{**a.tc, 'first_attempt': a.first.get('fail_reason') or a.first.get('judgement'),
             'attempts': a.attempts, 'retried_for': why_again(a.first, remeasure)[0],
             'repeat': a.number, 'repeats': a.repeats}
            for a in sorted(finished, key=lambda a: (a.key, a.number)) if a.attempts > 1]


def _attempt_together(name: str, group: list, where: str, environ: str, reframe_args: list,
                      prefix, env, remeasure: bool) -> None:
    '''One more attempt of each repeat of ``group`` (distinct cases on one
    partition and environment) in one ReFrame session; each _Again takes
    its new result, or is marked as having run nothing (its last attempt
    is then the last word).'''
    names = []
    for again in group:
        again.attempts += 1
        say(f'retrying (attempt {again.attempts} of {again.allowed}), '
            f'{why_again(again.tc, remeasure)[0]}: {case_name(again.tc)}{again.where()}')
        names += ['-n', f'/{again.tc["hashcode"]}']
    cmd, report = reframe_cmd(f'{name}-retry', [
        *option_values_removed(reframe_args, (*_SELECTION_OPTIONS, *_SESSION_FILE_OPTIONS)),
        *names, '-p', f'^{re.escape(environ)}$', '--system', where])
    _run_reframe([*prefix, *cmd], env)
    got = final_cases_of([references.load_report(report)]) if report.exists() else {}
    for again in group:
        if again.key in got:
            again.tc = got[again.key]
        else:
            again.ran_nothing = True


def _run_reframe(cmd: list, env: dict | None) -> int:
    '''Run ReFrame's ``cmd``, its output passed on fit for a log file
    (hpcnet.session.reframeoutput); its exit code.'''
    with passed_on() as stdout:
        return subprocess.run(cmd, cwd=WORK_DIR, env=reframe_environment(env, sys.stdout.isatty()),
                              stdout=stdout).returncode


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
    unmatched = unmatched_prgenv(reframe_args, environments + [BUILTIN_ENV])
    if unmatched:
        raise SelectionError(unmatched)


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


def launched() -> bool:
    '''A launched_through() is in force (a command run on the testbed).'''
    return _launch.environment is not None


@dataclass(frozen=True)
class SuiteRun:
    '''What one run_suite() did: its exit code by the contract, and the JSON
    report with results it wrote in this invocation, or None where it wrote
    none (a listing, a dry run, a rejected command line, a selection of no
    case): a caller reads this report, never a *-latest.json that an
    earlier invocation may have left.'''
    code: int
    report: Path | None = None

    def nothing_ran(self, what: str, consequence: str) -> Exit:
        '''The verdict where ``what`` wrote no report with results: not
        decided, or the worse code the run gave; one line says so.'''
        say(f'{what} ran nothing (exit code {int(self.code)}): {consequence}')
        return worst(self.code, Exit.UNDECIDED)


def run_suite(name: str, reframe_args: list, prefix: list = (), env: dict | None = None,
              judged_elsewhere: str = '') -> SuiteRun:
    '''Run ReFrame (under ``prefix``, e.g. inside a testbed node), keep the
    JSON report as reports/<name>-latest.json, print where things are and
    the closing summary; return the exit code by the contract and the
    report (SuiteRun).  Every repeat counts (hpcnet.session.verdict).  Failures are
    final, except those a stack's named known issue explains, and a case
    the testbed host was too busy to judge is measured again (why_again()),
    each repeat on its own; a case decided only then is listed as such.
    ``judged_elsewhere`` names what judges performance when the runs are
    not held to references (a baseline's, an acceptance's runs).'''
    if _launch.environment is not None and not prefix:
        prefix = list(_launch.prefix)
        env = _launch.environment(dict(env if env is not None else os.environ))
    cmd, report = reframe_cmd(name, reframe_args)
    left_out = _check_before_running(reframe_args, env)
    say('running: ' + ' '.join(cmd))
    start = time.monotonic()
    rc = _run_reframe([*prefix, *cmd], env)
    listing = any(is_option(a, LISTING_OPTIONS) for a in reframe_args)
    if listing:
        return SuiteRun(rc)   # a listing runs nothing and writes no report
    if not report.exists():
        if rc == Exit.USAGE:
            # argparse's exit code: ReFrame rejected an option (its message is above).
            say(f'reframe rejected its command line (exit code {rc}, its message above); '
                'nothing ran')
            return SuiteRun(Exit.USAGE)
        say(f'no report was written ({report}); reframe exit code {rc}')
        return SuiteRun(Exit.FAILED)
    repeats = case_repeats_of([references.load_report(report)])
    if not repeats:
        say(f'no test case was selected by: {" ".join(reframe_args) or "(no options)"}; '
            'see `hpcnet run -l` for what exists')
        return SuiteRun(Exit.UNDECIDED)
    if '--dry-run' in cmd:
        say(f'dry run: {len(repeats)} cases generated their job scripts under '
            f'{session_prefix(name, reframe_args)}; nothing was submitted (reframe exit code {rc})')
        return SuiteRun(Exit.FAILED if rc else Exit.OK)
    retried = _run_again(name, repeats, reframe_args, prefix, env,
                         remeasure=not judged_elsewhere)
    wall = time.monotonic() - start
    data = references.load_report(report)
    data['hpcnet_retried'] = retried
    report.write_text(json.dumps(data, indent=1))
    latest = report.with_name('latest.json' if name == 'run' else f'{name}-latest.json')
    shutil.copyfile(report, latest)
    say(f'report: {latest} (copy of {report})')
    lines, code = summary(repeats, retried, judged_elsewhere)
    if left_out:
        lines.insert(-1, left_out_line(left_out))
    if rc != 0 and code != Exit.FAILED and \
            all(tc['result'] in NOT_FAILED for results in repeats.values() for tc in results):
        # ReFrame's exit is explained by a failed repeat (failed still, or
        # passed on a known issue's retry); without one, ReFrame failed
        # outside any case (an error before or between cases): never a pass.
        lines[-1] = f'{WORDS[Exit.FAILED]}: reframe exited {rc} with no failed case in the report'
        code = Exit.FAILED
    page = latest.with_suffix('.html')
    say('rendering the HTML report')
    page.write_text(hpcnet_report.render([data], hpcnet_report.retried_keys(data),
                                         verdict=lines[-1],
                                         title=' '.join(['hpcnet', name, *reframe_args])))
    say(f'HTML report: {page}')
    _index_stored_session((env or os.environ).get('RFM_SQLITE_DB_FILE'))
    say(f'perflogs: {PERFLOG_DIR}')
    say(f'wall time: {wall:.0f} s ({wall / 60:.1f} min)')
    for line in lines:
        say(line)
    say(f'exit code {int(code)}')
    return SuiteRun(code, report)


def _index_stored_session(db: str | None) -> None:
    '''Add the session ReFrame stored to the metrics index beside its
    results database (with any other it lacks).'''
    try:
        path = metricindex.results_db(Path(db) if db else None)
    except metricindex.MetricIndexError as err:
        say(f'metrics index not updated: {err}')
        return
    done = metricindex.sync(path, progress=say)
    say(f'metrics index: {metricindex.index_path(path)} ({done.indexed} session(s) added)')


def _check_before_running(reframe_args: list, env: dict | None) -> list:
    '''The environments found, a selection that exists, and a reference
    directory that loads, before ReFrame starts; returns the environments
    the selected partitions are not offered (stacks.LeftOut).'''
    say('discovering the compiler x MPI environments')
    named = named_system(reframe_args, os.environ)
    site = sites.session_site(named)
    found = stacks.discover(site=site)
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
    gone = _left_out_of_selection(found, site, named)
    for what in gone:
        say(f'left out: {what.environment} on {what.partition}: {what.missing}')
    return gone


def _left_out_of_selection(found: stacks.Discovery, site, named: str | None) -> list:
    '''stacks.left_out() of ``site``, the system the session runs on, of the
    partition --system (``named``) names if it names one.'''
    if site is None:
        return []
    return [gone for gone in stacks.left_out(found, [site])
            if ':' not in (named or '') or gone.partition == named]


def left_out_line(gone: list) -> str:
    '''The summary's one line of the environments not offered on a
    partition, grouped by what is missing.'''
    by_missing = {}
    for what in gone:
        by_missing.setdefault(what.missing, []).append(f'{what.environment} on {what.partition}')
    groups = '; '.join(f'{", ".join(where)} ({missing})' for missing, where in by_missing.items())
    return (f'LEFT OUT ({len(gone)}): {groups}: not offered where the MPI cannot use the '
            "partition's fabric on this host; install what is named (`make deps` installs the "
            'Debian packages the suite uses)')
