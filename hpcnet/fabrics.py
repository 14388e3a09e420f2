"""Fabrics: everything hpcnet knows about one, in one place.

- **The registry**: one :class:`FabricEntry` per fabric a partition can
  declare (extras ``fabric``): what carries it, what a partition must name,
  whether the host probes it, which RDMA link layer it runs on.  The model,
  discovery, the checks, ``site init`` and the metric catalogue read it from
  here; the entries hpcnet ships are at the end of the registry's part, a
  site file's own are registered by hpcnet.siteconfig.sites.
- **The proof of its use**: the interface counters a job reads before and
  after the benchmark, on every node (:func:`snapshot_command`,
  :func:`link_deltas`).
- **Its MPI settings** are the fabric table's (config/fabrics.yaml), read
  and interpreted in hpcnet.fabrictable.

Adding a fabric is one :class:`FabricEntry` (:func:`register`) plus its block
in the fabric table.  This module imports nothing of hpcnet but the
vocabulary (hpcnet.constants) and the MPI registry (hpcnet.mpi).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, fields

from hpcnet import mpi
from hpcnet.constants import Fabric
from hpcnet.mpi import RegistryError


class ConfigError(ValueError):
    """A site's configuration (system file, fabric table) is invalid."""


class Carrier:
    '''What carries a fabric's bytes between ranks.'''
    #: Ranks of one node share memory: no link, nothing crosses an interface.
    SHARED_MEMORY = 'shared memory'
    #: A network interface, through the kernel's network stack.
    NETDEV = 'netdev'
    #: An RDMA device's port (the kernel is bypassed).
    RDMA = 'rdma'
    ALL = (SHARED_MEMORY, NETDEV, RDMA)


class LinkLayer:
    '''What sysfs says an RDMA port runs on (ports/<n>/link_layer).'''
    ETHERNET = 'Ethernet'
    INFINIBAND = 'InfiniBand'
    ALL = (ETHERNET, INFINIBAND)


#: The RDMA port a partition uses where it names none (extras rdma_port).
DEFAULT_RDMA_PORT = 1


@dataclass(frozen=True)
class FabricEntry:
    '''Everything hpcnet knows about one fabric.  Every field is required:
    an entry states each fact, where "not used" is None or False.'''
    #: The name partitions declare (extras ``fabric``) and the key of its
    #: block in the fabric table.
    name: str
    #: One line for `hpcnet fabrics validate` and the docs.
    description: str
    #: What carries it (:class:`Carrier`).
    carrier: str
    #: Whether a partition must name extras ``iface``: the interface whose
    #: counters prove the traffic.  An RDMA fabric may name one (its netdev).
    needs_iface: bool
    #: Whether discovery probes each MPI on it on the host running ReFrame
    #: (one host can carry it); an RDMA fabric is proven where the ranks run.
    host_probed: bool
    #: The interface the host probe runs it over (None: it needs none).
    host_probe_iface: str | None
    #: The link layer its RDMA ports must report (:class:`LinkLayer`; None
    #: where it is not RDMA): the preflight checks it, ``site init`` proposes
    #: the fabric on ports that report it.
    link_layer: str | None
    #: The RoCE v2 GID index its MPI settings use where a partition names
    #: none (extras ``gid_index``); None: it uses no GID.
    default_gid_index: int | None

    @property
    def is_rdma(self) -> bool:
        return self.carrier == Carrier.RDMA

    @property
    def has_link(self) -> bool:
        '''Whether its bytes cross a link (counters, preflight, the wire's rate).'''
        return self.carrier != Carrier.SHARED_MEMORY


