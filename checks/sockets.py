"""TCP and UDP over plain sockets, below any MPI library: our kernel
(src/sockets.c, see src/README-sockets.md) and, for comparison on the same
link, iperf3.

- ``hpcnet_sockets``: server and client on this host (``local:tcp``, the
  loopback interface), both started by one shell with ReFrame's ``local``
  launcher.
- ``hpcnet_sockets_multinode``: one task per node with the partition's
  launcher (``srun --mpi=none``); the kernel's ``--role auto`` makes rank 0
  the server, bound to its address on the partition's ``iface``.  The two
  hosts must differ and the interface byte counters must cover the payload.
- ``hpcnet_iperf3_multinode``: iperf3 between the same two nodes, same link,
  receiver-side throughput: the yardstick for ``hpcnet_sockets_multinode``
  ``tcp_stream``.

Throughputs are MB/s (10^6 bytes/s) of payload at the receiver; round trips
are microseconds; efficiencies are the payload rate over the partition's
``link_rate_bps`` (framing and headers make 1.0 unreachable: ~0.95 for TCP
over a 1500-byte MTU).
"""
import json
import math
import os
import re
import shlex
import shutil
import uuid

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher
from reframe.core.builtins import (fixture, parameter, performance_function, run_after,
                                   run_before, sanity_function, variable)
from reframe.core.exceptions import SanityError

from hpcnet import hooks
from hpcnet.constants import Fabric, PartitionFeature, Unit
from hpcnet.parsers.kernel import KernelOutputError, parse_kernel_output
from hpcnet.sites import BUILTIN_ENV
from hpcnet.testlib import MakeBuild, NetworkRun

#: The tests of the kernel (src/sockets.c --test).
TCP_STREAM = 'tcp_stream'
TCP_BIDIR = 'tcp_bidir'
TCP_RR = 'tcp_rr'
UDP_STREAM = 'udp_stream'
UDP_RR = 'udp_rr'
SOCKET_TESTS = (TCP_STREAM, TCP_BIDIR, TCP_RR, UDP_STREAM, UDP_RR)
STREAM_TESTS = (TCP_STREAM, TCP_BIDIR)
RR_TESTS = (TCP_RR, UDP_RR)
UDP_TESTS = (UDP_STREAM, UDP_RR)

#: Kernel name in its output ("hpcnet-kernel: sockets 1").
KERNEL = 'sockets'

#: Sizes (bytes) with their own performance variables; the whole table is
#: kept in the ``curve`` variable regardless.
STREAM_PERF_SIZES = (64 * 1024, 1024 * 1024)
RR_PERF_SIZES = (32, 1024)
UDP_STREAM_PERF_SIZES = (1024, 32 * 1024)

#: The column each test's throughput performance variables read.
THROUGHPUT_COLUMN = {TCP_STREAM: 'recv_MBps', TCP_BIDIR: 'total_recv_MBps',
                     UDP_STREAM: 'recv_MBps'}
#: Link directions a test loads at once (efficiency denominator).
DIRECTIONS = {TCP_STREAM: 1, TCP_BIDIR: 2, UDP_STREAM: 1}

#: Columns that may be 0 (losses); every other column must be > 0.
ZERO_ALLOWED_COLUMNS = frozenset({'lost_pkts', 'loss_pct', 'out_of_order', 'lost'})

#: Unit of packet loss (hpcnet.constants.Unit has none yet).
PERCENT = '%'

#: Loopback sustains this paced UDP payload rate without loss (Mbit/s).
LOCAL_UDP_RATE_MBPS = 2000.0

_IFACE_NAME = re.compile(r'[\w.:-]+')


def kernel_sizes(lo: int, hi: int) -> tuple:
    '''The sizes the kernel runs for --min-size lo --max-size hi: lo, every
    power of two in (lo, hi], and hi.'''
    sizes = {lo, hi}
    p = 1
    while p <= hi:
        if p > lo:
            sizes.add(p)
        p *= 2
    return tuple(sorted(sizes))


def iface_address_script(iface: str) -> str:
    '''Shell lines setting ``$addr`` to this node's IPv4 address on ``iface``
    (or failing with an ``error:`` line naming the node).'''
    if not _IFACE_NAME.fullmatch(iface):
        raise ValueError(f'interface name {iface!r} is not valid')
    return (f"addr=$(ip -4 -o addr show dev {iface} 2>/dev/null | "
            "awk '{split($4, a, \"/\"); print a[1]; exit}')\n"
            f'if [ -z "$addr" ]; then echo "error: no IPv4 address on {iface} on '
            '$(hostname)" >&2; exit 1; fi\n')


