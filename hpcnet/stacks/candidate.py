"""An MPI found by a source (:class:`MpiCandidate`) and the probe that proves
it works: :func:`probe` compiles and runs a small program with it, reading the
family and version from both the header macros (compile time) and
``MPI_Get_library_version`` (run time); :func:`probe_fabrics` runs it on 2
ranks of this host over each fabric one host can carry.  With what sources
and the probe share: the state directory, the error users are told about,
running a command, the benchmark programs of a prefix, the shim directories
that put one MPI's programs on PATH (:func:`with_kept_launcher`: the launcher
Spack kept where it replaced mpirun by a notice).

Below the sources (hpcnet.stacks.sources, hpcnet.stacks.modules) and
discovery (hpcnet.stacks): it imports none of them.
"""
from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from hpcnet import fabrics as fabric_registry, fabrictable, mpi
from hpcnet.constants import DEFAULT_STATE_DIR
from hpcnet.model import ConfigError, Partition, Stack
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
    #: A directory put before ``bindir`` on PATH (after any module load), whose
    #: mpirun and mpiexec run the launcher the MPI kept where its own mpirun is
    #: Spack's notice (:func:`with_kept_launcher`); '' where mpirun is its own.
    launcher_dir: str = ''

    @classmethod
    def from_json(cls, data: dict) -> 'MpiCandidate':
        '''A candidate from ``dataclasses.asdict`` read back from JSON (lists
        made tuples again).'''
        return cls(**{**data, 'env_vars': tuple(tuple(x) for x in data['env_vars']),
                      'modules': tuple(data['modules']),
                      'tool_prefixes': tuple(data.get('tool_prefixes', ())),
                      'built_with': tuple(tuple(x) for x in data.get('built_with', ()))})

    @property
    def launcher(self) -> str:
        '''The mpirun that starts this MPI's ranks without a scheduler: the
        launcher directory's, else the one beside the wrapper.'''
        return os.path.join(self.launcher_dir or self.bindir, 'mpirun')

    def env(self) -> dict:
        env = dict(os.environ)
        for name, value in self.env_vars:
            env[name] = value.replace('$PATH', env.get('PATH', '')).replace(
                '$LD_LIBRARY_PATH', env.get('LD_LIBRARY_PATH', ''))
        front = [d for d in (self.launcher_dir, self.bindir) if d]
        env['PATH'] = ':'.join(front + [env.get('PATH', '')])
        return env


def shim_dir(state: Path, label: str, links: dict, env: dict | None = None) -> str:
    '''A bin directory where each name of ``links`` (mpicc, mpirun, ...) runs
    the program it maps to, with the variables of ``env`` set, so that the
    launcher and tools resolve to one specific MPI via PATH.

    Scripts that exec the real program, not symlinks: MPICH's hydra looks for
    hydra_pmi_proxy next to the path it was started through.'''
    d = state / 'shims' / re.sub(r'[^A-Za-z0-9._-]', '_', label) / 'bin'
    d.mkdir(parents=True, exist_ok=True)
    # Quoted: paths found on the system and values of a table, written into a script.
    exports = ''.join(f'export {name}={shlex.quote(value)}\n'
                      for name, value in (env or {}).items())
    for name, target in links.items():
        shim = d / name
        text = f'#!/bin/sh\n{exports}exec {shlex.quote(str(target))} "$@"\n'
        if shim.is_symlink():
            shim.unlink()
        if not shim.exists() or shim.read_text() != text:
            shim.write_text(text)
            shim.chmod(0o755)
    return str(d)


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


# The probe.

#: The probe program; @HEADER_CHAIN@ is the registry's #if chain of header
#: macros (hpcnet.mpi.probe_header_chain).
_PROBE_TEMPLATE = r'''
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
@HEADER_CHAIN@    printf("library: %s\n", lib);
    return 0;
}
'''


def probe_source() -> str:
    '''The probe program's C source, for the families registered now.'''
    return _PROBE_TEMPLATE.replace('@HEADER_CHAIN@', mpi.probe_header_chain())


#: The probe program's file name in the probe's work directory.
PROBE_PROGRAM = 'probe'


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    reason: str = ''
    family: str = ''
    version: str = ''
    library_version: str = ''


def probe(candidate: MpiCandidate, compiler, workdir: Path) -> ProbeResult:
    '''Compile (warnings are errors) and run the probe program, with the C
    compiler ``compiler`` (hpcnet.stacks.discover.Compiler) behind the wrapper, or
    the wrapper's own (None).'''
    src = workdir / 'probe.c'
    src.write_text(probe_source())
    exe = workdir / PROBE_PROGRAM
    env = candidate.env()
    if compiler is not None:
        fam = candidate.expected_family
        variables = ({mpi.family(fam).wrapper_cc_variable} if fam else
                     {e.wrapper_cc_variable for e in mpi.families()})
        for var in variables:
            env[var] = compiler.command
    try:
        res = run_command([candidate.wrapper, '-Wall', '-Werror', str(src), '-o', str(exe)],
                          env=env)
    except (OSError, subprocess.SubprocessError) as err:
        return ProbeResult(False, f'compiler wrapper {candidate.wrapper} failed to start: {err}')
    if res.returncode != 0:
        first = (res.stdout.strip().splitlines() or ['(no output)'])[0]
        return ProbeResult(False, f'{candidate.wrapper} cannot compile an MPI program: {first}')
    try:
        res = run_command([str(exe)], env=env, timeout=30)
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
    lib = mpi.library_family(library.group(1))
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


