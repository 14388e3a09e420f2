"""Environment modules (Lmod) as a source of MPI stacks.

On a cluster the MPIs are modules: EasyBuild's (``OpenMPI/4.1.6-GCC-13.2.0``
and the toolchains that load them, ``gompi/2023b``, ``foss/2023b``) or
Spack's (``openmpi/5.0.5-gcc-12.2.0-abcdefg``).  This source lists what Lmod
offers (``module -t avail``, as ReFrame's ``find_modules`` and the EESSI
test suite do), picks the MPI and toolchain modules by name (each MPI
family's ``module_packages`` and toolchains in the registry, hpcnet.mpi),
loads each and makes an :class:`hpcnet.stacks.candidate.MpiCandidate` of the
environment the module gives: the
``mpicc`` first on its ``PATH`` and the variables it sets.  The candidate
names the module (with the directory it was found in), so the ReFrame
environment loads it in every job (``module use DIR; module load NAME``), and
the environment is named after it: ``<compiler>-gompi-2023b``.

OSU and IMB installed as modules of their own
(``OSU-Micro-Benchmarks/7.4-gompi-2023b``) are bound to the environment whose
toolchain or MPI module they load: their programs become that environment's
tools and the job loads them too.

Where modules are searched: ``MODULEPATH``, then the directories of
``HPCNET_MODULEPATH`` (colon separated).  Without Lmod the source finds
nothing, and says so in :func:`survey`'s summary; it is never an error.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from hpcnet import mpi
from hpcnet.stacks.candidate import (KNOWN_TOOLS, TOOL_SUBDIRS, MpiCandidate, StackError,
                                     wrapper_compiler)

#: More directories of modules to search, after MODULEPATH (colon separated).
MODULEPATH_ENV = 'HPCNET_MODULEPATH'
#: Where distributions install Lmod (Debian/Ubuntu ``lmod``, EPEL ``Lmod``):
#: used when the shell has not initialised Lmod (no LMOD_CMD), as in CI.
LMOD_COMMANDS = ('/usr/share/lmod/lmod/libexec/lmod',)
#: Seconds one Lmod command may take (a cold spider cache on a big tree).
LMOD_TIMEOUT = 120

#: Benchmark modules whose programs become tools of an environment
#: (EasyBuild: OSU-Micro-Benchmarks, IMB; Spack: osu-micro-benchmarks,
#: intel-mpi-benchmarks), by package name -> benchmark suite.
TOOL_MODULES = {
    'osu-micro-benchmarks': 'OSU',
    'imb': 'IMB',
    'intel-mpi-benchmarks': 'IMB',
}


class Role:
    '''What a module is to hpcnet.'''
    MPI = 'mpi'
    TOOLCHAIN = 'toolchain'
    TOOL = 'tool'


#: Variables that are Lmod's own bookkeeping, never part of what a module
#: gives a program (and wrong to copy into a job that loads the module).
_LMOD_STATE = re.compile(r'(_ModuleTable\w*|__LMOD\w*|_LMFILES_|LOADEDMODULES|MODULEPATH\w*|'
                         r'LMOD_\w+|__Init_Default_Modules|MODULESHOME)')
#: What ReFrame accepts as a variable name (its config schema).
_VARIABLE_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
#: Decorations some Lmod versions put after a name in terse output
#: ('(D)', '(L)', '(default)'); ReFrame's find_modules strips the same.
_DECORATION = re.compile(r'\(\S+\)')
#: A name ReFrame >= 4.10.1 accepts for an environment.
ENVIRONMENT_NAME = re.compile(r'[a-zA-Z_][a-zA-Z0-9_-]*')


class ModuleLoadError(RuntimeError):
    '''Lmod could not load a module (its message).'''


@dataclass(frozen=True)
class AvailableModule:
    '''One line of ``module -t avail``: a module and the MODULEPATH directory
    it was listed under.'''
    name: str            #: full name, e.g. 'gompi/2023b'
    directory: str

    @property
    def package(self) -> str:
        return self.name.split('/')[0]

    @property
    def role(self) -> str | None:
        return role(self.name)

    def spec(self) -> dict:
        '''The module as a ReFrame environment lists it: loaded from its own
        directory, so jobs need not inherit any MODULEPATH.'''
        return {'name': self.name, 'path': self.directory}


def role(module_name: str) -> str | None:
    '''Role of a module by its package name, or None (not ours).'''
    package = module_name.split('/')[0].lower()
    if mpi.module_family(package):
        return Role.MPI
    if package in dict(mpi.toolchains()):
        return Role.TOOLCHAIN
    if package in TOOL_MODULES:
        return Role.TOOL
    return None


def expected_family(module_name: str) -> str | None:
    package = module_name.split('/')[0].lower()
    return mpi.module_family(package) or dict(mpi.toolchains()).get(package)


def environment_name(module_name: str) -> str:
    '''The module's part of an environment name, valid for ReFrame >= 4.10.1
    (``^[a-zA-Z_][a-zA-Z0-9_-]*$``): '/' becomes '-', '.' and any other
    character '_' (gompi/2023b -> gompi-2023b, OpenMPI/4.1.6-GCC-13.2.0 ->
    OpenMPI-4_1_6-GCC-13_2_0).'''
    name = re.sub(r'[^A-Za-z0-9_-]', '_', module_name.replace('/', '-'))
    return name if re.match(r'[A-Za-z_]', name) else f'_{name}'


def parse_avail(text: str) -> list:
    '''The modules of ``module -t avail`` output (Lmod writes it to stderr):
    ``DIR:`` lines open a MODULEPATH directory, ``Name/`` lines are
    directories of versions, decorations are dropped, and hidden modules (a
    component starting with '.', listed only with --show_hidden) are left
    out.'''
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
        modules.append(AvailableModule(name, directory))
    return modules


# --------------------------------------------------------------------------
# Lmod
# --------------------------------------------------------------------------

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


def avail(lmod: str, dirs: list) -> list:
    '''Every module Lmod lists in ``dirs`` (hidden ones left out).  Raises
    StackError when Lmod itself fails.'''
    env = {**os.environ, 'MODULEPATH': ':'.join(dirs)}
    try:
        res = subprocess.run([lmod, 'bash', '-t', 'avail'], env=env, text=True,
                             capture_output=True, timeout=LMOD_TIMEOUT)
    except (OSError, subprocess.SubprocessError) as err:
        raise StackError(f'Lmod ({lmod}): `module -t avail` did not run: {err}') from None
    if res.returncode != 0:
        raise StackError(f'Lmod ({lmod}): `module -t avail` over {":".join(dirs)} failed: '
                         f'{" ".join(res.stderr.split())[-500:]}')
    return parse_avail(res.stderr)


def load(lmod: str, modules: list, dirs: list) -> dict:
    '''The environment after ``module load`` of ``modules`` (AvailableModule),
    each one's directory first on MODULEPATH (as ``module use`` puts it in a
    job); raises ModuleLoadError with Lmod's message.  No modules: the same
    shell's environment without a load, what module_variables compares with
    (bash sets a few variables of its own).'''
    first = [m.directory for m in reversed(modules)]
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


def _library_layer(wrapper: str, env: dict) -> str | None:
    ''''ofi' or 'ucx': the transport layer the MPI library the wrapper links
    loads (libfabric first, as for the MPICH wheels that carry both), read
    with ldd; None when the library names neither.'''
    try:
        show = subprocess.run([wrapper, '-show'], env=env, text=True, capture_output=True,
                              timeout=30).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None     # the probe says what is wrong with this wrapper
    libdirs = [a[2:] for a in show if a.startswith('-L')]
    names = [a[2:] for a in show if a in ('-lmpi', '-lmpich')]
    for d in libdirs:
        for name in names:
            for lib in sorted(Path(d).glob(f'lib{name}.so*')):
                with open(lib, 'rb') as f:
                    if f.read(4) != b'\x7fELF':
                        continue    # a linker script (INPUT(libmpi.so.12))
                deps = subprocess.run(['ldd', str(lib)], env=env, text=True,
                                      capture_output=True, timeout=30).stdout
                if 'libfabric' in deps:
                    return 'ofi'
                return 'ucx' if 'libucp' in deps else None
    return None


# --------------------------------------------------------------------------
# The source
# --------------------------------------------------------------------------

@dataclass
class _Chosen:
    '''A module that becomes an environment, with what loading it gave.'''
    module: AvailableModule
    env: dict
    mpi_modules: set          #: MPI modules it loaded (itself, for an MPI module)
    tools: list = field(default_factory=list)   #: [(tool module, prefix), ...]


@dataclass
class ModuleSurvey:
    '''What the module source found, and why anything was left out.'''
    lmod: str | None = None
    search_path: list = field(default_factory=list)
    candidates: list = field(default_factory=list)
    #: (module, why) for every MPI, toolchain or benchmark module left out
    skipped: list = field(default_factory=list)

    def summary(self) -> str:
        if self.lmod is None:
            return ('modules: no Lmod (LMOD_CMD unset, none at '
                    f'{", ".join(LMOD_COMMANDS)}): no module environments')
        if not self.search_path:
            return (f'modules: Lmod {self.lmod}, but MODULEPATH and {MODULEPATH_ENV} are empty: '
                    'no module environments')
        names = ', '.join(c.modules[0]['name'] for c in self.candidates) or 'none'
        return (f'modules: Lmod {self.lmod}, searched {":".join(self.search_path)}; '
                f'MPI and toolchain modules: {names}')


def survey() -> ModuleSurvey:
    '''Find the MPI and toolchain modules, load each, bind the benchmark
    modules to them; every module left out is named with the reason.'''
    result = ModuleSurvey(lmod=lmod_command())
    if result.lmod is None:
        if os.environ.get(MODULEPATH_ENV):
            raise StackError(f'{MODULEPATH_ENV} is set but there is no Lmod: LMOD_CMD is unset '
                             f'and none is at {", ".join(LMOD_COMMANDS)} (Debian package lmod)')
        return result
    result.search_path = search_path()
    if not result.search_path:
        return result
    lmod, dirs = result.lmod, result.search_path
    available = [m for m in avail(lmod, dirs) if m.role]
    if not available:
        return result
    base = load(lmod, [], dirs)
    already = set(loaded_modules(base))

    chosen, holder = [], {}
    # Compiler + MPI toolchains first (hpcnet.mpi.toolchains): where two load
    # the same MPI module (gompi/2023b and foss/2023b), the first becomes the
    # environment, and OSU and IMB are built with those.
    order = [name for name, _ in mpi.toolchains()]
    toolchains = sorted((m for m in available if m.role == Role.TOOLCHAIN),
                        key=lambda m: order.index(m.package.lower()))
    mpis = [m for m in available if m.role == Role.MPI]
    for module in toolchains + mpis:
        if module.name in holder:
            result.skipped.append((module.name, f'loaded by {holder[module.name]}, which is '
                                                'its environment'))
            continue
        try:
            env = load(lmod, [module], dirs)
        except ModuleLoadError as err:
            result.skipped.append((module.name, str(err)))
            continue
        new = [m for m in loaded_modules(env) if m not in already]
        mpi_modules = {m for m in new if role(m) == Role.MPI}
        shared = sorted(mpi_modules & set(holder))
        if shared:
            result.skipped.append((module.name, f'loads {shared[0]}, which is already the MPI '
                                                f'of {holder[shared[0]]}'))
            continue
        for m in mpi_modules | {module.name}:
            holder[m] = module.name
        chosen.append(_Chosen(module, env, mpi_modules))

    for tool in (m for m in available if m.role == Role.TOOL):
        _bind_tool(lmod, dirs, tool, chosen, already, base, result.skipped)

    for item in chosen:
        cand = _candidate(item, base, result.skipped)
        if cand is not None:
            result.candidates.append(cand)
    return result


def _bind_tool(lmod, dirs, tool, chosen, already, base, skipped) -> None:
    '''Bind benchmark module ``tool`` to the chosen module whose toolchain or
    MPI module it loads (the newest of a suite wins: Lmod lists versions in
    ascending order).'''
    try:
        env = load(lmod, [tool], dirs)
    except ModuleLoadError as err:
        skipped.append((tool.name, str(err)))
        return
    new = set(loaded_modules(env)) - already
    owner = next((c for c in chosen if c.module.name in new or c.mpi_modules & new), None)
    if owner is None:
        skipped.append((tool.name, 'loads no MPI or toolchain module that became an environment '
                                   '(a benchmark module is bound to the one it loads)'))
        return
    before = set(base.get('PATH', '').split(':'))
    prefix = None
    for d in env.get('PATH', '').split(':'):
        if d in before or not any(os.path.isfile(os.path.join(d, t)) for t in KNOWN_TOOLS):
            continue
        prefix = next((d[:-len(sub) - 1] for sub in TOOL_SUBDIRS if d.endswith('/' + sub)), None)
        if prefix:
            break
    if prefix is None:
        skipped.append((tool.name, 'puts no OSU or IMB program on PATH in a directory hpcnet '
                                   f'knows ({", ".join(TOOL_SUBDIRS)} of a prefix)'))
        return
    suite = TOOL_MODULES[tool.package.lower()]
    for earlier in [t for t in owner.tools if TOOL_MODULES[t[0].package.lower()] == suite]:
        owner.tools.remove(earlier)
        skipped.append((earlier[0].name, f'{tool.name} is newer'))
    owner.tools.append((tool, prefix))


def _candidate(item: _Chosen, base: dict, skipped: list):
    '''The MpiCandidate of a chosen module, or None (said in ``skipped``).'''
    module, env = item.module, item.env
    wrapper = shutil.which('mpicc', path=env.get('PATH', ''))
    if wrapper is None:
        skipped.append((module.name, f'no mpicc on PATH after `module load {module.name}`'))
        return None
    family = expected_family(module.name)
    bindir = os.path.dirname(wrapper)
    return MpiCandidate(
        label=f'module-{module.name}', source='module', wrapper=wrapper, bindir=bindir,
        prefix=os.path.dirname(bindir), env_vars=module_variables(env, base),
        expected_family=family,
        modules=(module.spec(),) + tuple(t.spec() for t, _ in item.tools),
        transport_layer=(_library_layer(wrapper, env)
                         if family and mpi.family(family).transport_layers else None),
        tool_prefixes=tuple(prefix for _, prefix in item.tools),
        env_name=environment_name(module.name),
        # A toolchain (gompi = GCC + Open MPI) is one compiler's environment.
        compiler_command=wrapper_compiler(wrapper, env) if module.role == Role.TOOLCHAIN else None)


def module_candidates(state: Path) -> list:
    '''The source for hpcnet.stacks.discover.SOURCES: one candidate per MPI or
    toolchain module (none without Lmod).  Modules keep nothing in the state
    directory.'''
    return survey().candidates


# --------------------------------------------------------------------------
# ReFrame
# --------------------------------------------------------------------------

def configure_reframe(systems: list, environments: list) -> None:
    '''Where an environment loads modules: every system uses ReFrame's Lmod
    backend (unless its file chose a modules system), ReFrame finds Lmod
    (its backend reads LMOD_CMD, which a shell that never initialised Lmod
    lacks; jobs inherit it), and the job of each such environment defines
    ``module`` if its shell has none (a batch job's bash reads no profile).'''
    with_modules = [env for env in environments if env.get('modules')]
    if not with_modules:
        return
    lmod = lmod_command()
    if lmod is None:
        raise StackError(f'environments {", ".join(e["name"] for e in with_modules)} load '
                         'modules, but there is no Lmod (set LMOD_CMD, or install Debian '
                         'package lmod)')
    os.environ.setdefault('LMOD_CMD', lmod)
    for system in systems:
        system.setdefault('modules_system', 'lmod')
    init = shlex.quote(str(lmod_init_script(lmod)))
    for env in with_modules:
        env['prepare_cmds'] = [f'type module >/dev/null 2>&1 || source {init}',
                               *env.get('prepare_cmds', [])]
