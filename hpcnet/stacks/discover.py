"""The compiler x MPI stack model: find what is installed, prove it works, and
turn every working pair into a ReFrame environment.

The model has three layers, so that new sources (a Spack environment, Lmod or
EasyBuild modules) only add candidates and never touch the checks:

1. *Sources* (hpcnet.stacks.sources, hpcnet.stacks.modules) yield
   :class:`hpcnet.stacks.candidate.MpiCandidate` objects: "there is an MPI compiler
   wrapper here, with this environment".  See :data:`SOURCES`.
2. :func:`hpcnet.stacks.candidate.probe` compiles and runs a small program with each
   candidate and each compiler, and reads the MPI family and version from both
   the header macros (compile time) and ``MPI_Get_library_version`` (run
   time): a wrapper whose headers and library disagree, or that names another
   MPI than its source said, is rejected.  This catches the Debian trap where
   ``/usr/bin/mpicc`` (an alternatives link) builds MPICH programs against
   Open MPI.
3. :class:`Environment` (compiler + probed stack) knows its ReFrame name
   (``<compiler><major>-<mpi><major>``), features and settings.

What differs between MPI families is read from their entries in the registry
(hpcnet.mpi).  Imports go one way: this module imports the sources, the
probe and the registry; none of them imports it.

Results are cached in the state directory, keyed by a fingerprint of every
wrapper and compiler found, so loading the ReFrame configuration stays cheap.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from hpcnet import mpi, stackvalues
from hpcnet.constants import CompilerFamily, Feature
from hpcnet.fabrics import host_probed
from hpcnet.model import ConfigError, Stack
from hpcnet.variables import STATE_DIR_ENV
from hpcnet.stacks.candidate import MpiCandidate, StackError, find_tools, run_command, state_dir
from hpcnet.stacks.modulecache import CACHE_FILE as MODULES_CACHE_FILE, module_candidates
from hpcnet.stacks.candidate import (PROBE_PROGRAM, probe, probe_fabrics, probe_source,
                                     with_kept_launcher)
from hpcnet.stacks.sources import (debian_candidates, extra_prefix_candidates, pypi_candidates,
                                   spack_candidates, spack_lock_candidates)

#: Programs an MPI prefix may ship that checks can use, by feature.
TOOL_FEATURES = {
    'IMB-MPI1': Feature.IMB,
    'IMB-NBC': Feature.IMB_NBC,
    'osu_latency': Feature.OSU,
}


class Labelled:
    '''A family and a version, named in environment names by family and major
    version: gcc12, openmpi4, impi2021 (Intel MPI keeps its year as major),
    mvapich2 (the family already says its major).'''

    @property
    def major(self) -> str:
        return self.version.split('.')[0]

    @property
    def label(self) -> str:
        return mpi.environment_label(self.family, self.version)


@dataclass(frozen=True)
class Compiler(Labelled):
    family: str          #: one of CompilerFamily.ALL
    version: str         #: full version, e.g. '12.2.0'
    command: str         #: absolute path of the C compiler



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
        return mpi.mpi_profile(self.family, self.candidate.transport_layer)


_VARIABLE_REFERENCE = re.compile(r'\$[A-Za-z_][A-Za-z0-9_]*')


def _shell_word(value: str) -> str:
    '''A path or a colon-separated list of them as one shell word: each part
    quoted, a ``$NAME`` part left to expand.'''
    return ':'.join(part if _VARIABLE_REFERENCE.fullmatch(part) else shlex.quote(part)
                    for part in value.split(':'))


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
        if cand.compiler_in_name and cand.env_name:
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
        '''Environment variables as ReFrame expects them: [[name, value], ...],
        each value a shell word (ReFrame writes ``export NAME=VALUE``).'''
        cand = self.mpi.candidate
        if cand.modules:
            # A module candidate's PATH and variables come from its modules,
            # loaded in the job (repeating them would hide a module that
            # fails); only the launcher directory goes in front of them
            # (ReFrame exports its variables after loading its modules).
            env = [['PATH', f'{cand.launcher_dir}:$PATH']] if cand.launcher_dir else []
        else:
            front = ':'.join(d for d in (cand.launcher_dir, cand.bindir) if d)
            env = [['PATH', f'{front}:$PATH'], *([k, v] for k, v in cand.env_vars)]
        env.append([mpi.family(self.mpi.family).wrapper_cc_variable, self.compiler.command])
        return [[name, _shell_word(value)] for name, value in env]

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

    def to_json(self) -> dict:
        '''The record the discovery cache keeps of it (:meth:`from_json`).'''
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> 'Environment':
        '''An environment from its cache record (lists made tuples again).'''
        found = data['mpi']
        stack = MpiStack(candidate=MpiCandidate.from_json(found['candidate']),
                         family=found['family'], version=found['version'],
                         library_version=found['library_version'],
                         tools=tuple(tuple(t) for t in found['tools']),
                         fabric_gaps=tuple(tuple(g) for g in found['fabric_gaps']))
        return cls(Compiler(**data['compiler']), stack, data.get('primary', False))

    def stack(self) -> Stack:
        '''The typed model the checks read back (hpcnet.model.Stack).'''
        cand = self.mpi.candidate
        issue = mpi.known_issue(self.mpi.family, self.mpi.version, cand.transport_layer)
        return Stack(environ=self.name, mpi_family=self.mpi.family, mpi_profile=self.mpi.profile,
                     mpi_version=self.mpi.version, mpi_source=cand.source, mpi_prefix=cand.prefix,
                     mpi_spec=cand.spec,
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

    def to_json(self) -> dict:
        '''The discovery cache's content (:meth:`from_json`).'''
        return {'environments': [e.to_json() for e in self.environments],
                'rejected': self.rejected, 'fabric_failures': self.fabric_failures}

    @classmethod
    def from_json(cls, data: dict) -> 'Discovery':
        return cls([Environment.from_json(e) for e in data['environments']],
                   [tuple(r) for r in data['rejected']],
                   [tuple(f) for f in data['fabric_failures']])


# --------------------------------------------------------------------------
# Compilers
# --------------------------------------------------------------------------

def _compiler_identity(path: str) -> tuple | None:
    '''(family, version) of a C compiler, or None if it does not answer.'''
    try:
        out = run_command([path, '--version'], timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    if 'clang version' in out:
        m = re.search(r'clang version (\d+(?:\.\d+)*)', out)
        return (CompilerFamily.CLANG, m.group(1)) if m else None
    if 'nvc' in out and 'NVIDIA' in out:
        m = re.search(r'nvc\S* (\d+\.\d+(?:-\d+)?)', out)
        return (CompilerFamily.NVHPC, m.group(1).replace('-', '.')) if m else None
    if re.search(r'\bgcc\b|GCC|Free Software Foundation', out):
        ver = run_command([path, '-dumpfullversion'], timeout=20).stdout.strip()
        return (CompilerFamily.GCC, ver) if re.fullmatch(r'\d+(\.\d+)*', ver) else None
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

#: Every source of candidates, in order.  A source is a function of the state
#: directory returning a list of MpiCandidate.
SOURCES: list = [debian_candidates, pypi_candidates, spack_candidates, spack_lock_candidates,
                 extra_prefix_candidates, module_candidates]


# --------------------------------------------------------------------------
# Probing
# --------------------------------------------------------------------------

# --------------------------------------------------------------------------
# Discovery with cache
# --------------------------------------------------------------------------

#: Bump when the cached data changes shape: old caches are then recomputed.
CACHE_FORMAT = 7
#: The cache of discovery in the state directory.
CACHE_FILE = 'stacks.json'


def _fingerprint(candidates, compilers) -> str:
    h = hashlib.sha256(f'{CACHE_FORMAT}\n{probe_source()}'.encode())
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


def _pinned_compilers(cand: MpiCandidate, found: list) -> tuple:
    '''(compilers, why none): [the compiler of a candidate that names its
    own], the compilers found of the families and majors it was built with,
    or None for a candidate that says neither (it goes with every compiler
    found); an empty list comes with the reason.'''
    if cand.compiler_command:
        identity = _compiler_identity(cand.compiler_command)
        if identity:
            return [Compiler(*identity, cand.compiler_command)], ''
        return [], f'its compiler {cand.compiler_command} does not say what it is (--version)'
    if cand.built_with:
        majors = {(family, version.split('.')[0]) for family, version in cand.built_with}
        chosen = [c for c in found if (c.family, c.major) in majors]
        built = ', '.join(f'{family} {version}' for family, version in sorted(cand.built_with))
        return chosen, '' if chosen else f'built with {built}: no such compiler on this host'
    return None, ''


def _probe(candidates: list, compilers: list, fabrics: tuple) -> Discovery:
    '''Probe every candidate, alone and with each of its compilers, and on
    ``fabrics``: every working pair is an environment.'''
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
            pinned, unpaired = _pinned_compilers(cand, compilers)
            if pinned == []:
                result.rejected.append((cand.label, unpaired))
                continue
            primary = True
            for comp in compilers if pinned is None else pinned:
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
    return result


def discover(state: Path | None = None, sources: list | None = None,
             compilers: list | None = None, use_cache: bool = True,
             fabrics: Iterable[str] | None = None, site=None) -> Discovery:
    '''Find every working compiler x MPI environment, and the fabrics of
    ``fabrics`` (default: every fabric one host can carry, hpcnet.fabrics)
    each MPI cannot use on this host.  The stack variables ``site`` (the
    session's SiteFile) sets are exported first where the environment
    leaves them unset (hpcnet.stackvalues).'''
    try:
        stackvalues.export(site.stack_values if site else ())
    except ConfigError as err:
        raise StackError(str(err)) from None
    state = Path(state) if state else state_dir()
    try:
        state.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise StackError(f'state directory {state} ({STATE_DIR_ENV} or the default) cannot be '
                         f'created: {err.strerror} (valid: a writable directory)') from err
    if not use_cache:
        (state / MODULES_CACHE_FILE).unlink(missing_ok=True)
    # Every source's MPI whose mpirun is Spack's notice gets the launcher Spack
    # kept (with_kept_launcher): ranks start with it wherever the MPI came from.
    candidates = [with_kept_launcher(c, state)
                  for src in (sources if sources is not None else SOURCES) for c in src(state)]
    compilers = detect_compilers() if compilers is None else compilers
    probed = host_probed()
    fabrics = probed if fabrics is None else fabrics
    unprobeable = sorted(set(fabrics) - set(probed))
    if unprobeable:
        raise StackError(f'fabric {unprobeable[0]!r} cannot be probed on one host (valid: '
                         f'{", ".join(probed)}; RDMA is proven in the job)')
    fabrics = tuple(f for f in probed if f in set(fabrics))
    fingerprint = _fingerprint(candidates, compilers) + ':' + ','.join(fabrics)
    cache = state / CACHE_FILE
    if use_cache and cache.exists():
        try:
            data = json.loads(cache.read_text())
            if data.get('fingerprint') == fingerprint:
                return Discovery.from_json(data)
            why = 'an MPI, a compiler or the probe changed'
        except (ValueError, KeyError, TypeError) as err:
            why = f'unreadable ({type(err).__name__}: {err})'
    else:
        why = 'asked to probe again' if cache.exists() else 'no cache yet'
    # One line on stderr while the probes run (stdout may be parsed: -l).
    print(f'hpcnet: probing {len(candidates)} MPI(s) with {len(compilers)} compiler(s) on '
          f'this host ({cache}: {why}) ...', end='', file=sys.stderr, flush=True)
    started = time.monotonic()
    outcome = 'stopped'
    try:
        result = _probe(candidates, compilers, fabrics)
        outcome = f'{len(result.environments)} environment(s)'
    finally:
        print(f' {outcome} in {time.monotonic() - started:.0f} s', file=sys.stderr, flush=True)
    cache.write_text(json.dumps({'fingerprint': fingerprint, **result.to_json()}, indent=1))
    return result


def cached_discovery(state: Path | None = None) -> Discovery | None:
    '''What the last discovery kept in the state directory, read without
    probing and without checking that it is current (`hpcnet config`);
    None where there is none; a StackError where it cannot be read.'''
    cache = (Path(state) if state else state_dir()) / CACHE_FILE
    try:
        return Discovery.from_json(json.loads(cache.read_text()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise StackError(f'{cache}: unreadable ({type(err).__name__}: {err}); `hpcnet stacks '
                         '--refresh` probes again and writes it anew') from None
