"""Point-to-point MPI between two ranks: ping-pong, ping-ping, streaming and
bidirectional bandwidth, with our own kernel (src/p2p.c).

Scale ``1_node``: both ranks on one node (partitions of one node); scale
``2_nodes``: one rank on each of two nodes (multi-node partitions), where the
link's byte counters must account for the traffic.

Every mode's whole curve runs once per MPI installation, with its first
compiler (the environment feature ``primary``): the curves are the library's
and the link's, and a clang-built MPI is an installation of its own.  The
installation's other compilers build the kernel, launch it, prove the
transport and measure one size in ping-pong; ``-S every_compiler=yes`` runs
the whole matrix (docs/acceptance.md, "What a run covers").
"""

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.exceptions import SanityError

from hpcnet.checklib import sanity
from hpcnet.constants import P2P_DIRECTIONS, Feature, P2PMode, Scale
from hpcnet.sizes import message_sizes, size_label
from hpcnet.checklib.testlib import KernelRun


#: The kernel's sizing on each scale, for what a run leaves at None.
SIZING_OF_SCALE = {
    Scale.ONE_NODE: {'time_per_size_ms': 40, 'min_iters': 20, 'warmup': 10,
                     'window': 64, 'window_bytes': 16 * 1024 * 1024},
    # At 1 Gbit/s one 4 MiB message takes 35 ms, so a window of 64 would make
    # one streaming sample 2.2 s; with less than 8 MiB in flight streaming at
    # 4 MiB falls well below the wire (docs/measurements.md).  A window of
    # 64 KiB messages takes a few ms, so 40 ms per size is a handful of
    # samples and moves from run to run: 160 ms (docs/measurements.md).
    Scale.TWO_NODES: {'time_per_size_ms': 160, 'min_iters': 10, 'warmup': 3,
                      'window': 8, 'window_bytes': 8 * 1024 * 1024},
}


#: The one size a compiler that is not its MPI's first measures: one of the
#: bandwidth sizes, so that the MPI's large-message path and the link's byte
#: counters are exercised.
PROVE_SIZE = 1024 * 1024


