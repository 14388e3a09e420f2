"""`local`: any host, ranks on this machine (the fallback system: its
hostnames match everything, so config/settings.py puts it last).

Two partitions, one per fabric a single host can test: shared memory, and
TCP over loopback as a one-host stand-in for an Ethernet fabric.
"""
from hpcnet.constants import DEFAULT_JOB_TIME_LIMIT, Fabric
from hpcnet.model import partition_extras

_common = {
    'scheduler': 'local',
    'launcher': 'mpirun',
    # Timed runs must never share the cores of a small host.
    'max_jobs': 1,
    'time_limit': DEFAULT_JOB_TIME_LIMIT,
}

system = {
    'name': 'local',
    'descr': 'Any host: ranks on this machine (fallback system)',
    'hostnames': ['.*'],
    'partitions': [
        {**_common, 'name': Fabric.SHM,
         'descr': 'ranks talk through shared memory',
         'extras': partition_extras(fabric=Fabric.SHM)},
        {**_common, 'name': Fabric.TCP,
         'descr': 'shared memory off, MPI forced onto TCP over loopback '
                  '(one-host stand-in for an Ethernet fabric)',
         'extras': partition_extras(fabric=Fabric.TCP, iface='lo', mtu=65536)},
    ],
}
