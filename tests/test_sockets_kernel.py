"""The socket benchmark kernel src/sockets.c: build it, run server and client
on loopback (127.0.0.1 / ::1 only), check the output and the error paths.

Run: /tmp/rfvenv/bin/python -m pytest tests/test_sockets_kernel.py -q
"""
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / 'src'
CFLAGS = '-O2 -Wall -Wextra -Werror'
#: Variables --role auto looks at; scrubbed from the environment of every run
#: so that a test session inside a Slurm/MPI job behaves the same.
RANK_VARS = ('OMPI_COMM_WORLD_RANK', 'PMIX_RANK', 'PMI_RANK', 'SLURM_PROCID')


def _compiler():
    for name in (os.environ.get('CC'), 'cc', 'gcc', 'clang'):
        if name and shutil.which(name):
            return name
    pytest.skip('no C compiler')


def _build(cc, out):
    '''src/Makefile's sockets target (several objects), warnings as errors.'''
    res = subprocess.run(['make', '-s', '-C', str(SRC), f'CC={cc}', f'CFLAGS={CFLAGS}',
                          f'BINDIR={out.parent}', str(out)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f'{cc} failed:\n{res.stderr}'
    assert res.stderr.strip() == '', f'{cc} printed diagnostics:\n{res.stderr}'
    return out


@pytest.fixture(scope='module')
def binary(tmp_path_factory):
    return _build(_compiler(), tmp_path_factory.mktemp('sockets') / 'sockets')


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in RANK_VARS}
    env.update(extra)
    return env


# ---------------------------------------------------------------------------
# output parsing: a small strict local reader of "hpcnet kernel output format 1"

def parse(text):
    """(header dict, columns, rows as dicts of floats) of one client output."""
    header, columns, rows, hosts, done = {}, None, [], {}, False
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith('#')]
    assert lines, 'empty output'
    assert lines[0] == 'hpcnet-kernel: sockets 1', lines[0]
    for line in lines:
        key, sep, value = line.partition(': ')
        assert sep and re.fullmatch(r'[a-z][a-z0-9-]*', key) and value.strip(), f'bad line {line!r}'
        assert not done, f'line after done: ok: {line!r}'
        if key == 'columns':
            assert columns is None
            columns = value.split()
        elif key == 'row':
            assert columns is not None, 'row before columns'
            fields = value.split()
            assert len(fields) == len(columns), line
            row = {}
            for name, field in zip(columns, fields):
                assert re.fullmatch(r'[0-9]+(\.[0-9]+)?', field), f'{name}={field!r} in {line!r}'
                row[name] = float(field)
                assert math.isfinite(row[name])
            rows.append(row)
        elif key == 'host':
            rank, name = value.split()
            hosts[int(rank)] = name
        elif key == 'done':
            assert value == 'ok'
            done = True
        else:
            assert key not in header, f'duplicate {key}'
            header[key] = value
    assert done, 'no done: ok'
    assert columns and columns[0] == 'size_bytes'
    header['hosts'] = hosts
    return header, columns, rows


def check_generic_parser(text):
    """Also parseable by the suite's generic parser, when it is there."""
    try:
        from hpcnet.parsers.kernel import parse_kernel_output
    except ImportError:
        return
    out = parse_kernel_output(text, expect_kernel='sockets')
    assert out.sizes == tuple(sorted(int(r['size_bytes']) for r in parse(text)[2]))
    assert set(out.hosts) == {0, 1}


# ---------------------------------------------------------------------------
# running both roles