def _incomplete(entry: FabricEntry) -> str | None:
    '''What an entry lacks or contradicts, or None.'''
    for f in fields(entry):
        if getattr(entry, f.name) == '':
            return f'{f.name} is empty'
    if entry.carrier not in Carrier.ALL:
        return f'carrier is {entry.carrier!r} (valid: {", ".join(Carrier.ALL)})'
    if entry.is_rdma != (entry.link_layer is not None):
        return ('link_layer is for RDMA fabrics only, and every RDMA fabric needs one '
                f'(valid: {", ".join(LinkLayer.ALL)})')
    if entry.link_layer is not None and entry.link_layer not in LinkLayer.ALL:
        return f'link_layer is {entry.link_layer!r} (valid: {", ".join(LinkLayer.ALL)})'
    if entry.carrier == Carrier.NETDEV and not entry.needs_iface:
        return 'a netdev fabric needs extras iface (its counters prove the traffic)'
    if entry.host_probe_iface and not entry.host_probed:
        return 'host_probe_iface is set, but host_probed is False'
    if entry.host_probed and entry.has_link and not entry.host_probe_iface:
        return 'a host-probed fabric with a link needs host_probe_iface'
    if entry.default_gid_index is not None and entry.link_layer != LinkLayer.ETHERNET:
        return 'default_gid_index is for RDMA over Ethernet only'
    return None


_REGISTRY = mpi.Registry('fabric', lambda entry, held: _incomplete(entry))
#: Add a fabric; RegistryError where the entry is incomplete or its name is taken.
register = _REGISTRY.register
#: Remove a fabric (a test's own, after the test).
unregister = _REGISTRY.unregister
#: Every entry, in registration order.
entries = _REGISTRY.entries
fabric_names = _REGISTRY.names
#: The entry of a fabric; RegistryError naming the valid ones.
fabric = _REGISTRY.get


def host_probed() -> tuple:
    '''The fabrics discovery probes each MPI on, on the host running ReFrame.'''
    return tuple(e.name for e in _REGISTRY.entries() if e.host_probed)


def rdma_fabrics() -> tuple:
    return tuple(e for e in _REGISTRY.entries() if e.is_rdma)


# The fabrics hpcnet ships.

SHM = register(FabricEntry(
    name=Fabric.SHM,
    description='ranks on one node talk through shared memory',
    carrier=Carrier.SHARED_MEMORY,
    needs_iface=False,
    host_probed=True,
    host_probe_iface=None,
    link_layer=None,
    default_gid_index=None,
))

TCP = register(FabricEntry(
    name=Fabric.TCP,
    description="Ethernet through the kernel's TCP stack (loopback on one host)",
    carrier=Carrier.NETDEV,
    needs_iface=True,
    host_probed=True,
    # One host carries TCP over loopback.
    host_probe_iface='lo',
    link_layer=None,
    default_gid_index=None,
))

ROCE = register(FabricEntry(
    name=Fabric.ROCE,
    description='RDMA over Converged Ethernet (RoCE v2)',
    carrier=Carrier.RDMA,
    needs_iface=False,
    host_probed=False,
    host_probe_iface=None,
    link_layer=LinkLayer.ETHERNET,
    # RoCE v2 over IPv4 on a default mlx5 configuration.
    default_gid_index=3,
))

IB = register(FabricEntry(
    name=Fabric.IB,
    description='InfiniBand (same MPI settings as RoCE, without the GID index)',
    carrier=Carrier.RDMA,
    needs_iface=False,
    host_probed=False,
    host_probe_iface=None,
    link_layer=LinkLayer.INFINIBAND,
    default_gid_index=None,
))


# The proof of a fabric's use: interface counters before and after a job.
#
# Two uses: proof that the bytes crossed the link under test (the interface's
# tx_bytes must grow by at least what the kernel sent), and telling a
# regression apart from a link throwing errors (errors and drops are attached
# to the result).  The job prints, from each node, one line per phase:
#
#     hpcnet-link: before cn1 eth0 tx_bytes=123 rx_bytes=456 tx_errors=0 ...

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


def link_deltas(text: str) -> list:
    '''One LinkDelta per host that printed both phases.'''
    missing = re.search(r'^hpcnet-link: missing (\S+) (\S+)', text, re.M)
    if missing:
        raise LinkStatsError(f'interface {missing.group(2)} does not exist on {missing.group(1)}')
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


def tcp_payload_MBps(rate_bps: float, mtu: int | None) -> float:
    '''The TCP payload rate a wire of ``rate_bps`` carries at ``mtu``: a full
    segment carries mtu - 52 bytes (IP, TCP, timestamps) and occupies
    mtu + 38 bytes of wire time (Ethernet header, frame check, preamble,
    inter-frame gap).'''
    mtu = mtu or 1500
    return rate_bps / 8e6 * (mtu - 52) / (mtu + 38)