def job_errors(stagedir: str, names) -> str:
    '''The ``error:`` lines the job printed (kernel, iperf3 wrapper, shell).'''
    lines = []
    for name in names:
        path = os.path.join(stagedir, name)
        if os.path.exists(path):
            with open(path, errors='replace') as fp:
                lines += [line.strip() for line in fp
                          if re.match(r'\s*(error|srun: error|iperf3: .*error)', line)]
    return '; '.join(lines[:5])


class build_sockets(MakeBuild):
    '''Build src/sockets.c (no MPI) with the environment's C compiler
    (-pthread is added by the Makefile's rule).'''

    descr = 'Build the hpcnet socket kernel'
    valid_prog_environs = [BUILTIN_ENV]
    make_targets = ['sockets']
    programs = [KERNEL]

    def compiler_vars(self) -> list:
        return [f'CC={self.current_environ.cc}']


class LinkCheckedRun(NetworkRun):
    '''A network test without MPI whose bytes must show on the partition's
    interface (link counters and references: hpcnet.testlib.NetworkRun).'''

    valid_prog_environs = [BUILTIN_ENV]
    #: No MPI in these tests (the perflog format has an MPI library column).
    mpi_library = variable(str, value='none', loggable=True)

    def iface(self):
        '''The partition's interface: the servers bind to it.'''
        return self.current_partition.extras.get('iface')

    @run_after('setup')
    def require_iface(self):
        self.skip_if(not self.iface(),
                     f'partition {self.current_partition.fullname} names no interface '
                     '(extras.iface) to bind the server to')

    def job_stdout(self) -> str:
        return self._read(self.stdout.evaluate())

    def check_exit(self):
        '''A non-zero job exit status fails with what the job said.'''
        code = self.job.exitcode
        if code not in (0, None):
            said = job_errors(self.stagedir, (self.stderr.evaluate(), self.stdout.evaluate()))
            raise SanityError(f'job exited with status {code}: {said or "(no error message)"}')

    @run_before('run')
    def launcher_without_mpi(self):
        if self.num_nodes > 1 and self.job.launcher.registered_name == 'srun':
            self.job.launcher.options += ['--mpi=none']


