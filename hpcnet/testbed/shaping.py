"""The tc command lines that shape what a testbed node sends: one root tbf
for the whole link, or, where paths to some peers are slowed, an htb root
that sorts the frames by destination into a tbf per peer and one for the rest.

Functions only build argv lists; ``Testbed`` runs them.  This kernel has
htb, the u32 classifier and tbf, but neither the prio qdisc nor the flower
classifier (docs/testbed.md, "One pair's path").
"""
from __future__ import annotations

import subprocess

from hpcnet.testbed.config import (CMD_TIMEOUT, DEFAULTS, ETHERNET_OVERHEAD, IFACE, TBF_LATENCY,
                                   StepError, TestbedError, TestbedUsageError, burst_bytes,
                                   rate_bps)
from hpcnet.testbed import tree
from hpcnet.testbed.processes import fmt_cmd

#: The size table of every root qdisc: tbf (alone or under htb) then counts
#: the bytes a real Ethernet frame spends on the wire.
STAB = ['stab', 'overhead', str(ETHERNET_OVERHEAD), 'linklayer', 'ethernet']
#: htb only sorts frames into classes; the tbf under each class shapes them.
#: So each class's own rate and bucket are far above anything the veth
#: carries (the classes never throttle), and its quantum is set because
#: htb's default (rate / r2q) is out of its range at such a rate.
CLASS_RATE = '100gbit'
CLASS_BURST = '1mb'
CLASS_QUANTUM = '60000'
#: The class of every frame no peer filter matches.
DEFAULT_CLASS = '1:1'


def tbf(rate: str, burst: str) -> list[str]:
    return ['tbf', 'rate', rate, 'burst', burst, 'latency', TBF_LATENCY]


#: What `tc qdisc del ... root` says where the device has no root qdisc.
NO_ROOT_QDISC = 'Cannot delete qdisc with handle of zero'


def clear_command(netns: str, dev: str) -> list[str]:
    """Removes ``dev``'s root qdisc (fails with NO_ROOT_QDISC where it has none)."""
    return ['tc', '-n', netns, 'qdisc', 'del', 'dev', dev, 'root']


def clear_root(step: str, netns: str, dev: str) -> None:
    """Remove ``dev``'s shaping; where it has none that is done too, and any
    other failure of tc is a StepError of ``step``."""
    res = subprocess.run(clear_command(netns, dev), stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, timeout=CMD_TIMEOUT)
    if res.returncode != 0 and NO_ROOT_QDISC not in res.stderr:
        raise StepError(step, f'{fmt_cmd(clear_command(netns, dev))} exited with '
                              f'{res.returncode}: {res.stderr.strip()}')


def root_tbf_command(netns: str, dev: str, rate: str, burst: str,
                     verb: str = 'add') -> list[str]:
    """Shapes all ``dev`` sends like an Ethernet wire of ``rate``."""
    return ['tc', '-n', netns, 'qdisc', verb, 'dev', dev, 'root', *STAB, *tbf(rate, burst)]


def peer_class(index: int) -> str:
    """The htb class of the ``index``-th slowed peer (0, 1, ...): 1:2, 1:3, ..."""
    return f'1:{index + 2:x}'


def per_peer_commands(netns: str, dev: str, rate: str | None, burst: str,
                      peer_rates: dict[str, str]) -> list[list[str]]:
    """Commands that build, on a ``dev`` with no root qdisc, an htb root
    whose default class sends at ``rate`` (None: unshaped) and whose class of
    each peer address in ``peer_rates`` sends at that peer's rate, every tbf
    with the same ``burst`` and the size table of the root."""
    tc = ['tc', '-n', netns]
    cmds = [tc + ['qdisc', 'add', 'dev', dev, 'root', 'handle', '1:', *STAB,
                  'htb', 'default', DEFAULT_CLASS.split(':')[1]]]
    classes = [(DEFAULT_CLASS, rate)] + [(peer_class(i), peer_rates[addr])
                                        for i, addr in enumerate(sorted(peer_rates))]
    for classid, class_rate in classes:
        cmds.append(tc + ['class', 'add', 'dev', dev, 'parent', '1:', 'classid', classid,
                          'htb', 'rate', CLASS_RATE, 'burst', CLASS_BURST,
                          'cburst', CLASS_BURST, 'quantum', CLASS_QUANTUM])
        if class_rate:
            cmds.append(tc + ['qdisc', 'add', 'dev', dev, 'parent', classid,
                              *tbf(class_rate, burst)])
    for i, addr in enumerate(sorted(peer_rates)):
        cmds.append(tc + ['filter', 'add', 'dev', dev, 'parent', '1:', 'protocol', 'ip',
                          'prio', '1', 'u32', 'match', 'ip', 'dst', f'{addr}/32',
                          'flowid', peer_class(i)])
    return cmds


def path_key(node: str, peer: str) -> str:
    """How state.json names the path between two nodes: 'cn1-cn2'."""
    return '-'.join(sorted((node, peer)))


