"""The builds the hpcnet checks take as fixtures: compile targets of
``src/`` once per environment (fixture scope ``environment``), warnings are
errors."""
from __future__ import annotations

import os
import shlex

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_before, sanity_function, variable

from hpcnet.constants import SRC_DIR, Feature
from hpcnet.constants import BUILTIN_ENV


class MakeBuild(rfm.CompileOnlyRegressionTest):
    '''Build targets of src/Makefile once per environment (use as a fixture
    with scope 'environment'); warnings are errors.'''

    valid_systems = ['*']
    build_system = 'Make'
    sourcesdir = str(SRC_DIR)
    build_locally = True
    #: Compiler flags; warnings are errors so a new compiler's complaint is seen.
    cflags = variable(typ.List[str], value=['-O2', '-Wall', '-Wextra', '-Werror'])
    #: Make targets, and the variables naming the compiler.
    make_targets = variable(typ.List[str], value=[])
    #: Programs the build must leave in bin/.
    programs = variable(typ.List[str], value=[])

    def compiler_vars(self) -> dict:
        raise NotImplementedError

    @run_before('compile')
    def set_make_options(self):
        # ReFrame writes the options into rfm_build.sh as they are: each one
        # is quoted, or make would read '-Wall' of 'CFLAGS=-O2 -Wall' as its own.
        variables = {**self.compiler_vars(), 'BINDIR': 'bin', 'CFLAGS': ' '.join(self.cflags)}
        self.build_system.options = [*self.make_targets,
                                     *(shlex.quote(f'{k}={v}') for k, v in variables.items())]
        self.build_system.max_concurrency = 1
        # A by-hand build in src/ (src/Makefile's own usage) leaves src/bin,
        # which the copy to the stage brings along and make takes as up to
        # date: binaries of another MPI (seen: Open MPI's in gcc12-impi2021).
        self.prebuild_cmds = ['rm -rf bin']

    @sanity_function
    def binaries_built(self):
        return sn.all([sn.assert_true(os.path.exists(os.path.join(self.stagedir, 'bin', p)),
                                      msg=f'bin/{p} was not built') for p in self.programs])


class build_kernels(MakeBuild):
    '''Build src/ (all MPI kernels) with the environment's MPI wrapper.'''

    descr = 'Build the hpcnet MPI kernels'
    valid_prog_environs = [f'+{Feature.MPI}']
    make_targets = ['all']
    programs = ['p2p', 'collectives', 'pairs']

    def compiler_vars(self) -> dict:
        return {'MPICC': self.current_environ.cc}


class build_sockets(MakeBuild):
    '''Build the socket kernel (src/sockets*.c, no MPI) with the environment's
    C compiler (-pthread is added by the Makefile).'''

    descr = 'Build the hpcnet socket kernel'
    valid_prog_environs = [BUILTIN_ENV]
    make_targets = ['sockets']
    programs = ['sockets']

    def compiler_vars(self) -> dict:
        return {'CC': self.current_environ.cc}


class build_mpiprobe(MakeBuild):
    '''Build src/mpiprobe.c, the library preloaded into prebuilt benchmarks
    to measure the MPI they load (plain C compiler: it links no MPI).'''

    descr = 'Build the hpcnet MPI library probe'
    valid_prog_environs = [f'+{Feature.MPI}']
    make_targets = ['mpiprobe']
    programs = ['libhpcnet_mpiprobe.so']

    def compiler_vars(self) -> dict:
        return {'CC': 'cc'}
