"""Discovery of MPIs a real Spack built (ci/spack/build.sh): the environment's
spack.lock, its `spack find --format` answers and the Lmod files
`spack module lmod refresh` wrote, recorded in tests/data/spack-built (see its
README).  Each source must name every environment by the Spack hash of its MPI.
The recorded prefixes ($SPACK_RUN/...) are re-rooted under tmp_path, with a
fake MPI at each MPI prefix."""
import json
import os
import re
from pathlib import Path

import pytest
from test_stacks import CC, make_fake_mpi, make_spack_open_mpi, run_in_environment

from hpcnet import stacks
from hpcnet.stacks import modules, sources, spacklock
from hpcnet.stacks.modulecache import module_candidates

DATA = Path(__file__).parent / 'data' / 'spack-built'
LOCK = DATA / 'spack.lock'
MPI_PACKAGES = ('openmpi', 'mpich')

needs_cc = pytest.mark.skipif(CC is None, reason='no C compiler (cc/gcc) on PATH')
needs_lmod = pytest.mark.skipif(modules.lmod_command() is None,
                                reason='Lmod is not installed (Debian package lmod; LMOD_CMD unset)')


#: Spack's name of the compiler package -> the family hpcnet names environments by.
COMPILER_FAMILY = {'gcc': 'gcc', 'llvm': 'clang'}


def _locked_builds() -> list:
    '''(package, full hash, version, compiler label) of each MPI build the
    recorded lock holds, read here from the lock's own structure (the 'c'
    virtual of each MPI node names its compiler).'''
    specs = json.loads(LOCK.read_text())['concrete_specs']
    builds = []
    for hash_, node in specs.items():
        if node['name'] not in MPI_PACKAGES:
            continue
        (cc,) = [d for d in node['dependencies'] if 'c' in d['parameters']['virtuals']]
        compiler = f"{COMPILER_FAMILY[cc['name']]}{specs[cc['hash']]['version'].split('.')[0]}"
        builds.append((node['name'], hash_, str(node['version']), compiler))
    return sorted(builds)


def _expected_specs() -> list:
    '''The spec of each MPI build as `spack find -l` names it, from the lock's
    own nodes: package@version %compiler@version /short hash.'''
    specs = json.loads(LOCK.read_text())['concrete_specs']
    out = []
    for hash_, node in specs.items():
        if node['name'] in MPI_PACKAGES:
            (cc,) = [d for d in node['dependencies'] if 'c' in d['parameters']['virtuals']]
            out.append(f"{node['name']}@{node['version']} %{cc['name']}@"
                       f"{specs[cc['hash']]['version']} /{hash_[:7]}")
    return sorted(out)


def _expected_names() -> list:
    return sorted(f'{compiler}-{name}4-{hash_[:7]}' for name, hash_, _, compiler in _locked_builds())


def _reroot(text: str, root: Path) -> str:
    return text.replace('$SPACK_RUN', str(root))


def _without_mpirun() -> set:
    '''Short hashes of the Open MPI builds whose mpirun Spack replaced by its
    notice (``~legacylaunchers schedulers=slurm``), read from the lock.'''
    specs = json.loads(LOCK.read_text())['concrete_specs']
    return {hash_[:7] for hash_, node in specs.items()
            if node['name'] == 'openmpi' and not node['parameters']['legacylaunchers']
            and 'slurm' in node['parameters']['schedulers']}


def _fake_mpi_at(prefix: Path, family: str) -> Path:
    '''A fake MPI (tests/test_stacks.py) at exactly ``prefix``; where the lock
    says Spack replaced its mpirun, as Spack installed it (the notice, and
    the orterun it keeps).'''
    make = prefix.parent / f'.make-{prefix.name}'
    made = (make_spack_open_mpi(make) if prefix.name[-7:] in _without_mpirun()
            else make_fake_mpi(make, family, family))
    # A link, not a move: the fake wrapper names the directory it was made in.
    prefix.symlink_to(made)
    return prefix


