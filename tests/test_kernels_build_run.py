"""Build the MPI kernels in src/ with every MPI found on this machine, run them
with 2 ranks on small sizes, and parse their output.

Needs the Debian MPI packages (`mpicc.openmpi`/`mpirun.openmpi`,
`mpicc.mpich`/`mpirun.mpich`); a missing stack is skipped with the name of the
missing program.  Everything runs on one node over shared memory / loopback,
2 ranks, small sizes: the whole file takes about 20-30 s.
"""

import math
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from hpcnet.parsers.kernel import KernelOutput, parse_kernel_output

SRC = Path(__file__).resolve().parent.parent / 'src'
KERNELS = ('p2p', 'collectives', 'pairs')

# name -> (compiler wrapper, launcher, variable choosing the wrapper's compiler,
#          how MPI_Get_library_version starts)
STACKS = {
    'openmpi': ('mpicc.openmpi', 'mpirun.openmpi', 'OMPI_CC', 'Open MPI'),
    'mpich': ('mpicc.mpich', 'mpirun.mpich', 'MPICH_CC', 'MPICH'),
}

RUN_TIMEOUT = 60
#: MPI profiling-interface wrappers that print each rank's last communication
#: call when it enters MPI_Finalize.
PMPI_LAST_CALL = Path(__file__).resolve().parent / 'pmpi' / 'last_call.c'
FINALIZE_AFTER = re.compile(r'^pmpi: rank (\d+) entered MPI_Finalize after (\S+)$', re.MULTILINE)
COMPILER_WARNING = re.compile(r'\bwarning:', re.IGNORECASE)
SMALL = ['--max-size', '4K', '--iters', '20', '--warmup', '5']
SMALL_SIZES = (0,) + tuple(2 ** k for k in range(13))      # 0, 1, 2, ..., 4096


def _env():
    env = dict(os.environ)
    # Open MPI refuses to run as root without these; harmless for MPICH
    env.update(OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1',
               # More ranks than this host's cores (pair rounds of 4 and 5 ranks).
               OMPI_MCA_rmaps_base_oversubscribe='1')
    return env


def _require(stack):
    wrapper, launcher, _, _ = STACKS[stack]
    for program in (wrapper, launcher):
        if shutil.which(program) is None:
            pytest.skip(f'{program} not found on PATH ({stack} not installed)')


def _make(stack, bindir, extra_env=None, make_vars=()):
    wrapper = STACKS[stack][0]
    env = _env()
    env.update(extra_env or {})
    return subprocess.run(['make', '-j3', '-C', str(SRC), f'MPICC={wrapper}', f'BINDIR={bindir}', *make_vars],
                          env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope='module', params=sorted(STACKS))
