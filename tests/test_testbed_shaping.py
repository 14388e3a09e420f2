"""The testbed's shaping command lines (hpcnet.testbed.shaping): as text, and
applied for real in two scratch network namespaces joined by a veth, where
frames to the slowed peer must land in its class and all others in the
default one (needs root and namespaces; skipped with the reason otherwise).
"""
import json
import re
import subprocess
import sys

import pytest

from hpcnet import testbed as tbm
from hpcnet.testbed import shaping
from hpcnet.commands.testbed import testbed_main as run_cli
from hpcnet.testbed.config import ETHERNET_OVERHEAD


def test_one_root_tbf_with_the_ethernet_size_table():
    assert shaping.root_tbf_command('ns', 'eth0', '1gbit', '8kb', 'replace') == [
        'tc', '-n', 'ns', 'qdisc', 'replace', 'dev', 'eth0', 'root',
        'stab', 'overhead', str(ETHERNET_OVERHEAD), 'linklayer', 'ethernet',
        'tbf', 'rate', '1gbit', 'burst', '8kb', 'latency', '50ms']


def test_per_peer_classes_filters_and_default():
    cmds = [' '.join(c[3:]) for c in shaping.per_peer_commands(
        'ns', 'eth0', '1gbit', '8kb', {'10.77.0.13': '700mbit', '10.77.0.12': '500mbit'})]
    htb_class = ('htb rate 100gbit burst 1mb cburst 1mb quantum 60000')
    assert cmds == [
        f'qdisc add dev eth0 root handle 1: stab overhead {ETHERNET_OVERHEAD} '
        'linklayer ethernet htb default 1',
        f'class add dev eth0 parent 1: classid 1:1 {htb_class}',
        'qdisc add dev eth0 parent 1:1 tbf rate 1gbit burst 8kb latency 50ms',
        # Peers in address order, each its class and its tbf.
        f'class add dev eth0 parent 1: classid 1:2 {htb_class}',
        'qdisc add dev eth0 parent 1:2 tbf rate 500mbit burst 8kb latency 50ms',
        f'class add dev eth0 parent 1: classid 1:3 {htb_class}',
        'qdisc add dev eth0 parent 1:3 tbf rate 700mbit burst 8kb latency 50ms',
        'filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst 10.77.0.12/32 '
        'flowid 1:2',
        'filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst 10.77.0.13/32 '
        'flowid 1:3']


def test_unshaped_default_class_has_no_tbf():
    cmds = shaping.per_peer_commands('ns', 'eth0', None, '8kb', {'10.77.0.12': '700mbit'})
    assert [c for c in cmds if c[3:6] == ['qdisc', 'add', 'dev'] and '1:1' in c] == []
    assert shaping.peer_class(14) == '1:10'          # tc's class minors are hex


def test_path_key_names_a_path_whatever_the_order():
    assert shaping.path_key('cn3', 'cn1') == shaping.path_key('cn1', 'cn3') == 'cn1-cn3'


# Root, namespaces and these tools: no Slurm or munge.
SKIP = tbm.unavailable_reason(tools=('ip', 'tc', 'nsenter', 'unshare'))


@pytest.fixture
def veth_pair():
    '''Namespaces hpcnetsha (10.98.0.1) and hpcnetshb (10.98.0.2 and .3) joined by a veth.'''
    names = ('hpcnetsha', 'hpcnetshb')
    for ns in names:
        subprocess.run(['ip', 'netns', 'add', ns], check=True)
    try:
        subprocess.run(['ip', '-n', names[0], 'link', 'add', 'eth0', 'type', 'veth', 'peer',
                        'name', 'eth0', 'netns', names[1]], check=True)
        for ns, addrs in zip(names, (['10.98.0.1'], ['10.98.0.2', '10.98.0.3'])):
            for addr in addrs:
                subprocess.run(['ip', '-n', ns, 'addr', 'add', f'{addr}/24', 'dev', 'eth0'],
                               check=True)
            subprocess.run(['ip', '-n', ns, 'link', 'set', 'eth0', 'up'], check=True)
        yield names
    finally:
        for ns in names:
            subprocess.run(['ip', 'netns', 'del', ns], check=True)


