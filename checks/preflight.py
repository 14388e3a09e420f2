"""Preflight of each partition's fabric on every node it uses: the link is
there, up and configured as the partition says, and how many errors it has
counted.  RoCE/IB partitions on nodes without the RDMA device skip, naming
what is missing; they never pass."""
import shlex

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.backends import getlauncher
from reframe.core.exceptions import SanityError

from hpcnet.checklib import preflight
from hpcnet import fabrics
from hpcnet.constants import Scale
from hpcnet.model import Partition
from hpcnet.constants import BUILTIN_ENV
from hpcnet.checklib.flexnodes import TakesAvailableNodes
from hpcnet.checklib.testlib import JudgedByReferences, PlacedByScale, SkipsWithReason


@rfm.simple_test
class hpcnet_preflight(rfm.RunOnlyRegressionTest, JudgedByReferences, SkipsWithReason,
                       TakesAvailableNodes, PlacedByScale):
    #: One node, or the nodes of a multi-node partition available when it starts.
    scale = parameter(Scale.WHOLE_PARTITION)
    valid_systems = ['*']
    valid_prog_environs = [BUILTIN_ENV]
    executable = 'sh'
    tags = {'preflight'}

    @run_after('setup')
    def set_probe(self):
        self.partition = part = Partition.of(self.current_partition)
        if not fabrics.fabric(part.fabric).has_link:
            self.skip_because('shared memory has no link to check')
        self.num_nodes = (1 if self.scale == Scale.ONE_NODE
                          else self.available_nodes(part.num_nodes))
        self.num_tasks = self.num_nodes
        self.num_tasks_per_node = 1
        self.descr = f'Preflight of the {part.fabric} fabric of {part.fullname}'
        script = '\n'.join(
            [preflight.probe_script(part.iface, None)] +
            [preflight.probe_script(None, dev, part.rdma_port, part.gid_index)
             for dev in part.rdma_devices])
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
        part = self.partition
        lacking = [f'{node.host} has no RDMA device {dev} (devices there: '
                   f'{node.values.get("rdma_devices", "").strip() or "none"})'
                   for dev in part.rdma_devices
                   for node in preflight.parse_device(self.stdout_text(), dev).values()
                   if node.values.get('rdma_present') != 'yes']
        # A partition that declares RDMA on nodes without the device fails,
        # naming what is missing: the declared fabric is what is accepted.
        if lacking:
            raise SanityError(f'partition {part.fullname} declares fabric {part.fabric}, '
                              f'but {"; ".join(lacking)}')
        problems = []
        for node in nodes.values():
            if part.iface:
                problems += preflight.ethernet_problems(node, part.iface, part.mtu,
                                                        part.link_speed_mbps)
        for dev in part.rdma_devices:
            for node in preflight.parse_device(self.stdout_text(), dev).values():
                problems += preflight.rdma_problems(node, part.fabric, dev, part.gid_index)
        if problems:
            raise SanityError('; '.join(problems))
        return True

    def _total(self, key):
        return sum(n.int(key) or 0 for n in self.nodes().values())

    @run_after('init')
    def set_perf_variables(self):
        self.add_metric('link_errors', self._link_errors())
        self.add_metric('link_drops', self._link_drops())
        self.add_metric('mtu', self._mtu())

    @sn.deferrable
    def _link_errors(self):
        return self._total('rx_errors') + self._total('tx_errors') + self._total('rx_crc_errors')

    @sn.deferrable
    def _link_drops(self):
        return self._total('rx_dropped') + self._total('tx_dropped')

    @sn.deferrable
    def _mtu(self):
        return min(n.int('mtu') or 0 for n in self.nodes().values())
