"""Tests of hpcnet.parsers.imb on real IMB outputs and on damaged copies of them.

Real outputs: IMB 2021.7 with Open MPI 4.1.4 / MPICH 4.0.2 in tests/data/samples (see its
README), IMB 2021.11 from Intel MPI 2021.19 in tests/data/imb (see its README).
"""
from __future__ import annotations

import functools
import pickle
from dataclasses import replace
from pathlib import Path

import pytest

from helpers import parse_error
from hpcnet.parsers.errors import BenchmarkOutputError
from hpcnet.parsers.imb import IMB_COLUMNS, ImbOutput, parse_imb
from hpcnet.parsers.imb_command import IMB_MPI1_BENCHMARKS, IMB_NBC_BENCHMARKS, imb_command

SAMPLES = Path(__file__).resolve().parent / 'data' / 'samples'
DATA = Path(__file__).resolve().parent / 'data' / 'imb'

SAMPLE_NAMES = [
    f'IMB-MPI1_{bench}.{mpi}.txt'
    for bench in ('PingPong', 'PingPing', 'Allreduce', 'PingPong_PingPing_Allreduce')
    for mpi in ('openmpi-4.1.4', 'mpich-4.0.2')
]
RECORDED = sorted(p.name for p in DATA.glob('*.txt'))


def sample(name: str) -> Path:
    path = SAMPLES / name
    if not path.is_file():
        pytest.fail(f'real IMB sample missing from the repository: {path}')
    return path


def parse_file(path: Path, **kw) -> ImbOutput:
    return parse_imb(path.read_text(), source=str(path), **kw)


def parse_sample(name: str) -> ImbOutput:
    return parse_file(sample(name))


def parse_recorded(name: str) -> ImbOutput:
    return parse_file(DATA / name)


#: The error the parser raises on a damaged output (helpers.parse_error).
expect_error = functools.partial(parse_error, parse_imb)


def line_of(text: str, fragment: str) -> int:
    """1-based number of the first line containing ``fragment``."""
    for number, line in enumerate(text.splitlines(), start=1):
        if fragment in line:
            return number
    raise AssertionError(f'{fragment!r} not in text')


# ------------------------------------------------------------------ real samples (2021.7)

@pytest.mark.parametrize('name', SAMPLE_NAMES)
def test_every_sample_parses_completely(name):
    out = parse_sample(name)
    assert out.version == '2021.7'
    assert out.part == 'MPI-1'
    assert out.complete is True
    assert out.header['Machine'] == 'x86_64'
    assert out.mpi_version == ('3.1' if 'openmpi' in name else '4.0')
    assert out.min_message_bytes == 0 and out.max_message_bytes == 4194304
    assert out.calling_sequence.startswith('/opt/imb/bin/IMB-MPI1 ')
    assert out.benchmarks_listed == out.benchmarks
    assert out.foreign_lines == () and out.skipped == () and out.invalid_names == ()
    for table in out.tables:
        assert table.processes == 2 and table.mode is None and table.groups == 1
        assert table.sizes[-1] == 4194304
        assert list(table.sizes) == sorted(set(table.sizes))
        for row in table.rows:
            assert set(row) == set(table.columns)
            assert isinstance(row['size_bytes'], int) and isinstance(row['repetitions'], int)


def test_samples_directory_has_no_unknown_imb_file():
    if not SAMPLES.is_dir():
        pytest.fail(f'real samples missing from the repository: {SAMPLES}')
    found = sorted(p.name for p in SAMPLES.glob('IMB*'))
    assert found == sorted(SAMPLE_NAMES)


def test_pingpong_openmpi_values():
    out = parse_sample('IMB-MPI1_PingPong.openmpi-4.1.4.txt')
    assert out.header['Date'] == 'Sat Nov 21 04:16:40 2026'
    table = out.table('PingPong')
    assert table.columns == ('size_bytes', 'repetitions', 't_usec', 'mbytes_per_sec')
    assert len(table.rows) == 24
    assert table.row_for_size(1024) == {'size_bytes': 1024, 'repetitions': 1000, 't_usec': 0.19,
                                        'mbytes_per_sec': 5276.60}
    assert table.row_for_size(4194304) == {'size_bytes': 4194304, 'repetitions': 10,
                                           't_usec': 1243.89, 'mbytes_per_sec': 3371.92}
    assert table.column('repetitions')[-5:] == (160, 80, 40, 20, 10)