def read_rendezvous(path, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists():
            text = path.read_text().strip()
            if text:
                host, _, port = text.rpartition(':')
                return host.strip('[]'), int(port)
        time.sleep(0.02)
    raise AssertionError(f'server did not write {path}')


def start_server(binary, tmp_path, *args, env=None, role='server'):
    rv = tmp_path / 'rendezvous'
    proc = subprocess.Popen([str(binary), '--role', role, '--port', '0', '--rendezvous', str(rv),
                             '--timeout', '30', *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env or _env())
    return proc, rv


def finish(proc, timeout=15):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f'server did not exit; stderr:\n{err}')
    return proc.returncode, out, err


def run_pair(binary, tmp_path, client_args, server_args=(), server_env=None, client_env=None,
             role=('server', 'client')):
    server, rv = start_server(binary, tmp_path, *server_args, env=server_env, role=role[0])
    try:
        client = subprocess.run([str(binary), '--role', role[1], '--rendezvous', str(rv),
                                 '--connect-timeout', '10', '--timeout', '30', *client_args],
                                capture_output=True, text=True, timeout=40,
                                env=client_env or _env())
    finally:
        src, sout, serr = finish(server)
    assert client.returncode == 0, f'client failed:\n{client.stderr}\nserver:\n{serr}'
    assert client.stderr == '', client.stderr
    assert src == 0, f'server failed:\n{serr}'
    assert sout == '', 'the server must not write to stdout'
    assert not rv.exists(), 'the server must remove its rendezvous file'
    return client.stdout


SMALL = {
    'tcp_stream': ['--sizes', '1,1K,64K', '--duration-ms', '60'],
    'tcp_bidir': ['--sizes', '1,1K,64K', '--duration-ms', '60'],
    'tcp_rr': ['--sizes', '32,1K,16K', '--iters', '200', '--warmup', '20'],
    # modest, paced rate and a big receive buffer: no loss on loopback even
    # with other jobs competing for the CPUs
    'udp_stream': ['--sizes', '64,1K,8K', '--duration-ms', '100', '--rate-mbps', '20', '--rcvbuf', '4M'],
    'udp_rr': ['--sizes', '32,1K,16K', '--iters', '200', '--warmup', '20', '--udp-timeout-ms', '500'],
}


@pytest.mark.parametrize('test, windows', [('tcp_stream', 3), ('tcp_bidir', 4)])
def test_stream_windows_report_the_median_window(binary, tmp_path, test, windows):
    '''Each size measured in --windows windows: its row is the window of the
    median rate (the lower middle one when even), and every window's rate is
    printed beside the table.'''
    sizes = [1, 1024, 65536]
    text = run_pair(binary, tmp_path, ['--test', test, '--windows', str(windows), '--duration-ms', '20',
                                       '--sizes', ','.join(map(str, sizes))])
    header, columns, rows = parse(text)
    assert header['windows'] == str(windows)
    window_lines = re.findall(r'^# windows at (\d+) B: ([\d. ]+) MB/s, reported window (\d+)$', text, re.M)
    assert [int(size) for size, _, _ in window_lines] == [int(r['size_bytes']) for r in rows] == sizes
    for row, (_, rates, picked) in zip(rows, window_lines):
        rates = [float(r) for r in rates.split()]
        assert len(rates) == windows
        reported = row['recv_MBps' if test == 'tcp_stream' else 'total_recv_MBps']
        assert reported == pytest.approx(sorted(rates)[(windows - 1) // 2], abs=0.0011)
        assert rates[int(picked) - 1] == pytest.approx(reported, abs=0.0011)
    # One window: no window lines, as before.
    text = run_pair(binary, tmp_path, ['--test', test, '--duration-ms', '20', '--sizes', '1024'])
    assert parse(text)[0]['windows'] == '1' and '# windows at' not in text


@pytest.mark.parametrize('test', list(SMALL))
def test_each_test_type(binary, tmp_path, test):
    text = run_pair(binary, tmp_path, ['--test', test, '--validate', *SMALL[test]])
    header, columns, rows = parse(text)
    check_generic_parser(text)
    want_sizes = [int(s.replace('K', '')) * (1024 if 'K' in s else 1)
                  for s in SMALL[test][SMALL[test].index('--sizes') + 1].split(',')]
    assert [int(r['size_bytes']) for r in rows] == want_sizes
    assert header['test'] == test
    assert header['transport'] == ('udp' if test.startswith('udp') else 'tcp')
    assert re.fullmatch(r'127\.0\.0\.1:\d+', header['server'])
    assert header['client-host'] and header['server-host']
    assert header['hosts'] == {0: header['server-host'], 1: header['client-host']}
    assert header['mpi-library'] == 'none'
    for key in ('sndbuf', 'rcvbuf', 'server-sndbuf', 'server-rcvbuf'):
        assert int(header[key]) > 0, key
    assert header['validate'] == 'on'
    assert header['validation'] == f'passed {len(want_sizes)}'

    if test == 'tcp_stream':
        assert columns == ['size_bytes', 'duration_s', 'recv_duration_s', 'bytes_sent', 'bytes_received',
                           'send_MBps', 'recv_MBps', 'send_Mbps', 'recv_Mbps']
        for r in rows:
            assert r['bytes_sent'] == r['bytes_received'] > 0
            assert 0.06 <= r['duration_s'] < 2 and 0.0 < r['recv_duration_s'] < 2
            assert r['send_MBps'] > 0 and r['recv_MBps'] > 0
            assert r['recv_Mbps'] == pytest.approx(8 * r['recv_MBps'], rel=1e-3, abs=0.01)
            assert r['recv_MBps'] == pytest.approx(r['bytes_received'] / r['recv_duration_s'] / 1e6,
                                                   rel=1e-3, abs=0.01)
    elif test == 'tcp_bidir':
        for r in rows:
            assert r['c2s_bytes'] > 0 and r['s2c_bytes'] > 0
            for k in ('c2s_send_MBps', 'c2s_recv_MBps', 's2c_send_MBps', 's2c_recv_MBps'):
                assert r[k] > 0, k
            assert r['total_recv_MBps'] == pytest.approx(r['c2s_recv_MBps'] + r['s2c_recv_MBps'],
                                                         rel=1e-3, abs=0.01)
            assert r['total_recv_Mbps'] == pytest.approx(8 * r['total_recv_MBps'], rel=1e-3, abs=0.01)
    elif test == 'udp_stream':
        assert header['rate-mbps'] == '20' and header['paced-sizes'] == 'all'
        assert columns == ['size_bytes', 'rate_mbps', 'duration_s', 'sent_pkts', 'recv_pkts', 'lost_pkts',
                           'loss_pct', 'out_of_order', 'send_MBps', 'recv_MBps', 'recv_Mbps']
        for r in rows:
            assert r['rate_mbps'] == 20
            assert r['sent_pkts'] > 0
            assert r['recv_pkts'] == r['sent_pkts'], f'loss on loopback at 20 Mbit/s: {r}'
            assert r['lost_pkts'] == 0 and r['loss_pct'] == 0 and r['out_of_order'] == 0
            assert r['send_MBps'] > 0 and r['recv_MBps'] > 0
            # paced at 20 Mbit/s = 2.5 MB/s of payload
            assert r['send_MBps'] == pytest.approx(2.5, rel=0.2)
    else:  # rr
        assert float(header['first-rtt-us']) > 0
        assert header['iters'] == '200' and header['warmup'] == '20'
        for r in rows:
            assert r['iterations'] == 200
            assert 0 < r['min_us'] <= r['median_us'] <= r['max_us']
            assert r['min_us'] <= r['mean_us'] <= r['max_us']
            assert r['min_us'] <= r['p99_us'] <= r['max_us']
            assert r['stddev_us'] >= 0 and r['first_us'] > 0 and r['trans_per_s'] > 0
        if test == 'udp_rr':
            assert all(r['lost'] == 0 and r['loss_pct'] == 0 for r in rows)
    assert text.rstrip().splitlines()[-1] == 'done: ok'


def test_udp_stream_paced_rates_and_unpaced_capacity(binary, tmp_path):
    '''--rate-mbps with several rates: every size runs unpaced (0), the
    --paced-sizes also at each paced rate, ascending, the unpaced run last;
    one row per run, told apart by rate_mbps.  Paced runs send at their rate
    and, at rates far below what loopback takes in, lose nothing.'''
    text = run_pair(binary, tmp_path, ['--test', 'udp_stream', '--sizes', '64,1K,8K',
                                       '--rate-mbps', '50,0,10,50', '--paced-sizes', '8K,1K',
                                       '--duration-ms', '100', '--rcvbuf', '4M'])
    header, columns, rows = parse(text)
    assert header['rate-mbps'] == '10,50,0' and header['paced-sizes'] == '1024,8192'
    assert [(int(r['size_bytes']), r['rate_mbps']) for r in rows] == [
        (64, 0), (1024, 10), (1024, 50), (1024, 0), (8192, 10), (8192, 50), (8192, 0)]
    for r in rows:
        if r['rate_mbps']:
            assert r['send_MBps'] * 8 == pytest.approx(r['rate_mbps'], rel=0.1), r
            assert r['lost_pkts'] == 0, r
        assert r['recv_Mbps'] > 0
    from hpcnet.parsers.errors import RowNotFound
    from hpcnet.parsers.kernel import parse_kernel_output
    out = parse_kernel_output(text, expect_kernel='sockets')
    assert out.sizes == (64, 1024, 8192)
    assert out.row_for_size(1024, rate_mbps=10)['sent_pkts'] == rows[1]['sent_pkts']
    assert out.row_for_size(64, rate_mbps=0)['rate_mbps'] == 0
    with pytest.raises(RowNotFound, match=r'has 3 rows for size 1024; .*rate_mbps= \(values 10\.0, '
                                          r'50\.0, 0\.0\)'):
        out.row_for_size(1024)


def test_udp_stream_pacing_keeps_its_rate(binary, tmp_path):
    '''The schedule is computed from the datagram count, so no rounding
    accumulates: 1 B at 0.1 Mbit/s (one datagram every 80 us) and 32 KiB at
    30 Mbit/s both send at the stated rate.'''
    for size, rate in ((1, 0.1), (32768, 30)):
        _, _, (row,) = parse(run_pair(binary, tmp_path, ['--test', 'udp_stream', '--sizes', str(size),
                                                         '--rate-mbps', str(rate), '--duration-ms', '200']))
        assert row['send_MBps'] * 8 == pytest.approx(rate, rel=0.05), row


@pytest.mark.parametrize('test,args,sizes', [
    ('tcp_stream', ['--duration-ms', '3'], [2 ** k for k in range(17)]),
    ('udp_stream', ['--duration-ms', '3', '--rate-mbps', '10'], [2 ** k for k in range(16)]),
    ('tcp_rr', ['--iters', '10', '--warmup', '0'], [2 ** k for k in range(5, 15)]),
    ('tcp_stream', ['--min-size', '100', '--max-size', '1000', '--duration-ms', '3'],
     [100, 128, 256, 512, 1000]),
    ('udp_rr', ['--max-size', '65507', '--min-size', '32K', '--iters', '10'], [32768, 65507]),
    ('tcp_stream', ['--sizes', '1M,4,4,1k', '--duration-ms', '3'], [4, 1024, 1 << 20]),
])
def test_size_lists(binary, tmp_path, test, args, sizes):
    header, _, rows = parse(run_pair(binary, tmp_path, ['--test', test, *args]))
    assert [int(r['size_bytes']) for r in rows] == sizes


def test_adaptive_rr(binary, tmp_path):
    header, _, rows = parse(run_pair(binary, tmp_path, ['--test', 'tcp_rr', '--sizes', '64',
                                                        '--duration-ms', '50']))
    assert header['iters'] == 'adaptive' and header['warmup'] == '100'
    (row,) = rows
    # 50 ms of ~10-100 us round trips on loopback
    assert row['iterations'] >= 50
    assert row['iterations'] / row['trans_per_s'] == pytest.approx(0.05, rel=0.5)


def test_socket_buffers_reported(binary, tmp_path):
    req = 256 * 1024
    header, _, _ = parse(run_pair(binary, tmp_path, ['--test', 'tcp_stream', '--sizes', '64K',
                                                     '--duration-ms', '20',
                                                     '--sndbuf', '256K', '--rcvbuf', '256K']))
    assert header['sndbuf-requested'] == str(req) and header['rcvbuf-requested'] == str(req)
    limits = {}
    for name in ('wmem_max', 'rmem_max'):
        try:
            limits[name] = int(Path(f'/proc/sys/net/core/{name}').read_text())
        except OSError:
            limits[name] = req
    # Linux reports twice the (capped) request: the kernel's bookkeeping overhead
    assert int(header['sndbuf']) >= min(req, limits['wmem_max'])
    assert int(header['rcvbuf']) >= min(req, limits['rmem_max'])
    assert int(header['server-sndbuf']) >= min(req, limits['wmem_max'])


def test_role_auto_from_rank_variables(binary, tmp_path):
    # rank 0 -> server, rank 1 -> client; MPI launcher variables win over an
    # inherited SLURM_PROCID (mpirun inside a Slurm job)
    text = run_pair(binary, tmp_path, ['--test', 'tcp_rr', '--sizes', '32', '--iters', '10'],
                    server_env=_env(PMI_RANK='0'),
                    client_env=_env(SLURM_PROCID='0', OMPI_COMM_WORLD_RANK='1'),
                    role=('auto', 'auto'))
    header, _, _ = parse(text)
    assert header['role-from'] == 'OMPI_COMM_WORLD_RANK=1'


def test_direct_server_address(binary, tmp_path):
    server, rv = start_server(binary, tmp_path)
    try:
        host, port = read_rendezvous(rv)
        assert host == '127.0.0.1'
        client = subprocess.run([str(binary), '--role', 'client', '--server-addr', '127.0.0.1',
                                 '--port', str(port), '--test', 'tcp_stream', '--sizes', '4K',
                                 '--duration-ms', '10'], capture_output=True, text=True, timeout=30,
                                env=_env())
    finally:
        rc, _, err = finish(server)
    assert client.returncode == 0, client.stderr
    assert rc == 0, err
    assert f'# sockets server listening on 127.0.0.1:{port}' in err
    assert parse(client.stdout)[0]['server'] == f'127.0.0.1:{port}'


def test_ipv6_loopback(binary, tmp_path):
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(('::1', 0))
    except OSError:
        pytest.skip('no IPv6 loopback')
    for test in ('tcp_rr', 'udp_rr'):
        header, _, rows = parse(run_pair(binary, tmp_path, ['--test', test, '--sizes', '64', '--iters', '20'],
                                         server_args=['--bind', '::1']))
        assert re.fullmatch(r'\[::1\]:\d+', header['server'])
        assert rows[0]['iterations'] == 20


def test_server_ignores_strangers(binary, tmp_path):
    """A connection that does not speak the protocol does not take the session."""
    server, rv = start_server(binary, tmp_path)
    try:
        host, port = read_rendezvous(rv)
        with socket.create_connection((host, port), timeout=5) as s:
            s.sendall(b'GET / HTTP/1.0\r\n\r\n')
        client = subprocess.run([str(binary), '--role', 'client', '--rendezvous', str(rv),
                                 '--test', 'tcp_rr', '--sizes', '32', '--iters', '10'],
                                capture_output=True, text=True, timeout=30, env=_env())
    finally:
        rc, _, err = finish(server)
    assert client.returncode == 0, client.stderr
    assert rc == 0, err


@pytest.mark.parametrize('args', [
    [],                                                   # no --role
    ['--role', 'master'],
    ['--role', 'client', '--test', 'sctp_stream'],
    ['--role', 'client', '--bogus'],
    ['--role', 'client', '--port'],
    ['--role', 'client', '--port', '70000'],
    ['--role', 'client', '--sizes', '0'],
    ['--role', 'client', '--sizes', '1,,2'],
    ['--role', 'client', '--sizes', '2G'],
    ['--role', 'client', '--sizes', '12Q'],
    ['--role', 'client', '--sizes', '1K', '--min-size', '1'],
    ['--role', 'client', '--min-size', '4K', '--max-size', '1K'],
    ['--role', 'client', '--test', 'udp_stream', '--sizes', '65508'],
    ['--role', 'client', '--test', 'udp_rr', '--max-size', '64K'],
    ['--role', 'client', '--duration-ms', '0'],
    ['--role', 'client', '--iters', '10'],                # rr only
    ['--role', 'client', '--test', 'tcp_rr', '--iters', '0'],
    ['--role', 'client', '--rate-mbps', '10'],            # udp_stream only
    ['--role', 'client', '--test', 'udp_stream', '--rate-mbps', '10,'],
    ['--role', 'client', '--test', 'udp_stream', '--rate-mbps', '-1'],
    ['--role', 'client', '--test', 'udp_stream', '--rate-mbps', '1,2,3,4,5,6,7,8,0'],   # at most 8
    ['--role', 'client', '--test', 'udp_stream', '--paced-sizes', '1K'],              # no paced rate
    ['--role', 'client', '--test', 'udp_stream', '--rate-mbps', '0', '--paced-sizes', '1K'],
    ['--role', 'client', '--test', 'udp_stream', '--rate-mbps', '10,0', '--sizes', '64,1K',
     '--paced-sizes', '2K'],                                                           # not a size run
    ['--role', 'client', '--test', 'udp_stream', '--rate-mbps', '10', '--sizes', '64,1K',
     '--paced-sizes', '1K'],                                                           # 64 would not run
    ['--role', 'client', '--paced-sizes', '1K'],          # udp_stream only
    ['--role', 'client', '--test', 'udp_rr', '--udp-timeout-ms', 'x'],
    ['--role', 'client', '--sndbuf', '-1'],
    ['--role', 'client', '--timeout', '0'],
    ['--role', 'client', '--duration-ms', '10000', '--timeout', '5'],  # cannot fit
    ['--role', 'client', '--duration-ms', '1000', '--windows', '6', '--timeout', '5'],  # nor this
    ['--role', 'client', '--test', 'tcp_rr', '--windows', '3'],        # tcp streams only
    ['--role', 'client', '--windows', '0'],
    ['--role', 'client', '--windows', '26'],
    ['--role', 'client', '--port', '0'],                  # needs --rendezvous
    ['--role', 'client', 'stray'],
    ['--role', 'auto'],                                   # no rank variable
])
def test_bad_arguments(binary, args):
    res = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=10, env=_env())
    assert res.returncode == 2, (args, res.returncode, res.stderr)
    assert res.stdout == ''
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith('error: '), res.stderr


def test_auto_with_too_many_ranks(binary):
    res = subprocess.run([str(binary), '--role', 'auto'], capture_output=True, text=True, timeout=10,
                         env=_env(SLURM_PROCID='2'))
    assert res.returncode == 2 and res.stderr.startswith('error: ') and 'exactly 2' in res.stderr


def test_help_and_version(binary):
    res = subprocess.run([str(binary), '--help'], capture_output=True, text=True, timeout=10)
    assert res.returncode == 0 and '--rendezvous' in res.stdout
    res = subprocess.run([str(binary), '--version'], capture_output=True, text=True, timeout=10)
    assert res.returncode == 0 and res.stdout.startswith('sockets 1')


def _free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def test_client_without_server_fails_in_time(binary):
    t0 = time.monotonic()
    res = subprocess.run([str(binary), '--role', 'client', '--server-addr', '127.0.0.1',
                          '--port', str(_free_port()), '--connect-timeout', '1'],
                         capture_output=True, text=True, timeout=20, env=_env())
    elapsed = time.monotonic() - t0
    assert res.returncode == 1 and res.stdout == ''
    assert res.stderr.startswith('error: could not connect to the server within 1 s'), res.stderr
    assert 'Connection refused' in res.stderr
    assert 0.9 < elapsed < 5


def test_client_waits_for_missing_rendezvous_in_time(binary, tmp_path):
    t0 = time.monotonic()
    res = subprocess.run([str(binary), '--role', 'client', '--rendezvous', str(tmp_path / 'nowhere'),
                          '--connect-timeout', '1'], capture_output=True, text=True, timeout=20, env=_env())
    assert res.returncode == 1
    assert res.stderr.startswith('error: rendezvous file') and 'did not appear within 1 s' in res.stderr
    assert time.monotonic() - t0 < 5


def test_client_rejects_malformed_rendezvous(binary, tmp_path):
    rv = tmp_path / 'rv'
    rv.write_text('no port here\n')
    res = subprocess.run([str(binary), '--role', 'client', '--rendezvous', str(rv),
                          '--connect-timeout', '1'], capture_output=True, text=True, timeout=20, env=_env())
    assert res.returncode == 1 and 'does not hold host:port' in res.stderr


def test_server_without_client_times_out(binary, tmp_path):
    t0 = time.monotonic()
    server, rv = start_server(binary, tmp_path, '--timeout', '1')
    rc, out, err = finish(server)
    assert rc == 1 and out == ''
    assert 'error: no client connected within 1 s' in err
    assert time.monotonic() - t0 < 5
    assert not rv.exists()


def test_server_removes_rendezvous_on_sigterm(binary, tmp_path):
    server, rv = start_server(binary, tmp_path)
    read_rendezvous(rv)
    server.send_signal(signal.SIGTERM)
    rc, _, _ = finish(server)
    assert rc == -signal.SIGTERM
    assert not rv.exists()


@pytest.mark.parametrize('victim', ['client', 'server'])
def test_peer_killed_mid_test(binary, tmp_path, victim):
    """The survivor reports an error and exits non-zero promptly."""
    server, rv = start_server(binary, tmp_path)
    client = subprocess.Popen([str(binary), '--role', 'client', '--rendezvous', str(rv),
                               '--test', 'tcp_bidir', '--sizes', '1K,2K', '--duration-ms', '2000'],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    time.sleep(0.5)
    (client if victim == 'client' else server).kill()
    t0 = time.monotonic()
    survivor = server if victim == 'client' else client
    try:
        out, err = survivor.communicate(timeout=10)
    finally:
        for p in (server, client):
            if p.poll() is None:
                p.kill()
                p.communicate()
    assert time.monotonic() - t0 < 5
    assert survivor.returncode == 1
    assert 'error: ' in err
    if victim == 'server':
        assert out == '', 'no partial table on failure'


@pytest.mark.parametrize('cc', ['gcc-12', 'gcc-11', 'clang'])
def test_builds_cleanly_with(cc, tmp_path):
    if not shutil.which(cc):
        pytest.skip(f'{cc} not installed')
    _build(cc, tmp_path / cc / 'sockets')


@pytest.mark.parametrize('test,args', [
    ('tcp_stream', ['--duration-ms', '100']),
    ('tcp_bidir', ['--duration-ms', '100']),
    ('tcp_rr', ['--iters', '50', '--warmup', '2']),
])
def test_short_writes_and_reads(binary, tmp_path, test, args):
    """Messages far larger than the socket buffers and odd receive sizes:
    send()/recv() return short; --validate checks that every byte arrives in
    order.  (Not smaller buffers: below 2 x MSS -- 64K on loopback -- Linux
    falls back to the persist timer and a 1M round trip takes seconds.)"""
    header, _, rows = parse(run_pair(binary, tmp_path, [
        '--test', test, '--sizes', '1000,1M', '--sndbuf', '64K', '--rcvbuf', '64K', '--recv-size', '777',
        '--validate', *args]))
    assert header['validation'] == 'passed 2'
    assert [int(r['size_bytes']) for r in rows] == [1000, 1 << 20]


def test_survives_stop_and_continue(binary, tmp_path):
    """SIGSTOP/SIGCONT makes blocking socket calls with timeouts fail with
    EINTR on Linux (signal(7)); the kernel must retry them."""
    server, rv = start_server(binary, tmp_path)
    client = subprocess.Popen([str(binary), '--role', 'client', '--rendezvous', str(rv),
                               '--test', 'tcp_bidir', '--sizes', '100,64K', '--duration-ms', '400',
                               '--validate'],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        time.sleep(0.2)
        for k in range(12):
            victim = (server, client)[k % 2]
            if victim.poll() is None:
                victim.send_signal(signal.SIGSTOP)
                time.sleep(0.02)
                victim.send_signal(signal.SIGCONT)
            time.sleep(0.03)
        out, err = client.communicate(timeout=20)
    finally:
        for p in (server, client):
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
        src, _, serr = finish(server)
    assert client.returncode == 0, err
    assert src == 0, serr
    assert parse(out)[0]['validation'] == 'passed 2'


#: LD_PRELOAD shim: every 5th socket/poll/sleep call fails with EINTR and
#: every 3rd stream send()/recv() is cut to about half its length.
EINTR_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>

static atomic_ulong calls;
static int hit(void) { return atomic_fetch_add(&calls, 1) % 5 == 3; }
static int is_stream(int fd) {
    int t = 0; socklen_t l = sizeof t;
    return getsockopt(fd, SOL_SOCKET, SO_TYPE, &t, &l) == 0 && t == SOCK_STREAM;
}
#define REAL(ret, name, ...) static ret (*real)(__VA_ARGS__); \
    if (!real) real = (ret (*)(__VA_ARGS__))dlsym(RTLD_NEXT, name)

ssize_t recv(int fd, void *b, size_t n, int f) {
    REAL(ssize_t, "recv", int, void *, size_t, int);
    if (hit()) { errno = EINTR; return -1; }
    if (n > 1 && is_stream(fd) && atomic_load(&calls) % 3 == 0) n = n / 2 + 1;
    return real(fd, b, n, f);
}
ssize_t send(int fd, const void *b, size_t n, int f) {
    REAL(ssize_t, "send", int, const void *, size_t, int);
    if (hit()) { errno = EINTR; return -1; }
    if (n > 1 && is_stream(fd) && atomic_load(&calls) % 3 == 0) n = n / 2 + 1;
    return real(fd, b, n, f);
}
ssize_t recvfrom(int fd, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l) {
    REAL(ssize_t, "recvfrom", int, void *, size_t, int, struct sockaddr *, socklen_t *);
    if (hit()) { errno = EINTR; return -1; }
    return real(fd, b, n, f, a, l);
}
ssize_t sendto(int fd, const void *b, size_t n, int f, const struct sockaddr *a, socklen_t l) {
    REAL(ssize_t, "sendto", int, const void *, size_t, int, const struct sockaddr *, socklen_t);
    if (hit()) { errno = EINTR; return -1; }
    return real(fd, b, n, f, a, l);
}
int recvmmsg(int fd, struct mmsghdr *m, unsigned int v, int f, struct timespec *t) {
    REAL(int, "recvmmsg", int, struct mmsghdr *, unsigned int, int, struct timespec *);
    if (hit()) { errno = EINTR; return -1; }
    return real(fd, m, v, f, t);
}
int poll(struct pollfd *p, nfds_t n, int t) {
    REAL(int, "poll", struct pollfd *, nfds_t, int);
    if (hit()) { errno = EINTR; return -1; }
    return real(p, n, t);
}
int accept4(int fd, struct sockaddr *a, socklen_t *l, int f) {
    REAL(int, "accept4", int, struct sockaddr *, socklen_t *, int);
    if (hit()) { errno = EINTR; return -1; }
    return real(fd, a, l, f);
}
int nanosleep(const struct timespec *r, struct timespec *rem) {
    REAL(int, "nanosleep", const struct timespec *, struct timespec *);
    if (hit()) { if (rem) *rem = *r; errno = EINTR; return -1; }
    return real(r, rem);
}
int clock_nanosleep(clockid_t c, int fl, const struct timespec *r, struct timespec *rem) {
    REAL(int, "clock_nanosleep", clockid_t, int, const struct timespec *, struct timespec *);
    if (hit()) return EINTR;    /* the error number, not -1 and errno */
    return real(c, fl, r, rem);
}
"""


@pytest.fixture(scope='module')
def shim(tmp_path_factory):
    cc = _compiler()
    d = tmp_path_factory.mktemp('shim')
    (d / 'shim.c').write_text(EINTR_SHIM)
    res = subprocess.run([cc, '-O2', '-shared', '-fPIC', '-o', str(d / 'shim.so'), str(d / 'shim.c'), '-ldl'],
                         capture_output=True, text=True, timeout=60)
    if res.returncode != 0:
        pytest.skip(f'cannot build the LD_PRELOAD shim: {res.stderr}')
    return d / 'shim.so'


@pytest.mark.parametrize('test', list(SMALL))
def test_injected_eintr_and_short_io(binary, tmp_path, shim, test):
    """Both roles under a shim that makes calls fail with EINTR and return
    short: the kernel retries, resumes and still delivers every byte."""
    env = _env(LD_PRELOAD=str(shim))
    args = ['--test', test, '--validate', *SMALL[test]]
    header, _, rows = parse(run_pair(binary, tmp_path, args, server_env=env, client_env=env))
    assert header['validation'] == f'passed {len(rows)}'
    if test == 'udp_stream':
        assert all(r['recv_pkts'] == r['sent_pkts'] and r['send_MBps'] == pytest.approx(2.5, rel=0.2)
                   for r in rows)


def test_server_rejects_other_protocol_version(binary, tmp_path):
    server, rv = start_server(binary, tmp_path)
    try:
        host, port = read_rendezvous(rv)
        with socket.create_connection((host, port), timeout=5) as s:
            s.sendall(b'hello proto=2 test=tcp_stream\n')
            reply = s.makefile().readline()
    finally:
        rc, _, err = finish(server)
    assert reply.startswith('error client speaks control protocol 2')
    assert rc == 1 and 'error: client speaks control protocol 2' in err
    assert not rv.exists()


def test_max_size_below_default_range(binary, tmp_path):
    _, _, rows = parse(run_pair(binary, tmp_path, ['--test', 'tcp_rr', '--max-size', '16', '--iters', '5']))
    assert [int(r['size_bytes']) for r in rows] == [16]


@pytest.mark.parametrize('line,message', [
    ('rate-mbps: 100,x,0', r'rate-mbps: expected rates \(Mbit/s\) separated by commas'),
    ('paced-sizes: 1K', r"paced-sizes: expected 'all' or sizes separated by commas"),
])
def test_generic_parser_refuses_malformed_udp_headers(line, message):
    from hpcnet.parsers.errors import BenchmarkOutputError
    from hpcnet.parsers.kernel import parse_kernel_output
    text = '\n'.join(['hpcnet-kernel: sockets 1', 'mpi-library: none', line,
                      'columns: size_bytes rate_mbps', 'row: 1 0', 'done: ok']) + '\n'
    with pytest.raises(BenchmarkOutputError, match=message):
        parse_kernel_output(text, expect_kernel='sockets')
