"""Tests of hpcnet.parsers.osu on the real OMB 7.4 samples and on broken variants.

Real outputs: tests/data/samples (Open MPI 4.1.4 / MPICH 4.0.2; see its README).
Broken variants: tests/data/osu (hand-made, see its README). Layouts that no sample shows
(osu_mbw_mr, -f, tail latencies, non-blocking collectives, ...) are written below by hand
from the printf formats of the OMB sources cited in hpcnet/parsers/osu.py.
"""
from __future__ import annotations

import functools
import math
from dataclasses import replace
from pathlib import Path

import pytest

from helpers import parse_error
from hpcnet.parsers.errors import BenchmarkOutputError
from hpcnet.parsers.osu import OSU_BENCHMARKS, OSU_COLUMNS, OsuOutput, parse_osu

SAMPLES = Path(__file__).resolve().parent / 'data' / 'samples'
BROKEN = Path(__file__).resolve().parent / 'data' / 'osu'

PT2PT = ('osu_latency', 'osu_bw', 'osu_bibw')
COLLECTIVES = ('osu_allreduce', 'osu_alltoall')
SAMPLE_NAMES = [f'{b}.{mpi}.txt' for b in PT2PT + COLLECTIVES
                for mpi in ('openmpi-4.1.4', 'mpich-4.0.2')]


def sample_text(name: str) -> str:
    path = SAMPLES / name
    if not path.is_file():
        pytest.fail(f'real OSU sample missing from the repository: {path}')
    return path.read_text()


def parse_sample(name: str, **kw) -> OsuOutput:
    return parse_osu(sample_text(name), source=name, **kw)


#: The error the parser raises on a damaged output (helpers.parse_error).
expect_error = functools.partial(parse_error, parse_osu)


# ------------------------------------------------------------------ real samples (7.4)

@pytest.mark.parametrize('name', SAMPLE_NAMES)
def test_every_sample_parses(name):
    benchmark = name.split('.')[0]
    out = parse_sample(name, expect_benchmark=benchmark)
    assert out.benchmark == benchmark
    assert out.title == OSU_BENCHMARKS[benchmark].title
    assert out.version == '7.4'
    assert out.datatype == 'MPI_CHAR'
    assert out.info == ()
    kind = OSU_BENCHMARKS[benchmark].kind
    if benchmark == 'osu_latency' or kind == 'collective':
        assert out.columns == ('size_bytes', 'avg_latency_us')
    else:
        assert out.columns == ('size_bytes', 'bandwidth_MBps')
    assert out.headline[0] == out.columns[1]
    max_size = 4194304 if benchmark in PT2PT else 1048576
    assert out.sizes == tuple(2 ** i for i in range(max_size.bit_length()))
    assert parse_sample(name, expect_max_size=max_size).rows == out.rows
    for row in out.rows:
        assert isinstance(row['size_bytes'], int) and isinstance(row[out.columns[1]], float)


def test_samples_directory_has_no_unknown_osu_file():
    if not SAMPLES.is_dir():
        pytest.fail(f'real samples missing from the repository: {SAMPLES}')
    assert sorted(p.name for p in SAMPLES.glob('osu_*')) == sorted(SAMPLE_NAMES)


@pytest.mark.parametrize('name, size, column, value', [
    ('osu_latency.openmpi-4.1.4.txt', 8, 'avg_latency_us', 0.12),
    ('osu_latency.openmpi-4.1.4.txt', 4096, 'avg_latency_us', 6.06),
    ('osu_latency.openmpi-4.1.4.txt', 4194304, 'avg_latency_us', 1364.26),
    ('osu_latency.mpich-4.0.2.txt', 512, 'avg_latency_us', 9.64),
    ('osu_bw.openmpi-4.1.4.txt', 4194304, 'bandwidth_MBps', 8234.31),
    ('osu_bw.mpich-4.0.2.txt', 131072, 'bandwidth_MBps', 984.31),
    ('osu_bibw.mpich-4.0.2.txt', 16384, 'bandwidth_MBps', 257.95),
    ('osu_bibw.openmpi-4.1.4.txt', 1, 'bandwidth_MBps', 15.34),
    ('osu_allreduce.openmpi-4.1.4.txt', 262144, 'avg_latency_us', 111.62),
    ('osu_allreduce.mpich-4.0.2.txt', 1048576, 'avg_latency_us', 695.06),
    ('osu_alltoall.mpich-4.0.2.txt', 16384, 'avg_latency_us', 52.00),
    ('osu_alltoall.openmpi-4.1.4.txt', 4096, 'avg_latency_us', 2.11),
])
def test_sample_values(name, size, column, value):
    out = parse_sample(name)
    assert out.row_for_size(size) == {'size_bytes': size, column: value}