class SocketsBase(LinkCheckedRun):
    '''One run of the socket kernel: one test, its sizes, its table.'''

    #: Kernel test (src/sockets.c --test).
    test = parameter(SOCKET_TESTS)
    #: Sizes (bytes) of the streams: every power of two in [min, max].
    stream_min_size = variable(int, value=1)
    stream_max_size = variable(int, value=1024 * 1024)
    #: Request/response sizes (the kernel's defaults).
    rr_min_size = variable(int, value=32)
    rr_max_size = variable(int, value=16 * 1024)
    #: UDP stream sizes (the kernel's defaults; at most 65507).
    udp_min_size = variable(int, value=1)
    udp_max_size = variable(int, value=32 * 1024)
    #: Time per size (ms): streams send this long, rr run this long.
    duration_ms = variable(int, value=300)
    #: udp_stream pacing (Mbit/s of payload); None: udp_rate_fraction of the
    #: partition's link_rate_bps (set at setup, so the report has the value).
    udp_rate_mbps = variable(float, type(None), value=None, loggable=True)
    udp_rate_fraction = variable(float, value=0.9)
    #: SO_RCVBUF of the UDP stream sockets (a paced sender still bursts).
    udp_rcvbuf = variable(str, value='4M')
    #: Highest packet loss (%) accepted at any size of the UDP tests.
    max_loss_pct = variable(float, value=1.0)
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

    kernel = fixture(build_sockets, scope='environment')

    def sizes(self) -> tuple:
        if self.test in STREAM_TESTS:
            return self.stream_min_size, self.stream_max_size
        if self.test in RR_TESTS:
            return self.rr_min_size, self.rr_max_size
        return self.udp_min_size, self.udp_max_size

    @run_after('setup')
    def resolve_udp_rate(self):
        if self.test != UDP_STREAM or self.udp_rate_mbps is not None:
            return
        rate_bps = self.current_partition.extras.get('link_rate_bps')
        if not rate_bps:
            raise ValueError(f'partition {self.current_partition.fullname} has no '
                             'extras.link_rate_bps: set it, or -S udp_rate_mbps=...')
        self.udp_rate_mbps = round(self.udp_rate_fraction * float(rate_bps) / 1e6, 3)

    def kernel_args(self) -> list:
        '''The options of one run (both roles may get them all).'''
        lo, hi = self.sizes()
        args = ['--test', self.test, '--min-size', str(lo), '--max-size', str(hi),
                '--duration-ms', str(self.duration_ms), '--timeout', f'{self.timeout_s:g}',
                '--connect-timeout', f'{self.connect_timeout_s:g}']
        if self.test == UDP_STREAM:
            args += ['--rate-mbps', f'{self.udp_rate_mbps:g}', '--rcvbuf', self.udp_rcvbuf]
        if self.validate:
            args.append('--validate')
        return args

    @run_after('setup')
    def set_descr(self):
        self.descr = f'Socket kernel {self.test} over {self.current_partition.fullname}'

    @run_after('setup')
    def set_perf_variables(self):
        sizes = kernel_sizes(*self.sizes())
        rate_bps = self.current_partition.extras.get('link_rate_bps')
        if self.test in RR_TESTS:
            for size in RR_PERF_SIZES:
                if size in sizes:
                    label = hooks.size_label(size)
                    self.perf_variables[f'rtt_median_{label}'] = sn.make_performance_function(
                        self._column(size, 'median_us'), Unit.US)
                    self.perf_variables[f'rtt_p99_{label}'] = sn.make_performance_function(
                        self._column(size, 'p99_us'), Unit.US)
            self.perf_variables['rtt_first'] = sn.make_performance_function(
                self._header('first-rtt-us'), Unit.US)
            return
        perf_sizes = UDP_STREAM_PERF_SIZES if self.test == UDP_STREAM else STREAM_PERF_SIZES
        column = THROUGHPUT_COLUMN[self.test]
        for size in perf_sizes:
            if size not in sizes:
                continue
            label = hooks.size_label(size)
            self.perf_variables[f'throughput_{label}'] = sn.make_performance_function(
                self._column(size, column), Unit.MBPS)
            if self.test == UDP_STREAM:
                self.perf_variables[f'loss_{label}'] = sn.make_performance_function(
                    self._column(size, 'loss_pct'), PERCENT)
            elif rate_bps:
                self.perf_variables[f'efficiency_{label}'] = sn.make_performance_function(
                    self._efficiency(size, column, rate_bps), Unit.RATIO)

    @sn.deferrable
    def _column(self, size, column):
        return self.kernel_output().row_for_size(size)[column]

    @sn.deferrable
    def _header(self, key):
        return self.kernel_output().header_float(key)

    @sn.deferrable
    def _efficiency(self, size, column, rate_bps):
        return hooks.link_efficiency(self.kernel_output().row_for_size(size)[column], rate_bps,
                                     directions=DIRECTIONS[self.test])

    def kernel_output(self):
        '''The client's parsed stdout (parsed once).'''
        cached = getattr(self, '_kernel_output', None)
        if cached is None:
            path = os.path.join(self.stagedir, self.stdout.evaluate())
            try:
                cached = parse_kernel_output(self.job_stdout(), source=path,
                                             expect_kernel=KERNEL)
            except KernelOutputError as err:
                # The kernel's own error line names the cause; the parse
                # error only the symptom.
                said = job_errors(self.stagedir, (self.stderr.evaluate(),))
                raise SanityError(f'sockets kernel failed: {said} ({err})' if said else
                                  str(err)) from None
            self._kernel_output = cached
        return cached

    def bytes_sent_by_host(self, out) -> dict:
        '''Payload each end sent that reached the other end, by host (lower
        bounds: rr warm-up and first transactions are not counted).'''
        client, server, rows = self.client_host, self.server_host, out.rows
        if self.test == TCP_STREAM:
            sent = {client: sum(r['bytes_received'] for r in rows), server: 0}
        elif self.test == TCP_BIDIR:
            sent = {client: sum(r['c2s_bytes'] for r in rows),
                    server: sum(r['s2c_bytes'] for r in rows)}
        elif self.test == UDP_STREAM:
            sent = {client: sum(r['recv_pkts'] * r['size_bytes'] for r in rows), server: 0}
        else:
            each = sum(r['iterations'] * r['size_bytes'] for r in rows)
            sent = {client: each, server: each}
        if client == server:
            return {client: int(sum(sent.values()))}
        return {h: int(v) for h, v in sent.items()}

    def check_kernel_output(self, out) -> None:
        for key, want in (('test', self.test),
                          ('transport', 'udp' if self.test in UDP_TESTS else 'tcp')):
            if out.header.get(key) != want:
                raise SanityError(f'kernel output says {key}: {out.header.get(key)!r}, '
                                  f'expected {want!r}')
        hooks.check_sizes(out.sizes, kernel_sizes(*self.sizes()))
        positive = [c for c in out.columns if c not in ZERO_ALLOWED_COLUMNS]
        hooks.check_finite_positive(out.rows, positive, what=self.test)
        for row in out.rows:
            for col in ZERO_ALLOWED_COLUMNS & set(out.columns):
                if not (math.isfinite(row[col]) and row[col] >= 0):
                    raise SanityError(f'{self.test} {col} at {int(row["size_bytes"])} B is '
                                      f'{row[col]} (must be >= 0)')
            if 'loss_pct' in row and row['loss_pct'] > self.max_loss_pct:
                raise SanityError(f'{self.test} lost {row["loss_pct"]:g} % at '
                                  f'{int(row["size_bytes"])} B (more than max_loss_pct '
                                  f'{self.max_loss_pct:g} %)')
        if self.test == UDP_STREAM:
            rate = out.header_float('rate-mbps')
            if not math.isclose(rate, self.udp_rate_mbps, rel_tol=1e-6):
                raise SanityError(f'kernel paced at {rate:g} Mbit/s, asked for '
                                  f'{self.udp_rate_mbps:g}')
        if self.test in RR_TESTS:
            first = out.header_float('first-rtt-us')
            if not (math.isfinite(first) and first > 0):
                raise SanityError(f'first-rtt-us is {first} (must be > 0)')
        if self.validate:
            nsizes = len(kernel_sizes(*self.sizes()))
            if out.validated != nsizes:
                raise SanityError(f'payload validation: {out.header.get("validation")!r}, '
                                  f'expected passed {nsizes}')

    def check_hosts(self, out) -> None:
        self.client_host = out.header.get('client-host', '')
        self.server_host = out.header.get('server-host', '')
        if not self.client_host or not self.server_host:
            raise SanityError('kernel output names no client-host/server-host')
        if self.num_nodes > 1 and self.client_host == self.server_host:
            raise SanityError(f'client and server ran on the same host {self.client_host}: '
                              f'the traffic did not cross the link')

    @sanity_function
    def assert_valid(self):
        self.check_exit()
        out = self.kernel_output()
        self.check_kernel_output(out)
        self.check_hosts(out)
        self.check_link(self.bytes_sent_by_host(out))
        self.socket_buffers = {k: int(float(out.header[k])) for k in
                               ('sndbuf', 'rcvbuf', 'server-sndbuf', 'server-rcvbuf')
                               if k in out.header}
        self.curve = [dict(r) for r in out.rows]
        return True

    def rendezvous_file(self) -> str:
        '''A file in the stage dir, unique per run (a stale one of a killed
        run would point the client to a dead server).'''
        return os.path.join(self.stagedir, f'rendezvous-{uuid.uuid4().hex[:12]}')

    def binary(self) -> str:
        return os.path.join(self.kernel.stagedir, 'bin', KERNEL)


