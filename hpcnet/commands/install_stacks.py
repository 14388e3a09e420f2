"""`hpcnet install-stacks`: the PyPI MPI stacks, one prefix each."""
from __future__ import annotations

import shutil
import subprocess
import sys

from hpcnet import stacks
from hpcnet.session import runner
from hpcnet.longwork.progress import phase
from hpcnet.stacks import sources


def run(args) -> int:
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
            runner.say(f'{name}: {" ".join(reqs)} already in {prefix}')
            continue
        try:
            # An old prefix left in part would mix its libraries with the new.
            if prefix.exists():
                shutil.rmtree(prefix)
        except OSError as err:
            failed.append(name)
            runner.say(f'{name}: {prefix} cannot be removed ({err}); this stack is left out')
            continue
        cmd = [sys.executable, '-m', 'pip', 'install', '--quiet', '--disable-pip-version-check',
               '--no-warn-script-location', '--ignore-installed', '--prefix', str(prefix), *reqs]
        if entry.pypi_no_deps:
            cmd.insert(cmd.index('--prefix'), '--no-deps')
        # pip says nothing (--quiet) while it downloads: the phase is said on stderr.
        with phase(f'{name}: downloading and installing {" ".join(reqs)} into {prefix}') as done:
            res = subprocess.run(cmd)
            done.outcome = 'done' if res.returncode == 0 else f'pip failed (exit {res.returncode})'
        if res.returncode != 0:
            failed.append(name)
            runner.say(f'{name}: pip failed (exit {res.returncode}); this stack is left out')
            shutil.rmtree(prefix, ignore_errors=True)
            continue
        marker.write_text(' '.join(reqs) + '\n')
        runner.say(f'{name}: {" ".join(reqs)} installed in {prefix}')
    return 1 if failed and args.strict else 0


def add_parser(sub) -> None:
    p = sub.add_parser('install-stacks', help='install the PyPI MPI stacks')
    p.add_argument('--only', nargs='*', choices=[e.name for e in sources.pypi_stacks()],
                   metavar='STACK', help='install only these stacks (%(choices)s; '
                                         'default: all)')
    p.add_argument('--strict', action='store_true', help='fail when a stack cannot be installed')
    p.set_defaults(func=run)
