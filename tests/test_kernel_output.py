"""Parser of the hpcnet kernel output format 1 (hpcnet/parsers/kernel.py), on text fixtures.

No MPI needed.  The fixtures are real outputs of src/{p2p,collectives,pairs}.c
(Debian Open MPI 4.1.4 and MPICH 4.0.2), shortened, from before the kernels
sampled to a precision (no `batch` / `median_ci_pct` columns: such outputs
must keep parsing), and two whole recordings of the current kernels in
tests/data/samples/ (Open MPI 5.0.11; README.md there says how they were made).
"""

import math
import textwrap
from pathlib import Path

import pytest

from hpcnet.parsers.errors import BenchmarkOutputError
from hpcnet.parsers.kernel import (
    KNOWN_KEYS,
    KernelOutput,
    parse_kernel_output,
    parse_kernel_output_file,
)


def _text(s):
    return textwrap.dedent(s).lstrip('\n')


P2P = _text('''
    hpcnet-kernel: p2p 1
    mpi-library: Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022
    ranks: 2
    host: 0 vm
    host: 1 vm
    mode: pingpong
    bw-formula: size_bytes/median_us
    warmup: 10
    iters: adaptive
    time-per-size-ms: 40
    min-iters: 20
    max-iters: 10000
    validate: on
    first-exchange-us: 56.1430
    second-exchange-us: 0.7310
    columns: size_bytes iterations min_us median_us mean_us max_us stddev_us p99_us bw_MBps bw_peak_MBps
    row: 0 10000 0.0900 0.1255 0.1308 23.7350 0.2443 0.1705 0.00 0.00
    row: 1 10000 0.1100 0.1455 0.1537 27.4805 0.2751 0.2755 6.87 9.09
    row: 2 10000 0.1000 0.1400 0.1545 89.3575 0.9643 0.1855 14.29 20.00
    row: 4 10000 0.1000 0.1355 0.1479 40.7605 0.5119 0.1755 29.52 40.00
    row: 8 10000 0.1050 0.1400 0.2954 1474.8175 14.7518 0.1755 57.14 76.19
    row: 16 10000 0.1150 0.1455 0.5376 3655.8920 36.6187 0.1855 109.97 139.13
    bytes-sent: 1230000 1230000
    validation: passed 6
    done: ok
''')

COLLECTIVES = _text('''
    hpcnet-kernel: collectives 1
    mpi-library: MPICH Version: 4.0.2 ; MPICH Release date: Thu Apr 7 12:34:45 CDT 2022 ; MPICH ABI: 14:2:2 ; MPICH Device: ch4:ucx ;
    ranks: 2
    host: 0 vm
    host: 1 vm
    ops: barrier,allreduce,alltoall
    root: 0
    reduction: MPI_FLOAT MPI_SUM
    warmup: 10
    iters: 20
    validate: on
    columns: op size_bytes count iterations t_min_us t_avg_us t_max_us med_min_us med_avg_us med_max_us
    row: barrier 0 0 20 0.4897 0.5063 0.5228 0.3710 0.3855 0.4000
    # allreduce 2: skipped, needs a multiple of 4 bytes (MPI_FLOAT), at least 4
    row: allreduce 4 1 20 0.4947 0.4962 0.4977 0.3650 0.4005 0.4360
    row: allreduce 8 2 20 0.4553 0.4891 0.5228 0.3410 0.3932 0.4455
    row: allreduce 1024 256 20 5.6454 5.6791 5.7129 5.3225 5.3678 5.4130
    row: alltoall 2 2 20 0.3555 0.3906 0.4256 0.3400 0.3803 0.4205
    row: alltoall 4 4 20 0.3326 0.3681 0.4037 0.3310 0.3660 0.4010
    row: alltoall 8 8 20 0.3219 0.3648 0.4078 0.3210 0.3610 0.4010
    row: alltoall 1024 1024 20 5.5396 105.1446 204.7497 2.3590 2.4060 2.4530
    validation: passed 7
    done: ok
''')