@rfm.simple_test
class hpcnet_p2p(KernelRun):
    scale = parameter(Scale.POINT_TO_POINT)
    #: Kernel mode (src/p2p.c --mode).
    mode = parameter(P2PMode.ALL)
    reference_index = ['$partition', 'mpi_family', 'mode']
    #: Smallest and largest message (bytes); every power of two in between.
    min_size = variable(int, value=0)
    max_size = variable(int, value=4 * 1024 * 1024)
    #: Samples per size: until the median is known within +-precision_pct %
    #: (95 % confidence), at most time_per_size_ms of them (src/README.md).
    precision_pct = variable(float, value=1.0)
    #: A sample times as many iterations as last batch_us (the clock is read
    #: once per sample, not inside every sub-microsecond round trip).
    batch_us = variable(float, value=10.0)
    #: The sizing below is the scale's (SIZING_OF_SCALE) where left at None;
    #: a value set with ``-S`` is kept on every scale.
    time_per_size_ms = variable(int, type(None), value=None)
    #: Fewest timed iterations per size, and untimed warm-up iterations.
    min_iters = variable(int, type(None), value=None)
    warmup = variable(int, type(None), value=None)
    #: Messages in flight per iteration of the bw and bibw modes, and at most
    #: this many bytes in flight (large messages need few to fill the pipe).
    window = variable(int, type(None), value=None)
    window_bytes = variable(int, type(None), value=None)
    #: bw/bibw: receive buffers per window (0: one per message; 1: one for
    #: all, as osu_bw; for comparisons only, see src/p2p.c).
    recv_slots = variable(int, value=0)
    #: The whole curve: one dict per size with every statistic (JSON report).
    curve = variable(typ.List[typ.Dict[str, float]], value=[], loggable=True)
    #: First exchange between the two ranks (pays connection set-up), µs.
    first_exchange_us = variable(float, value=0.0, loggable=True)
    #: Every mode's whole curve with every compiler, not only with each MPI
    #: installation's first (module docstring).
    every_compiler = variable(typ.Bool, value=False)

    tags = {'p2p', 'mpi'}
    kernel_name = 'p2p'

    @run_after('init')
    def curves_once_per_installation(self):
        if not self.every_compiler and self.mode != P2PMode.PINGPONG:
            self.valid_prog_environs = [f'+{Feature.MPI} +{Feature.PRIMARY}']

    def proves_only(self) -> bool:
        '''Whether this case builds, launches, proves and measures one size
        (a compiler that is not its MPI installation's first).'''
        return not self.every_compiler and Feature.PRIMARY not in self.current_environ.features

    @run_after('init')
    def size_for_the_scale(self):
        for name, value in SIZING_OF_SCALE[self.scale].items():
            if getattr(self, name) is None:
                setattr(self, name, value)

    def kernel_args(self) -> list:
        self.descr = (f'MPI point-to-point {self.mode} over {self.current_partition.fullname}'
                      + (f' (built and proved, {size_label(PROVE_SIZE)} only)'
                         if self.proves_only() else ''))
        sizes = self.sizes()
        return ['--mode', self.mode, '--validate',
                '--min-size', str(sizes[0]), '--max-size', str(sizes[-1]),
                '--precision', str(self.precision_pct), '--time-per-size', str(self.time_per_size_ms),
                '--batch-us', str(self.batch_us),
                '--min-iters', str(self.min_iters), '--warmup', str(self.warmup),
                '--window', str(self.window), '--window-bytes', str(self.window_bytes),
                '--recv-slots', str(self.recv_slots)]

    def sizes(self) -> tuple:
        if self.proves_only():
            return (PROVE_SIZE,)
        return message_sizes(self.min_size, self.max_size)

    @run_after('setup')
    def set_perf_variables(self):
        # Latency at the small sizes, bandwidth at the large: for every mode,
        # so ping-ping and streaming can be compared with ping-pong.
        for size in set(self.metric('latency').sizes) & set(self.sizes()):
            self.add_metric('latency', self._stat(size, 'median_us'), size)
        for size in set(self.metric('bandwidth').sizes) & set(self.sizes()):
            bandwidth = self.add_metric('bandwidth', self._stat(size, 'bw_MBps'), size)
            if self.partition.link_rate_bps:
                self.add_metric('efficiency', self._efficiency(size), size)
            if self.mode in P2PMode.ONE_WAY:
                self.calibrated_metrics.append(bandwidth)

    @sn.deferrable
    def _stat(self, size, column):
        return self.kernel_output('p2p').row_for_size(size)[column]

    @sn.deferrable
    def _efficiency(self, size):
        # Payload rate over what the link carries in the directions this mode uses.
        return self.efficiency(self.kernel_output('p2p').row_for_size(size)['bw_MBps'],
                               P2P_DIRECTIONS[self.mode])

    @sanity_function
    def assert_valid(self):
        out = self.kernel_output('p2p')
        if out.header.get('mode') != self.mode:
            raise SanityError(f'kernel ran mode {out.header.get("mode")!r}, asked for {self.mode!r}')
        sanity.check_sizes(out.sizes, self.sizes())
        with sanity.sanity_from_output_errors():
            out.require_finite_positive(('min_us', 'median_us', 'mean_us', 'max_us', 'p99_us',
                                         'bw_MBps', 'bw_peak_MBps'),
                                        zero_ok_at_size0=('bw_MBps', 'bw_peak_MBps'), what=self.mode)
        validation = out.header.get('validation', '')
        if not validation.startswith('passed'):
            raise SanityError(f'payload validation did not pass: {validation or "(no result)"}')
        self.prove(out.mpi_library, out.hosts, sanity.bytes_sent_by_host(out))
        self.first_exchange_us = float(out.header['first-exchange-us'])
        self.curve = [dict(r) for r in out.rows]
        return True