@rfm.simple_test
class hpcnet_sockets(SocketsBase):
    '''Server and client on this host, over the partition's interface
    (loopback on local:tcp).'''

    valid_systems = [f'+{Fabric.TCP} -{PartitionFeature.MULTINODE}']
    num_tasks = 1
    udp_rate_mbps = LOCAL_UDP_RATE_MBPS
    tags = {'sockets', 'tcp', 'udp'}

    @run_before('run')
    def set_command(self):
        # Both roles in one shell: the server in the background, the client
        # in front; a failed client stops the server; either failing fails.
        self.job.launcher = getlauncher('local')()
        rv = shlex.quote(self.rendezvous_file())
        binary = shlex.quote(self.binary())
        server = [binary, '--role', 'server', '--bind', '"$addr"', '--port', '0',
                  '--rendezvous', rv, '--timeout', f'{self.timeout_s:g}',
                  '--connect-timeout', f'{self.connect_timeout_s:g}']
        client = [binary, '--role', 'client', '--rendezvous', rv,
                  *map(shlex.quote, self.kernel_args())]
        script = (iface_address_script(self.iface()) +
                  f'{" ".join(server)} &\n'
                  'server=$!\n'
                  f'{" ".join(client)}\n'
                  'client=$?\n'
                  '[ $client -eq 0 ] || kill $server 2>/dev/null\n'
                  'wait $server\n'
                  'server=$?\n'
                  '[ $client -ne 0 ] && exit $client\n'
                  'exit $server\n')
        self.executable = 'sh'
        self.executable_opts = ['-c', shlex.quote(script)]