def test_pingpong_mpich_values():
    table = parse_sample('IMB-MPI1_PingPong.mpich-4.0.2.txt').table('pingpong')
    assert table.row_for_size(65536) == {'size_bytes': 65536, 'repetitions': 640, 't_usec': 16.49,
                                         'mbytes_per_sec': 3974.26}


def test_pingping_values():
    table = parse_sample('IMB-MPI1_PingPing.openmpi-4.1.4.txt').table('PingPing', processes=2)
    assert table.row_for_size(2097152)['mbytes_per_sec'] == 13558.42
    assert table.row_for_size(0)['mbytes_per_sec'] == 0.0


def test_allreduce_values():
    out = parse_sample('IMB-MPI1_Allreduce.mpich-4.0.2.txt')
    table = out.table('Allreduce')
    assert table.columns == ('size_bytes', 'repetitions', 't_min_usec', 't_max_usec', 't_avg_usec')
    assert table.sizes[:4] == (0, 4, 8, 16)          # reductions of MPI_FLOAT: no 1, 2 bytes
    assert len(table.rows) == 22
    assert table.row_for_size(4194304) == {'size_bytes': 4194304, 'repetitions': 10,
                                           't_min_usec': 2188.76, 't_max_usec': 2188.89,
                                           't_avg_usec': 2188.83}
    om = parse_sample('IMB-MPI1_Allreduce.openmpi-4.1.4.txt').table('Allreduce')
    assert om.row_for_size(8192)['t_avg_usec'] == 11.19


@pytest.mark.parametrize('mpi', ['openmpi-4.1.4', 'mpich-4.0.2'])
def test_combined_file_has_three_tables(mpi):
    out = parse_sample(f'IMB-MPI1_PingPong_PingPing_Allreduce.{mpi}.txt')
    assert [t.benchmark for t in out.tables] == ['PingPong', 'PingPing', 'Allreduce']
    assert out.benchmarks_listed == ('PingPong', 'PingPing', 'Allreduce')
    assert [len(t.rows) for t in out.tables] == [24, 24, 22]
    assert out.table('PingPong').columns == out.table('PingPing').columns
    assert 't_avg_usec' in out.table('Allreduce').columns


def test_combined_file_values():
    out = parse_sample('IMB-MPI1_PingPong_PingPing_Allreduce.openmpi-4.1.4.txt')
    assert out.table('PingPong').row_for_size(256)['t_usec'] == 4.45
    assert out.table('PingPing').row_for_size(1048576)['mbytes_per_sec'] == 11878.80
    assert out.table('Allreduce').row_for_size(32) == {
        'size_bytes': 32, 'repetitions': 1000, 't_min_usec': 0.52, 't_max_usec': 8.54,
        't_avg_usec': 4.53}
    mp = parse_sample('IMB-MPI1_PingPong_PingPing_Allreduce.mpich-4.0.2.txt')
    assert mp.table('Allreduce').row_for_size(524288)['t_max_usec'] == 1635.83
    assert mp.table('PingPong').row_for_size(4)['mbytes_per_sec'] == 7.24


def test_table_lookup_errors_list_what_is_present():
    out = parse_sample('IMB-MPI1_PingPong_PingPing_Allreduce.openmpi-4.1.4.txt')
    with pytest.raises(BenchmarkOutputError, match=r'no IMB table for Bcast; tables present: '
                       r'PingPong \(#processes = 2\); PingPing .*Allreduce'):
        out.table('Bcast')
    with pytest.raises(BenchmarkOutputError, match='processes=4'):
        out.table('PingPong', processes=4)


