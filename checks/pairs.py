"""Per-pair matrix (src/pairs.c): latency and bandwidth of every pair of
ranks, one pair at a time, so that one bad link or node stands out instead of
hiding in an average."""
import os
import statistics

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.exceptions import SanityError

from hpcnet import hooks
from hpcnet.constants import Feature, PartitionFeature, Unit
from hpcnet.testlib import MpiBenchmark, build_kernels


def worst_median(values, worst):
    '''(median, worst, worst / median) of per-pair figures; ``worst`` is max
    for latency, min for bandwidth.'''
    median = statistics.median(values)
    w = worst(values)
    return median, w, w / median


class PairsBase(MpiBenchmark):
    #: Message sizes (bytes) of the latency and bandwidth ping-pongs.
    lat_size = variable(int, value=8)
    bw_size = variable(int, value=1024 * 1024)
    #: Samples per pair (the first is kept out of the statistics).
    samples = variable(int, value=200)
    bw_samples = variable(int, value=20)
    #: The whole matrix: one dict per pair (JSON report).
    pair_table = variable(typ.List[typ.Dict[str, object]], value=[], loggable=True)

    valid_prog_environs = [f'+{Feature.MPI} +{Feature.PRIMARY}']
    kernels = fixture(build_kernels, scope='environment')

    @run_after('setup')
    def set_executable(self):
        self.descr = f'Per-pair MPI latency/bandwidth over {self.current_partition.fullname}'
        self.executable = os.path.join(self.kernels.stagedir, 'bin', 'pairs')
        self.executable_opts = ['--lat-size', str(self.lat_size), '--bw-size', str(self.bw_size),
                                '--samples', str(self.samples),
                                '--bw-samples', str(self.bw_samples)]

    def _summary(self, column, worst):
        values = [r[column] for r in self.kernel_output('pairs').rows]
        return worst_median(values, worst)

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

    @sanity_function
    def assert_valid(self):
        out = self.kernel_output('pairs')
        ranks = len(out.hosts)
        expected = ranks * (ranks - 1) // 2
        if len(out.rows) != expected:
            raise SanityError(f'{len(out.rows)} pairs measured, {ranks} ranks have {expected}')
        hooks.check_finite_positive(out.rows, ('lat_first_us', 'lat_mean_us', 'lat_min_us',
                                               'lat_max_us', 'bw_mean_MBps', 'bw_min_MBps',
                                               'bw_max_MBps'), what='pair')
        self.check_common(out)
        self.check_link(hooks.bytes_sent_by_host(out))
        self.pair_table = [dict(r) for r in out.rows]
        return True


@rfm.simple_test
class hpcnet_pairs(PairsBase):
    '''Every pair of ranks on one node (one rank per core).'''
    num_tasks = 2
    tags = {'pairs', 'mpi'}


@rfm.simple_test
class hpcnet_pairs_multinode(PairsBase):
    '''One rank per node: every pair of nodes.'''
    valid_systems = [f'+{PartitionFeature.MULTINODE}']
    num_nodes = 2
    num_tasks = 2
    tags = {'pairs', 'mpi', 'multinode'}
