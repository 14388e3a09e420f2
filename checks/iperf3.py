"""iperf3 between two nodes, on the link the socket kernel measures: server
on the first node, bound to its address on the partition's interface, client
on the second; receiver-side throughput.  The yardstick for
``hpcnet_sockets %scale=2_nodes %test=tcp_stream``."""
import os
import re
import shlex
import shutil
import uuid

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.exceptions import SanityError

from hpcnet import templates
from hpcnet.checklib import calibration, sanity
from hpcnet.constants import Scale
from hpcnet.parsers import parsed_once
from hpcnet.checklib.testlib import SocketRun


@rfm.simple_test
class hpcnet_iperf3(SocketRun):
    #: iperf3 needs two hosts: it runs on multi-node partitions only.
    scale = parameter([Scale.TWO_NODES])
    tags = {'sockets', 'tcp', 'iperf3'}
    #: iperf3 -t (s).
    duration_s = variable(int, value=5)
    port = variable(int, value=5201)
    #: iperf3 --connect-timeout (ms), and how long the client waits for the
    #: server to listen.
    connect_timeout_ms = variable(int, value=10000)
    #: Either side is killed after this long (s).
    timeout_s = variable(int, value=60)
    #: What iperf3 reported: version, hosts, bytes, seconds, retransmits.
    iperf3_summary = variable(typ.Dict[str, object], value={}, loggable=True)

    #: The client's JSON output and the server's log (in the stage dir).
    client_json = 'iperf3-client.json'
    server_log = 'iperf3-server.log'

    @run_after('init')
    def require_iperf3(self):
        if shutil.which('iperf3') is None:
            self.skip_because('iperf3 is not on PATH (install the iperf3 package)')

    @run_before('run')
    def set_command(self):
        self.descr = f'iperf3 over {self.current_partition.fullname}'
        client_json = os.path.join(self.stagedir, self.client_json)
        server_log = os.path.join(self.stagedir, self.server_log)
        script = templates.job_script(
            'iperf3-pair', IFACE=self.partition.iface, PORT=self.port,
            TIMEOUT_S=self.timeout_s, DURATION_S=self.duration_s,
            CONNECT_TIMEOUT_MS=self.connect_timeout_ms,
            WAIT_STEPS=max(1, self.connect_timeout_ms // 100),
            RENDEZVOUS=os.path.join(self.stagedir, f'rendezvous-{uuid.uuid4().hex[:12]}'),
            CLIENT_JSON=client_json, SERVER_LOG=server_log)
        self.prerun_cmds.insert(0, f'rm -f {shlex.quote(client_json)} {shlex.quote(server_log)}')
        self.executable = 'sh'
        self.executable_opts = ['-c', shlex.quote(script)]

    @parsed_once
    def client_result(self) -> tuple:
        '''(the client's JSON result, the receiver's throughput in MB/s), read
        once; iperf3's own error fails here.'''
        path = os.path.join(self.stagedir, self.client_json)
        try:
            result = calibration.read_iperf3(path)
            return result, calibration.iperf3_received_MBps(result, path)
        except calibration.CalibrationError as err:
            said = sanity.error_lines(self.job_stderr())
            raise SanityError(f'{err}' + (f': {said}' if said else '')) from None

    def received_MBps(self) -> float:
        return self.client_result()[1]

    @run_after('setup')
    def set_perf_variables(self):
        throughput = self.add_metric('throughput', self._throughput())
        if self.partition.link_rate_bps:
            self.add_metric('efficiency', self._efficiency())
        # Its own before/after calibration says whether the host emulated the wire.
        self.calibrated_metrics = [throughput]

    @sn.deferrable
    def _throughput(self):
        return self.received_MBps()

    @sn.deferrable
    def _efficiency(self):
        return self.efficiency(self.received_MBps())

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
        result = self.client_result()[0]
        received = result['end']['sum_received']
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
