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

Hierarchical trees (Lmod's Core -> Compiler -> MPI, as EasyBuild's
HierarchicalMNS and Spack's Lmod generator write them) are walked as
ReFrame's ``find_modules`` does for an environment's modules: each compiler
module is loaded and the directories it adds to MODULEPATH are listed; an
MPI module found there is named after its compiler and MPI
(``GCC-13_2_0-OpenMPI-4_1_6``) and the job loads both, compiler first.  MPI
modules found the same way open the level where their benchmark modules are.

Every module MPI is paired with the compiler its own wrapper calls, never
with the machine's other compilers: one environment per module, whose name
says that compiler (a toolchain's and an EasyBuild or Spack module's names do
already; any other gets the compiler's label in front).

Where modules are searched: ``MODULEPATH``, then the directories of
``HPCNET_MODULEPATH`` (colon separated).  Without Lmod the source finds
nothing, and says so in :func:`survey`'s summary; it is never an error.

Lmod itself (finding it, listing, loading) is :mod:`hpcnet.stacks.lmod`;
what a module's name says, :mod:`hpcnet.stacks.modulenames`.
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from hpcnet import mpi
from hpcnet.longwork.progress import phase
from hpcnet.stacks.candidate import (KNOWN_TOOLS, TOOL_SUBDIRS, MpiCandidate, StackError, is_elf,
                                     linked_layer, wrapper_compiler)
from hpcnet.stacks.lmod import (LMOD_COMMANDS, ModuleLoadError, avail, lmod_command,
                                lmod_init_script, load, loaded_files, module_variables,
                                opened_directories, search_path)
from hpcnet.stacks.modulenames import TOOL_MODULES, AvailableModule, Role, expected_family, role
from hpcnet.variables import MODULEPATH_ENV


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
                if is_elf(lib):     # not a linker script (INPUT(libmpi.so.12))
                    return linked_layer(lib, env)
    return None

@dataclass
class _Chosen:
    '''A module that becomes an environment, with what loading it gave.'''
    module: AvailableModule
    env: dict
    own_file: str             #: its modulefile
    mpi_files: set            #: modulefiles of the MPI modules it loaded (itself, for an MPI module)
    tools: list = field(default_factory=list)   #: [(tool module, prefix), ...]

    @property
    def files(self) -> set:
        return self.mpi_files | {self.own_file}


@dataclass
class ModuleSurvey:
    '''What the module source found, and why anything was left out.'''
    lmod: str | None = None
    search_path: list = field(default_factory=list)
    #: Directories compiler and MPI modules opened (a hierarchy's levels).
    opened: list = field(default_factory=list)
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
        names = ', '.join(c.label[len('module-'):] for c in self.candidates) or 'none'
        levels = f'; levels opened by compiler and MPI modules: {":".join(self.opened)}' \
            if self.opened else ''
        return (f'modules: Lmod {self.lmod}, searched {":".join(self.search_path)}{levels}; '
                f'MPI and toolchain modules: {names}')


def _walk_compilers(lmod: str, dirs: list, available: list, result: ModuleSurvey) -> list:
    '''The modules of the hierarchy levels compiler modules open: each
    compiler module is loaded, and what the directories it adds to
    MODULEPATH hold is listed, requiring that compiler (a compiler found
    there is walked in turn).'''
    known = set(dirs)
    found, pending = [], [m for m in available if m.role == Role.COMPILER]
    while pending:
        compiler = pending.pop(0)
        try:
            env = load(lmod, list(compiler.chain), dirs)
        except ModuleLoadError as err:
            result.skipped.append((compiler.title, str(err)))
            continue
        levels = opened_directories(env, known)
        known.update(levels)
        result.opened += levels
        if not levels:
            continue
        level = [m for m in avail(lmod, levels, compiler.chain) if m.role]
        found += level
        pending += [m for m in level if m.role == Role.COMPILER]
    return found


def survey() -> ModuleSurvey:
    '''Find the MPI and toolchain modules (in a hierarchy, under each
    compiler module), load each, bind the benchmark modules to them; every
    module left out is named with the reason.'''
    result = ModuleSurvey(lmod=lmod_command())
    if result.lmod is None:
        if os.environ.get(MODULEPATH_ENV):
            raise StackError(f'{MODULEPATH_ENV} is set but there is no Lmod: LMOD_CMD is unset '
                             f'and none is at {", ".join(LMOD_COMMANDS)} (Debian package lmod)')
        return result
    result.search_path = search_path()
    if not result.search_path:
        return result
    # Said on stderr: Lmod reads every modulefile and each MPI module is
    # loaded, which is long on a large tree (EESSI, CVMFS).
    with phase(f'surveying the modules under {len(result.search_path)} MODULEPATH '
               'director(ies), loading each MPI module') as done:
        _survey_lmod(result)
        done.outcome = f'{len(result.candidates)} MPI module(s) kept, {len(result.skipped)} left out'
    return result


def _survey_lmod(result: ModuleSurvey) -> None:
    '''survey() of ``result``'s search path with its Lmod, into ``result``.'''
    lmod, dirs = result.lmod, result.search_path
    available = [m for m in avail(lmod, dirs) if m.role]
    available += _walk_compilers(lmod, dirs, available, result)
    if not any(m.role in (Role.MPI, Role.TOOLCHAIN) for m in available):
        return
    base = load(lmod, [], dirs)
    already = set(loaded_files(base))

    chosen, holder = [], {}      # holder: MPI modulefile -> the title of its environment
    # Compiler + MPI toolchains first (hpcnet.mpi.toolchains): where two load
    # the same MPI module (gompi/2023b and foss/2023b), the first becomes the
    # environment, and OSU and IMB are built with those.
    order = [name for name, _ in mpi.toolchains()]
    toolchains = sorted((m for m in available if m.role == Role.TOOLCHAIN),
                        key=lambda m: order.index(m.package.lower()))
    mpis = [m for m in available if m.role == Role.MPI]
    tools = [m for m in available if m.role == Role.TOOL]
    known = set(dirs) | set(result.opened)
    for module in toolchains + mpis:
        try:
            env = load(lmod, list(module.chain), dirs)
        except ModuleLoadError as err:
            result.skipped.append((module.title, str(err)))
            continue
        new = {f: name for f, name in loaded_files(env).items() if f not in already}
        own_file = next((f for f, name in new.items() if name == module.name),
                        f'{module.directory}/{module.name}')
        if own_file in holder:
            result.skipped.append((module.title, f'loaded by {holder[own_file]}, which is '
                                                 'its environment'))
            continue
        mpi_files = {f for f, name in new.items() if role(name) == Role.MPI}
        shared = sorted(new[f] for f in mpi_files & set(holder))
        if shared:
            first = next(f for f in mpi_files & set(holder) if new[f] == shared[0])
            result.skipped.append((module.title, f'loads {shared[0]}, which is already the MPI '
                                                 f'of {holder[first]}'))
            continue
        for f in mpi_files | {own_file}:
            holder[f] = module.title
        chosen.append(_Chosen(module, env, own_file, mpi_files))
        # The level an MPI module opens holds what was built with it (OSU, IMB).
        levels = opened_directories(env, known)
        if levels:
            known.update(levels)
            result.opened += levels
            tools += [m for m in avail(lmod, levels, module.chain) if m.role == Role.TOOL]

    for tool in tools:
        _bind_tool(lmod, dirs, tool, chosen, already, base, result.skipped)

    for item in chosen:
        cand = _candidate(item, base, result.skipped)
        if cand is not None:
            result.candidates.append(cand)


def _bind_tool(lmod, dirs, tool, chosen, already, base, skipped) -> None:
    '''Bind benchmark module ``tool`` to the chosen module whose toolchain or
    MPI module it loads (the newest of a suite wins: Lmod lists versions in
    ascending order).'''
    try:
        env = load(lmod, list(tool.chain), dirs)
    except ModuleLoadError as err:
        skipped.append((tool.title, str(err)))
        return
    new = set(loaded_files(env)) - already
    owner = next((c for c in chosen if c.files & new), None)
    if owner is None:
        skipped.append((tool.title, 'loads no MPI or toolchain module that became an '
                                    'environment (a benchmark module is bound to the one it loads)'))
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
        skipped.append((tool.title, 'puts no OSU or IMB program on PATH in a directory hpcnet '
                                    f'knows ({", ".join(TOOL_SUBDIRS)} of a prefix)'))
        return
    suite = TOOL_MODULES[tool.package.lower()]
    for earlier in [t for t in owner.tools if TOOL_MODULES[t[0].package.lower()] == suite]:
        owner.tools.remove(earlier)
        skipped.append((earlier[0].title, f'{tool.title} is newer'))
    owner.tools.append((tool, prefix))


def _candidate(item: _Chosen, base: dict, skipped: list):
    '''The MpiCandidate of a chosen module, or None (said in ``skipped``).'''
    module, env = item.module, item.env
    wrapper = shutil.which('mpicc', path=env.get('PATH', ''))
    if wrapper is None:
        skipped.append((module.title, f'no mpicc on PATH after `module load {module.title}`'))
        return None
    # A module MPI goes with the compiler its own wrapper calls, never with
    # the machine's others: built with one compiler, it is not tested with another.
    compiler = wrapper_compiler(wrapper, env)
    if compiler is None:
        skipped.append((module.title, f'{wrapper} names no compiler on the module\'s PATH '
                                      f'({" or ".join(" ".join(a) for a in mpi.wrapper_show_args())})'
                                      ': a module MPI is paired with its own compiler only'))
        return None
    family = expected_family(module.name)
    bindir = os.path.dirname(wrapper)
    # Tools bound to a hierarchy's MPI require it: its chain is loaded once.
    specs = list(module.specs())
    for tool, _ in item.tools:
        specs += [s for s in tool.specs() if s not in specs]
    return MpiCandidate(
        label=f'module-{module.title}', source='module', wrapper=wrapper, bindir=bindir,
        prefix=os.path.dirname(bindir), env_vars=module_variables(env, base),
        expected_family=family,
        modules=tuple(specs),
        transport_layer=(_library_layer(wrapper, env)
                         if family and mpi.family(family).transport_layers else None),
        tool_prefixes=tuple(prefix for _, prefix in item.tools),
        env_name=module.environment_name(), compiler_command=compiler,
        compiler_in_name=module.names_compiler())


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