# 3 ranks (a functional run, oversubscribed, --outlier-rule clusterkit); host
# names edited to show three hosts.  Pair 1-2 was a bandwidth outlier in the
# first pass and fine when measured again with a control pair per endpoint.
PAIRS = _text('''
    hpcnet-kernel: pairs 1
    mpi-library: Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022
    ranks: 3
    host: 0 node-a
    host: 1 node-b
    host: 2 node-c
    pairs: 3
    rounds: 3
    schedule: concurrent
    lat-size: 8
    bw-size: 65536
    samples: 3
    bw-samples: 2
    outlier-rule: clusterkit
    lat-threshold-us: 4.7845
    bw-threshold-mbps: 7525.34
    retested: 3
    retest-rounds: 3
    columns: rank_a rank_b host_a host_b lat_first_us lat_mean_us lat_stddev_us lat_min_us lat_max_us bw_mean_MBps bw_stddev_MBps bw_min_MBps bw_max_MBps round lat_outlier bw_outlier retest lat_retest_us bw_retest_MBps lat_retest_outlier bw_retest_outlier
    row: 0 1 node-a node-b 2.6940 2.2783 0.0565 2.2435 2.3435 8091.77 102.783 8019.09 8164.44 2 0 0 2 4.7638 8052.64 0 0
    row: 0 2 node-a node-c 4.4815 2.2950 0.1202 2.2185 2.4335 7930.39 410.662 7640.01 8220.77 1 0 0 2 3.2365 8102.69 0 0
    row: 1 2 node-b node-c 60.4705 3.3752 0.7964 2.7490 4.2715 6544.34 2190.65 4995.31 8093.36 0 0 1 1 2.3202 7611.35 0 0
    # latency matrix: lat_mean_us (one-way, microseconds), row = rank_a, column = rank_b
    #                 0          1          2
    #      0          -     2.2783     2.2950
    #      1     2.2783          -     3.3752
    #      2     2.2950     3.3752          -
    # bandwidth matrix: bw_mean_MBps (MB/s = 10^6 bytes/s), row = rank_a, column = rank_b
    #                 0          1          2
    #      0          -    8091.77    7930.39
    #      1    8091.77          -    6544.34
    #      2    7930.39    6544.34          -
    bytes-sent: 786560 786560 786560
    done: ok
''')


def test_p2p_fixture():
    out = parse_kernel_output(P2P, expect_kernel='p2p')
    assert isinstance(out, KernelOutput)
    assert out.kernel == 'p2p' and out.format_version == 1
    assert out.mpi_library.startswith('Open MPI v4.1.4')
    assert out.hosts == {0: 'vm', 1: 'vm'}
    assert out.header['mode'] == 'pingpong'
    assert out.header['validation'] == 'passed 6'
    assert out.header['bytes-sent'] == '1230000 1230000'
    assert out.validated == 6
    assert out.header_float('first-exchange-us') == pytest.approx(56.143)
    assert 'mpi-library' not in out.header and 'columns' not in out.header
    assert out.columns[:2] == ('size_bytes', 'iterations')
    assert out.sizes == (0, 1, 2, 4, 8, 16)
    row = out.row_for_size(8)
    assert row['median_us'] == pytest.approx(0.14)
    assert row['bw_MBps'] == pytest.approx(57.14)
    assert all(isinstance(v, float) for v in row.values())
    assert out.column('iterations') == (10000.0,) * 6
    assert out.noise == ()


def test_collectives_fixture():
    out = parse_kernel_output(COLLECTIVES, source='coll.out', expect_kernel='collectives')
    assert out.sizes == (0, 2, 4, 8, 1024)
    assert [r['size_bytes'] for r in out.rows_where(op='allreduce')] == [4.0, 8.0, 1024.0]
    assert out.row_for_size(4, op='alltoall')['t_max_us'] == pytest.approx(0.4037)
    assert out.row_for_size(1024, op='allreduce')['count'] == 256
    assert out.rows_where(op='alltoall', size_bytes=8)[0]['op'] == 'alltoall'
    assert out.header['root'] == '0' and out.validated == 7
    with pytest.raises(BenchmarkOutputError, match=r'2 rows for size 4; narrow'):
        out.row_for_size(4)
    with pytest.raises(BenchmarkOutputError, match=r'no row for size 2 op=allreduce; sizes present: 4, 8, 1024'):
        out.row_for_size(2, op='allreduce')
    with pytest.raises(BenchmarkOutputError, match=r"no column 'opp'"):
        out.rows_where(opp='x')
    assert out.mpi_library.startswith('MPICH Version: 4.0.2')


