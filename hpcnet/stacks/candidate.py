"""An MPI found by a source and not yet proven to work (:class:`MpiCandidate`),
with what sources and the probe share: the state directory, the error users
are told about, running a command, the benchmark programs of a prefix.

Below the sources (hpcnet.stacks.sources, hpcnet.stacks.modules), the probe (hpcnet.stacks.probe)
and discovery (hpcnet.stacks): it imports none of them.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hpcnet import mpi
from hpcnet.constants import DEFAULT_STATE_DIR
from hpcnet.variables import STATE_DIR_ENV

#: Every benchmark program looked up next to an MPI's launcher.
KNOWN_TOOLS = ('IMB-MPI1', 'IMB-NBC', 'IMB-RMA', 'IMB-P2P',
               'osu_latency', 'osu_bw', 'osu_bibw', 'osu_mbw_mr', 'osu_multi_lat',
               'osu_allreduce', 'osu_alltoall', 'osu_allgather', 'osu_bcast',
               'osu_reduce', 'osu_gather', 'osu_reduce_scatter')

#: Subdirectories of a prefix where benchmark programs are installed (Spack
#: and EasyBuild put OSU under libexec).
TOOL_SUBDIRS = ('bin',
                'libexec/osu-micro-benchmarks/mpi/pt2pt',
                'libexec/osu-micro-benchmarks/mpi/collective')


def state_dir() -> Path:
    '''The directory for everything runs create (git-ignored).'''
    return Path(os.environ.get(STATE_DIR_ENV, DEFAULT_STATE_DIR))


class StackError(RuntimeError):
    '''A problem with the stack model a user can cause and must be told about.'''


@dataclass(frozen=True)
class MpiCandidate:
    '''An MPI found by a source, not yet proven to work.'''
    label: str                   #: unique, human readable (e.g. 'debian-openmpi')
    source: str                  #: 'debian', 'pypi', 'spack', 'module', ...
    wrapper: str                 #: absolute path of the C compiler wrapper
    bindir: str                  #: directory put first on PATH (mpirun, mpicc, tools)
    prefix: str                  #: installation prefix
    env_vars: tuple = ()         #: ((name, value), ...) needed to build and run
    expected_family: str | None = None   #: what the source claims, if anything
    modules: tuple = ()          #: modules to load (module-based sources)
    transport_layer: str | None = None   #: 'ucx', 'ofi' or None (MPI's own)
    #: Further prefixes holding benchmarks built against this MPI (Spack
    #: installs OSU and IMB as packages of their own).
    tool_prefixes: tuple = ()
    #: The MPI's part of the environment name, where the source names it
    #: (a module: 'gompi-2023b'); default: the probed family and major.
    env_name: str | None = None
    #: The C compiler this MPI belongs to (the one a module's wrapper
    #: calls): it is then paired with that compiler only.
    compiler_command: str | None = None
    #: Whether ``env_name`` says that compiler (gompi-2023b,
    #: OpenMPI-4_1_6-GCC-13_2_0): it is then the whole environment name,
    #: else the compiler's label goes in front.
    compiler_in_name: bool = False
    #: ((compiler family, version), ...): the compilers a package manager
    #: built this MPI and the benchmarks on it with (a Spack build); it is
    #: then paired with the compilers found here of those families and majors.
    built_with: tuple = ()
    #: What the package manager that built it calls this build (Spack:
    #: ``openmpi@4.1.4 %gcc@12.2.0 /wlpcv5h``); '' where no manager names it.
    spec: str = ''

    @classmethod
    def from_json(cls, data: dict) -> 'MpiCandidate':
        '''A candidate from ``dataclasses.asdict`` read back from JSON (lists
        made tuples again).'''
        return cls(**{**data, 'env_vars': tuple(tuple(x) for x in data['env_vars']),
                      'modules': tuple(data['modules']),
                      'tool_prefixes': tuple(data.get('tool_prefixes', ())),
                      'built_with': tuple(tuple(x) for x in data.get('built_with', ()))})

    def env(self) -> dict:
        env = dict(os.environ)
        for name, value in self.env_vars:
            env[name] = value.replace('$PATH', env.get('PATH', '')).replace(
                '$LD_LIBRARY_PATH', env.get('LD_LIBRARY_PATH', ''))
        env['PATH'] = f'{self.bindir}:{env.get("PATH", "")}'
        return env


def run_command(cmd, env=None, cwd=None, timeout=60) -> subprocess.CompletedProcess:
    '''``cmd``'s exit status and output, stderr in stdout.'''
    return subprocess.run(cmd, env=env, cwd=cwd, timeout=timeout, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def wrapper_compiler(wrapper: str, env: dict) -> str | None:
    '''Absolute path of the C compiler an MPI wrapper calls by default
    (each family's wrapper_show_args in hpcnet.mpi, tried in turn).'''
    for args in mpi.wrapper_show_args():
        try:
            res = run_command([wrapper, *args], env=env, timeout=20)
        except (OSError, subprocess.SubprocessError):
            continue
        words = res.stdout.split()
        if res.returncode == 0 and words:
            return shutil.which(words[0], path=env.get('PATH', ''))
    return None


def find_tools(candidate: MpiCandidate) -> tuple:
    tools = {}
    prefixes = (candidate.prefix,) + tuple(candidate.tool_prefixes)
    for sub in (candidate.bindir,) + tuple(os.path.join(p, s) for p in prefixes
                                           for s in TOOL_SUBDIRS):
        for name in KNOWN_TOOLS:
            p = os.path.join(sub, name)
            if name not in tools and os.access(p, os.X_OK) and os.path.isfile(p):
                tools[name] = p
    return tuple(sorted(tools.items()))



def is_elf(path: Path) -> bool:
    """Whether ``path`` is an ELF file (not a linker script or a stub)."""
    with open(path, 'rb') as f:
        return f.read(4) == b'\x7fELF'


def linked_layer(lib: Path, env: dict | None = None) -> str | None:
    """'ofi' or 'ucx': the transport layer the MPI library ``lib`` loads, read
    with ldd (libfabric first, as for the MPICH wheels that carry both);
    None when it names neither."""
    deps = subprocess.run(['ldd', str(lib)], env=env, text=True, capture_output=True,
                          timeout=30).stdout
    if 'libfabric' in deps:
        return 'ofi'
    return 'ucx' if 'libucp' in deps else None