def _class_packets(ns):
    # This tc prints classes as text only (-j is ignored for them).
    out = subprocess.run(['tc', '-n', ns, '-s', 'class', 'show', 'dev', 'eth0'],
                         check=True, capture_output=True, text=True).stdout
    return {handle: int(packets) for handle, packets in
            re.findall(r'^class htb (\S+) .*\n Sent \d+ bytes (\d+) pkt', out, re.M)}


def _send_udp(ns, addr, count):
    script = ('import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n'
              f'for _ in range({count}): s.sendto(b"x" * 1000, ({addr!r}, 9))')
    subprocess.run(['nsenter', f'--net=/run/netns/{ns}', sys.executable, '-c', script],
                   check=True)


@pytest.mark.skipif(SKIP is not None, reason=f'scratch network namespaces: {SKIP}')
def test_frames_to_the_slowed_peer_take_its_class(veth_pair):
    a, _ = veth_pair
    for argv in shaping.per_peer_commands(a, 'eth0', '1gbit', '8kb', {'10.98.0.2': '700mbit'}):
        subprocess.run(argv, check=True, capture_output=True)
    qdiscs = json.loads(subprocess.run(['tc', '-n', a, '-j', 'qdisc', 'show', 'dev', 'eth0'],
                                       check=True, capture_output=True, text=True).stdout)
    rates = sorted(q['options']['rate'] for q in qdiscs if q['kind'] == 'tbf')
    assert rates == [87500000, 125000000], qdiscs       # bytes/s: 700 Mbit/s, 1 Gbit/s
    before = _class_packets(a)
    _send_udp(a, '10.98.0.2', 30)
    _send_udp(a, '10.98.0.3', 20)
    after = _class_packets(a)
    sent = {h: after[h] - before.get(h, 0) for h in after}
    assert sent['1:2'] == 30, sent
    assert sent['1:1'] >= 20, sent            # and whatever else the stack sent


@pytest.mark.skipif(SKIP is not None, reason=f'scratch network namespaces: {SKIP}')
def test_unshaping_fails_loudly_unless_there_was_nothing_to_remove(veth_pair):
    '''Removing the shaping where there is none is done; a tc that fails
    otherwise (here: no such device) is a StepError, never a link left
    slowed while the state says unshaped.'''
    a, _ = veth_pair
    subprocess.run(shaping.root_tbf_command(a, 'eth0', '1gbit', '8kb'), check=True)
    shaping.clear_root('unshape', a, 'eth0')
    shaping.clear_root('unshape', a, 'eth0')   # nothing left: fine
    qdiscs = json.loads(subprocess.run(['tc', '-n', a, '-j', 'qdisc', 'show', 'dev', 'eth0'],
                                       check=True, capture_output=True, text=True).stdout)
    assert not any(q['kind'] == 'tbf' for q in qdiscs), qdiscs
    with pytest.raises(tbm.StepError, match=r"step 'unshape' failed: .* exited with 1: "
                                            r'Cannot find device "eth9"'):
        shaping.clear_root('unshape', a, 'eth9')


def test_peer_without_node_is_a_usage_error(capsys):
    assert run_cli(['shape', '--testbed-name', 'hpcnetnone', '--peer', 'cn2',
                    '--rate', '700mbit']) == 2
    assert capsys.readouterr().err == ('hpcnet testbed shape: --peer needs --node '
                                       '(the path between them)\n')


@pytest.mark.parametrize('argv, named', [
    (['shape', '--rate', '5xbit'], "rate '5xbit' is not valid"),
    (['status', '--testbed-name', 'Bad'], "bad testbed name 'Bad'"),
    (['status', '--state-dir', '/tmp/tb $(id)'], "testbed state directory '/tmp/tb $(id)'"),
    (['up', '--state-dir', '/tmp/tb\nx'], 'testbed state directory'),
])
def test_a_value_the_user_gave_is_a_usage_error_before_anything_runs(capsys, argv, named):
    '''Exit 2, one line naming the value and what is valid; a state directory
    slurm.conf and the node scripts could not carry is refused, never quoted
    into a root shell.'''
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f'hpcnet testbed {argv[0]}: ') and named in err, err
    assert 'valid' in err or 'use ' in err, err
    assert err.count('\n') == 1, err