def test_pairs_fixture():
    out = parse_kernel_output(PAIRS, expect_kernel='pairs')
    assert out.hosts == {0: 'node-a', 1: 'node-b', 2: 'node-c'}
    assert len(out.rows) == int(out.header_float('pairs')) == 3
    row = out.rows_where(rank_a=0, rank_b=2)[0]
    assert row['host_b'] == 'node-c' and isinstance(row['host_b'], str)
    assert row['lat_first_us'] == pytest.approx(4.4815)
    assert out.column('bw_mean_MBps', rank_a=1) == (6544.34,)
    assert out.sizes == ()        # pairs has no size_bytes column
    with pytest.raises(BenchmarkOutputError, match='no size_bytes column'):
        out.row_for_size(8)


def test_pairs_second_pass_is_parsed():
    from hpcnet.checklib.analysis import Culprits, bad_twice, culprits
    out = parse_kernel_output(PAIRS, expect_kernel='pairs')
    assert out.header['outlier-rule'] == 'clusterkit'
    assert out.header_float('bw-threshold-mbps') == pytest.approx(7525.34)
    assert out.header_float('lat-threshold-us') == pytest.approx(4.7845)
    assert out.header_float('retested') == 3 == sum(1 for r in out.rows if r['retest'])
    slow = out.rows_where(rank_a=1, rank_b=2)[0]
    assert (slow['bw_outlier'], slow['retest'], slow['bw_retest_outlier']) == (1, 1, 0)
    assert slow['bw_retest_MBps'] == pytest.approx(7611.35)
    # An outlier once, fine when measured again: nothing is blamed.
    assert not bad_twice(slow, 'bandwidth')
    assert culprits(out.rows, 'bandwidth') == Culprits() == culprits(out.rows, 'latency')


@pytest.mark.parametrize('edit,match', [
    (('outlier-rule: clusterkit', 'outlier-rule: gut'), 'outlier-rule: expected one of none, mad, clusterkit'),
    (('retested: 3', 'retested: three'), "retested: 'three' is not a number"),
    (('7611.35 0 0', '7611.35 0.5 0'), "column lat_retest_outlier: '0.5' is not a non-negative integer"),
])
def test_pairs_second_pass_is_checked(edit, match):
    with pytest.raises(BenchmarkOutputError, match=match):
        parse_kernel_output(PAIRS.replace(*edit), expect_kernel='pairs')


def test_missing_size_names_size_and_sizes_present():
    out = parse_kernel_output(P2P)
    with pytest.raises(KeyError) as exc:       # RowNotFound is also a KeyError
        out.row_for_size(1024)
    assert isinstance(exc.value, BenchmarkOutputError)
    assert str(exc.value) == '<output>: p2p output has no row for size 1024; sizes present: 0, 1, 2, 4, 8, 16'


def test_file_and_source_in_messages(tmp_path):
    path = tmp_path / 'p2p.out'
    path.write_text(P2P)
    assert parse_kernel_output_file(path).source == str(path)
    path.write_text(P2P.replace('done: ok\n', ''))
    with pytest.raises(BenchmarkOutputError, match=str(path)):
        parse_kernel_output_file(path)
    with pytest.raises(BenchmarkOutputError, match='cannot read'):
        parse_kernel_output_file(tmp_path / 'missing.out')


@pytest.mark.parametrize('cut', ['done: ok\n', 'validation: passed 6\ndone: ok\n'])
def test_truncated_without_done(cut):
    text = P2P[:P2P.index(cut)]
    with pytest.raises(BenchmarkOutputError, match=r"<output>:\d+: no final 'done: ok' line"):
        parse_kernel_output(text)


def test_truncated_in_header():
    text = P2P[:P2P.index('columns:')]
    with pytest.raises(BenchmarkOutputError, match=r"without a 'columns:' line \(truncated\?\)"):
        parse_kernel_output(text)


