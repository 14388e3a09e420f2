"""Ethernet through the kernel's TCP stack; the interface's counters prove
the traffic."""
from hpcnet.constants import Fabric
from hpcnet.fabrics.registry import Carrier, FabricEntry

ENTRY = FabricEntry(
    name=Fabric.TCP,
    description="Ethernet through the kernel's TCP stack (loopback on one host)",
    carrier=Carrier.NETDEV,
    needs_iface=True,
    host_probed=True,
    # One host carries TCP over loopback.
    host_probe_iface='lo',
    link_layer=None,
    default_gid_index=None,
)
