"""The `hpcnet site` commands (registered by hpcnet.cli):

    hpcnet site init NAME [--dry-run]   a site file from Slurm and the nodes
    hpcnet site check [--system NAME]   what the site must hold before its first run
"""
from __future__ import annotations

import os
import re
import socket
import sys
import tempfile
from pathlib import Path

from hpcnet import stacks
from hpcnet.argtypes import positive_int
from hpcnet.constants import SYSTEMS_DIR, SYSTEMS_DIRS_ENV
from hpcnet.exitcodes import WORDS, Exit
from hpcnet.model import ConfigError
from hpcnet.siteinit import check, nodes, proposal, slurm
from hpcnet.sites import SHIPPED_SYSTEMS, load_site_files, sessions_dir, system_directories
from hpcnet.stacks import modules

#: Seconds the probe job may wait for its nodes.
PROBE_START_WITHIN_S = 120


def _say(msg: str) -> None:
    print(f'hpcnet: {msg}', file=sys.stderr, flush=True)


def target_directory() -> Path:
    '''Where `site init` writes: the first directory of HPCNET_SYSTEMS_DIRS
    (a site's files kept outside the checkout), else config/systems.'''
    extra = [d for d in os.environ.get(SYSTEMS_DIRS_ENV, '').split(':') if d]
    return Path(extra[0]) if extra else SYSTEMS_DIR


def probe_partition(part: slurm.SlurmPartition, count: int | None) -> list:
    '''NodeNetwork of each node of one short job on ``part`` (all its nodes,
    or ``count``).'''
    n = min(part.total_nodes, count) if count else part.total_nodes
    out = slurm.run(['srun', '-l', f'--partition={part.name}', f'--nodes={n}',
                     '--ntasks-per-node=1', f'--immediate={PROBE_START_WITHIN_S}',
                     f'--time={check.JOB_MINUTES}', 'sh', '-c', nodes.PROBE_SCRIPT],
                    timeout=PROBE_START_WITHIN_S + 60 * check.JOB_MINUTES)
    return nodes.parse_probe(out)


def cmd_init(args) -> int:
    proposal.check_name(args.name)
    path = target_directory() / f'{args.name}.py'
    if path.exists() and not args.dry_run:
        raise ConfigError(f'{path} exists: site init does not overwrite a site file (remove it, '
                          'or choose another NAME)')
    taken = {s.system['name']: s.path for s in load_site_files(*system_directories())}
    if args.name in taken and not args.dry_run:
        raise ConfigError(f'system {args.name!r} is already defined by {taken[args.name]}')
    try:
        partitions, slurm_nodes = slurm.cluster()
    except slurm.SlurmError as err:
        raise ConfigError(f'site init reads Slurm: {err}') from None
    wanted = [p for p in partitions if not args.partition or p.name in args.partition]
    if args.partition and len(wanted) < len(args.partition):
        known = ', '.join(p.name for p in partitions)
        raise ConfigError(f'--partition {", ".join(args.partition)}: Slurm has {known}')
    proposals, skipped = [], []
    for part in wanted:
        if part.total_nodes == 0:
            skipped.append(f'{part.name}: no nodes (scontrol show partition: TotalNodes=0)')
            continue
        _say(f'probing Slurm partition {part.name}: one job on '
             f'{min(part.total_nodes, args.nodes or part.total_nodes)} node(s)')
        try:
            found = probe_partition(part, args.nodes)
        except (slurm.SlurmError, nodes.ProbeError) as err:
            skipped.append(f'{part.name}: the probe job failed: {err}')
            continue
        made, why = proposal.propose(part, found)
        proposals += made
        skipped += why
    for line in skipped:
        _say(f'not proposed: {line}')
    if not proposals:
        raise ConfigError('site init found no partition with a fabric to test: '
                          + '; '.join(skipped))
    try:
        pmis = slurm.parse_mpi_list(slurm.run(['srun', '--mpi=list']))
    except slurm.SlurmError as err:
        raise ConfigError(f'site init reads Slurm: {err}') from None
    text = proposal.render(args.name, socket.gethostname(), proposals, skipped, partitions,
                           slurm_nodes, pmis)
    with tempfile.TemporaryDirectory() as scratch:
        (Path(scratch) / path.name).write_text(text)
        load_site_files(scratch)          # the written file validates, or this is a bug
    if args.dry_run:
        print(text, end='')
        return Exit.OK
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    _say(f'wrote {path}: {len(proposals)} partition(s) '
         f'({", ".join(p.name for p in proposals)}); next: hpcnet site check --system {args.name}')
    return Exit.OK


