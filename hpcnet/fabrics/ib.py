"""InfiniBand: an RDMA port whose link layer is InfiniBand (no GID index)."""
from hpcnet.constants import Fabric
from hpcnet.fabrics.registry import Carrier, FabricEntry, LinkLayer

ENTRY = FabricEntry(
    name=Fabric.IB,
    description='InfiniBand (same MPI settings as RoCE, without the GID index)',
    carrier=Carrier.RDMA,
    needs_iface=False,
    host_probed=False,
    host_probe_iface=None,
    link_layer=LinkLayer.INFINIBAND,
    default_gid_index=None,
)
