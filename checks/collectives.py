"""MPI collectives with our own kernel (src/collectives.c): one test per
operation, IMB's t_min/t_avg/t_max across ranks, results validated.

Scale ``1_node``: one rank per core of one node; scale ``all_nodes``: one
rank on each node of a multi-node partition available when it starts
(hpcnet.checklib.flexnodes), whose interfaces must carry the traffic.
"""

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.exceptions import SanityError

from hpcnet.checklib import linkbytes, sanity
from hpcnet.constants import Collective, Feature, Scale
from hpcnet.metrics import COLLECTIVE_SIZES
from hpcnet.sizes import message_sizes
from hpcnet.checklib.testlib import KernelRun


def first_valid_size(op: str, ranks: int) -> int:
    '''Smallest size the kernel runs for ``op`` (src/README.md, collectives).'''
    if op == Collective.REDUCE_SCATTER:
        return 4 * ranks            # at least one float per rank
    if op in Collective.REDUCTIONS:
        return 4                    # one float
    return 0


@rfm.simple_test
class hpcnet_collectives(KernelRun):
    scale = parameter(Scale.WHOLE_PARTITION)
    #: Collective operation (src/collectives.c --op).
    op = parameter(Collective.ALL)
    reference_index = ['$partition', 'mpi_family', 'op']
    #: Largest size, bytes per rank; every power of two from 0.
    max_size = variable(int, value=1024 * 1024)
    #: Samples per size: until the median is known within +-precision_pct %
    #: (95 % confidence, on every rank), at most time_per_size_ms of them.
    precision_pct = variable(float, value=1.0)
    time_per_size_ms = variable(int, value=40)
    #: The whole table: one dict per size (JSON report).
    curve = variable(typ.List[typ.Dict[str, object]], value=[], loggable=True)

    tags = {'collectives', 'mpi'}
    # The network result does not depend on the compiler: one per MPI.
    valid_prog_environs = [f'+{Feature.MPI} +{Feature.PRIMARY}']
    kernel_name = 'collectives'

    def kernel_args(self) -> list:
        self.descr = f'MPI {self.op} over {self.current_partition.fullname}'
        return ['--op', self.op, '--validate', '--max-size', str(self.max_size),
                '--precision', str(self.precision_pct), '--time-per-size', str(self.time_per_size_ms)]

    def expected_sizes(self):
        if self.op == Collective.BARRIER:
            return (0,)
        lowest = first_valid_size(self.op, self.num_tasks)
        return message_sizes(lowest, self.max_size)

    @run_after('setup')
    def set_perf_variables(self):
        sizes = (0,) if self.op == Collective.BARRIER else COLLECTIVE_SIZES
        for size in set(sizes) & set(self.expected_sizes()):
            self.add_metric('avg', self._stat(size, 't_avg_us'), size)
            self.add_metric('max', self._stat(size, 't_max_us'), size)

    @sn.deferrable
    def _stat(self, size, column):
        return self.kernel_output('collectives').row_for_size(size, op=self.op)[column]

    @sanity_function
    def assert_valid(self):
        out = self.kernel_output('collectives')
        rows = out.rows_where(op=self.op)
        sanity.check_sizes(tuple(int(r['size_bytes']) for r in rows), self.expected_sizes())
        with sanity.sanity_from_output_errors():
            out.require_finite_positive(('t_min_us', 't_avg_us', 't_max_us'), what=self.op)
        if not out.header.get('validation', '').startswith('passed'):
            raise SanityError(f'{self.op} results were not validated: '
                              f'{out.header.get("validation", "(no result)")}')
        # The library picks the algorithm, not the bytes: each node's link
        # must carry at least what any algorithm of this op moves for the
        # sizes and calls that ran (hpcnet.checklib.linkbytes).
        bound = linkbytes.kernel_collective(
            self.op, rows, len(out.hosts), out.hosts, warmup=int(out.header.get('warmup', 0)),
            validated=out.header.get('validate') == 'on', root=int(out.header.get('root', 0)))
        self.prove(out.mpi_library, out.hosts, link_bound=bound)
        self.curve = [dict(r) for r in rows]
        return True