def test_row_for_size_error_names_size_and_sizes_present():
    out = parse_sample('osu_allreduce.openmpi-4.1.4.txt')
    with pytest.raises(BenchmarkOutputError) as info:
        out.row_for_size(3)
    message = str(info.value)
    assert 'no row for size 3' in message and 'sizes present: 1, 2, 4, 8' in message
    assert message.startswith('osu_allreduce.openmpi-4.1.4.txt:4: ')
    with pytest.raises(BenchmarkOutputError, match="no column 'bandwidth_MBps'"):
        out.column('bandwidth_MBps')


def test_rows_are_copies():
    out = parse_sample('osu_bw.openmpi-4.1.4.txt')
    out.row_for_size(1)['bandwidth_MBps'] = 0
    assert out.row_for_size(1)['bandwidth_MBps'] == 8.50


def test_require_finite_positive():
    out = parse_sample('osu_bw.openmpi-4.1.4.txt')
    out.require_finite_positive(('bandwidth_MBps',))
    nan_at_8 = tuple(dict(r, bandwidth_MBps=math.nan) if r['size_bytes'] == 8 else r
                     for r in out.rows)
    with pytest.raises(BenchmarkOutputError) as info:
        replace(out, rows=nan_at_8).require_finite_positive(('bandwidth_MBps',),
                                                            nonnegative=('bandwidth_MBps',))
    assert str(info.value) == ('osu_bw.openmpi-4.1.4.txt:4: osu_bw output: bandwidth_MBps at '
                               '8 B is nan')


def test_expect_benchmark_mismatch():
    expect_error(sample_text('osu_bw.openmpi-4.1.4.txt'), 'expected osu_bibw output',
                 "'OSU MPI Bandwidth Test' is that of osu_bw", line=2,
                 expect_benchmark='osu_bibw')


def test_expect_max_size_catches_a_run_cut_between_rows():
    text = sample_text('osu_latency.openmpi-4.1.4.txt')
    cut = text[:text.index('2097152 ')]            # stopped after 1048576
    assert parse_osu(cut).sizes[-1] == 1048576      # nothing in the text shows it...
    expect_error(cut, 'the last size is 1048576, expected 4194304', 'stopped early',
                 line=len(cut.splitlines()), expect_max_size=4194304)


def test_last_row_without_newline_is_truncated():
    text = sample_text('osu_bw.openmpi-4.1.4.txt')
    cut = text[:text.index('8234.31') + len('8234.3')]
    expect_error(cut, "the last row '4194304              8234.3' has no line terminator",
                 line=len(cut.splitlines()))


# -------------------------------------------------------------- broken variants (files)

@pytest.mark.parametrize('name, fragments, line', [
    ('osu_latency.truncated-row.txt',
     ("row has 1 fields, expected 2 (size_bytes avg_latency_us): '4194304'", 'truncated'), 27),
    ('osu_latency.unknown-column.txt',
     ("unexpected OSU column 'Jitter(us)'", 'known columns: Size, Latency (us), '
      'Avg Latency(us)', 'P<n> Tail Lat(us)'), 4),
    ('osu_bw.non-numeric.txt', ("bandwidth_MBps is '477.3x', expected a number",), 11),
    ('osu_bw.no-rows.txt', ('osu_bw: the table (header at line 4) has no rows',), 4),
    ('osu_allreduce.sizes-swapped.txt', ('size 16 after 32: sizes must increase',), 10),
])
def test_broken_files(name, fragments, line):
    path = BROKEN / name
    err = expect_error(path.read_text(), *fragments, line=line, source=str(path))
    assert err.source == str(path)


def test_broken_readme_names_every_file():
    readme = (BROKEN / 'README.md').read_text()
    for path in BROKEN.glob('*.txt'):
        assert f'`{path.name}`' in readme


def test_unknown_column_lists_every_valid_label():
    err = expect_error((BROKEN / 'osu_latency.unknown-column.txt').read_text())
    assert all(label in str(err) for label in OSU_COLUMNS)


# ------------------------------------------------- other layouts, from the OMB printf formats

