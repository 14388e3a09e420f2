"""The suite on a machine that has only Python, gcc and make (issue: a fresh
machine failed 31 cases because Intel MPI's TCP path needs libfabric.so.1).

`ci/fresh-machine.sh` reproduces that machine for one command: in a private
mount namespace, Debian's MPIs, gcc-11, clang, libfabric, UCX and the verbs
libraries are hidden.  The PyPI MPIs `make stacks` installed stay (a fresh
machine gets them from `make run` too); the state directory is new, so every
stack is probed again there.
"""
import os
import shutil
import subprocess

import pytest
from conftest import REFRAME, run_reframe

from hpcnet import stacks
from hpcnet.stacks import sources
from hpcnet.constants import Fabric, P2PMode
from hpcnet.paths import PROJECT_ROOT
from hpcnet.variables import STATE_DIR_ENV

pytestmark = pytest.mark.integration

FRESH_MACHINE = PROJECT_ROOT / 'ci' / 'fresh-machine.sh'
HPCNET = REFRAME.with_name('hpcnet')
IMPI_TCP_GAP = 'libfabric.so.1 not found: Debian package libfabric1'


@pytest.fixture
def fresh_machine(tmp_path):
    '''(command prefix, environment) that run a command on the fresh machine.'''
    if os.geteuid() != 0 or not shutil.which('unshare'):
        pytest.skip('needs root and unshare(1): the fresh machine is a mount namespace '
                    'with overlays hiding the Debian packages')
    pypi = stacks.pypi_root(stacks.state_dir())
    missing = [e.name for e in sources.pypi_stacks() if not (pypi / e.name / 'bin').is_dir()]
    if missing:
        pytest.fail(f'PyPI MPI stacks {missing} are not installed under {pypi}: run `make stacks`')
    state = tmp_path / 'state'
    state.mkdir()
    (state / 'mpi').symlink_to(pypi)
    scratch = tmp_path / 'scratch'
    scratch.mkdir()
    return (['unshare', '-m', str(FRESH_MACHINE), str(scratch)],
            {**os.environ, STATE_DIR_ENV: str(state)})


def test_stacks_on_a_fresh_machine_name_what_is_missing(fresh_machine):
    prefix, env = fresh_machine
    proc = subprocess.run([*prefix, str(HPCNET), 'stacks', '--refresh'], env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    assert proc.returncode == 0, proc.stdout
    lines = proc.stdout.splitlines()
    envs = {line.split()[0]: line.split()[1] for line in lines if line.startswith('gcc')}
    # Only gcc-12 and the PyPI MPIs: nothing from Debian leaked in.
    assert set(envs) == {'gcc12-openmpi5', 'gcc12-mpich5', 'gcc12-impi2021'}, proc.stdout
    assert set(envs.values()) == {'pypi'}
    impi = lines.index(next(line for line in lines if line.startswith('gcc12-impi2021')))
    assert lines[impi + 1].split() == ['skips', 'fabric', f'{Fabric.TCP}:', *IMPI_TCP_GAP.split()]
    assert 'skips fabric' not in '\n'.join(lines[:impi])
    assert 'fabric probe failed' not in proc.stdout
    # Hidden for the command only.
    assert os.path.exists(f'/usr/lib/{os.uname().machine}-linux-gnu/libfabric.so.1')


def test_p2p_on_a_fresh_machine_runs_where_it_can_and_skips_naming_the_gap(tmp_path,
                                                                           fresh_machine):
    prefix, env = fresh_machine
    proc, cases = run_reframe(tmp_path, '-n', '^hpcnet_p2p%', '-S', 'time_per_size_ms=10',
                              prefix=prefix, env={STATE_DIR_ENV: env[STATE_DIR_ENV]})
    assert proc.returncode == 0, proc.stdout[-3000:]
    p2p = [c for c in cases if c['name'].startswith('hpcnet_p2p ')]
    assert len(p2p) == 3 * 2 * len(P2PMode.ALL), proc.stdout[-3000:]
    skipped = [c for c in p2p if c['result'] == 'skip']
    assert {(c['environ'], c['partition']) for c in skipped} == {('gcc12-impi2021', Fabric.TCP)}
    assert len(skipped) == len(P2PMode.ALL)
    for case in skipped:
        assert case['skip_reason'].endswith(f'cannot use fabric tcp on this host: {IMPI_TCP_GAP}')
    assert all(c['result'] == 'pass' for c in p2p if c['result'] != 'skip'), \
        [(c['name'], c['environ'], c['fail_reason']) for c in p2p if c['result'] != 'pass']