#: What Spack installs in place of mpirun and mpiexec for ``openmpi
#: ~legacylaunchers schedulers=slurm`` (its nolegacylaunchers.sh): a notice
#: that exits 2.
_SPACK_NO_LAUNCHER = 'legacylaunchers'
#: The launchers Spack's recipe keeps beside that notice ("orterun is still
#: present"): Open MPI 4's orterun, Open MPI 5's prterun; the first found runs.
KEPT_LAUNCHERS = ('orterun', 'prterun')
#: The names a kept launcher gets in the launcher directory: what ReFrame's
#: mpirun launcher, the fabric probe and users call.
LAUNCHER_NAMES = ('mpirun', 'mpiexec')
#: What Open MPI's own mpirun sets before it execs the kept launcher, set by
#: the launcher directory's too: Open MPI 5's (ompi/tools/mpirun/main.c) has
#: PRRTE read the command line and start the ranks as Open MPI's.
KEPT_LAUNCHER_ENV = {'orterun': {}, 'prterun': {'PRTE_MCA_schizo_proxy': 'ompi'}}


def launcher_notice(launcher: str) -> str | None:
    """Why ``launcher`` cannot start ranks on this host, when it is Spack's
    notice standing in for mpirun; None for a real launcher (or none at all:
    starting it then fails with its own message)."""
    path = Path(launcher)
    if not path.is_file() or is_elf(path) or path.stat().st_size > 4096:
        return None
    if _SPACK_NO_LAUNCHER not in path.read_text(errors='replace'):
        return None
    return (f'{launcher} is Spack\'s notice for an Open MPI built ~legacylaunchers, not a '
            f'launcher, and there is no {" or ".join(KEPT_LAUNCHERS)} beside it to run in its '
            'place: it runs under srun on a Slurm partition (Spack builds mpirun with '
            '+legacylaunchers)')


def kept_launcher(bindir: str) -> str | None:
    """The launcher Spack kept in ``bindir`` (orterun, prterun) where its
    mpirun is Spack's notice; None where mpirun is no notice or none is kept."""
    if launcher_notice(os.path.join(bindir, 'mpirun')) is None:
        return None
    for name in KEPT_LAUNCHERS:
        path = os.path.join(bindir, name)
        if os.path.isfile(path) and os.access(path, os.X_OK) and launcher_notice(path) is None:
            return path
    return None


def with_kept_launcher(candidate: MpiCandidate, state: Path) -> MpiCandidate:
    """``candidate`` with a launcher directory whose mpirun and mpiexec run
    the launcher Spack kept, where its own mpirun is Spack's notice: ranks
    then start without a scheduler (under Slurm srun starts them); any other
    candidate as it is."""
    kept = kept_launcher(candidate.bindir)
    if kept is None:
        return candidate
    links = {name: kept for name in LAUNCHER_NAMES}
    launcher_dir = shim_dir(state, f'kept-{candidate.label}', links,
                            KEPT_LAUNCHER_ENV[os.path.basename(kept)])
    return dataclasses.replace(candidate, launcher_dir=launcher_dir)


def probe_fabrics(candidate: MpiCandidate, family: str, version: str, exe: Path,
                  fabrics: Iterable[str]) -> tuple:
    '''Run the probe program (built by :func:`probe`) on 2 ranks of this host
    with each fabric's settings from the fabric table.  Returns (gaps,
    failures): ((fabric, missing piece), ...) where a library the MPI needs
    for that fabric is missing (checks skip there, naming it), and ((fabric,
    reason), ...) where the probe failed otherwise (checks run and fail there,
    with their own diagnosis: a broken fabric is never a skip).'''
    stack = Stack(environ=candidate.label, mpi_family=family,
                  mpi_profile=mpi.mpi_profile(family, candidate.transport_layer),
                  mpi_version=version)
    launcher = candidate.launcher
    notice = launcher_notice(launcher)
    if notice is not None:
        return tuple((fabric, notice) for fabric in fabrics), ()
    gaps, failures = [], []
    for fabric in fabrics:
        part = Partition(fullname=f'host-probe:{fabric}', fabric=fabric,
                         iface=fabric_registry.fabric(fabric).host_probe_iface)
        try:
            settings = fabrictable.settings(part, stack, 'mpirun')
        except ConfigError as err:
            failures.append((fabric, str(err)))    # the checks fail there with the same
            continue
        env = {**candidate.env(), **settings.env, **mpi.start_env(family)}
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