def test_row_for_size_error_names_size_and_sizes_present():
    table = parse_sample('IMB-MPI1_Allreduce.openmpi-4.1.4.txt').table('Allreduce')
    with pytest.raises(BenchmarkOutputError) as info:
        table.row_for_size(1)
    message = str(info.value)
    assert 'IMB table Allreduce (#processes = 2) has no row for size 1' in message
    assert 'sizes present: 0, 4, 8, 16,' in message
    assert message.endswith('4194304')
    with pytest.raises(BenchmarkOutputError, match="no column 't_usec'"):
        table.column('t_usec')


def test_require_finite_positive_names_column_size_and_value():
    path = sample('IMB-MPI1_PingPong.openmpi-4.1.4.txt')
    table = parse_file(path).table('PingPong')
    table.require_finite_positive(('repetitions', 't_usec', 'mbytes_per_sec'),
                                  zero_ok_at_size0=('mbytes_per_sec',))
    # 0 bytes in any time is 0.00 MB/s: only an error where that is not allowed.
    with pytest.raises(BenchmarkOutputError) as info:
        table.require_finite_positive(('t_usec', 'mbytes_per_sec'))
    err = info.value
    assert err.line == line_of(path.read_text(), '# Benchmarking PingPong')
    assert err.reason == ('IMB table PingPong (#processes = 2): mbytes_per_sec at 0 B is 0.0 '
                          '(must be > 0)')
    table.require_finite_positive(('mbytes_per_sec',), nonnegative=('mbytes_per_sec',))
    with pytest.raises(BenchmarkOutputError, match="PingPong: t_usec at 0 B is -1.0 "
                                                   r"\(must be >= 0\)"):
        damaged_row = dict(table.rows[0], t_usec=-1.0)
        replace(table, rows=(damaged_row,) + table.rows[1:]).require_finite_positive(
            ('t_usec',), zero_ok_at_size0=('t_usec',), what='PingPong')
    with pytest.raises(BenchmarkOutputError, match="has no column 't_max_usec'"):
        table.require_finite_positive(('t_max_usec',))


def test_require_finite_positive_without_sizes_names_the_row():
    barrier = parse_recorded('IMB-MPI1_collectives.impi-2021.19.txt').table('Barrier')
    barrier.require_finite_positive(('repetitions', 't_avg_usec'))
    zero = replace(barrier, rows=(dict(barrier.rows[0], t_avg_usec=0.0),))
    with pytest.raises(BenchmarkOutputError, match=r't_avg_usec at the only row is 0.0 '
                                                   r'\(must be > 0\)'):
        zero.require_finite_positive(('t_avg_usec',), zero_ok_at_size0=('t_avg_usec',))


def test_rows_are_copies():
    table = parse_sample('IMB-MPI1_PingPong.openmpi-4.1.4.txt').table('PingPong')
    row = table.row_for_size(8)
    row['t_usec'] = -1
    assert table.row_for_size(8)['t_usec'] == 0.10


# ------------------------------------------------------- recorded outputs (IMB 2021.11)

@pytest.mark.parametrize('name', RECORDED)
def test_every_recorded_output_parses_completely(name):
    out = parse_recorded(name)
    assert out.version == '2021.11'
    assert out.complete and out.mpi_version == '4.1'
    assert out.tables
    for table in out.tables:
        assert table.rows
        for row in table.rows:
            assert tuple(row) == table.columns


def test_recorded_readme_names_every_file():
    readme = (DATA / 'README.md').read_text()
    for name in RECORDED:
        assert f'`{name}`' in readme, name


def test_recorded_pingpong():
    out = parse_recorded('IMB-MPI1_PingPong.impi-2021.19.txt')
    assert out.calling_sequence == 'IMB-MPI1 PingPong -msglog 0:10'
    assert out.max_message_bytes == 1024
    assert out.table('PingPong').row_for_size(1024) == {
        'size_bytes': 1024, 'repetitions': 1000, 't_usec': 0.25, 'mbytes_per_sec': 4076.23}


def test_sendrecv_exchange_have_times_and_bandwidth():
    out = parse_recorded('IMB-MPI1_Sendrecv_Exchange.impi-2021.19.txt')
    cols = ('size_bytes', 'repetitions', 't_min_usec', 't_max_usec', 't_avg_usec', 'mbytes_per_sec')
    assert out.table('Sendrecv').columns == cols and out.table('Exchange').columns == cols
    assert out.table('Sendrecv').row_for_size(512)['mbytes_per_sec'] == 4216.59
    assert out.table('Exchange').row_for_size(256)['t_avg_usec'] == 0.48