def _site(args):
    sites = load_site_files(*system_directories())
    if args.system:
        chosen = [s for s in sites if s.system['name'] == args.system]
        if not chosen:
            raise ConfigError(f'--system {args.system}: no site file defines it (systems: '
                              f'{", ".join(s.system["name"] for s in sites)})')
        return chosen[0]
    host = socket.gethostname()
    mine = [s for s in sites if s.system['name'] not in SHIPPED_SYSTEMS
            and any(re.match(p, host) for p in s.system.get('hostnames', []))]
    if len(mine) != 1:
        raise ConfigError(f'host {host!r} matches {len(mine)} site files: choose one with --system')
    return mine[0]


def cmd_check(args) -> int:
    site = _site(args)
    system = site.system
    try:
        wanted = re.compile(args.environ or '')
    except re.error as err:
        raise ConfigError(f'--environ {args.environ!r}: {err} (valid: a regular expression over '
                          'environment names, as ReFrame -p)') from None
    validated = check.ok(f'{site.path}: the site file validates ({len(system["partitions"])} '
                         'partition(s))')
    print(validated.line(), flush=True)
    try:
        parts, _ = slurm.cluster()
    except slurm.SlurmError as err:
        print(check.fail(f'Slurm: {err}').line())
        return Exit.FAILED
    # The discovery every run uses (its cache, probed for every host fabric):
    # a narrower one would probe again and replace the runs' cache.
    found = stacks.discover()
    # The environments each partition gets, as config/settings.py gives them.
    environs = stacks.site_environments(found, [site])
    modules.configure_reframe([system], environs)
    by_name = {e['name']: e for e in environs if wanted.search(e['name'])}
    per_partition = {p['name']: [by_name[n] for n in p['environs'] if n in by_name]
                     for p in system['partitions']}
    stage = Path(args.stage_dir) if args.stage_dir else sessions_dir(site)
    try:
        findings = [validated] + check.check_site(
            system, per_partition, stage, {p.name: p for p in parts},
            report=lambda f: print(f.line(), flush=True))
    except slurm.SlurmError as err:
        print(check.fail(f'Slurm: {err}').line())
        return Exit.FAILED
    code = check.exit_code(findings)
    failed = sum(f.code == Exit.FAILED for f in findings)
    print(f'hpcnet site check {system["name"]}: {WORDS[code]} ({len(findings)} findings, '
          f'{failed} failed)')
    return code


def register(sub) -> None:
    '''Add `site init` and `site check` to hpcnet's subcommands.'''
    p = sub.add_parser('site', help='site file from Slurm (init), and checks before the first run')
    ss = p.add_subparsers(dest='site_cmd', required=True)
    i = ss.add_parser('init', help='write config/systems/NAME.py from Slurm and the nodes')
    i.add_argument('name', help='the system name (and file name)')
    i.add_argument('--dry-run', action='store_true', help='print the file, write nothing')
    i.add_argument('--partition', action='append',
                   help='only this Slurm partition (repeatable; default all)')
    i.add_argument('--nodes', type=positive_int, help='probe this many nodes per partition (default all)')
    i.set_defaults(func=cmd_init)
    c = ss.add_parser('check', help='what a site must hold before its first run')
    c.add_argument('--system', help='the site (default: the site file matching this host)')
    c.add_argument('--stage-dir',
                   help="where jobs stage (default: hpcnet run's: the site file's prefix, "
                        'else output/ of the work directory)')
    c.add_argument('--environ', help='only environments matching this regex (as ReFrame -p)')
    c.set_defaults(func=cmd_check)
