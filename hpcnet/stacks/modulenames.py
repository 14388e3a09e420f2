"""What a module's name says to hpcnet: its role (MPI, toolchain, benchmark,
compiler), the MPI family it is expected to be, and its part of a ReFrame
environment's name; and a module as ``module -t avail`` lists it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from hpcnet import mpi

#: Benchmark modules whose programs become tools of an environment
#: (EasyBuild: OSU-Micro-Benchmarks, IMB; Spack: osu-micro-benchmarks,
#: intel-mpi-benchmarks), by package name -> benchmark suite.
TOOL_MODULES = {
    'osu-micro-benchmarks': 'OSU',
    'imb': 'IMB',
    'intel-mpi-benchmarks': 'IMB',
}


#: Compiler modules, by package name (EasyBuild: GCC, GCCcore, iccifort,
#: intel-compilers, NVHPC, AOCC, LLVM, Clang; Spack: gcc, llvm, aocc,
#: intel-oneapi-compilers, nvhpc): in a hierarchy, loading one opens the
#: level of what was built with it.
COMPILER_MODULES = ('gcc', 'gcccore', 'llvm', 'clang', 'aocc', 'iccifort', 'intel-compilers',
                    'intel-oneapi-compilers', 'nvhpc')
#: A module name that names its compiler: a COMPILER_MODULES package as a
#: part between '/' or '-' (OpenMPI/4.1.6-GCC-13.2.0, openmpi/5.0.5-gcc-12.2.0-abc).
_NAMES_COMPILER = re.compile(r'(?:^|[/-])(?:%s)(?:[/-]|$)'
                             % '|'.join(map(re.escape, COMPILER_MODULES)), re.IGNORECASE)


class Role:
    '''What a module is to hpcnet.'''
    MPI = 'mpi'
    TOOLCHAIN = 'toolchain'
    TOOL = 'tool'
    COMPILER = 'compiler'


#: A name ReFrame >= 4.10.1 accepts for an environment.
ENVIRONMENT_NAME = re.compile(r'[a-zA-Z_][a-zA-Z0-9_-]*')


@dataclass(frozen=True)
class AvailableModule:
    '''One line of ``module -t avail``: a module and the MODULEPATH directory
    it was listed under.'''
    name: str            #: full name, e.g. 'gompi/2023b'
    directory: str
    #: The modules whose load opens ``directory`` (a hierarchy's compiler,
    #: then MPI), loaded before this one; () for a module of the search path.
    requires: tuple = ()

    @property
    def package(self) -> str:
        return self.name.split('/')[0]

    @property
    def role(self) -> str | None:
        return role(self.name)

    @property
    def chain(self) -> tuple:
        '''The modules to load, in order: those it requires, then itself.'''
        return (*self.requires, self)

    @property
    def title(self) -> str:
        '''What a user types to load it: 'GCC/13.2.0 OpenMPI/4.1.6'.'''
        return ' '.join(m.name for m in self.chain)

    def spec(self) -> dict:
        '''The module as a ReFrame environment lists it: a module of the
        search path is loaded from its own directory, so jobs need not
        inherit any MODULEPATH; one of a hierarchy's level has no path, since
        loading the module it requires opens that level.'''
        if self.requires:
            return {'name': self.name}
        return {'name': self.name, 'path': self.directory}

    def specs(self) -> tuple:
        return tuple(m.spec() for m in self.chain)

    def environment_name(self) -> str:
        '''The environment name of the chain (GCC-13_2_0-OpenMPI-4_1_6).'''
        return '-'.join(environment_name(m.name) for m in self.chain)

    def names_compiler(self) -> bool:
        '''Whether its environment name says its compiler: a hierarchy's
        MPI (its compiler module comes first), a toolchain (gompi: GCC and
        Open MPI), or a name with a compiler part (OpenMPI/4.1.6-GCC-13.2.0).'''
        return bool(self.requires) or self.role == Role.TOOLCHAIN \
            or bool(_NAMES_COMPILER.search(self.name))


def role(module_name: str) -> str | None:
    '''Role of a module by its package name, or None (not ours).'''
    package = module_name.split('/')[0].lower()
    if mpi.module_family(package):
        return Role.MPI
    if package in dict(mpi.toolchains()):
        return Role.TOOLCHAIN
    if package in TOOL_MODULES:
        return Role.TOOL
    if package in COMPILER_MODULES:
        return Role.COMPILER
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