class Shaping:
    """``Testbed``'s shaping: every link, one node's link, one pair's path,
    or one leaf's uplink."""

    def _tc(self, step, netns, dev, rate, burst, verb='add'):
        """Shape what ``dev`` sends like an Ethernet wire of ``rate``: the
        size table counts the preamble, frame check and inter-frame gap every
        frame spends on a real wire, and the bucket holds a few frames, so no
        message leaves faster than a wire would carry it (docs/testbed.md).
        ``rate`` None removes the shaping."""
        if rate:
            self._cmd(step, root_tbf_command(netns, dev, rate, burst, verb))
        else:
            clear_root(step, netns, dev)

    def path_rates(self, node: str) -> dict[str, str]:
        """{peer: rate} of the slowed paths from ``node``."""
        found = {}
        for key, rate in self.state.get('path_rates', {}).items():
            ends = key.split('-')
            if node in ends:
                found[ends[1 - ends.index(node)]] = rate
        return found

    def _shape_egress(self, step: str, node: str, burst: str):
        """Rebuild what ``node`` sends from the state: its link's rate (the
        node's own, else every link's), and a class per slowed path."""
        rate = self.state.get('node_rates', {}).get(node, self.state.get('rate'))
        addresses = self.addresses()
        peers = {addresses[peer]: r for peer, r in self.path_rates(node).items()}
        if not peers:
            self._tc(step, self.netns(node), IFACE, rate, burst, verb='replace')
            return
        self._tc(step, self.netns(node), IFACE, None, burst)
        for argv in per_peer_commands(self.netns(node), IFACE, rate, burst, peers):
            self._cmd(step, argv)

    def _checked(self, rate: str | None, burst: str | None) -> tuple[str | None, str]:
        if rate in ('none', ''):
            rate = None
        if rate:
            rate_bps(rate)
        burst = burst or self.state.get('burst') or DEFAULTS.burst
        burst_bytes(burst)
        return rate, burst

    def _compute_node(self, node: str, option: str):
        if node not in self.compute_nodes():
            raise TestbedError(f'{option} {node}: unknown compute node '
                               f'(valid: {", ".join(self.compute_nodes())})')

    def shape(self, rate: str | None, burst: str | None = None,
              node: str | None = None):
        """Change (tc qdisc replace) or remove (rate None) the shaping of
        every node's link (which also ends every node's, path's and uplink's
        own rate: the testbed back to one rate everywhere), or of ``node``'s
        link only (e.g. one node at half rate)."""
        rate, burst = self._checked(rate, burst)
        if node is not None:
            self._compute_node(node, '--node')
        if node is None:
            for each in self.nodes():
                self._tc('shape', self.netns(each), IFACE, rate, burst, verb='replace')
                self._tc('shape', self.switch_netns(each), f'v-{each}', None, burst)
            for leaf in self.state.get('uplink_rates', {}):
                self._shape_uplink(leaf, None, burst)
            self._state['rate'] = rate
            self._state['burst'] = burst if rate else None
            self._state['node_rates'] = {}
            self._state['path_rates'] = {}
            self._state['uplink_rates'] = {}
        else:
            # One node's link (a slow NIC or cable): what it sends, and what
            # its switch sends it.
            self._state.setdefault('node_rates', {})[node] = rate
            self._shape_egress('shape', node, burst)
            common = self.state.get('rate')
            self._tc('shape', self.switch_netns(node), f'v-{node}',
                     rate if rate != common else None, burst, verb='replace')
        self._save()

    def _shape_uplink(self, leaf: str, rate: str | None, burst: str):
        """Each end's egress like a node's link: the same tbf and size table."""
        found = self.state['tree']
        for netns, dev in tree.uplink_ends(found['spine'], found['leaves'][leaf]['netns'], leaf):
            self._tc('shape', netns, dev, rate, burst, verb='replace')

    def shape_uplink(self, leaf: str, rate: str | None, burst: str | None = None):
        """Slow ``leaf``'s uplink to ``rate`` (None: unshaped again), both
        directions: a bad optic or a switch port slows what crosses it
        either way, and every pair between that leaf and another crosses it.
        Uplinks are unshaped by default: each pair is already held to the
        wire by its nodes' links, and an uplink carries no more pairs at
        once than its leaf's nodes (no oversubscription here)."""
        rate, burst = self._checked(rate, burst)
        leaves = self.leaves
        if not leaves:
            raise TestbedUsageError(f'--uplink {leaf}: testbed {self.name} has one bridge and no '
                               'uplink (valid: up --leaves 2 or more)')
        if leaf not in leaves:
            raise TestbedUsageError(f'--uplink {leaf}: no such leaf (valid: {", ".join(leaves)})')
        self._shape_uplink(leaf, rate, burst)
        rates = self._state.setdefault('uplink_rates', {})
        if rate:
            rates[leaf] = rate
        else:
            rates.pop(leaf, None)
        self._save()

    def shape_path(self, node: str, peer: str, rate: str | None,
                   burst: str | None = None):
        """Slow the path between two compute nodes to ``rate`` (None: back to
        each node's own rate), both directions: a bad cable or switch path
        slows what crosses it either way, so each node's egress toward the
        other is shaped, and no other pair's traffic is."""
        rate, burst = self._checked(rate, burst)
        self._compute_node(node, '--node')
        self._compute_node(peer, '--peer')
        if node == peer:
            raise TestbedError(f'--peer {peer}: a path needs two different nodes')
        paths = self._state.setdefault('path_rates', {})
        if rate:
            paths[path_key(node, peer)] = rate
        else:
            paths.pop(path_key(node, peer), None)
        for end in (node, peer):
            self._shape_egress('shape', end, burst)
        self._save()
