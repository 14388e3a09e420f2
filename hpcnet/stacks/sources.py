"""Sources of MPI candidates that need no module system: Debian's packages,
the PyPI stacks of `hpcnet install-stacks`, installation prefixes
(HPCNET_MPI_PREFIXES), a Spack environment and its spack.lock.  Each source
is a function of the state directory returning a list of
:class:`hpcnet.stacks.candidate.MpiCandidate`; hpcnet.stacks.discover.SOURCES lists them.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

from hpcnet import mpi
from hpcnet.stacks import spacklock
from hpcnet.stacks.spacklock import spack_spec
from hpcnet.stacks.candidate import (MpiCandidate, StackError, is_elf, linked_layer, run_command,
                                     shim_dir)
from hpcnet.variables import (MPI_PREFIXES_ENV, SPACK_ENV_VAR, SPACK_INSTALL_TREE_ENV_VAR,
                              SPACK_LOCK_ENV_VAR)


def debian_candidates(state: Path, search_path: str | None = None) -> list:
    '''Debian installs its MPIs side by side under suffixed names (each
    family's debian_suffix: mpicc.openmpi); the unsuffixed mpicc is an
    alternatives link to one of them.'''
    search_path = search_path if search_path is not None else os.environ.get('PATH', '')
    out = []
    for entry in (e for e in mpi.families() if e.debian_suffix):
        family, suffix, layer = entry.name, entry.debian_suffix, entry.debian_transport_layer
        wrapper = shutil.which(f'mpicc.{suffix}', path=search_path)
        launcher = shutil.which(f'mpirun.{suffix}', path=search_path)
        if not wrapper or not launcher:
            continue
        links = {'mpicc': wrapper, 'mpirun': launcher}
        mpiexec = shutil.which(f'mpiexec.{suffix}', path=search_path)
        if mpiexec:
            links['mpiexec'] = mpiexec
        bindir = shim_dir(state, f'debian-{family}', links)
        out.append(MpiCandidate(label=f'debian-{family}', source='debian', wrapper=wrapper,
                                bindir=bindir, prefix='/usr', expected_family=family,
                                transport_layer=layer))
    return out


def pypi_stacks() -> tuple:
    '''The families with a PyPI stack (pypi_requirements): `hpcnet
    install-stacks` puts each in a prefix of its own, named after the family
    (their wheels all ship bin/mpicc and would overwrite each other).'''
    return tuple(e for e in mpi.families() if e.pypi_requirements)


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
    # A build against the system's UCX or libfabric (Spack externals): what its library loads.
    for lib in sorted([*libdir.glob('libmpi.so*'), *libdir.glob('libmpich.so*')]):
        if is_elf(lib):
            return linked_layer(lib)
    return None


def prefix_candidate(prefix: Path, label: str, source: str,
                     expected_family: str | None = None,
                     lent_libdirs: tuple = ()) -> MpiCandidate | None:
    '''An MPI installed under one prefix (bin/mpicc, lib/), which also loads
    libraries from ``lent_libdirs`` (before the system's).'''
    bindir = prefix / 'bin'
    wrapper = bindir / 'mpicc'
    if not wrapper.exists():
        return None
    env = [('LD_LIBRARY_PATH', ':'.join([str(prefix / 'lib'), *map(str, lent_libdirs),
                                         '$LD_LIBRARY_PATH']))]
    # A program only one family installs names it, whatever the source claimed.
    expected_family = next((e.name for e in mpi.families()
                            if any((bindir / p).exists() for p in e.prefix_programs)),
                           expected_family)
    entry = mpi.family(expected_family) if expected_family in mpi.family_names() else None
    if entry and entry.root_variable:
        env.append((entry.root_variable, str(prefix)))
    # Which transport layer: only where the family ships several, or is unknown.
    layer = _prefix_layer(prefix) if entry is None or entry.transport_layers else None
    return MpiCandidate(label=label, source=source, wrapper=str(wrapper), bindir=str(bindir),
                        prefix=str(prefix), env_vars=tuple(env),
                        expected_family=expected_family, transport_layer=layer)


def _lent_libfabric(state: Path, entry) -> Path | None:
    '''The directory of the libfabric.so.1 another PyPI stack lends to
    ``entry``'s (its pypi_libfabric_from), or None.'''
    for lender in entry.pypi_libfabric_from:
        found = sorted((pypi_root(state) / lender / 'lib').glob('**/libfabric.so.1'))
        if found:
            return found[0].parent
    return None


def pypi_candidates(state: Path) -> list:
    out = []
    for entry in pypi_stacks():
        # A lent libfabric comes before the system's, so that the PyPI stacks
        # run alike on every host.
        lent = _lent_libfabric(state, entry)
        cand = prefix_candidate(pypi_root(state) / entry.name, f'pypi-{entry.name}', 'pypi',
                                entry.name, lent_libdirs=(lent,) if lent else ())
        if cand:
            out.append(cand)
    return out


def extra_prefix_candidates(state: Path) -> list:
    '''Prefixes named in HPCNET_MPI_PREFIXES (colon separated): how a site
    points the suite at MPIs installed anywhere (EasyBuild, by hand, a Spack
    view).'''
    out = []
    for i, p in enumerate(filter(None, os.environ.get(MPI_PREFIXES_ENV, '').split(':'))):
        cand = prefix_candidate(Path(p), f'prefix-{Path(p).name}-{i}', 'prefix')
        if cand is None:
            raise StackError(f'{MPI_PREFIXES_ENV}: {p!r} has no bin/mpicc '
                             '(valid: the installation prefix of an MPI)')
        out.append(cand)
    return out


#: Spack's benchmark packages whose programs become tools of the MPI they
#: were built against (the MPI packages are the families' spack_packages).
SPACK_BENCHMARK_PACKAGES = ('osu-micro-benchmarks', 'intel-mpi-benchmarks')
#: One line per installed spec: name, version, short hash, prefix, and the
#: compiler it was built with ('none|none' for a spec without one).
SPACK_FORMAT = '{name}|{version}|{hash:7}|{prefix}|{compiler.name}|{compiler.version}'
#: One line per installed spec built against an MPI (queried with ``^mpi``):
#: name, short hash, prefix of its MPI, its compiler. Spack refuses
#: ``{^mpi.prefix}`` for a spec without an MPI, so the two are separate queries.
SPACK_MPI_OF_FORMAT = '{name}|{hash:7}|{^mpi.prefix}|{compiler.name}|{compiler.version}'
SPACK_MPI_QUERY = '^mpi'


def spack_env_name(package: str, version: str, short_hash: str) -> str:
    '''The MPI's part of a Spack build's environment name: family, major and
    Spack hash (openmpi4-abc1234), so that every build of one MPI is told apart
    and each environment can be traced to its spec (``spack find /abc1234``).'''
    return f'{mpi.environment_label(mpi.spack_family(package) or package, version)}-{short_hash}'


def _spack_find(spack: str, env_dir: str, fmt: str, *query: str) -> list:
    '''The fields of each line `spack -e ENV find --format FMT QUERY...`
    prints, without Spack's own headers and notes.'''
    res = run_command([spack, '-e', env_dir, 'find', '--format', fmt, *query], timeout=300)
    if res.returncode != 0:
        raise StackError(f'{SPACK_ENV_VAR}={env_dir}: `spack find` failed: '
                         f'{res.stdout.strip()[:300]}')
    fields = fmt.count('|') + 1
    return [parts for parts in (line.strip().split('|') for line in res.stdout.splitlines())
            if len(parts) == fields]


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
    installed = _spack_find(spack, env_dir, SPACK_FORMAT)
    prefix_of = {row[2]: row[3] for row in installed}
    mpis = [row for row in installed if mpi.spack_family(row[0])]
    tools_of: dict = {}
    compilers_of: dict = {}     # MPI prefix -> its own compiler and its dependents'
    for row in mpis:
        compilers_of.setdefault(row[3], set()).add(tuple(row[4:]))
    for name, short_hash, mpi_prefix, *compiler in _spack_find(
            spack, env_dir, SPACK_MPI_OF_FORMAT, SPACK_MPI_QUERY):
        compilers_of.setdefault(mpi_prefix, set()).add(tuple(compiler))
        if name in SPACK_BENCHMARK_PACKAGES and short_hash in prefix_of:
            tools_of.setdefault(mpi_prefix, []).append(prefix_of[short_hash])
    out = []
    for name, version, short_hash, prefix, *compiler in mpis:
        cand = prefix_candidate(Path(prefix), f'spack-{name}-{version}-{short_hash}', 'spack',
                                mpi.spack_family(name))
        if cand is None:
            raise StackError(f'{SPACK_ENV_VAR}={env_dir}: {name}@{version} at {prefix} has no '
                             'bin/mpicc')
        out.append(dataclasses.replace(cand, tool_prefixes=tuple(tools_of.get(prefix, ())),
                                       env_name=spack_env_name(name, version, short_hash),
                                       built_with=_built_with(compilers_of.get(prefix, ())),
                                       spec=spack_spec(name, version, short_hash, compiler)))
    return out


def _built_with(spack_compilers) -> tuple:
    '''((family, version), ...) of Spack's (compiler name, version) pairs;
    'none' (a spec built without a compiler) left out.'''
    return tuple(sorted({(spacklock.SpackCompiler(name, version).family, version)
                         for name, version in spack_compilers if name != 'none'}))




def spack_lock_candidates(state: Path) -> list:
    '''MPIs of the Spack environment whose spack.lock HPCNET_SPACK_LOCK names,
    read without Spack (hpcnet.stacks.spacklock), prefixes from the lock's externals
    or the install tree HPCNET_SPACK_INSTALL_TREE; each build its own
    candidate, with the OSU/IMB builds bound to it by hash.'''
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
        cand = prefix_candidate(Path(m.prefix), label, 'spack', mpi.spack_family(m.name)) \
            if m.prefix else None
        if cand is None:
            raise StackError(f'{SPACK_LOCK_ENV_VAR}={lock}: {m.name}@{m.version}/{m.short_hash} has '
                             f'no bin/mpicc under {m.prefix or "any prefix"} (valid: an installed '
                             f'environment; set {SPACK_INSTALL_TREE_ENV_VAR} to its install tree)')
        out.append(dataclasses.replace(cand, tool_prefixes=tuple(t[3] for t in m.tools if t[3]),
                                       env_name=spack_env_name(m.name, m.version, m.short_hash),
                                       built_with=_built_with((c.name, c.version)
                                                              for c in m.compilers),
                                       spec=m.spec))
    return out

