"""hpcnet's fabrics: one registry entry per fabric (:mod:`.registry`), the
entries hpcnet ships (:mod:`.shm`, :mod:`.tcp`, :mod:`.roce`, :mod:`.ib`) and
the fabric table of MPI settings per fabric (:mod:`.table`,
config/fabrics.yaml).

Adding a fabric is one module with its :class:`FabricEntry`, registered
here, plus its block in config/fabrics.yaml.  The package imports nothing of
hpcnet but the vocabulary (hpcnet.constants) and the MPI registry (hpcnet.mpi).
"""
from hpcnet.fabrics import ib, roce, shm, tcp
from hpcnet.fabrics.registry import (DEFAULT_RDMA_PORT, Carrier, FabricEntry, LinkLayer,
                                     RegistryError, entries, fabric, fabric_names, host_probed,
                                     rdma_fabrics, register, unregister)
from hpcnet.fabrics.table import (ConfigError, FabricSettings, fabric_block, load_table,
                                  validate_table)

for _module in (shm, tcp, roce, ib):
    register(_module.ENTRY)

__all__ = ['DEFAULT_RDMA_PORT', 'Carrier', 'FabricEntry', 'LinkLayer', 'RegistryError',
           'entries', 'fabric', 'fabric_names', 'host_probed', 'rdma_fabrics', 'register',
           'unregister', 'ConfigError', 'FabricSettings', 'fabric_block', 'load_table',
           'validate_table']