def _assert_runs_without_mpirun(found) -> None:
    '''The environment of each build whose mpirun is Spack's notice starts
    ranks here (no gap, no failed probe) with the orterun Spack kept, as
    ``mpirun``.  (The fake MPICH links no UCX or libfabric: its probes fail.)'''
    kept = [env for env in found.environments if env.mpi.candidate.launcher_dir]
    assert [env.name[-7:] for env in kept] == sorted(_without_mpirun()), found.environments
    for env in kept:
        cand = env.mpi.candidate
        assert env.mpi.fabric_gaps == ()
        assert not [f for f in found.fabric_failures if f[0].startswith(f'{cand.label} ')]
        # A module environment gets its bindir from the module, loaded before the exports.
        res = run_in_environment(env, 'mpirun -np 2 /bin/echo exchange',
                                 path=f'{cand.bindir}:/usr/bin:/bin')
        assert (res.stdout, res.stderr) == ('exchange\nexchange\n',
                                            f'started {cand.bindir}/orterun\n'), res


def test_the_recorded_build_has_both_mpis_built_not_external():
    locked = spacklock.matrix(LOCK)
    assert sorted(m.name for m in locked) == ['mpich', 'openmpi', 'openmpi']
    assert not any(m.external for m in locked)
    assert [b[3] for b in _locked_builds()].count('clang14') == 1


def test_lock_names_each_environment_by_its_spack_hash(tmp_path):
    '''The install tree of the recorded projection, re-rooted: every MPI, OSU
    and IMB build is found by name, version and short hash.'''
    tree = tmp_path / 'opt'
    for line in (DATA / 'find-format.txt').read_text().splitlines():
        parts = line.split('|')
        if len(parts) == 6 and parts[3].startswith('$SPACK_RUN/env/opt/'):
            Path(_reroot(parts[3], tmp_path).replace(f'{tmp_path}/env/opt', str(tree))).mkdir(
                parents=True, exist_ok=True)
    locked = spacklock.matrix(LOCK, tree)
    names = spacklock.environment_names(locked)
    assert sorted(names.values()) == _expected_names()
    assert sorted(m.spec for m in locked) == _expected_specs()
    for m in locked:
        assert m.prefix and m.prefix.endswith(m.short_hash), m
        assert sorted(t[0] for t in m.tools) == ['intel-mpi-benchmarks', 'osu-micro-benchmarks']
        assert all(t[3] for t in m.tools), m.tools


@needs_cc
def test_lock_source_runs_the_build_without_mpirun_with_its_orterun(tmp_path, monkeypatch):
    '''HPCNET_SPACK_LOCK over the recorded install tree, re-rooted, with fake
    MPIs at the MPI prefixes: the ~legacylaunchers Open MPI has no gap.'''
    tree = tmp_path / 'opt'
    for line in (DATA / 'find-format.txt').read_text().splitlines():
        name, _, _, prefix = (line.split('|') + [''] * 4)[:4]
        if not prefix.startswith('$SPACK_RUN/env/opt/'):
            continue
        path = tree / Path(prefix).name
        path.parent.mkdir(parents=True, exist_ok=True)
        if name in MPI_PACKAGES:
            _fake_mpi_at(path, name)
        else:
            path.mkdir()
    monkeypatch.setenv(sources.SPACK_LOCK_ENV_VAR, str(LOCK))
    monkeypatch.setenv(sources.SPACK_INSTALL_TREE_ENV_VAR, str(tree))
    here = [stacks.Compiler('gcc', '12.2.0', CC), stacks.Compiler('clang', '14.0.6', CC)]
    found = stacks.discover(tmp_path / 'state', sources=[sources.spack_lock_candidates],
                            compilers=here)
    assert sorted(env.name for env in found.environments) == _expected_names(), found.rejected
    _assert_runs_without_mpirun(found)