def test_uniband_biband_message_rate():
    out = parse_recorded('IMB-MPI1_Uniband_Biband.impi-2021.19.txt')
    uni = out.table('Uniband')
    assert uni.columns == ('size_bytes', 'repetitions', 'mbytes_per_sec', 'msg_per_sec')
    assert uni.row_for_size(1024) == {'size_bytes': 1024, 'repetitions': 1000,
                                      'mbytes_per_sec': 6989.14, 'msg_per_sec': 6825333.0}
    assert out.table('Biband').row_for_size(0)['msg_per_sec'] == 11636609


def test_collectives_and_barrier_without_bytes():
    out = parse_recorded('IMB-MPI1_collectives.impi-2021.19.txt')
    assert out.benchmarks == ('Bcast', 'Reduce', 'Reduce_scatter', 'Allgather', 'Gather',
                              'Alltoall', 'Barrier')
    assert out.table('Reduce_scatter').row_for_size(1024)['t_max_usec'] == 0.75
    assert out.table('Reduce').sizes[:3] == (0, 4, 8)
    assert out.table('Bcast').sizes[:3] == (0, 1, 2)
    barrier = out.table('Barrier')
    assert barrier.columns == ('repetitions', 't_min_usec', 't_max_usec', 't_avg_usec')
    assert barrier.rows == ({'repetitions': 1000, 't_min_usec': 0.16, 't_max_usec': 0.16,
                             't_avg_usec': 0.16},)
    assert barrier.sizes == ()
    with pytest.raises(BenchmarkOutputError, match=r'no size_bytes column \(#bytes in the output\)'):
        barrier.row_for_size(0)


def test_nbc_columns():
    out = parse_recorded('IMB-NBC_Iallreduce_Ibcast_Ibarrier.impi-2021.19.txt')
    assert out.part == 'MPI-NBC'
    table = out.table('Iallreduce')
    assert table.columns == ('size_bytes', 'repetitions', 't_ovrl_usec', 't_pure_usec',
                             't_cpu_usec', 'overlap_percent')
    assert table.row_for_size(8) == {'size_bytes': 8, 'repetitions': 1000, 't_ovrl_usec': 1.91,
                                     't_pure_usec': 1.22, 't_cpu_usec': 0.97,
                                     'overlap_percent': 23.09}
    assert out.table('Ibarrier').rows[0]['t_ovrl_usec'] == 1.69
    pure = parse_recorded('IMB-NBC_Iallreduce_pure_Ialltoall.impi-2021.19.txt')
    assert pure.table('Iallreduce_pure').columns[2:] == ('t_min_usec', 't_max_usec',
                                                          't_avg_usec')
    assert 'overlap_percent' in pure.table('Ialltoall').columns


def test_rma_modes():
    out = parse_recorded('IMB-RMA_Unidir_put_Accumulate_Truly_passive_put.impi-2021.19.txt')
    assert out.part == 'MPI-RMA'
    assert [(t.benchmark, t.mode) for t in out.tables] == [
        ('Unidir_put', 'NON-AGGREGATE'), ('Unidir_put', 'AGGREGATE'),
        ('Accumulate', 'NON-AGGREGATE'), ('Accumulate', 'AGGREGATE'),
        ('Truly_passive_put', None)]
    # the list of benchmarks is followed by indented description lines: not benchmarks
    assert out.benchmarks_listed == ('Unidir_put', 'Accumulate', 'Truly_passive_put')
    with pytest.raises(BenchmarkOutputError, match='2 IMB tables match Unidir_put'):
        out.table('Unidir_put')
    agg = out.table('Unidir_put', mode='aggregate')
    assert agg.row_for_size(64) == {'size_bytes': 64, 'repetitions': 1000, 't_usec': 0.19,
                                    'mbytes_per_sec': 341.23}
    assert out.table('Unidir_put', mode='NON-AGGREGATE').rows[0]['repetitions'] == 100
    tpp = out.table('Truly_passive_put')
    assert tpp.columns == ('size_bytes', 'repetitions', 't_pure_usec', 't_ovrl_usec')
    assert tpp.row_for_size(64)['t_ovrl_usec'] == 0.70


