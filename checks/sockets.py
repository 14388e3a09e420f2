"""TCP and UDP over plain sockets, below any MPI library: our kernel
(src/sockets*.c, see src/README-sockets.md).

Scale ``1_node``: server and client on this host (``local:tcp``, the loopback
interface), both started by one shell with ReFrame's ``local`` launcher.
Scale ``2_nodes``: one task per node with the partition's launcher (``srun
--mpi=none``); the kernel's ``--role auto`` makes rank 0 the server, bound to
its address on the partition's interface.  The two hosts must differ and the
interface byte counters must cover the payload.

Throughputs are MB/s (10^6 bytes/s) of payload at the receiver; round trips
are microseconds; efficiencies are the payload rate over the partition's
link rate (framing and headers make 1.0 unreachable: ~0.94 for TCP over a
1500-byte MTU on Ethernet).

udp_stream, as a link is judged with iperf3 -u -b: every size runs unpaced,
which measures the receiver's capacity (``udp_receiver_capacity_<size>``,
Mbit/s; its loss is the receiver falling behind, not judged), and the
performance sizes run again paced at rates the link carries
(``udp_loss_<rate>Mbit_<size>``, % lost), where loss above
``max_paced_loss_pct`` fails the case.
"""
import os
import shlex
import uuid

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher
from reframe.core.exceptions import SanityError

from hpcnet import templates
from hpcnet.checklib import sanity, sockets
from hpcnet.constants import Scale
from hpcnet.parsers import parsed_once
from hpcnet.parsers.kernel import parse_kernel_output
from hpcnet.checklib.sockets import RR_TESTS, STREAM_TESTS, THROUGHPUT_COLUMN, UDP_STREAM
from hpcnet.metrics import RR_PERF_SIZES, STREAM_PERF_SIZES, UDP_STREAM_PERF_SIZES
from hpcnet.sizes import message_sizes
from hpcnet.checklib.builds import build_sockets
from hpcnet.checklib.testlib import SocketRun


