"""Interface counters before and after a job, on every node it uses.

Two uses: proof that the bytes crossed the link under test (the interface's
tx_bytes must grow by at least what the kernel sent), and telling a regression
apart from a link throwing errors (errors and drops are attached to the
result).  The job prints, from each node, one line per phase::

    hpcnet-link: before cn1 eth0 tx_bytes=123 rx_bytes=456 tx_errors=0 ...
"""
from __future__ import annotations

import re
from dataclasses import dataclass

#: Counters read from /sys/class/net/<iface>/statistics.
COUNTERS = ('tx_bytes', 'rx_bytes', 'tx_packets', 'rx_packets',
            'tx_errors', 'rx_errors', 'tx_dropped', 'rx_dropped')
ERROR_COUNTERS = ('tx_errors', 'rx_errors', 'tx_dropped', 'rx_dropped')

_LINE = re.compile(r'^hpcnet-link: (before|after) (\S+) (\S+)((?: \w+=\d+)+)\s*$', re.M)


class LinkStatsError(ValueError):
    pass


def snapshot_command(phase: str, iface: str) -> str:
    '''A POSIX shell command printing the counters of ``iface`` on this node.'''
    if not re.fullmatch(r'[\w.:-]+', iface):
        raise LinkStatsError(f'interface name {iface!r} is not valid')
    stats = f'/sys/class/net/{iface}/statistics'
    reads = ' '.join(f'{c}=$(cat {stats}/{c})' for c in COUNTERS)
    return (f'sh -c \'if [ -d {stats} ]; then echo "hpcnet-link: {phase} $(hostname) {iface} '
            f'{reads}"; else echo "hpcnet-link: missing $(hostname) {iface}"; fi\'')


def per_node(command: str, launcher: str, num_nodes: int) -> str:
    '''Run ``command`` once on each of the job's nodes.'''
    if num_nodes == 1:
        return command
    if launcher == 'srun':
        return (f'srun --nodes={num_nodes} --ntasks={num_nodes} --ntasks-per-node=1 '
                f'--mpi=none {command}')
    raise LinkStatsError(f'reading link counters on {num_nodes} nodes needs the srun launcher '
                         f'(partition uses {launcher!r})')


@dataclass(frozen=True)
class LinkDelta:
    host: str
    iface: str
    delta: dict        #: counter -> after - before

    @property
    def errors(self) -> dict:
        return {c: self.delta[c] for c in ERROR_COUNTERS if self.delta.get(c)}


def parse(text: str) -> list:
    '''One LinkDelta per host that printed both phases.'''
    if re.search(r'^hpcnet-link: missing (\S+) (\S+)', text, re.M):
        m = re.search(r'^hpcnet-link: missing (\S+) (\S+)', text, re.M)
        raise LinkStatsError(f'interface {m.group(2)} does not exist on {m.group(1)}')
    snaps = {}
    for phase, host, iface, fields in _LINE.findall(text):
        values = dict(f.split('=') for f in fields.split())
        snaps.setdefault((host, iface), {})[phase] = {k: int(v) for k, v in values.items()}
    deltas = []
    for (host, iface), phases in sorted(snaps.items()):
        if set(phases) != {'before', 'after'}:
            raise LinkStatsError(f'{host} {iface}: counters only {list(phases)}, '
                                 'need before and after')
        deltas.append(LinkDelta(host, iface, {c: phases['after'][c] - phases['before'][c]
                                              for c in phases['before']}))
    return deltas


def link_efficiency(payload_MBps: float, rate_bps: float, directions: int = 1) -> float:
    '''Achieved payload rate over the link's wire rate (1.0 = every bit on
    the wire is payload, unreachable: framing and headers cost ~4-6 %).'''
    return payload_MBps * 8e6 / (float(rate_bps) * directions)