def test_p2p_layout():
    out = parse_recorded('IMB-P2P_PingPong_PingPing.impi-2021.19.txt')
    assert out.part == 'IMB-P2P'
    assert out.calling_sequence == 'IMB-P2P PingPong PingPing -msglog 0:10'
    assert out.benchmarks_listed == ('PingPong', 'PingPing')
    assert out.min_message_bytes == 1
    table = out.table('PingPong')
    assert table.sizes[0] == 1
    assert table.row_for_size(1) == {'size_bytes': 1, 'repetitions': 100000, 't_usec': 0.41,
                                     'mbytes_per_sec': 2.42, 'msg_per_sec': 2415108.0}


def test_p2p_invalid_benchmark_is_reported_as_skipped():
    out = parse_recorded(
        'IMB-P2P_Unirandom_Birandom_Corandom_Stencil2D_SendRecv_Replace.impi-2021.19.txt')
    assert out.skipped == (('Stencil2D', 2),)
    assert out.benchmarks == ('Unirandom', 'Birandom', 'Corandom', 'SendRecv_Replace')
    with pytest.raises(BenchmarkOutputError, match='IMB declared Stencil2D invalid for 2'):
        out.table('Stencil2D')


def test_i_mpi_debug_lines_are_ignored():
    path = DATA / 'IMB-MPI1_PingPong_Allreduce.I_MPI_DEBUG-5.impi-2021.19.txt'
    text = path.read_text()
    assert text.startswith('[0] MPI startup(): Intel(R) MPI Library, Version 2021.19.0')
    out = parse_imb(text)
    assert out.foreign_lines == ()
    assert out.table('PingPong').row_for_size(16)['mbytes_per_sec'] == 105.34
    assert out.table('Allreduce').row_for_size(16)['t_avg_usec'] == 0.22


def test_npmin_gives_several_process_counts():
    out = parse_recorded('IMB-MPI1_Allreduce_Alltoall_npmin1.impi-2021.19.txt')
    assert [(t.benchmark, t.processes, t.waiting) for t in out.tables] == [
        ('Allreduce', 1, 1), ('Allreduce', 2, 0), ('Alltoall', 1, 1), ('Alltoall', 2, 0)]
    with pytest.raises(BenchmarkOutputError, match='narrow with processes='):
        out.table('Allreduce')
    assert out.table('Alltoall', processes=1).row_for_size(64)['t_avg_usec'] == 0.05


def test_multi_1_group_column():
    out = parse_recorded('IMB-MPI1_PingPong_Allreduce_multi1_npmin1.impi-2021.19.txt')
    assert [(t.benchmark, t.processes, t.groups) for t in out.tables] == [
        ('PingPong', 2, 1), ('Allreduce', 1, 2), ('Allreduce', 2, 1)]
    multi = out.table('Allreduce', processes=1)
    assert multi.columns[0] == 'group'
    assert len(multi.rows) == 8 and multi.sizes == (0, 4, 8, 16)
    with pytest.raises(BenchmarkOutputError, match=r'2 rows for size 16; narrow it down with more columns, '
                       r'e.g. group= \(values 0, 1\)'):
        multi.row_for_size(16)
    assert multi.row_for_size(16, group=1) == {'group': 1, 'size_bytes': 16, 'repetitions': 1000,
                                               't_min_usec': 0.03, 't_max_usec': 0.03,
                                               't_avg_usec': 0.03}
    assert out.table('Allreduce', groups=1).row_for_size(4)['t_avg_usec'] == 0.21


def test_multi_0_without_group_column():
    out = parse_recorded('IMB-MPI1_Allreduce_multi0_npmin1.impi-2021.19.txt')
    multi = out.table('Allreduce', processes=1)
    assert multi.groups == 2 and 'group' not in multi.columns and len(multi.rows) == 4