def test_truncated_mid_row():
    text = P2P[:P2P.index('row: 2 ') + 20]     # the last line is cut in the middle
    with pytest.raises(BenchmarkOutputError, match=r'<output>:19: row has 3 fields, expected 10 .*'
                       r'the output ends inside this line \(truncated\?\)'):
        parse_kernel_output(text)


def test_empty_and_foreign_output():
    with pytest.raises(BenchmarkOutputError, match='empty output'):
        parse_kernel_output('')
    with pytest.raises(BenchmarkOutputError, match="no 'hpcnet-kernel: <name> <version>' line"):
        parse_kernel_output('# OSU MPI Latency Test v7.1\n0   0.21\n')


def test_wrong_column_count():
    text = P2P.replace('row: 4 10000 0.1000 0.1355', 'row: 4 10000 0.1355')
    with pytest.raises(BenchmarkOutputError) as exc:
        parse_kernel_output(text, source='x.out')
    msg = str(exc.value)
    assert msg.startswith('x.out:20: row has 9 fields, expected 10 (size_bytes iterations')
    assert "line: 'row: 4 10000 0.1355" in msg


@pytest.mark.parametrize('bad', ['nan', '-nan', 'inf', '-inf', 'NaN', 'Infinity'])
def test_non_finite_values(bad):
    text = P2P.replace('row: 8 10000 0.1050 0.1400', f'row: 8 10000 0.1050 {bad}')
    with pytest.raises(BenchmarkOutputError, match=rf"<output>:21: column median_us: value '{bad}' is not finite"):
        parse_kernel_output(text)


@pytest.mark.parametrize('bad', ['abc', '1_000', '0x10', '1.2.3', ''])
def test_non_numeric_values(bad):
    text = P2P.replace('row: 8 10000 0.1050 ', f'row: 8 10000 {bad} ')
    if bad == '':
        with pytest.raises(BenchmarkOutputError, match='row has 9 fields'):
            parse_kernel_output(text)
    else:
        with pytest.raises(BenchmarkOutputError, match=rf"column min_us: '{bad}' is not a number"):
            parse_kernel_output(text)


def test_integer_columns():
    text = P2P.replace('row: 8 10000', 'row: 8.5 10000')
    with pytest.raises(BenchmarkOutputError, match="column size_bytes: '8.5' is not a non-negative integer"):
        parse_kernel_output(text)


def test_unknown_version():
    with pytest.raises(BenchmarkOutputError, match=r"<output>:1: unsupported format version '2'"):
        parse_kernel_output(P2P.replace('hpcnet-kernel: p2p 1', 'hpcnet-kernel: p2p 2'))
    with pytest.raises(BenchmarkOutputError, match='unsupported format version'):
        parse_kernel_output(P2P.replace('hpcnet-kernel: p2p 1', 'hpcnet-kernel: p2p one'))
    with pytest.raises(BenchmarkOutputError, match="expected 'hpcnet-kernel: <name> <format version>'"):
        parse_kernel_output(P2P.replace('hpcnet-kernel: p2p 1', 'hpcnet-kernel: p2p'))


def test_expect_kernel():
    with pytest.raises(BenchmarkOutputError, match="output of kernel 'p2p', expected 'pairs'"):
        parse_kernel_output(P2P, expect_kernel='pairs')


def test_structure_errors():
    with pytest.raises(BenchmarkOutputError, match="duplicate 'mode:' line"):
        parse_kernel_output(P2P.replace('mode: pingpong\n', 'mode: pingpong\nmode: bw\n'))
    with pytest.raises(BenchmarkOutputError, match="'row:' before the 'columns:' line"):
        parse_kernel_output(P2P.replace('columns:', 'row: 1 2 3\ncolumns:'))
    with pytest.raises(BenchmarkOutputError, match="'mode:' before the 'hpcnet-kernel:' line"):
        parse_kernel_output('mode: bw\n' + P2P)
    with pytest.raises(BenchmarkOutputError, match="after 'done: ok'.*two runs"):
        parse_kernel_output(P2P + P2P)
    with pytest.raises(BenchmarkOutputError, match="expected 'done: ok', got 'done: partial'"):
        parse_kernel_output(P2P.replace('done: ok', 'done: partial'))
    with pytest.raises(BenchmarkOutputError, match=r"'ranks: 2' but host lines for ranks \[0\]"):
        parse_kernel_output(P2P.replace('host: 1 vm\n', ''))
    with pytest.raises(BenchmarkOutputError, match="no 'mpi-library:' line"):
        parse_kernel_output(P2P.replace('mpi-library:', 'mpi-libary:'))
    with pytest.raises(BenchmarkOutputError, match="first-exchange-us: 'fast' is not a number"):
        parse_kernel_output(P2P.replace('first-exchange-us: 56.1430', 'first-exchange-us: fast'))
    with pytest.raises(BenchmarkOutputError, match="validation: expected 'passed"):
        parse_kernel_output(P2P.replace('validation: passed 6', 'validation: failed'))
    with pytest.raises(BenchmarkOutputError, match='bytes-sent: expected one byte count per rank'):
        parse_kernel_output(P2P.replace('bytes-sent: 1230000 1230000', 'bytes-sent: 12 -3'))


