"""The suite on a machine that has only Python, gcc and make (issue: a fresh
machine's `make run` exited 3 because Intel MPI's TCP path needs
libfabric.so.1, and the local partition was offered it all the same).

`ci/fresh-machine.sh` reproduces that machine for one command: in a private
mount namespace, Debian's MPIs, gcc-11, clang, libfabric, UCX and the verbs
libraries are hidden.  The PyPI MPIs `make stacks` installed stay (a fresh
machine gets them from `make run` too); the state directory is new, so every
stack is probed again there.  The PyPI Intel MPI runs on the libfabric the
MPICH wheel lends it; where no wheel lends one, it is left out of the tcp
partition and the run says so in one line.
"""
import os
import shutil
import subprocess

import pytest
from conftest import REFRAME, run_reframe

from hpcnet import stacks
from hpcnet.stacks import sources
from hpcnet.constants import Fabric, P2PMode
from hpcnet.mpi import MpiFamily
from hpcnet.paths import PROJECT_ROOT
from hpcnet.variables import STATE_DIR_ENV

pytestmark = pytest.mark.integration

FRESH_MACHINE = PROJECT_ROOT / 'ci' / 'fresh-machine.sh'
HPCNET = REFRAME.with_name('hpcnet')
IMPI_TCP_GAP = 'libfabric.so.1 not found: Debian package libfabric1'
PYPI_ENVS = {'gcc12-openmpi5', 'gcc12-mpich5', 'gcc12-impi2021'}


def _fresh_machine(tmp_path, families):
    '''(command prefix, environment) that run a command on the fresh machine
    with the PyPI stacks of ``families`` installed.'''
    if os.geteuid() != 0 or not shutil.which('unshare'):
        pytest.skip('needs root and unshare(1): the fresh machine is a mount namespace '
                    'with overlays hiding the Debian packages')
    pypi = stacks.pypi_root(stacks.state_dir())
    missing = [e.name for e in sources.pypi_stacks() if not (pypi / e.name / 'bin').is_dir()]
    if missing:
        pytest.fail(f'PyPI MPI stacks {missing} are not installed under {pypi}: run `make stacks`')
    state = tmp_path / 'state'
    (state / 'mpi').mkdir(parents=True)
    for family in families:
        (state / 'mpi' / family).symlink_to(pypi / family)
    scratch = tmp_path / 'scratch'
    scratch.mkdir()
    return (['unshare', '-m', str(FRESH_MACHINE), str(scratch)],
            {**os.environ, STATE_DIR_ENV: str(state)})


@pytest.fixture
def fresh_machine(tmp_path):
    '''The fresh machine after `make stacks`: every PyPI stack.'''
    return _fresh_machine(tmp_path, [e.name for e in sources.pypi_stacks()])


@pytest.fixture
def fresh_machine_impi_alone(tmp_path):
    '''The fresh machine with the PyPI Intel MPI alone: no wheel lends it a libfabric.'''
    return _fresh_machine(tmp_path, [MpiFamily.IMPI])


def _stacks(prefix, env):
    proc = subprocess.run([*prefix, str(HPCNET), 'stacks', '--refresh'], env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    assert proc.returncode == 0, proc.stdout
    return proc.stdout.splitlines()


def test_stacks_on_a_fresh_machine_use_the_libfabric_a_wheel_lends(fresh_machine):
    lines = _stacks(*fresh_machine)
    envs = {line.split()[0]: line.split()[1] for line in lines if line.startswith('gcc')}
    # Only gcc-12 and the PyPI MPIs: nothing from Debian leaked in.
    assert set(envs) == PYPI_ENVS, lines
    assert set(envs.values()) == {'pypi'}
    text = '\n'.join(lines)
    assert 'skips fabric' not in text and 'fabric probe failed' not in text, text
    # Hidden for the command only.
    assert os.path.exists(f'/usr/lib/{os.uname().machine}-linux-gnu/libfabric.so.1')


def test_stacks_name_the_missing_library_where_no_wheel_lends_it(fresh_machine_impi_alone):
    lines = _stacks(*fresh_machine_impi_alone)
    impi = lines.index(next(line for line in lines if line.startswith('gcc12-impi2021')))
    assert lines[impi + 1].split() == ['skips', 'fabric', f'{Fabric.TCP}:', *IMPI_TCP_GAP.split()]


def test_p2p_on_a_fresh_machine_runs_every_pypi_stack_on_every_fabric(tmp_path, fresh_machine):
    prefix, env = fresh_machine
    proc, cases = run_reframe(tmp_path, '-n', '^hpcnet_p2p%', '-S', 'time_per_size_ms=10',
                              prefix=prefix, env={STATE_DIR_ENV: env[STATE_DIR_ENV]})
    assert proc.returncode == 0, proc.stdout[-3000:]
    p2p = [c for c in cases if c['name'].startswith('hpcnet_p2p ')]
    assert len(p2p) == len(PYPI_ENVS) * 2 * len(P2PMode.ALL), proc.stdout[-3000:]
    assert {(c['environ'], c['partition']) for c in p2p} == \
        {(e, p) for e in PYPI_ENVS for p in (Fabric.SHM, Fabric.TCP)}
    assert all(c['result'] == 'pass' for c in p2p), \
        [(c['name'], c['environ'], c['fail_reason']) for c in p2p if c['result'] != 'pass']


def test_a_stack_that_cannot_use_a_fabric_is_left_out_of_it_and_named(fresh_machine_impi_alone):
    prefix, env = fresh_machine_impi_alone
    proc = subprocess.run([*prefix, str(HPCNET), 'run', '-n', '^hpcnet_p2p%', '-S',
                           'time_per_size_ms=10'], env=env, text=True, timeout=900,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    # Not offered on local:tcp (local is ours: nobody declared it there), so
    # nothing is skipped and the run is decided.
    assert proc.returncode == 0, proc.stdout[-3000:]
    lines = proc.stdout.splitlines()
    assert f'hpcnet: left out: gcc12-impi2021 on local:{Fabric.TCP}: {IMPI_TCP_GAP}' in lines
    (left_out,) = [line for line in lines if line.startswith('hpcnet: LEFT OUT (1): ')]
    assert f'gcc12-impi2021 on local:{Fabric.TCP} ({IMPI_TCP_GAP})' in left_out
    assert 'make deps' in left_out
    assert 'NOT DECIDED' not in proc.stdout and 'SKIPPED' not in proc.stdout
    assert f'@local:{Fabric.SHM}+gcc12-impi2021' in proc.stdout
    assert f'@local:{Fabric.TCP}+gcc12-impi2021' not in proc.stdout
