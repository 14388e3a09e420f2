"""The systems hpcnet knows, as ReFrame configuration data.

Each partition tests one fabric: its ``extras`` say which (``fabric``) and
where (``iface``, ``rdma_device``, ``rdma_port``, ``gid_index``).  Adding a
site means adding one function here that returns its system dictionary; the
environments are shared by all systems (see :func:`environments`).
"""
from __future__ import annotations

import functools
import sys

from hpcnet import stacks
from hpcnet.constants import DEFAULT_JOB_TIME_LIMIT, Fabric, PartitionFeature

#: Environment available on every partition even when no MPI is found, so that
#: ReFrame always loads; MPI checks select ``+mpi`` and skip it.
BUILTIN_ENV = 'builtin'


@functools.lru_cache(maxsize=None)
def _discovery():
    # Once per process: the configuration asks for it per system and again
    # for the environments, and each discovery runs the compilers.
    try:
        return stacks.discover()
    except stacks.StackError as err:
        # The configuration must still load so that `reframe --list` etc.
        # show the problem instead of a traceback.
        print(f'hpcnet: {err}', file=sys.stderr)
        return stacks.Discovery()


def environment_names() -> list:
    return [e.name for e in _discovery().environments] + [BUILTIN_ENV]


def _local() -> dict:
    envs = environment_names()
    common = {
        'scheduler': 'local',
        'launcher': 'mpirun',
        'environs': envs,
        # Timed runs must never share the 2 cores of a small host.
        'max_jobs': 1,
        'time_limit': DEFAULT_JOB_TIME_LIMIT,
    }
    return {
        'name': 'local',
        'descr': 'Any host: ranks on this machine (fallback system)',
        'hostnames': ['.*'],
        'partitions': [
            {**common, 'name': Fabric.SHM,
             'descr': 'ranks talk through shared memory',
             'extras': {'fabric': Fabric.SHM}},
            {**common, 'name': Fabric.TCP,
             'descr': 'shared memory off, MPI forced onto TCP over loopback '
                      '(one-host stand-in for an Ethernet fabric)',
             'extras': {'fabric': Fabric.TCP, 'iface': 'lo', 'mtu': 65536}},
        ],
    }


def _testbed() -> dict:
    '''The Slurm virtual cluster of ci/testbed (nodes in network namespaces).'''
    envs = environment_names()
    return {
        'name': 'testbed',
        'descr': 'Slurm virtual cluster in network namespaces (ci/testbed)',
        'hostnames': [r'^hn0$'],
        'partitions': [{
            'name': 'eth',
            'descr': 'veth links to a bridge, tbf-shaped (Gigabit Ethernet)',
            'scheduler': 'slurm',
            'launcher': 'srun',
            'access': ['--partition=eth', '--exclusive'],
            'environs': envs,
            'max_jobs': 1,
            'time_limit': DEFAULT_JOB_TIME_LIMIT,
            'extras': {'fabric': Fabric.TCP, 'iface': 'eth0', 'mtu': 1500,
                       # Gigabit Ethernet: what the testbed shapes its links to.
                       'link_rate_bps': 10**9},
            'features': [PartitionFeature.MULTINODE],
        }, {
            'name': 'roce',
            'descr': 'Soft-RoCE (rdma_rxe) on the veth links, where the kernel has it',
            'scheduler': 'slurm',
            'launcher': 'srun',
            'access': ['--partition=eth', '--exclusive'],
            'environs': envs,
            'max_jobs': 1,
            'time_limit': DEFAULT_JOB_TIME_LIMIT,
            'extras': {'fabric': Fabric.ROCE, 'iface': 'eth0', 'rdma_device': 'rxe0',
                       'rdma_port': 1, 'gid_index': 1, 'link_rate_bps': 10**9},
            'features': [PartitionFeature.MULTINODE],
        }],
    }


def _example_site() -> dict:
    '''A template for a real cluster with an Ethernet and a RoCE partition.
    Copy it, set hostnames, access and the device names of your nodes.'''
    envs = environment_names()
    common = {'scheduler': 'slurm', 'launcher': 'srun', 'environs': envs,
              'time_limit': DEFAULT_JOB_TIME_LIMIT, 'features': [PartitionFeature.MULTINODE]}
    return {
        'name': 'example',
        'descr': 'Example site: 25 GbE and 100 GbE RoCE v2 partitions',
        'hostnames': [r'^example-login\d+$'],
        'partitions': [
            {**common, 'name': 'eth', 'access': ['--partition=eth', '--exclusive'],
             'extras': {'fabric': Fabric.TCP, 'iface': 'eno1', 'link_rate_bps': 25 * 10**9}},
            {**common, 'name': 'roce', 'access': ['--partition=roce', '--exclusive'],
             'extras': {'fabric': Fabric.ROCE, 'iface': 'ens1f0np0', 'rdma_device': 'mlx5_0',
                        'rdma_port': 1, 'gid_index': 3, 'link_rate_bps': 100 * 10**9}},
        ],
    }


def _with_fabric_features(system: dict) -> dict:
    '''Each partition also carries its fabric as a feature (``+tcp``,
    ``+roce``), so checks select fabrics declaratively.'''
    for part in system['partitions']:
        fabric = part['extras']['fabric']
        part['features'] = sorted(set(part.get('features', [])) | {fabric})
    return system


#: In order: ReFrame picks the first system whose hostnames match ('local' last).
SYSTEMS_IN_ORDER = (_testbed, _example_site, _local)


def systems() -> list:
    return [_with_fabric_features(make()) for make in SYSTEMS_IN_ORDER]


def environments() -> list:
    system_names = [s['name'] for s in systems()]
    envs = [e.to_reframe(system_names) for e in _discovery().environments]
    envs.append({'name': BUILTIN_ENV, 'cc': 'cc', 'cxx': '', 'ftn': '',
                 'target_systems': system_names})
    return envs
