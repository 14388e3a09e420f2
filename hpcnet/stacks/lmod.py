"""Lmod, the program: where it is, what it lists in a set of directories,
and what loading modules gives a shell.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from hpcnet.stacks.candidate import StackError
from hpcnet.stacks.modulenames import AvailableModule
from hpcnet.variables import MODULEPATH_ENV

#: Where distributions install Lmod (Debian/Ubuntu ``lmod``, EPEL ``Lmod``):
#: used when the shell has not initialised Lmod (no LMOD_CMD), as in CI.
LMOD_COMMANDS = ('/usr/share/lmod/lmod/libexec/lmod',)
#: Seconds one Lmod command may take (a cold spider cache on a big tree).
LMOD_TIMEOUT = 120
#: Variables that are Lmod's own bookkeeping, never part of what a module
#: gives a program (and wrong to copy into a job that loads the module).
_LMOD_STATE = re.compile(r'(_ModuleTable\w*|__LMOD\w*|_LMFILES_|LOADEDMODULES|MODULEPATH\w*|'
                         r'LMOD_\w+|__Init_Default_Modules|MODULESHOME)')
#: What ReFrame accepts as a variable name (its config schema).
_VARIABLE_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
#: Decorations some Lmod versions put after a name in terse output
#: ('(D)', '(L)', '(default)'); ReFrame's find_modules strips the same.
_DECORATION = re.compile(r'\(\S+\)')


class ModuleLoadError(RuntimeError):
    '''Lmod could not load a module (its message).'''



def parse_avail(text: str, requires: tuple = ()) -> list:
    '''The modules of ``module -t avail`` output (Lmod writes it to stderr):
    ``DIR:`` lines open a MODULEPATH directory, ``Name/`` lines are
    directories of versions, decorations are dropped, and hidden modules (a
    component starting with '.', listed only with --show_hidden) are left
    out.  ``requires``: the modules whose load opened these directories.'''
    modules, directory = [], None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.endswith('/'):
            continue
        if line.endswith(':'):
            directory = line[:-1]
            continue
        name = _DECORATION.sub('', line).strip()
        # Anything else Lmod may print (a warning) has blanks; a name has none.
        if directory is None or re.search(r'\s', name):
            continue
        if any(part.startswith('.') for part in name.split('/')):
            continue
        modules.append(AvailableModule(name, directory, requires))
    return modules

def lmod_command() -> str | None:
    '''Lmod's command: $LMOD_CMD (set by Lmod's shell initialisation), else
    where distributions install it; None without Lmod.'''
    given = os.environ.get('LMOD_CMD')
    candidates = (given,) if given else LMOD_COMMANDS
    for cmd in candidates:
        if os.path.isfile(cmd) and os.access(cmd, os.X_OK):
            return cmd
    return None


def lmod_init_script(lmod: str) -> Path:
    '''Lmod's bash initialisation (defines ``module``), next to its command:
    <lmod>/libexec/lmod -> <lmod>/init/bash (not resolved: Debian's
    /usr/share/lmod/lmod links to the versioned directory, which an upgrade
    replaces).'''
    return Path(lmod).parent.parent / 'init' / 'bash'


def search_path() -> list:
    '''Directories searched for modules: MODULEPATH, then HPCNET_MODULEPATH.
    Raises StackError for an HPCNET_MODULEPATH entry that is no directory.'''
    dirs = [d for d in os.environ.get('MODULEPATH', '').split(':') if d]
    for d in (d for d in os.environ.get(MODULEPATH_ENV, '').split(':') if d):
        if not os.path.isdir(d):
            raise StackError(f'{MODULEPATH_ENV}: {d!r} is not a directory (valid: directories '
                             'of modulefiles, as for MODULEPATH, colon separated)')
        if d not in dirs:
            dirs.append(d)
    return dirs


def avail(lmod: str, dirs: list, requires: tuple = ()) -> list:
    '''Every module Lmod lists in ``dirs`` (hidden ones left out), each
    requiring ``requires`` (what opened ``dirs``).  Raises StackError when
    Lmod itself fails.'''
    env = {**os.environ, 'MODULEPATH': ':'.join(dirs)}
    try:
        res = subprocess.run([lmod, 'bash', '-t', 'avail'], env=env, text=True,
                             capture_output=True, timeout=LMOD_TIMEOUT)
    except (OSError, subprocess.SubprocessError) as err:
        raise StackError(f'Lmod ({lmod}): `module -t avail` did not run: {err}') from None
    if res.returncode != 0:
        raise StackError(f'Lmod ({lmod}): `module -t avail` over {":".join(dirs)} failed: '
                         f'{" ".join(res.stderr.split())[-500:]}')
    return parse_avail(res.stderr, requires)


def load(lmod: str, modules: list, dirs: list) -> dict:
    '''The environment after ``module load`` of ``modules`` (AvailableModule),
    in order, the directory of each one of the search path first on
    MODULEPATH (as ``module use`` puts it in a job; a hierarchy's level is
    opened by the module it requires, as in the job); raises ModuleLoadError
    with Lmod's message.  No modules: the same shell's environment without a
    load, what module_variables compares with (bash sets a few variables of
    its own).'''
    first = [m.directory for m in reversed(modules) if not m.requires]
    path = list(dict.fromkeys(first + dirs))
    env = {**os.environ, 'MODULEPATH': ':'.join(path), 'LMOD_CMD': lmod}
    # Lmod prints shell code on stdout (and `false` when a load fails): the
    # module names are arguments, never part of the script.
    script = 'eval "$("$LMOD_CMD" bash load "$@")" && env -0' if modules else 'env -0'
    try:
        res = subprocess.run(['bash', '--noprofile', '--norc', '-c', script,
                              'hpcnet-module-load', *(m.name for m in modules)],
                             env=env, capture_output=True, timeout=LMOD_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise ModuleLoadError(f'`module load {" ".join(m.name for m in modules)}` did not end '
                              f'within {LMOD_TIMEOUT} s') from None
    if res.returncode != 0 or not res.stdout:
        message = ' '.join(res.stderr.decode(errors='replace').split())
        raise ModuleLoadError(f'`module load {" ".join(m.name for m in modules)}` failed: '
                              f'{message[:400] or f"exit status {res.returncode}"}')
    loaded = {}
    for entry in res.stdout.decode(errors='replace').split('\0'):
        name, sep, value = entry.partition('=')
        if sep:
            loaded[name] = value
    return loaded


def loaded_modules(env: dict) -> list:
    '''Full names of the modules loaded in ``env`` (Lmod's LOADEDMODULES).'''
    return [m for m in env.get('LOADEDMODULES', '').split(':') if m]


def loaded_files(env: dict) -> dict:
    '''{modulefile: module name} of the modules loaded in ``env`` (Lmod's
    _LMFILES_ beside LOADEDMODULES): a file is one module, where a name is
    not (each compiler of a hierarchy may have its own openmpi/5.0.5).'''
    files = [f for f in env.get('_LMFILES_', '').split(':') if f]
    return dict(zip(files, loaded_modules(env)))


def opened_directories(env: dict, known: set) -> list:
    '''The directories of ``env``'s MODULEPATH not in ``known``: the
    hierarchy levels the loaded modules opened.'''
    return [d for d in dict.fromkeys(env.get('MODULEPATH', '').split(':'))
            if d and d not in known]


def module_variables(env: dict, base: dict) -> tuple:
    '''What loading gave: ((name, value), ...) of the variables that differ
    from ``base``, Lmod's own bookkeeping left out.  PATH and
    LD_LIBRARY_PATH that only grew in front are written relative
    ('/x/bin:$PATH'), as MpiCandidate.env expands them.'''
    changed = []
    for name, value in sorted(env.items()):
        if base.get(name) == value or _LMOD_STATE.fullmatch(name) \
                or not _VARIABLE_NAME.fullmatch(name):
            continue
        if name in ('PATH', 'LD_LIBRARY_PATH') and base.get(name):
            value = _relative_path(value, base[name], name)
        changed.append((name, value))
    return tuple(changed)


def _relative_path(value: str, before: str, name: str) -> str:
    ''''/new/dir:$NAME' where ``value`` is new directories in front of
    ``before`` (which Lmod also rids of duplicates), else ``value``.'''
    old = before.split(':')
    entries = value.split(':')
    front = 0
    while front < len(entries) and entries[front] not in old:
        front += 1
    if front and entries[front:] in (old, list(dict.fromkeys(old))):
        return ':'.join(entries[:front] + [f'${name}'])
    return value
