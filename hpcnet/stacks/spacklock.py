"""The compiler x MPI matrix of a Spack environment from its ``spack.lock``,
without Spack: a site's CI often has the lock file and the install tree, not
a working Spack in the job.

Lock file formats (both real examples in tests/data/spack):
- v5 (Spack 0.2x): each node has a ``compiler`` field {name, version};
- v6 (Spack 1.x): compilers are dependency edges whose virtuals include
  ``c`` (``gcc`` with virtuals ``[c, cxx]``), nodes of their own.

Every MPI node (a package providing the ``mpi`` virtual to some node, or a
known MPI package) paired with each compiler that built against it becomes
a candidate; OSU and IMB roots are bound to their MPI by hash.  Prefixes:
an external's ``external.path`` (environment variables expanded), else the
directory ``<name>-<version>-<hash>`` found under the install tree (any
projection), else ``spack location -i /<hash>`` where Spack is on PATH.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

# The Spack packages of the MPIs the suite knows: each family's spack_packages.
from hpcnet.constants import CompilerFamily
from hpcnet.mpi import environment_label, spack_family, spack_packages

BENCHMARK_PACKAGES = ('osu-micro-benchmarks', 'intel-mpi-benchmarks')
LOCKFILE_VERSIONS = (5, 6)


class SpackLockError(ValueError):
    """A lock file that cannot be read as one; the message names the file."""


#: Spack's compiler package names (1.x: llvm; 0.2x: clang) -> hpcnet's family.
SPACK_COMPILER_FAMILIES = {'gcc': CompilerFamily.GCC, 'llvm': CompilerFamily.CLANG,
                           'clang': CompilerFamily.CLANG, 'nvhpc': CompilerFamily.NVHPC}


@dataclass(frozen=True)
class SpackCompiler:
    name: str
    version: str

    @property
    def family(self) -> str:
        """hpcnet's compiler family (gcc, clang, nvhpc), else Spack's own name."""
        return SPACK_COMPILER_FAMILIES.get(self.name, self.name)


@dataclass
class LockedMpi:
    """One MPI build of the lock, with the compilers and tools built on it."""
    name: str
    version: str
    hash: str
    prefix: str | None
    external: bool
    compilers: set = field(default_factory=set)    #: SpackCompiler
    #: The compiler that built the MPI itself (None: an external, or no C compiler)
    own_compiler: SpackCompiler | None = None
    #: (package, version, hash, prefix, SpackCompiler) of the OSU/IMB builds on it
    tools: list = field(default_factory=list)

    @property
    def short_hash(self) -> str:
        return self.hash[:7]

    @property
    def spec(self) -> str:
        """The build as `spack find -l` names it (spack_spec)."""
        own = self.own_compiler
        return spack_spec(self.name, self.version, self.short_hash, own and (own.name, own.version))


def spack_spec(name: str, version: str, short_hash: str, compiler=None) -> str:
    '''A Spack build as `spack find -l` names it: ``openmpi@4.1.4 %gcc@12.2.0
    /wlpcv5h`` (``compiler``: (name, version) of its own C compiler, if any).'''
    own = f' %{compiler[0]}@{compiler[1]}' if compiler and compiler[0] != 'none' else ''
    return f'{name}@{version}{own} /{short_hash}'


def load(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except OSError as err:
        raise SpackLockError(f'{path}: cannot read: {err.strerror}') from None
    except ValueError as err:
        raise SpackLockError(f'{path}: not JSON ({err}); expected a spack.lock') from None
    meta = data.get('_meta') if isinstance(data, dict) else None
    if not isinstance(meta, dict) or meta.get('file-type') != 'spack-lockfile':
        raise SpackLockError(f"{path}: _meta.file-type is not 'spack-lockfile' (not a spack.lock)")
    if meta.get('lockfile-version') not in LOCKFILE_VERSIONS:
        raise SpackLockError(f'{path}: _meta.lockfile-version is {meta.get("lockfile-version")!r} '
                             f'(valid: {", ".join(map(str, LOCKFILE_VERSIONS))}: Spack 0.2x, 1.x)')
    if not isinstance(data.get('concrete_specs'), dict) or not isinstance(data.get('roots'), list):
        raise SpackLockError(f'{path}: no roots / concrete_specs')
    return data


def _compiler_of(node: dict, specs: dict) -> SpackCompiler | None:
    if isinstance(node.get('compiler'), dict):              # v5
        return SpackCompiler(node['compiler']['name'], str(node['compiler']['version']))
    for dep in node.get('dependencies') or []:              # v6: the 'c' edge
        if 'c' in (dep.get('parameters') or {}).get('virtuals', []):
            compiler = specs.get(dep['hash'], {})
            return SpackCompiler(dep['name'], str(compiler.get('version', '?')))
    return None


def _mpi_dependency(node: dict) -> str | None:
    for dep in node.get('dependencies') or []:
        if 'mpi' in (dep.get('parameters') or {}).get('virtuals', []) \
                or dep.get('name') in spack_packages():
            return dep['hash']
    return None


def _find_in_tree(install_tree: Path | None, node: dict) -> str | None:
    """The node's directory under any projection that starts with name-version
    and ends with its hash, whole (Spack's default) or cut ({hash:7})."""
    if install_tree is None:
        return None
    hash_, short = node['hash'], node['hash'][:7]
    for depth in ('', '*/', '*/*/'):
        for hit in sorted(install_tree.glob(f'{depth}{node["name"]}-{node["version"]}-*')):
            if hit.name.endswith((f'-{hash_}', f'-{short}')) and hit.is_dir():
                return str(hit)
    return None


def _spack_location(hash_: str) -> str | None:
    spack = shutil.which('spack')
    if spack is None:
        return None
    res = subprocess.run([spack, 'location', '-i', f'/{hash_}'], text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    return res.stdout.strip() if res.returncode == 0 and res.stdout.strip() else None


def prefix_of(node: dict, install_tree: Path | None) -> str | None:
    external = node.get('external')
    if isinstance(external, dict) and external.get('path'):
        return os.path.expandvars(external['path'])
    return _find_in_tree(install_tree, node) or _spack_location(node['hash'])


def matrix(path: Path, install_tree: Path | None = None) -> list:
    """Every MPI build of the lock with its compilers and tools (LockedMpi)."""
    data = load(path)
    specs = data['concrete_specs']
    mpis: dict = {}

    def mpi(hash_):
        if hash_ not in mpis:
            node = specs.get(hash_)
            if node is None:
                raise SpackLockError(f'{path}: concrete_specs has no {hash_} (a truncated lock?)')
            mpis[hash_] = LockedMpi(node['name'], str(node['version']), hash_,
                                    prefix_of(node, install_tree), 'external' in node)
        return mpis[hash_]

    for hash_, node in specs.items():
        if node.get('name') in spack_packages():
            entry = mpi(hash_)
            own = _compiler_of(node, specs)
            if own is not None:
                entry.compilers.add(own)
                entry.own_compiler = own
    for hash_, node in specs.items():
        mpi_hash = _mpi_dependency(node)
        if mpi_hash is None or node.get('name') in spack_packages():
            continue
        entry = mpi(mpi_hash)
        compiler = _compiler_of(node, specs)
        if compiler is not None:
            entry.compilers.add(compiler)
        if node['name'] in BENCHMARK_PACKAGES:
            entry.tools.append((node['name'], str(node['version']), hash_,
                                prefix_of(node, install_tree), compiler))
    return sorted(mpis.values(), key=lambda m: (m.name, m.version, m.hash))


def environment_names(locked: list) -> dict:
    """(MPI hash, compiler) -> environment name: compiler, MPI family and major,
    and the MPI's short Spack hash (gcc12-openmpi4-g5o6l6i), the name discovery
    gives the same build (hpcnet.stacks.sources.spack_env_name)."""
    names = {}
    for m in locked:
        family = spack_family(m.name) or m.name
        for c in m.compilers:
            names[(m.hash, c)] = (f'{environment_label(c.family, c.version)}-'
                                  f'{environment_label(family, m.version)}-{m.short_hash}')
    return names


def table(path: Path, install_tree: Path | None = None) -> str:
    """The matrix as `hpcnet stacks --spack-lock` prints it."""
    locked = matrix(path, install_tree)
    names = environment_names(locked)
    data = load(path)
    lines = [f'{path}: lockfile v{data["_meta"]["lockfile-version"]} '
             f'(Spack {data.get("spack", {}).get("version", "?")}), {len(locked)} MPI builds']
    for m in locked:
        for c in sorted(m.compilers, key=lambda c: (c.name, c.version)):
            tools = ', '.join(f'{t[0]}@{t[1]}/{t[2][:7]}' for t in sorted(m.tools, key=str)
                              if t[4] == c) or 'no OSU/IMB'
            lines.append(f'{names[(m.hash, c)]:32} {m.spec}  with {c.name}@{c.version}  '
                         f'prefix {m.prefix or "(not installed here)"}')
            lines.append(f'{"":32} tools: {tools}')
    return '\n'.join(lines)