def test_old_pt2pt_layout_latency_us():
    text = ('# OSU MPI Latency Test v5.6.3\n'
            '# Size          Latency (us)\n'
            '0                       0.25\n'
            '1                       0.27\n')
    out = parse_osu(text, expect_benchmark='osu_latency')
    assert out.version == '5.6.3' and out.datatype is None
    assert out.columns == ('size_bytes', 'latency_us')
    assert out.headline == ('latency_us', 'us')
    assert out.row_for_size(0)['latency_us'] == 0.25


def test_mbw_mr_74_layout():
    text = ('# OSU MPI Multiple Bandwidth / Message Rate Test v7.4\n'
            '# [ pairs: 1 ] [ window size: 64 ]\n'
            '# Datatype: MPI_CHAR.\n'
            '# Size                  MB/s        Messages/s\n'
            '1                       2.36        2356892.44\n'
            '2                       4.71        2356892.44\n')
    out = parse_osu(text)
    assert out.benchmark == 'osu_mbw_mr'
    assert out.columns == ('size_bytes', 'bandwidth_MBps', 'messages_per_s')
    assert out.info == ('# [ pairs: 1 ] [ window size: 64 ]',)
    assert out.row_for_size(2) == {'size_bytes': 2, 'bandwidth_MBps': 4.71,
                                   'messages_per_s': 2356892.44}
    assert out.headline == ('bandwidth_MBps', 'MB/s')


def test_mbw_mr_71_layout_title_twice_datatype_after_header():
    text = ('# OSU MPI Multiple Bandwidth / Message Rate Test v7.1\n'
            '# OSU MPI Multiple Bandwidth / Message Rate Test v7.1\n'
            '\n'
            '# [ pairs: 1 ] [ window size: 64 ]\n'
            '# Size                  MB/s        Messages/s\n'
            '# Datatype: MPI_CHAR.\n'
            '1                       2.36        2356892.44\n')
    out = parse_osu(text)
    assert out.benchmark == 'osu_mbw_mr' and out.datatype == 'MPI_CHAR'
    assert out.header_line == 5


def test_multi_lat():
    text = ('# OSU MPI Multi Latency Test v7.4\n'
            '# Datatype: MPI_CHAR.\n'
            '# Size       Avg Latency(us)\n'
            '1                       0.31\n')
    assert parse_osu(text).benchmark == 'osu_multi_lat'


def test_collective_full_tail_and_validation_columns():
    text = ('# OSU MPI Allgather Latency Test v7.4\n'
            '# Datatype: MPI_CHAR.\n'
            '# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations'
            '         Validation   P50 Tail Lat(us)   P90 Tail Lat(us)   P99 Tail Lat(us)\n'
            '1                       2.81              2.10              3.52        1000'
            '               Pass               2.70               3.10               3.40\n'
            '2                       2.90              2.20              3.60        1000'
            '               Fail               2.80               3.20               3.50\n')
    out = parse_osu(text, expect_benchmark='osu_allgather')
    assert out.columns == ('size_bytes', 'avg_latency_us', 'min_latency_us', 'max_latency_us',
                           'iterations', 'validation', 'p50_latency_us', 'p90_latency_us',
                           'p99_latency_us')
    assert out.row_for_size(1) == {'size_bytes': 1, 'avg_latency_us': 2.81, 'min_latency_us': 2.10,
                                   'max_latency_us': 3.52, 'iterations': 1000,
                                   'validation': 1.0, 'p50_latency_us': 2.70,
                                   'p90_latency_us': 3.10, 'p99_latency_us': 3.40}
    assert out.row_for_size(2)['validation'] == 0.0


def test_bandwidth_tail_columns():
    text = ('# OSU MPI Bandwidth Test v7.4\n'
            '# Datatype: MPI_CHAR.\n'
            '# Size      Bandwidth (MB/s)   P50 Tail BW(MB/s)   P99 Tail BW(MB/s)\n'
            '1                       8.50                8.40                8.10\n')
    out = parse_osu(text)
    assert out.columns == ('size_bytes', 'bandwidth_MBps', 'p50_bandwidth_MBps', 'p99_bandwidth_MBps')


