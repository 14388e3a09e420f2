"""The registry of fabrics: one :class:`FabricEntry` per fabric a partition
can declare, and every lookup the rest of hpcnet makes about a fabric.

A fabric is known to hpcnet by its entry alone (plus its block of MPI
settings in the fabric table, config/fabrics.yaml ``fabrics:``): the
partition model, the host probe of discovery, the link proof and preflight
of the checks, ``site init`` and the metric catalogue all read it from here.
:func:`register` adds one, :func:`unregister` removes it again (tests).

This module is a floor: it imports nothing of hpcnet, so that the model,
discovery, the checks and the metric catalogue can all import it.
"""
from __future__ import annotations

from dataclasses import dataclass, fields


class RegistryError(ValueError):
    '''A fabric the registry does not hold, or an entry that is incomplete or
    contradicts the others; the message names what is valid.'''


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


_ENTRIES: dict = {}


def register(entry: FabricEntry) -> FabricEntry:
    '''Add a fabric; raises RegistryError where the entry is incomplete or
    its name is taken.'''
    if entry.name in _ENTRIES:
        raise RegistryError(f'fabric {entry.name!r} is already registered')
    wrong = _incomplete(entry)
    if wrong:
        raise RegistryError(f'fabric {entry.name!r}: {wrong}')
    _ENTRIES[entry.name] = entry
    return entry


def unregister(name: str) -> None:
    '''Remove a fabric (a test's own, after the test).'''
    _ENTRIES.pop(name, None)


def entries() -> tuple:
    '''Every entry, in registration order.'''
    return tuple(_ENTRIES.values())


def fabric_names() -> tuple:
    return tuple(_ENTRIES)


def fabric(name: str) -> FabricEntry:
    try:
        return _ENTRIES[name]
    except KeyError:
        raise RegistryError(f'fabric {name!r} is not registered '
                            f'(valid: {", ".join(_ENTRIES)})') from None


def host_probed() -> tuple:
    '''The fabrics discovery probes each MPI on, on the host running ReFrame.'''
    return tuple(e.name for e in _ENTRIES.values() if e.host_probed)


def rdma_fabrics() -> tuple:
    return tuple(e for e in _ENTRIES.values() if e.is_rdma)