def built(request, tmp_path_factory):
    """(stack, bindir) with the three kernels built by the Makefile."""
    stack = request.param
    _require(stack)
    bindir = tmp_path_factory.mktemp(f'bin-{stack}')
    proc = _make(stack, bindir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not COMPILER_WARNING.search(proc.stdout + proc.stderr), proc.stdout + proc.stderr
    for kernel in KERNELS:
        assert (bindir / kernel).is_file()
    return stack, bindir


def _run(built, kernel, *args, ranks=2):
    stack, bindir = built
    launcher = STACKS[stack][1]
    return subprocess.run([launcher, '-n', str(ranks), str(bindir / kernel), *args],
                          env=_env(), capture_output=True, text=True, timeout=RUN_TIMEOUT)


def _run_ok(built, kernel, *args) -> KernelOutput:
    proc = _run(built, kernel, *args)
    assert proc.returncode == 0, f'rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}'
    out = parse_kernel_output(proc.stdout, source=f'{built[0]} {kernel}', expect_kernel=kernel)
    stack = built[0]
    assert out.mpi_library.startswith(STACKS[stack][3]), out.mpi_library
    other = [s for s in STACKS if s != stack]
    assert not any(out.mpi_library.startswith(STACKS[o][3]) for o in other)
    assert '\n' not in out.mpi_library and '\t' not in out.mpi_library
    assert sorted(out.hosts) == [0, 1] and int(out.header['ranks']) == 2
    return out


def _assert_finite(out):
    for row in out.rows:
        for name, value in row.items():
            if isinstance(value, float):
                assert math.isfinite(value) and value >= 0, (name, row)


# ---------------------------------------------------------------------------

@pytest.mark.parametrize('mode', ['pingpong', 'pingping', 'bw', 'bibw'])
def test_p2p(built, mode):
    args = ['--mode', mode, '--validate', *SMALL]
    if mode in ('bw', 'bibw'):
        args += ['--window', '16']
    out = _run_ok(built, 'p2p', *args)
    assert out.header['mode'] == mode
    assert out.sizes == SMALL_SIZES
    assert out.validated == len(SMALL_SIZES)
    assert out.header['validate'] == 'on' and out.header['iters'] == '20'
    assert out.header_float('first-exchange-us') > 0
    assert out.header_float('second-exchange-us') > 0
    _assert_finite(out)
    assert out.columns[-2:] == ('batch', 'median_ci_pct')
    for row in out.rows:
        # --iters: 20 samples, each the mean of `batch` iterations
        assert row['iterations'] == 20
        assert row['batch'] >= 1 and row['batch'].is_integer()
        assert 0 < row['min_us'] <= row['median_us'] <= row['max_us']
        assert row['min_us'] <= row['p99_us'] <= row['max_us']
        assert row['min_us'] <= row['mean_us'] <= row['max_us']
        if row['size_bytes'] > 0:
            assert row['bw_MBps'] > 0 and row['bw_peak_MBps'] >= row['bw_MBps']
        else:
            assert row['bw_MBps'] == 0
    # payload per rank: per size, 5 warm-up iterations (one per sample) and
    # 20 samples of `batch` iterations (rank 0 chose the batch; rank 1 counts
    # its own traffic, so this also checks that both ranks ran the same
    # number of iterations); the first two exchanges use size 0
    iters = {int(r['size_bytes']): 5 + 20 * int(r['batch']) for r in out.rows}
    payload = sum(n * size for size, n in iters.items())
    expected = {'pingpong': (payload, payload), 'pingping': (payload, payload),
                'bw': (16 * payload, 4 * sum(iters.values())),
                'bibw': (16 * payload, 16 * payload)}[mode]
    assert tuple(map(int, out.header['bytes-sent'].split())) == expected
    big = out.row_for_size(4096)
    factor = 2 if mode == 'bibw' else 1
    assert big['bw_MBps'] == pytest.approx(factor * 4096 / big['median_us'], rel=2e-3, abs=0.01)


#: The small pairs run of the second-pass tests and the payload each of its
#: pairs makes both its ranks send: (first + 5) x 8 B, (untimed + 2) x 4 KiB.
PAIRS_SMALL = ('--samples', '5', '--bw-samples', '2', '--bw-size', '4K')
PAIRS_SMALL_PAYLOAD = 6 * 8 + 3 * 4096


def _pairs_run(built, ranks, *args) -> KernelOutput:
    stack, _ = built
    proc = _run(built, 'pairs', *PAIRS_SMALL, *args, ranks=ranks)
    if proc.returncode != 0 and 'slots' in proc.stdout + proc.stderr:
        pytest.fail(f'{stack} could not start {ranks} ranks here: {proc.stdout}{proc.stderr}')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return parse_kernel_output(proc.stdout, expect_kernel='pairs')


def _agrees(flag, value, threshold, above: bool, tolerance: float) -> bool:
    """The kernel's flag against the printed threshold; a value within the
    printing's rounding of it may go either way."""
    return abs(value - threshold) <= tolerance or bool(flag) == (value > threshold if above
                                                                 else value < threshold)


def _assert_second_pass(out, lat_tol: float = 2e-4, bw_rel: float = 1e-5):
    """What the kernel retested follows its first pass: every outlier pair,
    one control per endpoint with a rank that is no outlier's endpoint, the
    flags of both passes against the printed thresholds (the second pass's
    value is a pair's better of its two measurements), and each rank's
    payload covering the first pass and the second's two."""
    lat_limit, bw_limit = out.header_float('lat-threshold-us'), out.header_float('bw-threshold-mbps')
    suspects, controls = set(), []
    for r in out.rows:
        pair = (int(r['rank_a']), int(r['rank_b']))
        outlier = r['lat_outlier'] or r['bw_outlier']
        assert (r['retest'] == 1) == bool(outlier), r
        if outlier:
            suspects.update(pair)
        if r['retest'] == 2:
            controls.append(pair)
        for first, second in (('lat_mean_us', 'lat_outlier'), ('lat_retest_us', 'lat_retest_outlier')):
            if r['retest'] or first == 'lat_mean_us':
                assert _agrees(r[second], r[first], lat_limit, True, lat_tol), (r, lat_limit)
        for first, second in (('bw_median_MBps', 'bw_outlier'), ('bw_retest_MBps', 'bw_retest_outlier')):
            if r['retest'] or first == 'bw_median_MBps':
                assert _agrees(r[second], r[first], bw_limit, False, bw_rel * bw_limit), (r, bw_limit)
        retested = (r['lat_retest_us'], r['bw_retest_MBps'])
        assert all(v > 0 for v in retested) if r['retest'] else retested == (0, 0), r
        if not r['retest']:
            assert r['lat_retest_outlier'] == r['bw_retest_outlier'] == 0, r
    ranks = len(out.hosts)
    controlled = [a if a in suspects else b for a, b in controls]
    assert all(len(set(pair) & suspects) == 1 for pair in controls), (controls, suspects)
    assert len(controlled) == len(set(controlled))
    if len(suspects) < ranks:
        assert set(controlled) == suspects, (controls, suspects)
    retested = [r for r in out.rows if r['retest']]
    assert out.header_float('retested') == len(retested)
    assert (out.header_float('retest-rounds') > 0) == bool(retested)
    # The second pass measures each of its pairs twice.
    pairs_of = [ranks - 1 + 2 * sum(1 for r in retested if rank in (r['rank_a'], r['rank_b']))
                for rank in range(ranks)]
    assert out.header['bytes-sent'] == ' '.join(str(PAIRS_SMALL_PAYLOAD * n) for n in pairs_of)


@pytest.mark.parametrize('ranks,floor', [(4, 0.0), (5, 0.0), (4, 0.5)])
def test_pairs_mad_rule_is_scipys_and_outliers_are_measured_again(built, ranks, floor):
    """--outlier-rule mad: one-sided median +- max(k x MAD, floor x median),
    MAD scaled as scipy's median_abs_deviation(scale='normal'), of the
    printed mean latencies and median bandwidths; a small k and no floor make outliers of about half of the
    pairs, a floor of half the median widens the margin."""
    out = _pairs_run(built, ranks, '--outlier-rule', 'mad', '--mad-k', '0.5',
                     '--outlier-floor', str(floor))
    assert out.header['outlier-rule'] == 'mad' and out.header_float('mad-k') == 0.5
    assert out.header_float('outlier-floor') == floor

    def margin(values):
        return max(0.5 * stats.median_abs_deviation(values, scale='normal'), floor * np.median(values))
    lat = np.array(out.column('lat_mean_us'))
    bw = np.array(out.column('bw_median_MBps'))
    assert out.header_float('lat-threshold-us') == pytest.approx(np.median(lat) + margin(lat), abs=2e-4)
    assert out.header_float('bw-threshold-mbps') == pytest.approx(np.median(bw) - margin(bw), rel=1e-4)
    if floor == 0:
        assert any(r['retest'] for r in out.rows)
    _assert_second_pass(out)


@pytest.mark.parametrize('bw_of_best', [None, 0.5])
def test_pairs_clusterkit_rule_is_its_ratios_to_the_best_pair(built, bw_of_best):
    given = ['--bw-of-best', str(bw_of_best)] if bw_of_best else []
    out = _pairs_run(built, 3, '--outlier-rule', 'clusterkit', '--one-pair-at-a-time', *given)
    assert 'mad-k' not in out.header
    assert out.header_float('bw-of-best') == (bw_of_best or 0.93)
    assert out.header_float('lat-threshold-us') == pytest.approx(
        2.1 * min(out.column('lat_mean_us')), abs=3e-4)
    assert out.header_float('bw-threshold-mbps') == pytest.approx(
        (bw_of_best or 0.93) * max(out.column('bw_median_MBps')), rel=1e-4)
    _assert_second_pass(out)


#: MPI calls of src/ that do not communicate (the wrappers need not see them).
NOT_COMMUNICATION = {'MPI_Init', 'MPI_Finalize', 'MPI_Abort', 'MPI_Wtime', 'MPI_Comm_rank',
                     'MPI_Comm_size', 'MPI_Get_count', 'MPI_Get_library_version',
                     'MPI_Get_processor_name'}


@pytest.fixture(scope='module')
def built_with_last_call(built, tmp_path_factory):
    """(stack, bindir): the kernels linked with tests/pmpi/last_call.c."""
    stack = built[0]
    tmp = tmp_path_factory.mktemp(f'pmpi-{stack}')
    wrapper_obj = tmp / 'last_call.o'
    compiled = subprocess.run([STACKS[stack][0], '-std=c11', '-O2', '-c', '-o', str(wrapper_obj),
                               str(PMPI_LAST_CALL)], env=_env(), capture_output=True, text=True,
                              timeout=120)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    made = _make(stack, tmp / 'bin', make_vars=[f'LDLIBS=-lm {wrapper_obj}'])
    assert made.returncode == 0, made.stdout + made.stderr
    return stack, tmp / 'bin'


def test_last_call_wrappers_cover_every_communication_call_of_src():
    used = {m for path in SRC.glob('*.[ch]')
            for m in re.findall(r'\b(MPI_[A-Z][a-z_]*)\(', path.read_text())}
    wrapped = set(re.findall(r'^int (MPI_\w+)\(', PMPI_LAST_CALL.read_text(), re.MULTILINE))
    assert used - NOT_COMMUNICATION <= wrapped, sorted(used - NOT_COMMUNICATION - wrapped)


@pytest.mark.parametrize('kernel, args', [
    ('p2p', ['--mode', 'pingping', *SMALL]),
    ('collectives', SMALL),
    ('pairs', ['--samples', '20', '--bw-samples', '5', '--bw-size', '64K']),
])
def test_every_rank_enters_finalize_from_a_barrier(built_with_last_call, kernel, args):
    """hk_finalize: MPICH 4.0.2 over UCX hangs in MPI_Finalize when one rank
    finishes its endpoint flushes before its peer starts them (src/hpcnet_kernel.h);
    every kernel's last communication call before MPI_Finalize is a barrier, on
    every rank (read through the MPI profiling interface)."""
    proc = _run(built_with_last_call, kernel, *args)
    assert proc.returncode == 0, f'rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}'
    assert dict(FINALIZE_AFTER.findall(proc.stderr)) == {'0': 'MPI_Barrier', '1': 'MPI_Barrier'}, \
        proc.stderr


@pytest.mark.parametrize('slots', [1, 4])
def test_p2p_streaming_into_fewer_receive_buffers(built, slots):
    '''--recv-slots: osu_bw's way (1: every receive of a window into one
    buffer), for comparisons; validation still checks the last message.'''
    out = _run_ok(built, 'p2p', '--mode', 'bw', '--validate', '--window', '16',
                  '--recv-slots', str(slots), *SMALL)
    assert out.header['recv-slots'] == str(slots) and out.validated == len(SMALL_SIZES)
    _assert_finite(out)


def _sampled_ms(row):
    """Wall time of a pingpong row's timed samples in ms (a sample is the mean
    of `batch` round trips / 2)."""
    return row['iterations'] * row['batch'] * 2 * row['mean_us'] * 1e-3


def test_p2p_adaptive_and_explicit_sizes(built):
    out = _run_ok(built, 'p2p', '--sizes', '3,1K,8', '--time-per-size', '2',
                  '--min-iters', '30', '--max-iters', '500')
    assert out.sizes == (3, 8, 1024)
    assert out.header['iters'] == 'adaptive' and out.header['precision-pct'] == '1'
    assert out.header['time-per-size-ms'] == '2'
    assert 'validation' not in out.header and out.header['validate'] == 'off'
    for row in out.rows:
        assert 30 <= row['iterations'] <= 500, row
        # stopped because the median was precise enough, or at --max-iters,
        # or when the 2 ms were spent (the samples' own time, at least half
        # of it: the rest is the decisions between chunks)
        assert (row['median_ci_pct'] <= 1 or row['iterations'] == 500
                or _sampled_ms(row) >= 1), row


@pytest.mark.parametrize('kernel, args', [
    ('p2p', ['--sizes', '0,8,4K']),
    ('collectives', ['--op', 'allreduce,barrier', '--sizes', '8,4K']),
])
def test_adaptive_stops_when_the_median_is_precise(built, kernel, args):
    '''With a time budget that cannot run out, only the precision (95 % CI of
    the median within +-2 %) or --max-iters ends the sampling, never before
    --min-iters and never before 200 samples (a median precise over a few ms
    is not yet repeatable); the first chunk is --min-iters and each further
    one doubles the count, so a run that stopped early took 320 samples.'''
    out = _run_ok(built, kernel, *args, '--precision', '2', '--time-per-size', '600000',
                  '--min-iters', '20', '--max-iters', '640')
    assert out.header['precision-pct'] == '2'
    assert out.columns[-1] == 'median_ci_pct'
    for row in out.rows:
        n = row['iterations']
        assert n == 640 or (row['median_ci_pct'] <= 2 and n == 320), row


def test_p2p_batch(built):
    '''--batch-us 0: one iteration per sample (the clock read around every
    round trip); the default (10 us) times a batch of the sub-microsecond
    shared-memory round trips per sample, the batch chosen from the median of
    the size's warm-up, timed one round trip at a time. A busy host can make
    one size's warm-up slow (it then measures one round trip a sample, as it
    should), so batching is asserted of the small sizes together.'''
    small = '0,1,2,4,8,16,32,64'
    single = _run_ok(built, 'p2p', '--batch-us', '0', '--sizes', small, '--iters', '30')
    assert single.header['batch-us'] == '0'
    assert all(r['batch'] == 1 for r in single.rows)
    assert all(r['iterations'] == 30 for r in single.rows)
    batched = _run_ok(built, 'p2p', '--sizes', small + ',4K', '--iters', '30')
    assert batched.header['batch-us'] == '10'
    batching = [r for r in batched.rows if r['batch'] > 1]
    assert batching, batched.rows
    for row in batching:
        # a sample lasts about 10 us (batch x round trip), with slack: the
        # batch comes from the warm-up
        assert row['batch'] * 2 * row['median_us'] < 100, row
    # bytes: 10 warm-up + 30 samples of `batch` round trips per size
    sent = sum((10 + 30 * int(r['batch'])) * int(r['size_bytes']) for r in batched.rows)
    assert batched.header['bytes-sent'] == f'{sent} {sent}'


def test_p2p_precision_0_fills_the_time_per_size(built):
    '''--precision 0: the old rule, sample until --time-per-size has passed
    (or --max-iters), whatever the precision.'''
    out = _run_ok(built, 'p2p', '--precision', '0', '--time-per-size', '5', '--sizes', '0,1K,16K')
    assert out.header['precision-pct'] == '0' and out.header['time-per-size-ms'] == '5'
    for row in out.rows:
        assert row['iterations'] >= 20, row
        # sampled until the budget was spent (at least half of it in the
        # samples themselves), however precise the median was early on, or
        # until --max-iters
        assert row['iterations'] == 10000 or _sampled_ms(row) >= 2.5, row


def test_collectives(built):
    out = _run_ok(built, 'collectives', '--validate', *SMALL)
    ops = out.header['ops'].split(',')
    assert out.columns[-1] == 'median_ci_pct' and 'batch' not in out.columns   # no batches
    assert ops == ['barrier', 'bcast', 'reduce', 'allreduce', 'gather', 'allgather',
                   'alltoall', 'reduce_scatter']
    _assert_finite(out)
    expected = {
        'barrier': (0,),
        'reduce': SMALL_SIZES[3:],          # 4 and up: MPI_FLOAT
        'allreduce': SMALL_SIZES[3:],
        'reduce_scatter': SMALL_SIZES[4:],  # 8 and up: one float per rank, 2 ranks
    }
    checked = 0
    for op in ops:
        rows = out.rows_where(op=op)
        sizes = tuple(int(r['size_bytes']) for r in rows)
        assert sizes == expected.get(op, SMALL_SIZES), op
        if op != 'barrier':
            checked += len(rows)
        for row in rows:
            assert row['iterations'] == 20
            assert row['median_ci_pct'] >= 0        # the widest over the ranks
            assert 0 < row['t_min_us'] <= row['t_avg_us'] <= row['t_max_us']
            assert 0 < row['med_min_us'] <= row['med_avg_us'] <= row['med_max_us']
    assert out.validated == checked
    assert out.row_for_size(1024, op='allreduce')['count'] == 256
    assert out.row_for_size(1024, op='reduce_scatter')['count'] == 128
    assert out.row_for_size(1024, op='alltoall')['count'] == 1024


def test_collectives_op_subset(built):
    out = _run_ok(built, 'collectives', '--op', 'allreduce,barrier', '--sizes', '6,8')
    assert out.header['ops'] == 'allreduce,barrier'
    assert [(r['op'], r['size_bytes']) for r in out.rows] == [('allreduce', 8.0), ('barrier', 0.0)]


def test_pairs(built):
    out = _run_ok(built, 'pairs', '--samples', '20', '--bw-samples', '5', '--bw-size', '64K')
    assert out.header['pairs'] == '1' and out.header['bw-size'] == '65536'
    assert len(out.rows) == 1
    row = out.rows[0]
    assert (row['rank_a'], row['rank_b']) == (0, 1)
    assert row['host_a'] == out.hosts[0] and row['host_b'] == out.hosts[1]
    _assert_finite(out)
    assert row['lat_first_us'] > 0
    assert 0 < row['lat_min_us'] <= row['lat_mean_us'] <= row['lat_max_us']
    assert 0 < row['bw_min_MBps'] <= row['bw_mean_MBps'] <= row['bw_max_MBps']
    assert row['bw_min_MBps'] <= row['bw_median_MBps'] <= row['bw_max_MBps']
    sent = 21 * 8 + 6 * 65536      # (first + 20) x 8 B, (untimed + 5) x 64 KiB
    assert out.header['bytes-sent'] == f'{sent} {sent}'
    # No outlier rule asked for: no second pass.
    assert out.header['outlier-rule'] == 'none' and 'retested' not in out.header
    assert row['retest'] == row['bw_outlier'] == row['lat_outlier'] == row['bw_retest_MBps'] == 0


@pytest.mark.parametrize('ranks,rounds', [(4, 3), (5, 5)])
def test_pairs_in_rounds_of_disjoint_pairs(built, ranks, rounds):
    '''N ranks: N-1 rounds (N when odd), every pair once, no rank twice in a round.'''
    stack, _ = built
    proc = _run(built, 'pairs', '--samples', '5', '--bw-samples', '2', '--bw-size', '4K',
                ranks=ranks)
    if proc.returncode != 0 and 'slots' in proc.stdout + proc.stderr:
        pytest.fail(f'{stack} could not start {ranks} ranks here: {proc.stdout}{proc.stderr}')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = parse_kernel_output(proc.stdout, expect_kernel='pairs')
    assert out.header['rounds'] == str(rounds)
    pairs = [(int(r['rank_a']), int(r['rank_b'])) for r in out.rows]
    assert sorted(pairs) == [(a, b) for a in range(ranks) for b in range(a + 1, ranks)]
    by_round = {}
    for row in out.rows:
        by_round.setdefault(int(row['round']), []).extend([int(row['rank_a']), int(row['rank_b'])])
    assert sorted(by_round) == list(range(rounds))
    assert all(len(r) == len(set(r)) for r in by_round.values()), by_round


def test_pairs_sample_of_rounds_and_schedule_first(built):
    '''--rounds measures only those rounds (5 ranks: 2 of 5, every rank in
    one at least); the schedule and the expected time come before any row.'''
    started = time.monotonic()
    proc = _run(built, 'pairs', '--samples', '5', '--bw-samples', '2', '--bw-size', '4K',
                '--rounds', '0,3', '--pair-seconds', '0.5', '--outlier-rule', 'clusterkit',
                ranks=5)
    took = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = parse_kernel_output(proc.stdout, expect_kernel='pairs')
    assert (out.header['rounds'], out.header['rounds-of-all-pairs'], out.header['pairs']) == \
        ('2', '5', '4')
    assert {int(r['round']) for r in out.rows} == {0, 3} and len(out.rows) == 4
    assert {int(r[k]) for r in out.rows for k in ('rank_a', 'rank_b')} == set(range(5))
    # Printed to the millisecond: a pass of 4 small pairs may read 0.000.
    assert 0 <= float(out.header['first-pass-seconds']) < took
    lines = proc.stdout.splitlines()
    schedule = [i for i, line in enumerate(lines) if line.startswith('# ')][:3]
    assert lines[schedule[0]] == ('# schedule: 5 ranks, 2 of 5 rounds of 2 disjoint pairs, 4 pairs, '
                                  'the pairs of a round at once')
    assert lines[schedule[1]] == '# expected first pass: 1 s at 0.5 s per pair'     # 2 rounds
    assert lines[schedule[2]].startswith('# first round: ')
    assert schedule[2] < min(i for i, line in enumerate(lines) if line.startswith('row: '))
    bad = _run(built, 'pairs', '--rounds', '0,5', ranks=5)
    assert bad.returncode == 2 and "--rounds: '0,5' is not a comma-separated list of rounds 0..4" \
        in bad.stderr, bad.stderr


def test_bad_argument_under_launcher_exits_2(built):
    proc = _run(built, 'p2p', '--max-size', '-1')
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert re.search(r"^error: --max-size: '-1' is not a size", proc.stderr, re.MULTILINE), proc.stderr
    # The kernel names itself and its MPI library first (so a wrong-MPI run
    # is told apart), but a failed run never claims completion.
    assert proc.stdout.startswith('hpcnet-kernel: ') and 'done: ok' not in proc.stdout


@pytest.mark.parametrize('kernel, args, message', [
    ('p2p', ['--max-size', '-1'], "--max-size: '-1' is not a size"),
    ('p2p', ['--max-size', '2G'], 'larger than 1 GiB'),
    ('p2p', ['--max-size', 'abc'], "'abc' is not a size"),
    ('p2p', ['--min-size', '8K', '--max-size', '4K'], 'is larger than --max-size'),
    ('p2p', ['--iters', '0'], '--iters: 0 is out of range'),
    ('p2p', ['--mode', 'foo'], "unknown mode 'foo'"),
    ('p2p', ['--sizes', '1,,2'], 'bad element'),
    ('p2p', ['--bogus'], "unknown option '--bogus'"),
    ('p2p', [], 'p2p needs exactly 2 ranks, got 1'),
    ('collectives', ['--op', 'allreduce,foo'], "unknown operation 'foo' (valid: barrier, bcast"),
    ('collectives', [], 'collectives needs at least 2 ranks, got 1'),
    ('pairs', ['--samples', 'x'], "--samples: 'x' is not a non-negative integer"),
    ('pairs', ['--bw-size', '0'], '--bw-size must be at least 1 byte'),
    ('pairs', ['--outlier-rule', 'median'], "--outlier-rule: 'median' is not one of none, mad, clusterkit"),
    ('pairs', ['--outlier-rule', 'mad', '--mad-k', '4'], '--outlier-rule mad needs --mad-k and --outlier-floor'),
    ('pairs', ['--mad-k', '4'], '--mad-k and --outlier-floor go with --outlier-rule mad only'),
    ('pairs', ['--outlier-rule', 'mad', '--mad-k', '3', '--outlier-floor', '0.1', '--bw-of-best', '0.8'],
     '--bw-of-best goes with --outlier-rule clusterkit only'),
    ('pairs', ['--outlier-rule', 'mad', '--mad-k', '4', '--outlier-floor', '1'],
     "--outlier-floor: '1' is not below 1"),
])
def test_bad_arguments_exit_2(built, kernel, args, message):
    # singleton runs (no launcher): faster, and the same code path
    proc = subprocess.run([str(built[1] / kernel), *args], env=_env(), capture_output=True,
                          text=True, timeout=RUN_TIMEOUT)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith('error: ') and message in proc.stderr, proc.stderr
    # The kernel names itself and its MPI library first (so a wrong-MPI run
    # is told apart), but a failed run never claims completion.
    assert proc.stdout.startswith('hpcnet-kernel: ') and 'done: ok' not in proc.stdout


def test_help(built):
    proc = subprocess.run([str(built[1] / 'p2p'), '--help'], env=_env(), capture_output=True,
                          text=True, timeout=RUN_TIMEOUT)
    assert proc.returncode == 0 and '--mode M' in proc.stdout and '--validate' in proc.stdout
    # Built by the default compiler (gcc-12: the wrappers' own).
    assert re.search(r'^compiler: gcc 12\.\d+\.\d+$', proc.stdout, re.M), proc.stdout


@pytest.mark.parametrize('stack', sorted(STACKS))
@pytest.mark.parametrize('compiler', ['gcc-11', 'clang'])   # gcc-12 is the default gcc: fixture
def test_builds_without_warnings_with_other_compilers(stack, compiler, tmp_path):
    _require(stack)
    if shutil.which(compiler) is None:
        pytest.skip(f'{compiler} not found on PATH')
    proc = _make(stack, tmp_path, {STACKS[stack][2]: compiler})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not COMPILER_WARNING.search(proc.stdout + proc.stderr), proc.stdout + proc.stderr
    # The kernel names the compiler the wrapper really called, as the
    # compiler itself reports its version.
    version = subprocess.run([compiler, '-dumpversion'], capture_output=True, text=True,
                             check=True).stdout.strip()
    help_run = subprocess.run([str(tmp_path / 'p2p'), '--help'], env=_env(),
                              capture_output=True, text=True, timeout=RUN_TIMEOUT)
    said = re.search(r'^compiler: (\S+) (\S+)$', help_run.stdout, re.M)
    assert said, help_run.stdout
    assert said[1] == compiler.split('-')[0] and said[2].startswith(version.split('.')[0] + '.'), \
        said[0]



@pytest.mark.parametrize('kernel', ['p2p', 'collectives', 'pairs'])
@pytest.mark.parametrize('value, message', [('abc', "'abc' is not a non-negative integer"),
                                            ('0', 'out of range'), ('3601', 'out of range')])
def test_bad_finalize_timeout_exits_2(built, kernel, value, message):
    env = {**_env(), 'HPCNET_FINALIZE_TIMEOUT_S': value}
    proc = subprocess.run([str(built[1] / kernel), '--help'], env=env, capture_output=True,
                          text=True, timeout=RUN_TIMEOUT)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith('error: HPCNET_FINALIZE_TIMEOUT_S: ') and message in proc.stderr, \
        proc.stderr