def test_nonblocking_collective_full():
    text = ('# OSU MPI Non-blocking Allreduce Latency Test v7.4\n'
            '# Overall = Coll. Init + Compute + MPI_Test + MPI_Wait\n'
            '\n'
            '# Datatype: MPI_CHAR.\n'
            '# Size           Overall(us)       Compute(us)    Coll. Init(us)      '
            'MPI_Test(us)      MPI_Wait(us)    Pure Comm.(us)     Min Comm.(us)     '
            'Max Comm.(us)        Overlap(%)\n'
            '1                       3.10              1.50              0.40              '
            '0.00              1.10              1.40              1.30              1.50'
            '             85.71\n')
    out = parse_osu(text)
    assert out.benchmark == 'osu_iallreduce'
    assert out.info == ('# Overall = Coll. Init + Compute + MPI_Test + MPI_Wait',)
    assert out.columns == ('size_bytes', 'overall_us', 'compute_us', 'coll_init_us', 'mpi_test_us',
                           'mpi_wait_us', 'pure_comm_us', 'min_comm_us', 'max_comm_us',
                           'overlap_percent')
    assert out.row_for_size(1)['overlap_percent'] == 85.71
    assert out.headline == ('overall_us', 'us')


def test_barrier_without_size_column():
    text = ('# OSU MPI Barrier Latency Test v7.4\n'
            '# Avg Latency(us)\n'
            '             1.23\n')
    out = parse_osu(text)
    assert out.benchmark == 'osu_barrier'
    assert out.columns == ('avg_latency_us',) and out.sizes == ()
    assert out.rows == ({'avg_latency_us': 1.23},)
    with pytest.raises(BenchmarkOutputError, match=r'osu_barrier output has no size_bytes column '
                       r'\(Size in the output\)'):
        out.row_for_size(1)
    expect_error(text, 'no Size column', expect_max_size=8)


def test_accelerator_title_and_later_title_spelling():
    cuda = ('# OSU MPI-CUDA Latency Test v7.4\n# Send Buffer on DEVICE (D) and Receive '
            'Buffer on DEVICE (D)\n# Datatype: MPI_CHAR.\n# Size       Avg Latency(us)\n'
            '1                       2.00\n')
    out = parse_osu(cuda)
    assert out.benchmark == 'osu_latency' and out.title == 'OSU MPI-CUDA Latency Test'
    assert out.info == ('# Send Buffer on DEVICE (D) and Receive Buffer on DEVICE (D)',)
    # OMB 7.5 concatenates "Personalized Exchange" "Latency Test" without a space
    nbc = ('# OSU MPI Non-blocking All-to-All Personalized ExchangeLatency Test v7.5\n'
           '# Size           Overall(us)       Compute(us)    Pure Comm.(us)        Overlap(%)\n'
           '1                       3.10              1.50              1.40             85.71\n')
    assert parse_osu(nbc).benchmark == 'osu_ialltoall'


def test_library_and_launcher_lines_are_ignored():
    text = ('mpirun: starting\n'
            '[0] MPI startup(): Intel(R) MPI Library\n'
            '\n# OSU MPI Latency Test v7.4\n'
            'some warning printed before the header\n'
            '# Datatype: MPI_CHAR.\n'
            '# Size       Avg Latency(us)\n'
            '1                       0.12\n'
            '[1] MPI startup(): late line\n'
            '2                       0.13\n')
    assert parse_osu(text).sizes == (1, 2)


# ------------------------------------------------------------------- other error cases

def test_not_an_osu_output():
    expect_error('', 'not an OSU Micro-Benchmarks output')
    expect_error('#    Intel(R) MPI Benchmarks 2021.7, MPI-1 part\n', 'no "# OSU ... Test')


def test_unknown_title():
    text = '# OSU MPI Teleportation Test v9.9\n# Size       Avg Latency(us)\n1   0.1\n'
    expect_error(text, "unknown OSU benchmark title 'OSU MPI Teleportation Test'",
                 "osu_latency: 'OSU MPI Latency Test'", line=1)
    assert parse_osu(text, expect_benchmark='osu_teleport').benchmark == 'osu_teleport'


def test_no_column_header():
    expect_error('\n# OSU MPI Latency Test v7.4\n# Datatype: MPI_CHAR.\n',
                 'osu_latency: no column header')


def test_data_row_before_header():
    expect_error('# OSU MPI Latency Test v7.4\n1   0.12\n# Size       Avg Latency(us)\n',
                 'a data row before the column header', line=2)


def test_validation_error_message():
    text = sample_text('osu_latency.openmpi-4.1.4.txt')
    damaged = text + 'DATA VALIDATION ERROR: osu_latency exited with status 1 on message size 8.\n'
    expect_error(damaged, 'OMB reported a validation error', line=len(damaged.splitlines()))