def test_invalid_name_is_recorded_and_imb_ran_everything():
    out = parse_recorded('IMB-MPI1_invalid-name-Foo.impi-2021.19.txt')
    assert out.invalid_names == ('foo',)
    assert len(out.tables) == 19
    assert out.benchmarks_listed == out.benchmarks
    assert set(out.benchmarks) <= set(IMB_MPI1_BENCHMARKS)


# ------------------------------------------------------------------- error cases

def pingpong_text() -> str:
    return (DATA / 'IMB-MPI1_PingPong.impi-2021.19.txt').read_text()


def combined_text() -> str:
    return (DATA / 'IMB-MPI1_PingPong_Allreduce.I_MPI_DEBUG-5.impi-2021.19.txt').read_text()


def test_truncated_output_without_finalize():
    text = pingpong_text()
    cut = text[:text.index('          512 ')]
    err = expect_error(cut, 'no "# All processes entering MPI_Finalize" line', 'truncated',
                       'last table PingPong', 'ends at its size 256')
    assert err.line == len(cut.splitlines())
    out = parse_imb(cut, allow_incomplete=True)
    assert out.complete is False and out.table('PingPong').sizes[-1] == 256


def test_row_cut_in_the_middle():
    text = pingpong_text()
    cut = text[:text.index('   2519.73')]            # '          512         1000         0.20'
    n = len(cut.splitlines())
    expect_error(cut, 'PingPong row has 3 fields, expected 4', 'bytes repetitions t_usec '
                 'mbytes_per_sec', line=n)
    # accepted as incomplete: the unterminated last line is dropped
    out = parse_imb(cut, allow_incomplete=True)
    assert out.complete is False and out.table('PingPong').sizes[-1] == 256
    # the same cut with all fields present but no newline: only the final line is missing
    cut2 = text[:text.index('   2519.73') + len('   2519.7')]
    expect_error(cut2, 'no "# All processes entering MPI_Finalize"')
    assert parse_imb(cut2, allow_incomplete=True).table('PingPong').sizes[-1] == 256


def test_truncated_inside_a_section_before_its_table():
    text = combined_text()
    cut = text[:text.index('# #processes = 2 \n#----------------------------------------------'
                           '------------------\n       #bytes #repetitions  t_min')]
    expect_error(cut, 'output ends inside the Allreduce section', 'truncated')


def test_section_without_table():
    text = combined_text()
    start = text.index('       #bytes #repetitions      t[usec]')
    end = text.index('#----', start)
    damaged = text[:start] + text[end:]
    expect_error(damaged, 'the PingPong section', 'ended before its table',
                 line=line_of(damaged, 'Benchmarking Allreduce'))


def test_table_without_rows():
    text = combined_text()
    start = text.index('            0         1000         0.15')
    end = text.index('#----', start)
    damaged = text[:start] + text[end:]
    expect_error(damaged, 'the PingPong table', 'has no rows')


def test_unexpected_column_is_named_with_the_valid_ones():
    damaged = pingpong_text().replace('t[usec]', 't_med[usec]')
    err = expect_error(damaged, "unexpected IMB column 't_med[usec]'", 'PingPong',
                       'known columns: #bytes, #repetitions, Group, t[usec], Mbytes/sec',
                       line=line_of(damaged, 't_med[usec]'))
    assert all(c in str(err) for c in IMB_COLUMNS)


def test_non_numeric_value():
    damaged = pingpong_text().replace('1587.31', '1587.3x')
    expect_error(damaged, "mbytes_per_sec is '1587.3x', expected a number",
                 line=line_of(damaged, '1587.3x'))
    for bad in ('nan', 'inf', '1_590.42', '0x10'):
        expect_error(pingpong_text().replace('1587.31', bad), 'expected a number')


def test_non_integer_size():
    damaged = pingpong_text().replace('          256         1000', '        256.0         1000')
    expect_error(damaged, "bytes is '256.0', expected an integer",
                 line=line_of(damaged, '256.0'))


def test_wrong_field_count():
    text = pingpong_text()
    damaged = text.replace('          128         1000         0.15       826.31',
                           '          128         1000         0.15       826.31     7.0')
    expect_error(damaged, 'row has 5 fields, expected 4', line=line_of(damaged, '826.31'))