@needs_cc
def test_spack_env_names_each_environment_by_its_spack_hash(tmp_path, monkeypatch):
    '''HPCNET_SPACK_ENV: `spack find --format` answered with the recorded
    lines (a script in place of spack), fake MPIs at the recorded prefixes.'''
    answer = _reroot((DATA / 'find-format.txt').read_text(), tmp_path)
    for line in answer.splitlines():
        name, _, _, prefix = (line.split('|') + [''] * 4)[:4]
        if name in MPI_PACKAGES:
            _fake_mpi_at(Path(prefix), name)
    (tmp_path / 'answer.txt').write_text(answer)
    (tmp_path / 'mpi-of.txt').write_text(_reroot((DATA / 'find-mpi-of.txt').read_text(),
                                                  tmp_path))
    bindir = tmp_path / 'spackbin'
    bindir.mkdir()
    # Answers the two queries discovery makes (hpcnet/stacks/sources.py) as recorded.
    (bindir / 'spack').write_text(
        '#!/bin/sh\n'
        f'if [ "$5" = "{sources.SPACK_FORMAT}" ] && [ $# = 5 ]; then cat {tmp_path / "answer.txt"}\n'
        f'elif [ "$5 $6" = "{sources.SPACK_MPI_OF_FORMAT} {sources.SPACK_MPI_QUERY}" ]; then '
        f'cat {tmp_path / "mpi-of.txt"}\n'
        'else exit 4; fi\n')
    (bindir / 'spack').chmod(0o755)
    monkeypatch.setenv('PATH', f'{bindir}:{os.environ["PATH"]}')
    monkeypatch.setenv(stacks.SPACK_ENV_VAR, str(tmp_path / 'env'))
    # Every compiler of this machine kind, one C compiler behind them (the fakes need one):
    # each build pairs only with its own.
    here = [stacks.Compiler('gcc', '12.2.0', CC), stacks.Compiler('gcc', '11.3.0', CC),
            stacks.Compiler('clang', '14.0.6', CC)]
    found = stacks.discover(tmp_path / 'state', sources=[stacks.spack_candidates],
                            compilers=here)
    assert sorted(env.name for env in found.environments) == _expected_names(), found.rejected
    _assert_runs_without_mpirun(found)
    # The report's provenance names each environment's spec (checks log the stack's mpi_spec).
    assert sorted(env.stack().mpi_spec for env in found.environments) == _expected_specs()
    for env in found.environments:
        assert len(env.mpi.candidate.tool_prefixes) == 2, env.mpi.candidate
        assert env.name.endswith(env.stack().mpi_spec[-7:])


@needs_cc
@needs_lmod
def test_spack_module_files_name_each_environment_by_its_spack_hash(tmp_path, monkeypatch):
    '''The Lmod tree Spack wrote (hierarchy [mpi], gcc 12 the core compiler),
    re-rooted; each MPI module's PATH leads to a fake MPI.'''
    root = tmp_path / 'env' / 'modules'     # where the files' own MODULEPATH lines point
    for lua in (DATA / 'modules').rglob('*.lua'):
        target = root / lua.relative_to(DATA / 'modules')
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_reroot(lua.read_text(), tmp_path))
    for name, hash_, _, _ in _locked_builds():
        (lua,) = [p for p in root.rglob('*.lua') if p.parent.name == name and hash_[:7] in p.name]
        bindir = re.search(r'prepend_path\("PATH", "([^"]+)/bin"', lua.read_text()).group(1)
        _fake_mpi_at(Path(bindir), name)
    # The hierarchy's root (<arch>/Core); each MPI's own .../<mpi>/<version>/Core lies deeper.
    core = min({p.parent.parent for p in root.rglob('*.lua') if p.parent.parent.name == 'Core'},
               key=lambda path: len(path.parts))
    monkeypatch.delenv('MODULEPATH', raising=False)
    monkeypatch.setenv(modules.MODULEPATH_ENV, str(core))
    found = stacks.discover(tmp_path / 'state', sources=[module_candidates])
    names = sorted(env.name for env in found.environments)
    assert names, found.rejected
    # Each MPI, the clang build too: behind Spack's llvm module, whose name leads its own
    # (llvm-14_0_6-z2m2fo2-openmpi-4_1_4-bcff2c3).
    builds = _locked_builds()
    assert len(names) == len(builds), found.rejected
    _assert_runs_without_mpirun(found)
    for name, hash_, version, compiler in builds:
        wanted = f"{name}-{version.replace('.', '_')}-{hash_[:7]}"
        assert any(n.endswith(wanted) and (compiler != 'clang14' or n.startswith('llvm-14_0_6'))
                   for n in names), names
