"""The `hpcnet site` commands:

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

from hpcnet import stacks, topology
from hpcnet.argtypes import positive_int
from hpcnet.commands.parser import renamed
from hpcnet.constants import SYSTEMS_DIR
from hpcnet.variables import SYSTEMS_DIRS_ENV
from hpcnet.exitcodes import WORDS, Exit
from hpcnet.model import ConfigError, PartitionKey
from hpcnet.siteinit import check, nodes, plan, proposal, slurm
from hpcnet.siteconfig.sites import (SHIPPED_SYSTEMS, load_site_files,
                                     missing_system_directories, sessions_dir,
                                     system_directories)
from hpcnet.stacks import modules


def _say(msg: str) -> None:
    print(f'hpcnet: {msg}', file=sys.stderr, flush=True)


def target_directory() -> Path:
    '''Where `site init` writes: the first directory of HPCNET_SYSTEMS_DIRS
    (a site's files kept outside the checkout), else config/systems.'''
    extra = [d for d in os.environ.get(SYSTEMS_DIRS_ENV, '').split(':') if d]
    return Path(extra[0]) if extra else SYSTEMS_DIR


def _wanted(args, partitions: list) -> list:
    wanted = [p for p in partitions if not args.partition or p.name in args.partition]
    if args.partition and len(wanted) < len(args.partition):
        known = ', '.join(p.name for p in partitions)
        raise ConfigError(f'--partition {", ".join(args.partition)}: Slurm has {known}')
    return wanted


def _check_target(args) -> Path:
    proposal.check_name(args.name)
    path = target_directory() / f'{args.name}.py'
    if path.exists():
        raise ConfigError(f'{path} exists: site init does not overwrite a site file (remove it, '
                          'or choose another NAME)')
    taken = {s.system['name']: s.path for s in load_site_files(*system_directories())}
    if args.name in taken:
        raise ConfigError(f'system {args.name!r} is already defined by {taken[args.name]}')
    return path


def run_init(args) -> int:
    writes = not (args.dry_run or args.dump_commands)
    path = _check_target(args) if writes else proposal.check_name(args.name)
    access = plan.access_options(args.reservation, args.account, args.qos)
    source = plan.Saved(Path(args.from_dir)) if args.from_dir else plan.Live()
    try:
        # Before anything runs: the patterns hold for the host Slurm is read on.
        login_hosts = proposal.hostnames(args.hostnames, source.hostname()) \
            if args.hostnames and not args.dump_commands else None
        slurm_nodes = slurm.parse_nodes(source.output(plan.SHOW_NODES))
        partitions = slurm.parse_partitions(source.output(plan.SHOW_PARTITIONS), slurm_nodes)
    except slurm.SlurmError as err:
        raise ConfigError(f'site init reads Slurm: {err}') from None
    wanted = _wanted(args, partitions)
    probes, skipped, left_out = plan.probes_for(wanted, slurm_nodes, access,
                                              args.reservation, args.nodes)
    for line in left_out:
        _say(line)
    commands = [plan.HOSTNAME, plan.SHOW_NODES, plan.SHOW_PARTITIONS,
                *(c for _, c in probes), plan.MPI_LIST, plan.SHOW_TOPOLOGY]
    if args.dump_commands:
        print(plan.dump_script(commands), end='')
        return Exit.OK
    if args.dry_run:
        print('# hpcnet site init --dry-run: the commands it would run ($PROBE: the probe '
              'script, hpcnet.siteinit.nodes.PROBE_SCRIPT; --dump-commands prints it)')
        print('\n'.join(c.shown() for c in commands[3:]))
        for line in skipped:
            _say(f'not proposed: {line}')
        return Exit.OK
    # A reservation ends with its maintenance window: the nightly jobs must
    # not ask for it afterwards, unless the site says they should.
    written_access = access if args.keep_reservation else \
        plan.access_options(None, args.account, args.qos)
    text, made = _propose(args, source, partitions, slurm_nodes, probes, skipped, left_out,
                          written_access, login_hosts)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    _say(f'wrote {path}: {len(made)} partition(s) ({", ".join(p.name for p in made)}); next: '
         f'hpcnet site check --system {args.name}')
    # A Slurm partition with nodes and no partition in the file is not decided:
    # its nodes were busy, or its probe failed.
    missing = [p.name for p in wanted if p.total_nodes and p.name not in {m.slurm for m in made}]
    if missing:
        _say(f'{WORDS[Exit.UNDECIDED]}: Slurm partition(s) {", ".join(missing)} not in the file '
             '("not proposed" says why)')
    return Exit.UNDECIDED if missing else Exit.OK


def _propose(args, source, partitions, slurm_nodes, probes, skipped, left_out, access,
             login_hosts) -> tuple:
    '''(the site file's text, [Proposal] in it) from each probe's output.'''
    proposals = []
    for part, command in probes:
        _say(f'Slurm partition {part.name}: the probe job on {", ".join(command.hosts)}'
             + (f' (saved in {source.directory / command.file})' if args.from_dir else ''))
        try:
            found = nodes.parse_probe(source.output(command))
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
        pmis = slurm.parse_mpi_list(source.output(plan.MPI_LIST))
    except slurm.SlurmError as err:
        raise ConfigError(f'site init reads Slurm: {err}') from None
    _record_trees(source, proposals, partitions)
    text = proposal.render(args.name, source.hostname(), proposals, skipped, partitions,
                           slurm_nodes, pmis, left_out=left_out, access=access,
                           login_hosts=login_hosts)
    with tempfile.TemporaryDirectory() as scratch:
        (Path(scratch) / f'{args.name}.py').write_text(text)
        load_site_files(scratch)          # the written file validates, or this is a bug
    return text, proposals


def _record_trees(source, proposals: list, partitions: list) -> None:
    '''Each proposal's switch tree, where Slurm has one (``scontrol show
    topology``, the topology/tree plugin's); a Slurm without one leaves the
    partitions without, and says so.'''
    shown = plan.SHOW_TOPOLOGY.shown()
    try:
        text = source.output(plan.SHOW_TOPOLOGY)
    except slurm.SlurmError as err:
        _say(f'no switch tree recorded: {err}')
        return
    if not any(line.strip().lower().startswith('switchname=') for line in text.splitlines()):
        _say(f'no switch tree recorded: {shown} lists no switch (no topology/tree plugin)')
        return
    tree = topology.parse_topology(text, shown)
    by_name = {p.name: p for p in partitions}
    for prop in proposals:
        entry = tree.site_entry(by_name[prop.slurm].nodes, f'Slurm partition {prop.slurm}')
        prop.extras[PartitionKey.TOPOLOGY] = (
            entry, f'{shown}: {len(entry["leaves"])} leaves; the uplinks\' oversubscription is '
                   "not Slurm's to say: set it (or a leaf's capacity) where it is not 1")


def _site(args):
    sites = load_site_files(*system_directories())
    if args.system:
        chosen = [s for s in sites if s.system['name'] == args.system]
        if not chosen:
            missing = missing_system_directories()
            raise ConfigError(f'--system {args.system}: no site file defines it (systems: '
                              f'{", ".join(s.system["name"] for s in sites)})'
                              + (f'; {missing}' if missing else ''))
        return chosen[0]
    host = socket.gethostname()
    mine = [s for s in sites if s.system['name'] not in SHIPPED_SYSTEMS
            and any(re.match(p, host) for p in s.system.get('hostnames', []))]
    if len(mine) != 1:
        raise ConfigError(f'host {host!r} matches {len(mine)} site files: choose one with --system')
    return mine[0]


def run_check(args) -> int:
    site = _site(args)
    system = site.system
    try:
        wanted = re.compile(args.prgenv or '')
    except re.error as err:
        raise ConfigError(f'--prgenv {args.prgenv!r}: {err} (valid: a regular expression over '
                          'environment names, as ReFrame -p)') from None
    validated = check.ok(f'{site.path}: the site file validates ({len(system["partitions"])} '
                         'partition(s))')
    print(validated.line(), flush=True)
    try:
        parts, slurm_nodes = slurm.cluster()
        fence = check.check_pmix_fence(system, slurm.parse_config(
            slurm.run(list(slurm.SHOW_CONFIG))))
    except slurm.SlurmError as err:
        print(check.fail(f'Slurm: {err}').line())
        return Exit.FAILED
    before_jobs = [validated]
    if fence is not None:
        print(fence.line(), flush=True)
        before_jobs.append(fence)
    # The discovery every run uses (its cache, probed for every host fabric):
    # a narrower one would probe again and replace the runs' cache.
    found = stacks.discover(site=site)
    # The environments each partition gets, as config/settings.py gives them.
    environs = stacks.site_environments(found, [site])
    modules.configure_reframe([system], environs)
    by_name = {e['name']: e for e in environs if wanted.search(e['name'])}
    per_partition = {p['name']: [by_name[n] for n in p['environs'] if n in by_name]
                     for p in system['partitions']}
    stage = Path(args.stage_dir) if args.stage_dir else sessions_dir(site)
    try:
        findings = before_jobs + check.check_site(
            system, per_partition, stage, {p.name: p for p in parts},
            report=lambda f: print(f.line(), flush=True), slurm_nodes=slurm_nodes)
    except slurm.SlurmError as err:
        print(check.fail(f'Slurm: {err}').line())
        return Exit.FAILED
    code = check.exit_code(findings)
    failed = sum(f.code == Exit.FAILED for f in findings)
    print(f'hpcnet site check {system["name"]}: {WORDS[code]} ({len(findings)} findings, '
          f'{failed} failed)')
    return code


def add_parser(sub) -> None:
    '''Add `site init` and `site check` to hpcnet's subcommands.'''
    p = sub.add_parser('site', help='site file from Slurm (init), and checks before the first run')
    ss = p.add_subparsers(dest='site_cmd', required=True)
    i = ss.add_parser('init', help='write config/systems/NAME.py from Slurm and the nodes')
    i.add_argument('name', help='the system name (and file name)')
    modes = i.add_mutually_exclusive_group()
    modes.add_argument('--dry-run', action='store_true',
                       help='print the probe jobs it would start; start none, write nothing')
    modes.add_argument('--dump-commands', action='store_true',
                       help='print a shell script that saves, on the cluster, every output '
                            'site init reads (into its argument DIR); then use --from DIR')
    i.add_argument('--from', dest='from_dir', metavar='DIR',
                   help="write the file from the outputs --dump-commands' script saved in DIR "
                        '(runs nothing)')
    i.add_argument('--partition', action='append',
                   help='only this Slurm partition (repeatable; default all)')
    i.add_argument('--nodes', type=positive_int,
                   help='probe this many idle nodes per partition (default all idle nodes)')
    i.add_argument('--reservation',
                   help='run the probe in this reservation (Slurm\'s option of that name); it '
                        "is not written into the partitions' access, as it ends with its "
                        'window, unless --keep-reservation')
    i.add_argument('--keep-reservation', action='store_true',
                   help="also write --reservation into every partition's access (a standing "
                        'reservation the nightly runs use)')
    for option, what in (('--account', 'an account'), ('--qos', 'a QOS')):
        i.add_argument(option, help=f'run the probe in {what}, and write it into every '
                                    "partition's access (Slurm's option of that name)")
    i.add_argument('--hostnames', action='append', metavar='REGEX',
                   help='the login nodes ReFrame picks this system on (repeatable; a Python '
                        "regex matched from the start of the name, e.g. '^login[0-9]+$'; "
                        'default: this host alone)')
    i.set_defaults(func=run_init)
    c = ss.add_parser('check', help='what a site must hold before its first run')
    c.add_argument('--system', metavar='NAME', help='the site (default: the site file matching this host)')
    c.add_argument('--stage-dir',
                   help="where jobs stage (default: hpcnet run's: the site file's prefix, "
                        'else output/ of the work directory)')
    c.add_argument('-p', '--prgenv', help='only environments matching this regex (as ReFrame -p)')
    renamed(c, '--environ', '-p/--prgenv')
    c.set_defaults(func=run_check)