def test_error_line_from_merged_stderr():
    text = P2P.replace('row: 16 ', 'error: validation failed: mode=pingpong size=16 offset=3 '
                       'expected=0x1f got=0xee (direction 0->1, rank 1)\nrow: 16 ')
    with pytest.raises(BenchmarkOutputError, match=r'<output>:22: the kernel reported an error: '
                       r'validation failed: mode=pingpong size=16 offset=3'):
        parse_kernel_output(text)


# Real noise, captured on this machine with I_MPI_DEBUG=5, UCX_LOG_LEVEL=info and
# Open MPI --mca btl_base_verbose 100, plus an Open MPI help message.
NOISE = [
    '[0] MPI startup(): Intel(R) MPI Library, Version 2021.19.0  Build 20260929 (id: 1821d9b)',
    '[0] MPI startup(): Rank    Pid      Node name  Pin cpu',
    '[0] MPI startup(): I_MPI_DEBUG=5',
    '[1795238351.451135] [vm:13529:0]     ucp_context.c:1849 UCX  INFO  Version 1.13.1 '
    '(loaded from /lib/x86_64-linux-gnu/libucp.so.0)',
    '[1795238351.473952] [vm:13529:0]      ucp_worker.c:1763 UCX  INFO    ep_cfg[0]: '
    'tag(self/memory0 cma/memory) rma(self/memory0 sysv/memory posix/memory)',
    '[vm:13537] mca: base: components_register: registering framework btl components',
    '[vm:13537] select: initializing btl component tcp',
    '--------------------------------------------------------------------------',
    'WARNING: There was an error initializing an OpenFabrics device.',
    '  Local host:   vm',
    '  host: 7 not-ours',           # indented: not a key line
    'mpi: a key we do not know',   # unknown key: noise
    'Row: 1 2 3',                  # keys are lower case
    '\tdone: ok',
]


def test_noise_lines_are_ignored_everywhere():
    lines = P2P.splitlines()
    mixed = []
    for i, line in enumerate(lines):
        mixed.append(NOISE[i % len(NOISE)])
        mixed.append(line)
    mixed += NOISE
    out = parse_kernel_output('\n'.join(mixed) + '\n', expect_kernel='p2p')
    clean = parse_kernel_output(P2P)
    assert out.rows == clean.rows
    assert out.header == clean.header
    assert out.hosts == clean.hosts
    assert len(out.noise) == len(lines) + len(NOISE)
    assert out.noise[0] == (1, NOISE[0])


def test_noise_without_newline_at_end_and_crlf():
    text = P2P.replace('\n', '\r\n') + '[1] MPI startup(): exiting'
    out = parse_kernel_output(text)
    assert out.sizes == (0, 1, 2, 4, 8, 16)
    assert out.noise == ((len(P2P.splitlines()) + 1, '[1] MPI startup(): exiting'),)


def test_known_keys_cover_the_fixtures():
    for text in (P2P, COLLECTIVES, PAIRS, P2P_SAMPLED.read_text(), COLLECTIVES_SAMPLED.read_text()):
        keys = {line.split(':', 1)[0] for line in text.splitlines() if line and not line.startswith('#')}
        assert keys <= KNOWN_KEYS, keys - KNOWN_KEYS


