"""`hpcnet stacks`: the compiler x MPI environments, and why others are out."""
from __future__ import annotations

import json
from pathlib import Path

from hpcnet import stacks
from hpcnet.session import runner
from hpcnet.siteconfig import sites
from hpcnet.stacks import modules, spacklock


def _site(system: str | None):
    '''The site file of ``system``, None for none named.'''
    if not system:
        return None
    by_name = {s.system['name']: s for s in sites.load_site_files(*sites.system_directories())}
    if system not in by_name:
        raise runner.SelectionError(f'--system {system}: no such system (valid: '
                                    f'{", ".join(sorted(by_name))})')
    return by_name[system]


def run(args) -> int:
    if args.spack_lock:
        try:
            print(spacklock.table(Path(args.spack_lock),
                                  Path(args.install_tree) if args.install_tree else None))
        except spacklock.SpackLockError as err:
            raise runner.SelectionError(str(err)) from None
        return 0
    site = _site(args.system)
    found = stacks.discover(use_cache=not args.refresh,
                            site=site or sites.session_site(None))
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
        # Discovery gave it a launcher directory: which launcher, read only then.
        kept = env.mpi.candidate.launcher_dir and stacks.kept_launcher(env.mpi.candidate.bindir)
        if kept:
            print(f'{"":22} starts ranks with {kept} without a scheduler '
                  f'({env.mpi.candidate.bindir}/mpirun is Spack\'s ~legacylaunchers notice)')
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
        runner.say('no working compiler x MPI environment found')
        return 1
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser('stacks', help='list the compiler x MPI environments')
    p.add_argument('--refresh', action='store_true', help='probe again, ignore the cache')
    p.add_argument('--modules', action='store_true',
                   help='also say where Lmod was searched and why modules were left out')
    p.add_argument('--json', action='store_true',
                   help="print the working environments as ReFrame's environment entries (JSON)")
    p.add_argument('--system', metavar='NAME',
                   help="only the environments this system's site file admits (its `stacks`)")
    p.add_argument('--spack-lock', metavar='FILE',
                   help="the matrix of a Spack environment's spack.lock (no Spack needed)")
    p.add_argument('--install-tree', metavar='DIR', help='where that environment is installed')
    p.set_defaults(func=run)