@rfm.simple_test
class hpcnet_sockets(SocketRun):
    scale = parameter(Scale.POINT_TO_POINT)
    #: Kernel test (src/sockets.c --test).
    test = parameter(sockets.SOCKET_TESTS)
    reference_index = ['$partition', 'test']
    #: Sizes (bytes) of the streams: every power of two in [min, max].
    stream_min_size = variable(int, value=1)
    stream_max_size = variable(int, value=1024 * 1024)
    #: Request/response sizes (the kernel's defaults).
    rr_min_size = variable(int, value=32)
    rr_max_size = variable(int, value=16 * 1024)
    #: UDP stream sizes (the kernel's defaults; at most 65507).
    udp_min_size = variable(int, value=1)
    udp_max_size = variable(int, value=32 * 1024)
    #: Time per size (ms) of rr and UDP streams.
    duration_ms = variable(int, value=300)
    #: TCP streams: each size sends in stream_windows windows of
    #: stream_window_ms, each on a new connection, and reports the median
    #: window, so stalls of the host cost windows, not the figure
    #: (docs/measurements.md, "TCP streams on the testbed").
    stream_windows = variable(int, value=5)
    stream_window_ms = variable(int, value=100)
    #: udp_stream paced rates (Mbit/s of payload); None: udp_rate_fractions
    #: of the partition's link rate, or the stated loopback rates (scale
    #: 1_node: the traffic does not cross the link).
    udp_rates_mbps = variable(typ.List[float], type(None), value=None, loggable=True)
    udp_rate_fractions = variable(typ.List[float], value=list(sockets.UDP_RATE_FRACTIONS))
    #: SO_RCVBUF of the UDP stream sockets (a paced sender still bursts).
    udp_rcvbuf = variable(str, value='4M')
    #: Highest packet loss (%) accepted at any size of udp_rr.
    max_loss_pct = variable(float, value=1.0)
    #: Highest packet loss (%) of udp_stream at a paced rate (the link
    #: carries it: a healthy one loses nothing).
    max_paced_loss_pct = variable(float, value=sockets.MAX_PACED_LOSS_PCT)
    #: Check payload contents at the receiver (costs throughput on fast links).
    validate = variable(bool, value=False)
    #: Kernel limits (s): overall, and connecting / a stalled transfer.
    timeout_s = variable(float, value=120.0)
    connect_timeout_s = variable(float, value=30.0)

    #: The whole table: one dict per size with every column.
    curve = variable(typ.List[typ.Dict[str, float]], value=[], loggable=True)
    client_host = variable(str, value='', loggable=True)
    server_host = variable(str, value='', loggable=True)
    #: Effective socket buffers of both ends (bytes, as Linux reports them).
    socket_buffers = variable(typ.Dict[str, int], value={}, loggable=True)

    tags = {'sockets', 'tcp', 'udp'}
    #: Scale 1_node: one shell starts both roles.
    ranks_on_one_node = 1
    kernel = fixture(build_sockets, scope='environment')

    def size_range(self) -> tuple:
        if self.test in STREAM_TESTS:
            return self.stream_min_size, self.stream_max_size
        if self.test in RR_TESTS:
            return self.rr_min_size, self.rr_max_size
        return self.udp_min_size, self.udp_max_size

    def sizes(self) -> tuple:
        return message_sizes(*self.size_range(), endpoints=True)

    def paced_sizes(self) -> tuple:
        '''udp_stream sizes also run at the paced rates.'''
        return tuple(sorted(set(UDP_STREAM_PERF_SIZES) & set(self.sizes())))

    @run_after('setup')
    def resolve_udp_rates(self):
        self.descr = f'Socket kernel {self.test} over {self.current_partition.fullname}'
        if self.test != UDP_STREAM:
            return
        if self.udp_rates_mbps is not None:
            if not self.udp_rates_mbps or min(self.udp_rates_mbps) <= 0:
                raise ValueError(f'udp_rates_mbps {self.udp_rates_mbps}: give rates > 0 '
                                 '(the unpaced run is always made)')
            self.udp_rates_mbps = sorted(set(self.udp_rates_mbps))
            return
        if self.scale == Scale.ONE_NODE:
            self.udp_rates_mbps = list(sockets.LOCAL_UDP_RATES_MBPS)
            return
        rate_bps = self.partition.link_rate_bps
        if not rate_bps:
            self.skip_because(f'partition {self.partition.fullname} states no link rate '
                              '(link_rate_bps) to pace udp_stream at: set it in its system '
                              'file, or -S udp_rates_mbps=...')
        self.udp_rates_mbps = list(sockets.udp_rates_from_link(rate_bps, self.udp_rate_fractions))

    def kernel_args(self) -> list:
        '''The options of one run (both roles may get them all).'''
        lo, hi = self.size_range()
        args = ['--test', self.test, '--min-size', str(lo), '--max-size', str(hi)]
        if self.test in STREAM_TESTS:
            args += ['--windows', str(self.stream_windows),
                     '--duration-ms', str(self.stream_window_ms)]
        else:
            args += ['--duration-ms', str(self.duration_ms)]
        args += ['--timeout', f'{self.timeout_s:g}', '--connect-timeout', f'{self.connect_timeout_s:g}']
        if self.test == UDP_STREAM:
            args += ['--rate-mbps', sockets.kernel_rates_arg(self.udp_rates_mbps),
                     '--rcvbuf', self.udp_rcvbuf]
            paced = self.paced_sizes()
            if paced:
                args += ['--paced-sizes', ','.join(map(str, paced))]
        if self.validate:
            args.append('--validate')
        return args

    @run_before('run')
    def set_command(self):
        # A rendezvous file unique per run: a stale one of a killed run would
        # point the client to a dead server.
        values = dict(IFACE=self.partition.iface,
                      BINARY=os.path.join(self.kernel.stagedir, 'bin', sockets.KERNEL),
                      RENDEZVOUS=os.path.join(self.stagedir, f'rendezvous-{uuid.uuid4().hex[:12]}'),
                      CLIENT_ARGS=self.kernel_args())
        if self.scale == Scale.ONE_NODE:
            self.job.launcher = getlauncher('local')()
            script = templates.job_script('sockets-pair-local', TIMEOUT_S=f'{self.timeout_s:g}',
                                          CONNECT_TIMEOUT_S=f'{self.connect_timeout_s:g}',
                                          **values)
        else:
            script = templates.job_script('sockets-pair-nodes', **values)
        self.executable = 'sh'
        self.executable_opts = ['-c', shlex.quote(script)]

    @run_after('setup')
    def set_perf_variables(self):
        sizes = self.sizes()
        if self.test in RR_TESTS:
            for size in set(RR_PERF_SIZES) & set(sizes):
                self.add_metric('rtt_median', self._column(size, 'median_us'), size)
                self.add_metric('rtt_p99', self._column(size, 'p99_us'), size)
            self.add_metric('rtt_first', self._header('first-rtt-us'))
            return
        if self.test == UDP_STREAM:
            for size in set(UDP_STREAM_PERF_SIZES) & set(sizes):
                self.add_metric('udp_receiver_capacity',
                                self._column(size, 'recv_Mbps', rate_mbps=0), size)
                for rate in self.udp_rates_mbps or ():
                    self.add_metric('udp_loss', self._column(size, 'loss_pct', rate_mbps=rate),
                                    size, qualifier=sockets.rate_label(rate))
            return
        column = THROUGHPUT_COLUMN[self.test]
        for size in set(STREAM_PERF_SIZES) & set(sizes):
            throughput = self.add_metric('throughput', self._column(size, column), size)
            if self.test == sockets.TCP_STREAM:
                self.calibrated_metrics.append(throughput)
            if self.partition.link_rate_bps:
                self.add_metric('efficiency', self._efficiency(size, column), size)

    @sn.deferrable
    def _column(self, size, column, **match):
        return self.kernel_output().row_for_size(size, **match)[column]

    @sn.deferrable
    def _header(self, key):
        return self.kernel_output().header_float(key)

    @sn.deferrable
    def _efficiency(self, size, column):
        return self.efficiency(self.kernel_output().row_for_size(size)[column],
                               sockets.DIRECTIONS[self.test])

    @parsed_once
    def kernel_output(self):
        '''The client's parsed stdout.'''
        path = os.path.join(self.stagedir, self.stdout.evaluate())
        # The kernel's own error line names the cause; the parse error only
        # the symptom.
        said = sanity.error_lines(self.job_stderr())
        with sanity.sanity_from_output_errors(note=f' (the kernel said: {said})' if said else ''):
            return parse_kernel_output(self.job_stdout(), source=path,
                                       expect_kernel=sockets.KERNEL)

    @sanity_function
    def assert_valid(self):
        self.check_exit()
        out = self.kernel_output()
        sockets.check_output(out, self.test, self.sizes(), self.max_loss_pct,
                             self.udp_rates_mbps, self.validate, self.paced_sizes(),
                             self.max_paced_loss_pct)
        self.client_host = out.header.get('client-host', '')
        self.server_host = out.header.get('server-host', '')
        if not self.client_host or not self.server_host:
            raise SanityError('kernel output names no client-host/server-host')
        if self.num_nodes > 1 and self.client_host == self.server_host:
            raise SanityError(f'client and server ran on the same host {self.client_host}: '
                              'the traffic did not cross the link')
        self.check_link(sockets.bytes_sent_by_host(self.test, self.client_host, self.server_host,
                                                   out.rows))
        self.socket_buffers = {k: int(float(out.header[k])) for k in
                               ('sndbuf', 'rcvbuf', 'server-sndbuf', 'server-rcvbuf')
                               if k in out.header}
        self.curve = [dict(r) for r in out.rows]
        return True