def test_rows_are_numbers_except_text_columns():
    out = parse_kernel_output(COLLECTIVES)
    for row in out.rows:
        assert isinstance(row['op'], str)
        assert all(isinstance(v, float) and math.isfinite(v) for k, v in row.items() if k != 'op')


# Real recordings of the kernels with adaptive sampling to a precision
# (tests/data/samples/README.md: commands and MPI).
SAMPLES = Path(__file__).resolve().parent / 'data' / 'samples'
P2P_SAMPLED = SAMPLES / 'hpcnet-p2p-pingpong.local-shm.openmpi-5.0.11.txt'
COLLECTIVES_SAMPLED = SAMPLES / 'hpcnet-collectives.local-shm.openmpi-5.0.11.txt'


def test_p2p_sampled_output_batch_and_median_ci():
    out = parse_kernel_output_file(P2P_SAMPLED, expect_kernel='p2p')
    assert out.mpi_library.startswith('Open MPI v5.0.11')
    assert out.noise == ()                     # batch-us:, precision-pct: are known keys
    assert out.header_float('batch-us') == 10
    assert out.header_float('precision-pct') == 1
    assert out.header['iters'] == 'adaptive'
    assert out.columns[-2:] == ('batch', 'median_ci_pct')
    assert out.sizes == (0,) + tuple(2 ** k for k in range(17))     # 0, 1, ..., 64K
    min_iters = out.header_float('min-iters')
    for row in out.rows:
        assert isinstance(row['batch'], float) and row['batch'].is_integer() and row['batch'] >= 1
        assert isinstance(row['median_ci_pct'], float) and 0 <= row['median_ci_pct'] < 100
        assert row['iterations'] >= min_iters
    row = out.row_for_size(0)
    assert (row['iterations'], row['batch'], row['median_ci_pct']) == (80, 30, pytest.approx(0.576))
    # a shared-memory round trip of ~0.2 us: many iterations per sample at
    # size 0, one per sample at 64 KiB (~12 us per round trip)
    assert out.row_for_size(65536)['batch'] == 1
    assert out.validated == 18


def test_p2p_batch_is_an_integer_column():
    text = P2P_SAMPLED.read_text()
    line = 'row: 0 80 0.0961 0.1013 0.1030 0.2255 0.0140 0.2255 0 0 30 0.576\n'
    assert line in text
    with pytest.raises(BenchmarkOutputError, match="column batch: '30.5' is not a non-negative integer"):
        parse_kernel_output(text.replace(line, line.replace(' 30 ', ' 30.5 ')))
    with pytest.raises(BenchmarkOutputError, match="column median_ci_pct: value 'nan' is not finite"):
        parse_kernel_output(text.replace(line, line.replace(' 0.576', ' nan')))
    with pytest.raises(BenchmarkOutputError, match="batch-us: 'ten' is not a number"):
        parse_kernel_output(text.replace('batch-us: 10\n', 'batch-us: ten\n'))
    with pytest.raises(BenchmarkOutputError, match="precision-pct: 'x' is not a number"):
        parse_kernel_output(text.replace('precision-pct: 1\n', 'precision-pct: x\n'))
    # the old format (no batch, no median_ci_pct) still parses
    old = parse_kernel_output(P2P)
    assert 'batch' not in old.columns and 'median_ci_pct' not in old.columns


def test_collectives_sampled_output_median_ci():
    out = parse_kernel_output_file(COLLECTIVES_SAMPLED, expect_kernel='collectives')
    assert out.noise == ()
    assert out.header_float('precision-pct') == 1 and 'batch-us' not in out.header
    assert out.columns[-1] == 'median_ci_pct' and 'batch' not in out.columns
    assert len(out.rows) == 9 + 12 + 1          # allreduce 4..1K, alltoall 0..1K, barrier
    max_iters = out.header_float('max-iters')
    for row in out.rows:
        assert isinstance(row['median_ci_pct'], float) and row['median_ci_pct'] >= 0
        assert row['iterations'].is_integer() and 20 <= row['iterations'] <= max_iters
    # stopped by its time budget before the interval was within 1 %
    row = out.row_for_size(512, op='allreduce')
    assert row['median_ci_pct'] == pytest.approx(1.36) and row['iterations'] == 1280
    assert out.validated == 9 + 12     # every (op, size) but barrier