def test_sizes_must_increase():
    text = pingpong_text()
    damaged = text.replace('           64         1000', '            8         1000')
    expect_error(damaged, '#bytes 8 after 32: sizes must increase')


def test_foreign_line_inside_a_table_is_an_error_but_library_lines_are_not():
    text = pingpong_text()
    anchor = '          128         1000'
    damaged = text.replace(anchor, 'WARNING: something from UCX\n' + anchor)
    expect_error(damaged, "bytes is 'WARNING:'", 'foreign line inside the table',
                 line=line_of(damaged, 'WARNING'))
    tolerated = text.replace(anchor, '[1] MPI startup(): late message\n' + anchor)
    assert parse_imb(tolerated).table('PingPong').rows == parse_imb(text).table('PingPong').rows


def test_foreign_lines_outside_tables_are_kept_not_parsed():
    text = 'srun: job 42 queued\n' + pingpong_text() + 'mpirun: exiting\n'
    out = parse_imb(text)
    assert out.foreign_lines == ((1, 'srun: job 42 queued'),
                                 (len(text.splitlines()), 'mpirun: exiting'))
    assert len(out.table('PingPong').rows) == 12


def test_table_data_outside_a_section():
    text = pingpong_text()
    damaged = text.replace('# Benchmarking PingPong', '# (lost)')
    expect_error(damaged, 'table data outside a benchmark section',
                 line=line_of(damaged, '#bytes #repetitions'))


def test_missing_process_count():
    damaged = pingpong_text().replace('# #processes = 2', '#')
    expect_error(damaged, 'no "#processes = N"')


def test_not_an_imb_output():
    expect_error('# OSU MPI Latency Test v7.4\n# Size   Avg Latency(us)\n', 'not an IMB output')
    expect_error('', 'not an IMB output')


def test_two_runs_concatenated():
    expect_error(pingpong_text() + pingpong_text(), 'a second IMB header', 'concatenated')


def test_section_after_finalize():
    text = pingpong_text()
    head = text[:text.index('#---------------------------------------------------\n# Benchmarking')]
    section = text[len(head):text.index('\n\n# All processes')]
    expect_error(text + section, 'benchmark section after "# All processes entering '
                 'MPI_Finalize"')


def test_error_is_a_value_error_and_picklable():
    try:
        parse_imb('', source='x.txt')
    except BenchmarkOutputError as err:
        assert isinstance(err, ValueError)
        again = pickle.loads(pickle.dumps(err))
        assert str(again) == str(err) and again.source == 'x.txt' and again.line is None


def test_crlf_line_endings():
    text = pingpong_text().replace('\n', '\r\n')
    assert parse_imb(text).table('PingPong').row_for_size(1024)['t_usec'] == 0.25


# ------------------------------------------------------------------- imb_command

def test_imb_command_basic():
    assert imb_command(['PingPong', 'Allreduce'], msglog=(0, 10)) == [
        'IMB-MPI1', 'PingPong', 'Allreduce', '-msglog', '0:10']
    assert imb_command('pingpong', msglog='2:4', iter_policy='off') == [
        'IMB-MPI1', 'PingPong', '-msglog', '2:4', '-iter_policy', 'off']
    assert imb_command(['Barrier'], msglog=3) == ['IMB-MPI1', 'Barrier', '-msglog', '3']
    # IMB 2021 windows 256 messages unless told: the checks say 64.
    assert imb_command(['Uniband'], window_size=64) == ['IMB-MPI1', 'Uniband', '-window_size', '64']


def test_imb_command_all_options():
    assert imb_command(['Allreduce'], msglog=(0, 4), iter_policy='dynamic', npmin=2,
                       iterations=(1000, 40), time_limit=1.5, mem_gb=0.5, multi=0, sync=False,
                       executable='/opt/imb/bin/IMB-MPI1', extra=['-zero_size', 'off']) == [
        '/opt/imb/bin/IMB-MPI1', 'Allreduce', '-msglog', '0:4', '-iter', '1000,40',
        '-iter_policy', 'dynamic', '-npmin', '2', '-time', '1.5', '-mem', '0.5', '-multi', '0',
        '-sync', 'off', '-zero_size', 'off']