def test_second_datatype_section_is_rejected():
    text = sample_text('osu_latency.openmpi-4.1.4.txt')
    damaged = text + '# Datatype: MPI_INT.\n# Size       Avg Latency(us)\n4   0.2\n'
    expect_error(damaged, 'a second datatype section (MPI_INT)', 'one datatype per invocation')


def test_two_outputs_concatenated():
    text = sample_text('osu_latency.openmpi-4.1.4.txt') + sample_text('osu_bw.openmpi-4.1.4.txt')
    expect_error(text, "a second OSU title 'OSU MPI Bandwidth Test'", 'concatenated')
    same = sample_text('osu_bw.openmpi-4.1.4.txt') * 2
    expect_error(same, 'a second OSU title')


def test_comment_after_rows():
    text = sample_text('osu_bw.openmpi-4.1.4.txt') + '# something else\n'
    expect_error(text, "unexpected comment line after the rows: '# something else'")


def test_non_numeric_values():
    base = ('# OSU MPI Latency Test v7.4\n# Size       Avg Latency(us)   Iterations\n'
            '1                       0.12   1000\n')
    for bad, fragment in [('nan', "avg_latency_us is 'nan'"), ('-', "avg_latency_us is '-'"),
                          ('1e3x', 'expected a number')]:
        expect_error(base.replace('0.12', bad), fragment, line=3)
    expect_error(base.replace('1000', '1000.5'), "iterations is '1000.5', expected an integer")
    expect_error(base.replace('1000', 'Pass'), 'expected an integer')
    validation = ('# OSU MPI Latency Test v7.4\n# Size       Avg Latency(us)        Validation\n'
                  '1                       0.12           Maybe\n')
    expect_error(validation, "Validation is 'Maybe', expected Pass or Fail")


def test_header_errors():
    expect_error('# OSU MPI Latency Test v7.4\n# Size  Avg Latency(us)  Avg Latency(us)\n1 1 1\n',
                 'repeated column')
    expect_error('# OSU MPI Latency Test v7.4\n# Avg Latency(us)    Size\n1 1\n',
                 'Size is not the first column')
    expect_error('# OSU MPI Latency Test v7.4\n# Size   Avg Latency(us)\n1   1\n'
                 '# Size   Avg Latency(us)\n', 'a second column header')


# --------------------------------------------------------------------- OSU_BENCHMARKS

def test_osu_benchmarks_table():
    required = {'osu_latency', 'osu_bw', 'osu_bibw', 'osu_mbw_mr', 'osu_multi_lat',
                'osu_allreduce', 'osu_alltoall', 'osu_allgather', 'osu_bcast', 'osu_reduce',
                'osu_gather', 'osu_reduce_scatter'}
    assert required <= set(OSU_BENCHMARKS)
    kinds = {'pt2pt-latency', 'pt2pt-bandwidth', 'pt2pt-message-rate', 'collective',
             'collective-nonblocking'}
    titles = set()
    normalized = set(OSU_COLUMNS.values())
    for name, info in OSU_BENCHMARKS.items():
        assert info.kind in kinds, name
        assert info.perf_columns and set(info.perf_columns) <= normalized, name
        assert info.unit in ('us', 'MB/s'), name
        assert info.title not in titles
        titles.add(info.title)
    assert OSU_BENCHMARKS['osu_latency'].kind == 'pt2pt-latency'
    assert OSU_BENCHMARKS['osu_bw'].kind == 'pt2pt-bandwidth'
    assert OSU_BENCHMARKS['osu_mbw_mr'].perf_columns == ('bandwidth_MBps', 'messages_per_s')
    assert OSU_BENCHMARKS['osu_allreduce'].kind == 'collective'
    assert OSU_BENCHMARKS['osu_allreduce'][0] == 'collective'      # also a tuple


@pytest.mark.parametrize('name', sorted(OSU_BENCHMARKS))
def test_every_known_title_is_recognized(name):
    info = OSU_BENCHMARKS[name]
    if info.kind == 'collective-nonblocking':
        header, ncols = '# Size  Overall(us)  Compute(us)  Pure Comm.(us)  Overlap(%)', 5
    elif info.unit == 'us':
        header, ncols = '# Size       Avg Latency(us)', 2
    else:
        header, ncols = '# Size      Bandwidth (MB/s)', 2
    row = '  '.join(['1'] + ['1.0'] * (ncols - 1))
    out = parse_osu(f'# {info.title} v7.4\n{header}\n{row}\n', expect_benchmark=name)
    assert out.benchmark == name
