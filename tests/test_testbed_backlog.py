"""The host backlog a testbed holds while up (hpcnet.testbed.softirq): sized
for the ports it adds, never below what the host had, shared by several
testbeds and restored by the last one down.  On files, not the host's sysctl."""
import pytest

from hpcnet.testbed import softirq


@pytest.fixture
def host(tmp_path, monkeypatch):
    sysctl = tmp_path / 'netdev_max_backlog'
    sysctl.write_text('1000\n')
    monkeypatch.setattr(softirq, 'BACKLOG_SYSCTL', sysctl)
    monkeypatch.setattr(softirq, 'BACKLOG_RECORD', tmp_path / 'run' / 'backlog.json')
    (tmp_path / 'run').mkdir()
    return sysctl


def state_dir_up(tmp_path, name):
    '''A state directory of a testbed that is up (its state file exists).'''
    state_dir = tmp_path / name
    state_dir.mkdir()
    (state_dir / 'state.json').write_text('{}')
    return str(state_dir)


def test_a_queue_per_port():
    # 4 compute nodes and the head: 5 links, each a node's eth0 and a bridge port.
    assert softirq.backlog_needed(4) == 10000
    assert softirq.backlog_needed(1) == 4000


def test_held_shared_and_restored(tmp_path, host):
    small, big = state_dir_up(tmp_path, 'small'), state_dir_up(tmp_path, 'big')
    assert softirq.hold_backlog(small, 4000) == 4000
    assert softirq.hold_backlog(big, 10000) == 10000
    assert host.read_text() == '10000\n'
    assert softirq.backlog_holders() == {small: 4000, big: 10000}
    # The big one leaves: sized for the one still up.
    assert softirq.release_backlog(big) == []
    assert host.read_text() == '4000\n'
    # The last one leaves: the host's own value is back, and no record is left.
    assert softirq.release_backlog(small) == []
    assert host.read_text() == '1000\n'
    assert not softirq.BACKLOG_RECORD.exists()
    assert softirq.release_backlog(small) == []       # down twice: nothing to do


def test_never_below_the_host(tmp_path, host):
    host.write_text('50000\n')
    one = state_dir_up(tmp_path, 'one')
    assert softirq.hold_backlog(one, 10000) == 50000
    softirq.release_backlog(one)
    assert host.read_text() == '50000\n'


def test_a_testbed_killed_without_down_is_not_a_holder(tmp_path, host):
    killed, alive = state_dir_up(tmp_path, 'killed'), state_dir_up(tmp_path, 'alive')
    softirq.hold_backlog(killed, 10000)
    (tmp_path / 'killed' / 'state.json').unlink()      # its state went with it
    # A new testbed finds the host as the killed one left it; the original stays 1000.
    assert softirq.hold_backlog(alive, 4000) == 4000
    assert softirq.backlog_holders() == {alive: 4000}
    softirq.release_backlog(alive)
    assert host.read_text() == '1000\n'