def test_imb_command_infers_the_suite():
    assert imb_command(['Iallreduce', 'ibcast'])[:3] == ['IMB-NBC', 'Iallreduce', 'Ibcast']
    assert imb_command(['Unidir_put'])[0] == 'IMB-RMA'
    assert imb_command(['Stencil2D'], msglog=(0, 4)) == ['IMB-P2P', 'Stencil2D', '-msglog', '0:4']
    assert imb_command(['PingPong'], suite='IMB-P2P')[0] == 'IMB-P2P'


def test_imb_command_unknown_benchmark_lists_the_valid_ones():
    with pytest.raises(ValueError) as info:
        imb_command(['PingPong', 'Foo'])
    message = str(info.value)
    assert "'Foo'" in message
    assert all(b in message for b in IMB_MPI1_BENCHMARKS + IMB_NBC_BENCHMARKS)
    with pytest.raises(ValueError, match=r"unknown IMB-NBC benchmark name\(s\) 'PingPong' "
                       r"\(PingPong belong\(s\) to IMB-MPI1\); valid IMB-NBC names: Iallgather"):
        imb_command(['PingPong'], suite='IMB-NBC')


@pytest.mark.parametrize('kwargs, fragment', [
    (dict(benchmarks=[]), 'no benchmark given'),
    (dict(benchmarks=['PingPong', 'Iallreduce']), 'not all in one IMB suite'),
    (dict(benchmarks=['PingPong'], suite='IMB-FOO'), 'unknown IMB suite'),
    (dict(benchmarks=['PingPong'], iter_policy='sometimes'), 'dynamic, multiple_np, auto, off'),
    (dict(benchmarks=['PingPong'], msglog=(10, 5)), '0 <= min < max <= 30'),
    (dict(benchmarks=['PingPong'], msglog=(4, 4)), '0 <= min < max <= 30'),
    (dict(benchmarks=['PingPong'], msglog=31), 'int in 0..30'),
    (dict(benchmarks=['PingPong'], msglog='a:b'), 'is not "max" or "min:max"'),
    (dict(benchmarks=['PingPong'], npmin=0), 'npmin'),
    (dict(benchmarks=['Biband'], window_size=0), 'window_size must be an int >= 1, not 0'),
    (dict(benchmarks=['Stencil2D'], window_size=64), 'IMB-P2P does not take window_size'),
    (dict(benchmarks=['PingPong'], multi=2), 'multi must be 0 or 1'),
    (dict(benchmarks=['PingPong'], time_limit=0), '-time must be a positive number'),
    (dict(benchmarks=['PingPong'], iterations=(1, 2, 3, 4)), 'iterations'),
    (dict(benchmarks=['Stencil2D'], iter_policy='off'), 'IMB-P2P does not take iter_policy'),
    (dict(benchmarks=[' PingPong']), 'invalid benchmark name'),
])
def test_imb_command_rejects(kwargs, fragment):
    with pytest.raises(ValueError, match=None) as info:
        imb_command(**kwargs)
    assert fragment in str(info.value)


def test_imb_command_output_round_trips_through_the_recorded_calling_sequence():
    # the recorded runs were made with exactly these argument lists
    for name, args in [
        ('IMB-MPI1_Sendrecv_Exchange.impi-2021.19.txt',
         imb_command(['Sendrecv', 'Exchange'], msglog=(0, 10))),
        ('IMB-NBC_Iallreduce_Ibcast_Ibarrier.impi-2021.19.txt',
         imb_command(['Iallreduce', 'Ibcast', 'Ibarrier'], msglog=(0, 10))),
        ('IMB-MPI1_Allreduce_multi0_npmin1.impi-2021.19.txt',
         imb_command(['Allreduce'], multi=0, npmin=1, msglog=(0, 4))),
    ]:
        recorded = parse_recorded(name).calling_sequence.split()
        assert sorted(recorded) == sorted(args), (name, recorded, args)
