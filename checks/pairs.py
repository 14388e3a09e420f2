"""Per-pair matrix (src/pairs.c): latency and bandwidth of every pair of
ranks, scheduled in rounds of disjoint pairs (N ranks: N-1 rounds), so that
one bad link or node stands out instead of hiding in an average.

Scale ``all_nodes``: one rank on each node of a multi-node partition; the
worst pair over the median pair names the outlier.  A pair needs two nodes:
on one node (scale ``1_node``) the check does not run and says why.  Two
nodes are one pair: it is reported, but a slow pair cannot be put on either
of its nodes, so worst pair, worst over median and the outlier counts
(which could only be the pair itself, 1 and 0) are not reported; that takes
three nodes or more.
"""

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.exceptions import SanityError

from hpcnet.checklib import sanity
from hpcnet.checklib.analysis import outlier_nodes, worst_median
from hpcnet.constants import Feature, Scale, Unit
from hpcnet.checklib.testlib import KernelRun

#: Nodes that make a pair, and nodes that let a slow pair be put on one node
#: (a majority of its pairs to compare against).
NODES_FOR_A_PAIR = 2
NODES_FOR_ATTRIBUTION = 3
#: What two nodes cannot tell: the pair is the median and the worst pair.
ATTRIBUTION_VARIABLES = ('latency_worst_pair', 'latency_worst_over_median',
                         'bandwidth_worst_pair', 'bandwidth_worst_over_median',
                         'bandwidth_outlier_nodes', 'latency_outlier_nodes')


@rfm.simple_test
class hpcnet_pairs(KernelRun):
    scale = parameter(Scale.WHOLE_PARTITION)
    reference_index = ['$partition', 'mpi_family']
    #: Message sizes (bytes) of the latency and bandwidth ping-pongs.
    lat_size = variable(int, value=8)
    #: 4 MiB: where a ping-pong reaches the wire rate (the Rocks paper, Table II).
    bw_size = variable(int, value=4 * 1024 * 1024)
    #: Samples per pair (the first is kept out of the statistics).
    samples = variable(int, value=200)
    bw_samples = variable(int, value=10)
    #: The whole matrix: one dict per pair (JSON report).
    pair_table = variable(typ.List[typ.Dict[str, object]], value=[], loggable=True)
    #: A node is an outlier when its median pair is this much worse than the
    #: median node's (bandwidth lower, latency higher).
    outlier_fraction = variable(float, value=0.25)
    #: The outliers found, by metric: {'bandwidth': ['cn3'], 'latency': []}.
    outliers = variable(typ.Dict[str, typ.List[str]], value={}, loggable=True)
    #: Why no node is named (fewer than NODES_FOR_ATTRIBUTION nodes), '' else.
    attribution = variable(str, value='', loggable=True)

    tags = {'pairs', 'mpi'}
    valid_prog_environs = [f'+{Feature.MPI} +{Feature.PRIMARY}']
    kernel_name = 'pairs'

    def kernel_args(self) -> list:
        self.descr = f'Per-pair MPI latency/bandwidth over {self.current_partition.fullname}'
        # Where the nodes share one host's cores, concurrent pairs would
        # measure CPU contention: the pairs of a round then take turns.
        turns = ['--one-pair-at-a-time'] if self.partition.nodes_share_cores else []
        return ['--lat-size', str(self.lat_size), '--bw-size', str(self.bw_size),
                '--samples', str(self.samples), '--bw-samples', str(self.bw_samples)] + turns

    @run_after('setup')
    def needs_pairs_of_nodes(self):
        if self.num_nodes < NODES_FOR_A_PAIR:
            self.skip_because(f'the pair matrix needs at least {NODES_FOR_A_PAIR} nodes; '
                              f'{self.current_partition.fullname} runs it on {self.num_nodes} '
                              '(ranks of one node measure the node, not a link)')
        if self.num_nodes < NODES_FOR_ATTRIBUTION:
            self.attribution = (f'not computed: {self.num_nodes} nodes are one pair; putting a '
                                f'slow pair on one of its nodes needs at least '
                                f'{NODES_FOR_ATTRIBUTION} nodes')
            for name in ATTRIBUTION_VARIABLES:
                self.perf_variables.pop(name, None)

    def _summary(self, column, worst):
        return worst_median([r[column] for r in self.kernel_output('pairs').rows], worst)

    @performance_function(Unit.US)
    def latency_median_pair(self):
        return self._summary('lat_mean_us', max)[0]

    @performance_function(Unit.US)
    def latency_worst_pair(self):
        return self._summary('lat_mean_us', max)[1]

    @performance_function(Unit.RATIO)
    def latency_worst_over_median(self):
        return self._summary('lat_mean_us', max)[2]

    @performance_function(Unit.MBPS)
    def bandwidth_median_pair(self):
        return self._summary('bw_mean_MBps', min)[0]

    @performance_function(Unit.MBPS)
    def bandwidth_worst_pair(self):
        return self._summary('bw_mean_MBps', min)[1]

    @performance_function(Unit.RATIO)
    def bandwidth_worst_over_median(self):
        return self._summary('bw_mean_MBps', min)[2]

    def _outliers(self):
        out = self.kernel_output('pairs')
        return {'bandwidth': outlier_nodes(out.rows, out.hosts, 'bw_mean_MBps',
                                           self.outlier_fraction, low_is_bad=True),
                'latency': outlier_nodes(out.rows, out.hosts, 'lat_mean_us',
                                         self.outlier_fraction, low_is_bad=False)}

    # Counted apart: on an emulated cluster latency is the host's, and a site
    # may judge one and not the other.
    @performance_function(Unit.COUNT)
    def bandwidth_outlier_nodes(self):
        return len(self._outliers()['bandwidth'])

    @performance_function(Unit.COUNT)
    def latency_outlier_nodes(self):
        return len(self._outliers()['latency'])

    @sanity_function
    def assert_valid(self):
        out = self.kernel_output('pairs')
        ranks = len(out.hosts)
        expected = ranks * (ranks - 1) // 2
        if len(out.rows) != expected:
            raise SanityError(f'{len(out.rows)} pairs measured, {ranks} ranks have {expected}')
        with sanity.sanity_from_output_errors():
            out.require_finite_positive(('lat_first_us', 'lat_mean_us', 'lat_min_us', 'lat_max_us',
                                         'bw_mean_MBps', 'bw_min_MBps', 'bw_max_MBps'), what='pair')
        self.prove(out.mpi_library, out.hosts, sanity.bytes_sent_by_host(out))
        self.pair_table = [dict(r) for r in out.rows]
        if not self.attribution:
            self.outliers = self._outliers()
        return True
