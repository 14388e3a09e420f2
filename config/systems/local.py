"""`local`: any host, ranks on this machine (the fallback system: its
hostnames match everything, so hpcnet.siteconfig.sites puts it last).

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

#: ReFrame settings of this system alone (hpcnet.siteconfig.sites.GENERAL): how often
#: ReFrame looks whether a job ended.  Its default decays from 10 Hz to
#: 0.1 Hz, so a case ends up to 10 s late; a local job's status is a
#: waitpid(), so 10-50 Hz (faster, ReFrame takes the ranks' cores).
#: Measurements: docs/measurements.md, "Where the time goes".
general = {'poll_rate_max': 50, 'poll_rate_min': 10, 'poll_rate_decay': 0.1}
