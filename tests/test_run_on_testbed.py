"""`hpcnet run|baseline|accept --system testbed` run ReFrame where `hpcnet
testbed run` does: inside the head node of the testbed that is up, with its
SLURM_CONF (the host's namespace has no route to its slurmctld).  Where no
testbed is up, one line says so and what to run, before ReFrame starts.  A
fake state directory stands for the testbed: no Slurm, no namespaces."""
from __future__ import annotations

import argparse
import json

import pytest
from helpers import hpcnet_in_process

from hpcnet.session import runner
from hpcnet.commands import run as run_command
from hpcnet.exitcodes import Exit
from hpcnet.variables import TESTBED_NODES_ENV, TESTBED_STATE_DIR_ENV


def _fake_testbed(state_dir, complete: bool = True) -> None:
    '''A state.json as `hpcnet testbed up` leaves it: a head node and two
    compute nodes, every link at 1gbit.'''
    state_dir.mkdir(parents=True, exist_ok=True)
    nodes = [{'name': 'hn0', 'role': 'head', 'addr': '10.77.0.10'},
             {'name': 'cn1', 'role': 'compute', 'addr': '10.77.0.11'},
             {'name': 'cn2', 'role': 'compute', 'addr': '10.77.0.12'}]
    (state_dir / 'state.json').write_text(json.dumps(
        {'complete': complete, 'nodes': nodes, 'rate': '1gbit', 'burst': '8kb',
         'resources': [], 'rdma': {'device': None, 'why': 'no rdma_rxe'}}))


@pytest.fixture
def no_reframe(monkeypatch):
    '''ReFrame must not start: a test that reaches it fails.'''
    def started(*args, **kwargs):
        raise AssertionError('ReFrame was started')
    monkeypatch.setattr(runner, '_run_reframe', started)


@pytest.mark.parametrize('command', ['run', 'baseline', 'accept'])
def test_no_testbed_up_is_one_line_naming_testbed_run(command, tmp_path, monkeypatch, no_reframe):
    monkeypatch.setenv(TESTBED_STATE_DIR_ENV, str(tmp_path / 'testbed'))
    code, _, err = hpcnet_in_process(command, '--system', 'testbed', '-n', 'hpcnet_p2p')
    assert code == Exit.USAGE, err
    assert err.count('\n') == 1 and 'Traceback' not in err, err
    assert err.startswith('hpcnet: error: --system testbed: testbed hpcnet is not up'), err
    assert str(tmp_path / 'testbed' / 'state.json') in err and '`hpcnet testbed run ...`' in err


def test_an_incomplete_testbed_is_not_up(tmp_path, monkeypatch, no_reframe):
    _fake_testbed(tmp_path / 'testbed', complete=False)
    monkeypatch.setenv(TESTBED_STATE_DIR_ENV, str(tmp_path / 'testbed'))
    code, _, err = hpcnet_in_process('run', '--system=testbed:eth')
    assert code == Exit.USAGE and 'is not up' in err, err


def _seen_by_run_suite(monkeypatch, argv: list) -> dict:
    '''What run_suite() would launch ReFrame under, for `hpcnet run ARGV`.'''
    seen = {}

    def run_suite(name, reframe_args, **kwargs):
        launch = runner._launch
        seen.update(prefix=list(launch.prefix),
                    env=launch.environment({'PATH': '/usr/bin'}) if launch.environment else None)
        return runner.SuiteRun(Exit.OK)
    monkeypatch.setattr(runner, 'run_suite', run_suite)
    args = argparse.Namespace(report_name='run', repeats=1, reframe_args=argv)
    assert run_command.run(args) == Exit.OK
    return seen


def test_reframe_runs_in_the_head_node_of_the_testbed_up(tmp_path, monkeypatch):
    state = tmp_path / 'testbed'
    _fake_testbed(state)
    monkeypatch.setenv(TESTBED_STATE_DIR_ENV, str(state))
    monkeypatch.setattr(run_command.os, 'geteuid', lambda: 0)
    seen = _seen_by_run_suite(monkeypatch, ['--system', 'testbed', '-n', 'hpcnet_p2p'])
    assert seen['prefix'][:2] == ['nsenter', '--net=/run/netns/hpcnet-hn0']
    assert f'--uts={state / "ns" / "hn0.uts"}' in seen['prefix'] and seen['prefix'][-1] == '--'
    assert seen['env']['SLURM_CONF'] == str(state / 'etc' / 'slurm.conf')
    assert seen['env'][TESTBED_NODES_ENV] == '2'
    assert seen['env']['PATH'].startswith(f'{state / "bin"}:')
    assert not runner.launched()       # the launch ends with the command


def test_other_systems_and_listings_run_on_the_host(tmp_path, monkeypatch):
    monkeypatch.setenv(TESTBED_STATE_DIR_ENV, str(tmp_path / 'testbed'))
    assert _seen_by_run_suite(monkeypatch, ['--system', 'local'])['prefix'] == []
    # A listing submits nothing: it needs no testbed up.
    assert _seen_by_run_suite(monkeypatch, ['--system', 'testbed', '-l'])['prefix'] == []


def test_not_root_is_one_line(tmp_path, monkeypatch, no_reframe):
    _fake_testbed(tmp_path / 'testbed')
    monkeypatch.setenv(TESTBED_STATE_DIR_ENV, str(tmp_path / 'testbed'))
    monkeypatch.setattr(run_command.os, 'geteuid', lambda: 1000)
    code, _, err = hpcnet_in_process('run', '--system', 'testbed')
    assert code == Exit.USAGE and err.count('\n') == 1 and 'needs root' in err, err


def test_testbed_run_is_not_launched_twice(tmp_path, monkeypatch):
    '''`hpcnet testbed run` runs `hpcnet run` inside its own launch.'''
    _fake_testbed(tmp_path / 'testbed')
    monkeypatch.setenv(TESTBED_STATE_DIR_ENV, str(tmp_path / 'testbed'))
    with runner.launched_through(['outer', '--'], lambda env: {**env, 'SLURM_CONF': 'outer'}):
        seen = _seen_by_run_suite(monkeypatch, ['--system', 'testbed'])
    assert seen['prefix'] == ['outer', '--'] and seen['env']['SLURM_CONF'] == 'outer'


def test_on_the_head_node_the_sessions_run_where_they_are(tmp_path, monkeypatch):
    '''A pipeline's wrapper starts hpcnet on the head node with the
    testbed's SLURM_CONF: no testbed is entered again from there.'''
    from hpcnet.testbed.config import HEAD
    monkeypatch.setenv(TESTBED_STATE_DIR_ENV, str(tmp_path / 'testbed'))    # none up
    monkeypatch.setattr(run_command.socket, 'gethostname', lambda: HEAD)
    monkeypatch.setenv('SLURM_CONF', str(tmp_path / 'slurm.conf'))
    with run_command.on_the_testbed_named(['--system', 'testbed', '-n', 'hpcnet_p2p']):
        assert not runner.launched()
    monkeypatch.delenv('SLURM_CONF')
    with pytest.raises(runner.SelectionError, match='is not up'):
        with run_command.on_the_testbed_named(['--system', 'testbed', '-n', 'hpcnet_p2p']):
            pass