@rfm.simple_test
class hpcnet_sockets_multinode(SocketsBase):
    '''One task on each of two nodes: rank 0 serves on its address on the
    partition's interface, rank 1 is the client; the bytes must cross the
    link.'''

    valid_systems = [f'+{PartitionFeature.MULTINODE} +{Fabric.TCP}']
    num_tasks = 2
    num_tasks_per_node = 1
    num_nodes = 2
    tags = {'sockets', 'tcp', 'udp', 'multinode'}

    @run_before('run')
    def set_command(self):
        # Each task finds its own address: the server binds to it (and
        # writes it to the rendezvous file), the client ignores --bind.
        args = ['--role', 'auto', '--bind', '"$addr"', '--port', '0',
                '--rendezvous', shlex.quote(self.rendezvous_file()),
                *map(shlex.quote, self.kernel_args())]
        script = (iface_address_script(self.iface()) +
                  f'exec {shlex.quote(self.binary())} {" ".join(args)}\n')
        self.executable = 'sh'
        self.executable_opts = ['-c', shlex.quote(script)]


@rfm.simple_test
class hpcnet_iperf3_multinode(LinkCheckedRun):
    '''iperf3 between two nodes: server on the first, bound to its address on
    the partition's interface, client on the second; receiver-side
    throughput.'''

    valid_systems = [f'+{PartitionFeature.MULTINODE} +{Fabric.TCP}']
    num_tasks = 2
    num_tasks_per_node = 1
    num_nodes = 2
    tags = {'sockets', 'tcp', 'iperf3', 'multinode'}
    #: iperf3 -t (s).
    duration_s = variable(int, value=5)
    port = variable(int, value=5201)
    #: iperf3 --connect-timeout (ms), and how long the client waits for the
    #: server to listen (s).
    connect_timeout_ms = variable(int, value=10000)
    #: Either side is killed after this long (s).
    timeout_s = variable(int, value=60)
    #: What iperf3 reported: version, hosts, bytes, seconds, retransmits.
    iperf3_summary = variable(typ.Dict[str, object], value={}, loggable=True)

    #: The client's JSON output (in the stage dir).
    client_json = 'iperf3-client.json'
    server_log = 'iperf3-server.log'

    @run_after('init')
    def require_iperf3(self):
        self.skip_if(shutil.which('iperf3') is None,
                     'iperf3 is not on PATH (install the iperf3 package)')

    @run_after('setup')
    def set_descr(self):
        self.descr = f'iperf3 over {self.current_partition.fullname}'

    @run_before('run')
    def set_command(self):
        rv = shlex.quote(os.path.join(self.stagedir, f'rendezvous-{uuid.uuid4().hex[:12]}'))
        cjson = shlex.quote(os.path.join(self.stagedir, self.client_json))
        slog = shlex.quote(os.path.join(self.stagedir, self.server_log))
        wait_steps = max(1, self.connect_timeout_ms // 100)
        script = (
            iface_address_script(self.iface()) +
            'rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-${SLURM_PROCID:-}}}}\n'
            'echo "hpcnet-iperf3: rank $rank host $(hostname) addr $addr"\n'
            'case $rank in\n'
            '0)\n'
            f'  timeout {self.timeout_s} iperf3 --server --one-off --bind "$addr" '
            f'--port {self.port} --logfile {slog} &\n'
            '  server=$!\n'
            '  n=0\n'
            f'  until ss -Hltn "sport = :{self.port}" | grep -q .; do\n'
            '    n=$((n + 1))\n'
            f'    if [ $n -gt {wait_steps} ] || ! kill -0 $server 2>/dev/null; then\n'
            '      echo "error: iperf3 server on $(hostname) is not listening on '
            f'$addr:{self.port}: $(cat {slog} 2>/dev/null)" >&2\n'
            '      kill $server 2>/dev/null; exit 1\n'
            '    fi\n'
            '    sleep 0.1\n'
            '  done\n'
            f'  echo "$addr" > {rv}.tmp && mv {rv}.tmp {rv}\n'
            '  wait $server\n'
            '  rc=$?\n'
            f'  rm -f {rv}\n'
            '  exit $rc ;;\n'
            '1)\n'
            '  n=0\n'
            f'  while [ ! -s {rv} ]; do\n'
            '    n=$((n + 1))\n'
            f'    if [ $n -gt {wait_steps} ]; then echo "error: the iperf3 server did not '
            'start listening (no rendezvous file)" >&2; exit 1; fi\n'
            '    sleep 0.1\n'
            '  done\n'
            f'  exec timeout {self.timeout_s} iperf3 --client "$(cat {rv})" --bind "$addr" '
            f'--port {self.port} --time {self.duration_s} --json '
            f'--connect-timeout {self.connect_timeout_ms} --logfile {cjson} ;;\n'
            '*)\n'
            '  echo "error: iperf3 needs exactly 2 tasks (rank 0 and 1), this is rank '
            '\'$rank\'" >&2; exit 2 ;;\n'
            'esac\n')
        self.prerun_cmds.insert(0, f'rm -f {cjson} {slog}')
        self.executable = 'sh'
        self.executable_opts = ['-c', shlex.quote(script)]

    def client_result(self) -> dict:
        '''The client's JSON (parsed once); iperf3's own error fails here.'''
        cached = getattr(self, '_client_result', None)
        if cached is None:
            path = os.path.join(self.stagedir, self.client_json)
            try:
                with open(path, errors='replace') as fp:
                    cached = json.load(fp)
            except OSError:
                said = job_errors(self.stagedir, (self.stderr.evaluate(),))
                raise SanityError(f'iperf3 client wrote no {self.client_json}'
                                  + (f': {said}' if said else '')) from None
            except ValueError as err:
                raise SanityError(f'{path}: not JSON ({err})') from None
            if not isinstance(cached, dict):
                raise SanityError(f'{path}: not an iperf3 JSON result')
            if cached.get('error'):
                raise SanityError(f'iperf3: {cached["error"]}')
            self._client_result = cached
        return cached

    def received(self) -> dict:
        try:
            received = self.client_result()['end']['sum_received']
        except (KeyError, TypeError):
            raise SanityError(f'{self.client_json}: no end.sum_received') from None
        bps = received.get('bits_per_second')
        if not isinstance(bps, (int, float)) or not math.isfinite(bps) or bps <= 0:
            raise SanityError(f'{self.client_json}: receiver throughput is {bps!r}')
        return received

    @performance_function(Unit.MBPS)
    def throughput(self):
        return self.received()['bits_per_second'] / 8e6

    @run_after('setup')
    def set_efficiency(self):
        rate_bps = self.current_partition.extras.get('link_rate_bps')
        if rate_bps:
            self.perf_variables['efficiency'] = sn.make_performance_function(
                self._efficiency(rate_bps), Unit.RATIO)

    @sn.deferrable
    def _efficiency(self, rate_bps):
        return hooks.link_efficiency(self.received()['bits_per_second'] / 8e6, rate_bps)

    @sanity_function
    def assert_valid(self):
        self.check_exit()
        tasks = {int(rank): (host, addr) for rank, host, addr in re.findall(
            r'^hpcnet-iperf3: rank (\d+) host (\S+) addr (\S+)$', self.job_stdout(), re.M)}
        if sorted(tasks) != [0, 1]:
            raise SanityError(f'expected tasks of rank 0 and 1, found {sorted(tasks)}')
        (server_host, server_addr), (client_host, _) = tasks[0], tasks[1]
        if server_host == client_host:
            raise SanityError(f'iperf3 server and client ran on the same host {server_host}')
        result = self.client_result()
        received = self.received()
        connected = result.get('start', {}).get('connecting_to', {}).get('host')
        if connected != server_addr:
            raise SanityError(f'iperf3 client connected to {connected!r}, the server listened '
                              f'on {server_addr}')
        sent = result['end'].get('sum_sent', {})
        self.iperf3_summary = {
            'version': result.get('start', {}).get('version', ''),
            'server_host': server_host, 'client_host': client_host,
            'server_addr': server_addr,
            'seconds': received.get('seconds'), 'bytes_received': received.get('bytes'),
            'bytes_sent': sent.get('bytes'), 'retransmits': sent.get('retransmits'),
        }
        self.check_link({client_host: int(received['bytes']), server_host: 0})
        return True
