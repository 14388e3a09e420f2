"""Preflight of each partition's fabric on every node it uses: the link is
there, up and configured as the partition says, and how many errors it has
counted.  RoCE/IB partitions on nodes without the RDMA device skip, naming
what is missing; they never pass."""
import shlex

import reframe as rfm
from reframe.core.backends import getlauncher
from reframe.core.exceptions import SanityError

from hpcnet import fabrics, hooks, preflight
from hpcnet.constants import Fabric, PartitionFeature


class PreflightBase(rfm.RunOnlyRegressionTest):
    valid_systems = ['*']
    valid_prog_environs = ['builtin']
    executable = 'sh'
    num_nodes = variable(int, value=1)

    @run_after('setup')
    def set_probe(self):
        part = self.current_partition
        self.fabric = hooks.partition_fabric(part.extras, part.fullname)
        self.skip_if(self.fabric == Fabric.SHM, 'shared memory has no link to check')
        missing = hooks.rdma_missing_reason(self.fabric, part.extras, part.fullname)
        self.skip_if(missing is not None, missing)
        self.num_tasks = self.num_nodes
        self.num_tasks_per_node = 1
        self.descr = f'Preflight of the {self.fabric} fabric of {part.fullname}'
        self.rdma_devices = (fabrics.rdma_devices(part.extras)
                             if self.fabric in (Fabric.ROCE, Fabric.IB) else [])
        script = '\n'.join(
            [preflight.probe_script(part.extras.get('iface'), None)] +
            [preflight.probe_script(None, dev, part.extras.get('rdma_port', 1),
                                    part.extras.get('gid_index')) for dev in self.rdma_devices])
        self.executable_opts = ['-c', shlex.quote(script)]

    @run_before('run')
    def one_task_per_node(self):
        if self.num_nodes == 1:
            # Not an MPI program: no MPI launcher needed on one node.
            self.job.launcher = getlauncher('local')()
        elif self.current_partition.launcher_type.registered_name == 'srun':
            self.job.launcher.options += ['--mpi=none']

    def stdout_text(self):
        with open(f'{self.stagedir}/{self.stdout.evaluate()}') as fp:
            return fp.read()

    def nodes(self):
        return preflight.parse(self.stdout_text())

    @sanity_function
    def fabric_ready(self):
        nodes = self.nodes()
        if len(nodes) != self.num_nodes:
            raise SanityError(f'{len(nodes)} node(s) reported, expected {self.num_nodes}')
        extras = self.current_partition.extras
        problems = []
        for node in nodes.values():
            if extras.get('iface'):
                problems += preflight.ethernet_problems(node, extras['iface'], extras)
        for dev in self.rdma_devices:
            for node in preflight.parse_device(self.stdout_text(), dev).values():
                problems += preflight.rdma_problems(node, self.fabric, dev,
                                                    extras.get('gid_index'))
        if problems:
            raise SanityError('; '.join(problems))
        return True

    def _total(self, key):
        return sum(n.int(key) or 0 for n in self.nodes().values())

    @performance_function('count')
    def link_errors(self):
        return self._total('rx_errors') + self._total('tx_errors') + self._total('rx_crc_errors')

    @performance_function('count')
    def link_drops(self):
        return self._total('rx_dropped') + self._total('tx_dropped')

    @performance_function('bytes')
    def mtu(self):
        return min(n.int('mtu') or 0 for n in self.nodes().values())


@rfm.simple_test
class hpcnet_preflight(PreflightBase):
    '''The fabric of a one-node partition.'''
    tags = {'preflight'}
    valid_systems = ['-' + PartitionFeature.MULTINODE]


@rfm.simple_test
class hpcnet_preflight_multinode(PreflightBase):
    '''The fabric on each of two nodes.'''
    tags = {'preflight'}
    valid_systems = [f'+{PartitionFeature.MULTINODE}']
    num_nodes = 2
