"""Point-to-point MPI between two ranks: ping-pong, ping-ping, streaming and
bidirectional bandwidth, with our own kernel (src/p2p.c).

On a one-node partition both ranks share the node; on a multi-node partition
(``hpcnet_p2p_multinode``) they run on two nodes and the link's byte counters
must account for the traffic.
"""
import os

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.exceptions import SanityError

from hpcnet import hooks
from hpcnet.constants import (P2P_BANDWIDTH_SIZES, P2P_DIRECTIONS, P2P_LATENCY_SIZES,
                              PartitionFeature, P2PMode, Unit)
from hpcnet.testlib import MpiBenchmark, build_kernels


class P2PBase(MpiBenchmark):
    #: Kernel mode (src/p2p.c --mode).
    mode = parameter(P2PMode.ALL)
    #: Smallest and largest message (bytes); every power of two in between.
    min_size = variable(int, value=0)
    max_size = variable(int, value=4 * 1024 * 1024)
    #: Wall time spent per message size (ms); sets the iteration count.
    time_per_size_ms = variable(int, value=40)
    #: Fewest timed iterations per size, and untimed warm-up iterations.
    min_iters = variable(int, value=20)
    warmup = variable(int, value=10)
    #: Messages in flight per iteration of the bw and bibw modes, and at most
    #: this many bytes in flight (large messages need few to fill the pipe).
    window = variable(int, value=64)
    window_bytes = variable(int, value=16 * 1024 * 1024)
    #: The whole curve: one dict per size with every statistic (JSON report).
    curve = variable(typ.List[typ.Dict[str, float]], value=[], loggable=True)
    #: First exchange between the two ranks (pays connection set-up), µs.
    first_exchange_us = variable(float, value=0.0, loggable=True)

    kernels = fixture(build_kernels, scope='environment')

    @run_after('setup')
    def set_executable(self):
        self.descr = f'MPI point-to-point {self.mode} over {self.current_partition.fullname}'
        self.executable = os.path.join(self.kernels.stagedir, 'bin', 'p2p')
        self.executable_opts = ['--mode', self.mode, '--validate',
                                '--min-size', str(self.min_size), '--max-size', str(self.max_size),
                                '--time-per-size', str(self.time_per_size_ms),
                                '--min-iters', str(self.min_iters), '--warmup', str(self.warmup),
                                '--window', str(self.window),
                                '--window-bytes', str(self.window_bytes)]

    @run_after('setup')
    def set_perf_variables(self):
        # Latency at the small sizes, bandwidth at the large: for every mode,
        # so ping-ping and streaming can be compared with ping-pong.
        sizes = hooks.powers_of_two(self.min_size, self.max_size)
        for size in P2P_LATENCY_SIZES:
            if size in sizes:
                self.perf_variables[f'latency_{hooks.size_label(size)}'] = \
                    sn.make_performance_function(self._stat(size, 'median_us'), Unit.US)
        rate_bps = self.current_partition.extras.get('link_rate_bps')
        for size in P2P_BANDWIDTH_SIZES:
            if size in sizes:
                label = hooks.size_label(size)
                self.perf_variables[f'bandwidth_{label}'] = \
                    sn.make_performance_function(self._stat(size, 'bw_MBps'), Unit.MBPS)
                if rate_bps:
                    # Payload rate over what the link carries in the
                    # directions this mode uses.
                    self.perf_variables[f'efficiency_{label}'] = sn.make_performance_function(
                        self._efficiency(size, rate_bps), Unit.RATIO)

    def _value(self, size, column):
        return self.kernel_output('p2p').row_for_size(size)[column]

    @sn.deferrable
    def _stat(self, size, column):
        return self._value(size, column)

    @sn.deferrable
    def _efficiency(self, size, rate_bps):
        return hooks.link_efficiency(self._value(size, 'bw_MBps'), rate_bps,
                                     directions=P2P_DIRECTIONS[self.mode])

    @sanity_function
    def assert_valid(self):
        out = self.kernel_output('p2p')
        if out.header.get('mode') != self.mode:
            raise SanityError(f'kernel ran mode {out.header.get("mode")!r}, asked for {self.mode!r}')
        hooks.check_sizes(out.sizes, hooks.powers_of_two(self.min_size, self.max_size))
        hooks.check_finite_positive(out.rows, ('min_us', 'median_us', 'mean_us', 'max_us', 'p99_us',
                                               'bw_MBps', 'bw_peak_MBps'),
                                    allow_zero_at_size0=('bw_MBps', 'bw_peak_MBps'),
                                    what=self.mode)
        validation = out.header.get('validation', '')
        if not validation.startswith('passed'):
            raise SanityError(f'payload validation did not pass: {validation or "(no result)"}')
        self.check_common(out)
        self.check_link(hooks.bytes_sent_by_host(out))
        self.first_exchange_us = float(out.header['first-exchange-us'])
        self.curve = [dict(r) for r in out.rows]
        return True


@rfm.simple_test
class hpcnet_p2p(P2PBase):
    '''Two ranks on one node of the partition.'''
    num_nodes = 1
    tags = {'p2p', 'mpi'}


@rfm.simple_test
class hpcnet_p2p_multinode(P2PBase):
    '''One rank on each of two nodes: the bytes must cross the link.'''
    valid_systems = [f'+{PartitionFeature.MULTINODE}']
    num_nodes = 2
    tags = {'p2p', 'mpi', 'multinode'}
    # Sized for real links: at 1 Gbit/s one 4 MiB message takes 35 ms, so a
    # window of 64 would make one streaming sample 2.2 s.
    window = 8
    window_bytes = 8 * 1024 * 1024
    min_iters = 10
    warmup = 3
