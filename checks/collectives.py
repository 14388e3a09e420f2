"""MPI collectives with our own kernel (src/collectives.c): one test per
operation, IMB's t_min/t_avg/t_max across ranks, results validated."""
import os

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.exceptions import SanityError

from hpcnet import hooks
from hpcnet.constants import COLLECTIVE_SIZES, Collective, Feature, PartitionFeature, Unit
from hpcnet.testlib import MpiBenchmark, build_kernels


def first_valid_size(op: str, ranks: int) -> int:
    '''Smallest size the kernel runs for ``op`` (src/README.md, collectives).'''
    if op == Collective.REDUCE_SCATTER:
        return 4 * ranks            # at least one float per rank
    if op in Collective.REDUCTIONS:
        return 4                    # one float
    return 0


class CollectivesBase(MpiBenchmark):
    #: Collective operation (src/collectives.c --op).
    op = parameter(Collective.ALL)
    #: Largest size, bytes per rank; every power of two from 0.
    max_size = variable(int, value=1024 * 1024)
    #: Wall time per size (ms); sets the iteration count.
    time_per_size_ms = variable(int, value=40)
    #: The whole table: one dict per size (JSON report).
    curve = variable(typ.List[typ.Dict[str, object]], value=[], loggable=True)

    # The network result does not depend on the compiler: one per MPI.
    valid_prog_environs = [f'+{Feature.MPI} +{Feature.PRIMARY}']
    kernels = fixture(build_kernels, scope='environment')

    @run_after('setup')
    def set_executable(self):
        self.descr = f'MPI {self.op} over {self.current_partition.fullname}'
        self.executable = os.path.join(self.kernels.stagedir, 'bin', 'collectives')
        self.executable_opts = ['--op', self.op, '--validate', '--max-size', str(self.max_size),
                                '--time-per-size', str(self.time_per_size_ms)]

    def expected_sizes(self):
        if self.op == Collective.BARRIER:
            return (0,)
        lowest = first_valid_size(self.op, self.num_tasks)
        return tuple(s for s in hooks.powers_of_two(0, self.max_size) if s >= lowest)

    @run_after('setup')
    def set_perf_variables(self):
        sizes = (0,) if self.op == Collective.BARRIER else COLLECTIVE_SIZES
        for size in sizes:
            if size in self.expected_sizes():
                label = hooks.size_label(size)
                for stat in ('t_avg_us', 't_max_us'):
                    name = f'{stat.split("_")[1]}_{label}'          # avg_8B, max_64KiB
                    self.perf_variables[name] = sn.make_performance_function(
                        self._stat(size, stat), Unit.US)

    @sn.deferrable
    def _stat(self, size, column):
        return self.kernel_output('collectives').row_for_size(size, op=self.op)[column]

    @sanity_function
    def assert_valid(self):
        out = self.kernel_output('collectives')
        rows = out.rows_where(op=self.op)
        hooks.check_sizes(tuple(int(r['size_bytes']) for r in rows), self.expected_sizes())
        hooks.check_finite_positive(rows, ('t_min_us', 't_avg_us', 't_max_us'), what=self.op)
        if not out.header.get('validation', '').startswith('passed'):
            raise SanityError(f'{self.op} results were not validated: '
                              f'{out.header.get("validation", "(no result)")}')
        self.check_common(out)
        self.curve = [dict(r) for r in rows]
        return True


@rfm.simple_test
class hpcnet_collectives(CollectivesBase):
    '''Ranks on one node (one per core).'''
    num_tasks = 2
    tags = {'collectives', 'mpi'}


@rfm.simple_test
class hpcnet_collectives_multinode(CollectivesBase):
    '''One rank per node across two nodes.'''
    valid_systems = [f'+{PartitionFeature.MULTINODE}']
    num_nodes = 2
    num_tasks = 2
    tags = {'collectives', 'mpi', 'multinode'}
