"""hpcnet stacks --spack-lock: the compiler x MPI matrix of a real Spack
environment from its lock file, without Spack (v6 from Spack 1.1, v5 from
Spack 0.23)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from hpcnet.stacks import spacklock

DATA = Path(__file__).parent / 'data' / 'spack'
V6 = DATA / 'spack-1.1-install-12specs.spack.lock'
V5 = DATA / 'spack-0.23-matrix-12specs.spack.lock'


@pytest.mark.parametrize('lock', [V6, V5])
def test_every_mpi_x_compiler_with_its_own_osu_and_imb(lock):
    locked = spacklock.matrix(lock)
    names = spacklock.environment_names(locked)
    assert sorted({name.rsplit('-', 1)[0] for name in names.values()}) == [
        'gcc11-impi2021', 'gcc11-mpich4', 'gcc11-openmpi4',
        'gcc12-impi2021', 'gcc12-mpich4', 'gcc12-openmpi4']
    # Every environment is named by the Spack hash of its MPI build.
    assert all(name.endswith(f'-{mpi_hash[:7]}') for (mpi_hash, _), name in names.items())
    for m in locked:
        for c in m.compilers:
            tools = sorted(t[0] for t in m.tools if t[4] == c)
            assert tools == ['intel-mpi-benchmarks', 'osu-micro-benchmarks'], (m.name, c)
    # Externals keep the prefix the site gave Spack.
    openmpi = [m for m in locked if m.name == 'openmpi']
    assert all(m.prefix == '/usr' and m.external for m in openmpi)


def test_the_v6_lock_binds_tools_by_hash_and_reads_the_compiler_edge():
    (openmpi,) = [m for m in spacklock.matrix(V6) if m.name == 'openmpi']
    assert {(c.name, c.version) for c in openmpi.compilers} == {('gcc', '12.2.0'), ('gcc', '11.3.0')}
    by_compiler = {c.version: sorted(t[2][:7] for t in openmpi.tools if t[4] == c)
                   for c in openmpi.compilers}
    assert by_compiler['12.2.0'] == ['iz7tlen', 'w4i5hab']


def test_two_builds_of_one_mpi_get_distinct_names(tmp_path):
    data = json.loads(V6.read_text())
    specs = data['concrete_specs']
    # A second Open MPI 4 build (another hash) under the gcc 12 OSU of the lock.
    twin = dict(specs['g5o6l6i7pemrc4n4s35ltskkpqi5wsf7'], hash='zzzzzzz' + 'a' * 25)
    specs[twin['hash']] = twin
    osu = specs['iz7tlenfuwbr6xwc7jye33rekzeqjcnj']
    osu['dependencies'] = [dict(d, hash=twin['hash']) if d['name'] == 'openmpi' else d
                           for d in osu['dependencies']]
    lock = tmp_path / 'spack.lock'
    lock.write_text(json.dumps(data))
    names = set(spacklock.environment_names(spacklock.matrix(lock)).values())
    assert {'gcc12-openmpi4-g5o6l6i', 'gcc12-openmpi4-zzzzzzz'} <= names


def test_install_tree_gives_prefixes_under_a_short_hash_projection(tmp_path):
    '''spack-env/spack.yaml's projection ends with {hash:7}, not the whole hash.'''
    node = json.loads(V6.read_text())['concrete_specs']['iz7tlenfuwbr6xwc7jye33rekzeqjcnj']
    built = tmp_path / f'osu-micro-benchmarks-7.4-gcc12.2.0-{node["hash"][:7]}'
    built.mkdir()
    (tmp_path / 'osu-micro-benchmarks-7.4-gcc12.2.0-aaaaaaa').mkdir()
    (openmpi,) = [m for m in spacklock.matrix(V6, tmp_path) if m.name == 'openmpi']
    assert str(built) in {t[3] for t in openmpi.tools}


def test_install_tree_gives_prefixes_of_built_packages(tmp_path):
    node = json.loads(V6.read_text())['concrete_specs']['iz7tlenfuwbr6xwc7jye33rekzeqjcnj']
    built = tmp_path / 'linux-x86_64_v4' / f'osu-micro-benchmarks-7.4-{node["hash"]}'
    built.mkdir(parents=True)
    (openmpi,) = [m for m in spacklock.matrix(V6, tmp_path) if m.name == 'openmpi']
    assert str(built) in {t[3] for t in openmpi.tools}


def test_a_file_that_is_not_a_lock_is_one_message(tmp_path):
    bad = tmp_path / 'spack.lock'
    bad.write_text(json.dumps({'_meta': {'file-type': 'spack-lockfile', 'lockfile-version': 3}}))
    with pytest.raises(spacklock.SpackLockError, match=r'lockfile-version is 3 \(valid: 5, 6'):
        spacklock.load(bad)


def test_cli_prints_the_matrix_of_both_lock_formats():
    hpcnet = Path(sys.executable).with_name('hpcnet')
    for lock, version in ((V6, 'lockfile v6 (Spack 1.1.0)'), (V5, 'lockfile v5 (Spack 0.23.1)')):
        res = subprocess.run([str(hpcnet), 'stacks', '--spack-lock', str(lock)], text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        assert res.returncode == 0, res.stdout
        assert version in res.stdout and 'gcc11-mpich4' in res.stdout
