"""Shared memory: ranks of one node, no link."""
from hpcnet.constants import Fabric
from hpcnet.fabrics.registry import Carrier, FabricEntry

ENTRY = FabricEntry(
    name=Fabric.SHM,
    description='ranks on one node talk through shared memory',
    carrier=Carrier.SHARED_MEMORY,
    needs_iface=False,
    host_probed=True,
    host_probe_iface=None,
    link_layer=None,
    default_gid_index=None,
)
