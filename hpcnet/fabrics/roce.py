"""RDMA over Converged Ethernet (RoCE v2): an RDMA port whose link layer is
Ethernet, addressed by a RoCE v2 GID."""
from hpcnet.constants import Fabric
from hpcnet.fabrics.registry import Carrier, FabricEntry, LinkLayer

ENTRY = FabricEntry(
    name=Fabric.ROCE,
    description='RDMA over Converged Ethernet (RoCE v2)',
    carrier=Carrier.RDMA,
    needs_iface=False,
    host_probed=False,
    host_probe_iface=None,
    link_layer=LinkLayer.ETHERNET,
    # RoCE v2 over IPv4 on a default mlx5 configuration.
    default_gid_index=3,
)
