"""The IMB and OSU checks (checks/imb.py, checks/osu.py) and hpcnet.checklib.benchlib.

- Pure functions of hpcnet.checklib.benchlib, on real outputs (fast, no ReFrame run).
- IMB: a real ReFrame run on `local` (shm and tcp) with the Intel MPI
  environment that ships IMB, asserted on the JSON report; and one run that
  must fail because IMB's own time budget ran out.
- OSU: no OMB is installed here, so the checks run unchanged against a fake
  installation: an MPI prefix (the `bin/mpicc`, `mpirun` of a real MPI found
  by hpcnet.stacks) whose libexec/osu-micro-benchmarks/mpi/... holds scripts
  printing the REAL OMB 7.4 outputs of ../shared/samples. hpcnet.stacks finds
  it through HPCNET_MPI_PREFIXES, with a fresh HPCNET_STATE_DIR. Two settings
  differ from a real run, with `-S`: `verify_transport=False` (the scripts
  do not call MPI, so the MPI prints no transport report),
  `check_link_counters=False` (they move no bytes: the link proof's
  arithmetic is tests/test_link_proofs.py; one run keeps it on and must fail,
  naming the bound) and `full_stats=False` for the collectives (the samples
  were recorded without `-f`; one run keeps `-f` and must fail, naming the
  missing columns).
- Without OMB the OSU checks skip, naming the program.
"""
import copy
import os
import re
import subprocess
import sys
from pathlib import Path

import conftest
import pytest
import reframe.utility.typecheck as typ
from reframe.core.exceptions import SanityError

from hpcnet import mpi, stacks
from hpcnet.checklib import benchlib, sanity
from hpcnet.checklib.benchlib import ImbBenchmark, OsuProgram
from hpcnet.constants import CHECKS_DIR
from hpcnet.mpi import MpiFamily
from hpcnet.model import Stack
from hpcnet.parsers import parsed_once
from hpcnet.parsers.errors import BenchmarkOutputError, RowNotFound
from hpcnet.parsers.imb import parse_imb
from hpcnet.parsers.kernel import parse_kernel_output
from hpcnet.parsers.osu import parse_osu
from hpcnet.parsers.table import SIZE_COLUMN, ParsedTable
from hpcnet.sizes import message_sizes, size_label
from hpcnet.checklib.testlib import MpiBenchmark

REFRAME = Path(sys.executable).with_name('reframe')
IMB_CHECKS = CHECKS_DIR / 'imb.py'
OSU_CHECKS = CHECKS_DIR / 'osu.py'
IMB_DATA = Path(__file__).parent / 'data' / 'imb'
# Real recordings, copied into the repository (tests/data/samples/README.md).
SAMPLES = Path(__file__).parent / 'data' / 'samples'
#: The MPI the OSU samples were recorded with (file name suffix).
SAMPLE_MPI = 'openmpi-4.1.4'


def run_reframe(tmp_path, *args, partition=None, env=None, timeout=900):
    '''reframe on `local` (or one of its partitions), no retry; the test
    cases, without the build fixtures.'''
    system = f'local:{partition}' if partition else 'local'
    proc, cases = conftest.run_reframe(tmp_path, *args, env=env, timeout=timeout, system=system,
                                       retries=0)
    return proc, [c for c in cases if not c.get('fixture')]


def set_false(test_cls, name: str) -> str:
    '''``-S name=<false>`` for a variable of ``test_cls``. ReFrame converts a
    ``-S`` string with the declared type: ``typ.Bool`` takes 'false', but a
    variable declared ``bool`` gets ``bool('false')``, which is True; only ''
    makes it False.'''
    types = test_cls._rfm_var_space[name].field.valid_types
    return f'{name}=false' if typ.Bool in types else f'{name}='


#: No transport proof for the fake OMB: its programs do not call MPI.
NO_TRANSPORT_PROOF = set_false(MpiBenchmark, 'verify_transport')
#: No link proof for the fake OMB: its programs send nothing.
NO_LINK_PROOF = set_false(MpiBenchmark, 'check_link_counters')


def perf(case) -> dict:
    return {k.split(':')[-1]: v[0] for k, v in case['perfvalues'].items()}


def by_benchmark(cases) -> dict:
    out = {}
    for c in cases:
        out.setdefault(c['benchmark'], []).append(c)
    return out


# --------------------------------------------------------------------------
# hpcnet.checklib.benchlib on real outputs
# --------------------------------------------------------------------------

def test_imb_sizes_match_real_tables():
    collectives = parse_imb((IMB_DATA / 'IMB-MPI1_collectives.impi-2021.19.txt').read_text())
    for table in collectives.tables:
        assert table.sizes == benchlib.imb_sizes(table.benchmark, 0, 10), table.benchmark
    nbc = parse_imb((IMB_DATA / 'IMB-NBC_Iallreduce_Ibcast_Ibarrier.impi-2021.19.txt').read_text())
    for table in nbc.tables:
        assert table.sizes == benchlib.imb_sizes(table.benchmark, 0, 10), table.benchmark
    assert benchlib.imb_sizes(ImbBenchmark.PINGPONG, 0, 22)[-1] == 4 << 20


def test_message_sizes_of_every_benchmark():
    # The kernels: 0 when the range starts at 0, then the powers of two.
    assert message_sizes(0, 16) == (0, 1, 2, 4, 8, 16)
    assert message_sizes(3, 40) == (4, 8, 16, 32)
    # The socket kernel: lo, the powers of two above it, hi.
    assert message_sizes(100, 300, endpoints=True) == (100, 128, 256, 300)
    assert message_sizes(0, 5, endpoints=True) == (0, 1, 2, 4, 5)
    # IMB -msglog 2:4 (0 first), OSU's required sizes.
    assert message_sizes(4, 16, zero=True) == (0, 4, 8, 16)
    assert message_sizes(benchlib.OSU_MIN_REQUIRED_SIZE, 64) == (8, 16, 32, 64)
    assert message_sizes(0, 0) == (0,)
    with pytest.raises(ValueError, match='min_size 9 is above max_size 8'):
        message_sizes(9, 8)
    with pytest.raises(ValueError, match=r"max_size must be an int >= 0 \(bytes\), not '8'"):
        message_sizes(1, '8')


def test_size_label():
    assert [size_label(n) for n in (0, 8, 1000, 65536, 1 << 20, 4 << 20, 1536)] == [
        '0B', '8B', '1000B', '64KiB', '1MiB', '4MiB', '1536B']


class Parses:
    '''Stands for a check: counts how often its output is really parsed.'''
    def __init__(self, outputs):
        self.outputs = outputs
        self.parsed = []

    @parsed_once
    def output(self, name, *, strict=True):
        self.parsed.append((name, strict))
        text = self.outputs[name]
        if text is None:
            raise BenchmarkOutputError(name, None, 'no output yet')
        return text.upper()


def test_parsed_once_per_instance_and_arguments_never_errors():
    check = Parses({'a': 'x', 'b': 'y', 'late': None})
    assert check.output('a') == check.output('a') == 'X'
    assert check.output('a', strict=False) == 'X' and check.output('b') == 'Y'
    assert check.parsed == [('a', True), ('a', False), ('b', True)]
    # An error is raised again on every call, until the output is there.
    for _ in range(2):
        with pytest.raises(BenchmarkOutputError, match='no output yet'):
            check.output('late')
    check.outputs['late'] = 'z'
    assert check.output('late') == 'Z'
    assert check.parsed.count(('late', True)) == 3
    # Another instance (a test case ReFrame copied before it ran) has its own cache.
    other = Parses({'a': 'other'})
    assert other.output('a') == 'OTHER' and check.output('a') == 'X'
    copied = copy.deepcopy(Parses({'a': 'x'}))
    assert copied.output('a') == 'X' and copied.parsed == [('a', True)]


def test_sanity_from_output_errors():
    with pytest.raises(SanityError, match=r'^out.txt:3: truncated; job killed$'):
        with sanity.sanity_from_output_errors('; job killed'):
            raise BenchmarkOutputError('out.txt', 3, 'truncated')
    table = parse_osu((SAMPLES / f'osu_latency.{SAMPLE_MPI}.txt').read_text(), source='lat.txt')
    with pytest.raises(SanityError, match="lat.txt:4: osu_latency output has no row for size 3"):
        with sanity.sanity_from_output_errors():
            table.row_for_size(3)
    with pytest.raises(KeyError):      # not an output error: not a test verdict either
        with sanity.sanity_from_output_errors():
            raise KeyError('x')


def test_one_table_base_for_kernel_imb_and_osu():
    kernel = parse_kernel_output((SAMPLES / 'hpcnet-p2p-pingpong.local-tcp.mvapich2-2.3.7-'
                                  'ch3sock.txt').read_text())
    imb = parse_imb((IMB_DATA / 'IMB-MPI1_PingPong.impi-2021.19.txt').read_text()).tables[0]
    osu = parse_osu((SAMPLES / f'osu_latency.{SAMPLE_MPI}.txt').read_text())
    for table in (kernel, imb, osu):
        assert isinstance(table, ParsedTable)
        assert table.columns[0] == SIZE_COLUMN and 8 in table.sizes
        assert table.row_for_size(8)[SIZE_COLUMN] == 8
        with pytest.raises(RowNotFound, match='has no row for size 3; sizes present: '):
            table.row_for_size(3)


def test_imb_volume_follows_the_link():
    '''IMB's own 40 MB per size where the link moves it in 0.1 s (and where
    the rate is unknown), less on a slower link.'''
    assert benchlib.imb_volume_mb(None) == benchlib.IMB_VOLUME_MB == 40
    assert benchlib.imb_volume_mb(100 * 10**9) == 40
    assert benchlib.imb_volume_mb(10**9) == 12          # the testbed's Gigabit
    assert benchlib.imb_volume_mb(10**7) == 1


def test_osu_time_limit_follows_what_omb_moves_on_the_link():
    # osu_latency to 16 KiB: 1-8192 B with 10100 round trips, 16 KiB with 1010.
    wire = benchlib.osu_wire_seconds('osu_latency', 16384, 10**9)
    assert wire == pytest.approx((16383 * 2 * 10100 + 16384 * 2 * 1010) * 8 / 1e9)
    # osu_bw: a window of 64 per iteration, 110 then 22 iterations.
    assert benchlib.osu_wire_seconds('osu_bw', 16384, 10**9) == pytest.approx(
        (16383 * 64 * 110 + 16384 * 64 * 22) * 8 / 1e9)
    # osu_mbw_mr keeps 110 iterations of its window at every size (osu_mbw_mr.c).
    assert benchlib.osu_wire_seconds('osu_mbw_mr', 16384, 10**9) == pytest.approx(
        (16383 + 16384) * 64 * 110 * 8 / 1e9)
    # The default sweep to 4 MiB on 1 Gbit/s is longer than the suite's 3 min default:
    # the testbed's osu_latency ran 2 min 44 s to 2 min 48 s, and osu_mbw_mr, timed out
    # at 5 min 46 s, had reached 2 MiB (docs/measurements.md).
    assert benchlib.osu_time_limit('osu_latency', 4 << 20, 10**9) > 2 * 168 > 180
    assert benchlib.osu_time_limit('osu_mbw_mr', 2 << 20, 10**9) > 2 * 346
    assert benchlib.osu_time_limit('osu_latency', 4 << 20, None) is None


def test_imb_timeout_is_named():
    # The line IMB 2021.11 printed here when -time ran out (Uniband over TCP).
    text = ((IMB_DATA / 'IMB-MPI1_PingPong.impi-2021.19.txt').read_text()
            .replace('\n# All processes', '           64 time-out.; Time limit (secs_per_sample * '
                     'msg_sizes_list_len) is over; use "-time X" or SECS_PER_SAMPLE=X '
                     '(IMB_settings.h) to increase time limit.\n\n# All processes', 1))
    with pytest.raises(SanityError, match=r'IMB stopped PingPong at 64 B: its time budget '
                                          r'\(-time 2 s per size x 12 sizes = 24 s\)'):
        benchlib.check_imb_timeout(text, 'PingPong', 2.0, 12)
    benchlib.check_imb_timeout((IMB_DATA / 'IMB-MPI1_PingPong.impi-2021.19.txt').read_text(),
                               'PingPong', 2.0, 12)


def test_library_and_hosts_are_measured_in_every_rank():
    # What src/mpiprobe.c printed from the ranks of a real IMB run (Intel MPI
    # 2021.19), around a wrapper script that exec'd it (its own line: none).
    text = ('hpcnet-mpi-library: 0 vm none\n'
            'hpcnet-mpi-library: 0 vm Intel(R) MPI Library 2021.19.0 for Linux* OS\n'
            'hpcnet-mpi-library: 1 cn2 Intel(R) MPI Library 2021.19.0 for Linux* OS\n')
    lib, hosts = benchlib.measured_library(text, 2)
    assert mpi.library_family(lib) == (MpiFamily.IMPI, '2021.19.0')
    assert hosts == {0: 'vm', 1: 'cn2'}
    with pytest.raises(SanityError, match=r'the MPI probe reported ranks \[0\], expected 0..1'):
        benchlib.measured_library(text.splitlines()[1] + '\n', 2)
    mixed = text.replace('1 cn2 Intel(R) MPI Library 2021.19.0 for Linux* OS',
                         '1 cn2 Open MPI v4.1.4, package: Debian OpenMPI')
    with pytest.raises(SanityError, match='the ranks loaded 2 MPI libraries'):
        benchlib.measured_library(mixed, 2)
    with pytest.raises(SanityError, match='could not tell its rank'):
        benchlib.measured_library('hpcnet-mpi-library: ? vm MPICH Version: 4.0.2\n', 1)


def test_foreign_lines_are_dropped_and_cut_lines_kept():
    sample = SAMPLES / f'osu_latency.{SAMPLE_MPI}.txt'
    if not sample.exists():
        pytest.skip(f'OSU sample {sample} missing (set HPCNET_OSU_SAMPLES)')
    lines = sample.read_text().splitlines(keepends=True)
    # Transport reports and our link counters can land inside the table.
    noisy = (['hpcnet-link: before vm lo tx_bytes=1 rx_bytes=1\n'] + lines[:6]
             + ['[1732162583.123456] [vm:4242:0]     ucp_worker.c:1866 UCX  INFO  '
                'ep_cfg[1]: tag(tcp/lo)\n', '[vm:4242] mca: bml: Using tcp btl for send to '
                '[[123,1],1] on node vm\n'] + lines[6:]
             + ['hpcnet-link: after vm lo tx_bytes=2 rx_bytes=2\n'])
    with pytest.raises(Exception):
        parse_osu(''.join(noisy), expect_benchmark='osu_latency')
    out = parse_osu(benchlib.benchmark_text(''.join(noisy)), expect_benchmark='osu_latency',
                    expect_max_size=benchlib.OSU_PT2PT_MAX_SIZE)
    assert out.sizes[-1] == 4 << 20
    # A last line without terminator is not hidden by the filter.
    assert benchlib.benchmark_text('a\nb').endswith('\nb')


def _stack(**kw):
    return Stack(environ='gcc12-x', mpi_family='openmpi', mpi_profile='openmpi',
                 mpi_version='5.0.11', mpi_prefix='/opt/mpi', **kw)


def test_tool_missing_reason_names_the_program():
    stack = _stack(tools=(('IMB-MPI1', '/opt/mpi/bin/IMB-MPI1'),))
    assert benchlib.tool_missing_reason('IMB-MPI1', 'IMB', stack) is None
    reason = benchlib.tool_missing_reason('osu_latency', 'OSU Micro-Benchmarks', stack)
    assert 'osu_latency' in reason and 'gcc12-x' in reason and 'OSU' in reason
    assert '/opt/mpi/libexec/osu-micro-benchmarks/mpi/pt2pt' in reason
    assert 'IMB-MPI1' in reason          # what the environment does have


def test_tool_must_belong_to_the_environment_mpi():
    stack = _stack(tool_prefixes=('/opt/spack/osu-7.4-abc',))
    benchlib.check_tool_prefix('osu_bw', '/opt/mpi/libexec/osu-micro-benchmarks/mpi/pt2pt/osu_bw',
                               stack)
    benchlib.check_tool_prefix('osu_bw', '/opt/spack/osu-7.4-abc/bin/osu_bw', stack)
    with pytest.raises(SanityError, match='not under the prefix of the MPI of environment gcc12-x'):
        benchlib.check_tool_prefix('IMB-MPI1', '/opt/mpi-other/bin/IMB-MPI1', stack)
    with pytest.raises(SanityError):
        benchlib.check_tool_prefix('IMB-MPI1', '/opt/mpix/bin/IMB-MPI1', stack)


# --------------------------------------------------------------------------
# IMB: real runs
# --------------------------------------------------------------------------

#: The subset run by the test (one of each kind), and its -msglog maximum (64 KiB).
IMB_SUBSET = (ImbBenchmark.PINGPONG, ImbBenchmark.UNIBAND, ImbBenchmark.ALLREDUCE,
              ImbBenchmark.BARRIER, ImbBenchmark.IALLREDUCE)
TEST_MSGLOG = 16
EXPECTED_IMB_PERF = {
    ImbBenchmark.PINGPONG: {'latency_0B', 'latency_8B', 'bandwidth_64KiB'},
    ImbBenchmark.UNIBAND: {'bandwidth_64KiB', 'msgrate_8B', 'msgrate_64KiB'},
    ImbBenchmark.ALLREDUCE: {'avg_8B', 'avg_64KiB', 'max_8B', 'max_64KiB'},
    ImbBenchmark.BARRIER: {'avg_0B', 'max_0B'},
    ImbBenchmark.IALLREDUCE: {'overall_8B', 'overall_64KiB', 'pure_8B', 'pure_64KiB',
                              'overlap_8B', 'overlap_64KiB'},
}


@pytest.fixture(scope='module')
def imb_environment():
    '''The environment the IMB checks run in: an MPI shipping IMB-MPI1 and
    IMB-NBC, its first compiler (feature +primary).'''
    found = stacks.discover()
    for env in found.environments:
        tools = dict(env.mpi.tools)
        if env.primary and {'IMB-MPI1', 'IMB-NBC'} <= set(tools):
            return env
    pytest.skip('no environment has IMB-MPI1 and IMB-NBC (hpcnet.stacks found: '
                f'{", ".join(e.name for e in found.environments) or "none"}): install Intel MPI '
                '(`make stacks`) or an IMB build against one of the MPIs')


def names_regex(cls_names, benchmarks):
    return f'^({"|".join(cls_names)})\\b.*benchmark=({"|".join(benchmarks)})\\b'


@pytest.mark.integration
def test_imb_runs_on_both_partitions(tmp_path, imb_environment):
    prefix = imb_environment.mpi.candidate.prefix
    proc, cases = run_reframe(tmp_path, '-c', str(IMB_CHECKS), '-p', f'^{imb_environment.name}$',
                              '-n', names_regex(('hpcnet_imb', 'hpcnet_imb_nbc'), IMB_SUBSET),
                              '-S', f'msglog_max={TEST_MSGLOG}')
    assert len(cases) == len(IMB_SUBSET) * 2, proc.stdout[-3000:]
    failed = [(c['name'], c['partition'], c['fail_reason']) for c in cases if c['result'] != 'pass']
    assert not failed, failed
    assert proc.returncode == 0
    for bench, runs in by_benchmark(cases).items():
        assert sorted(c['partition'] for c in runs) == ['shm', 'tcp']
        for c in runs:
            values = perf(c)
            assert set(values) == EXPECTED_IMB_PERF[bench], (bench, values)
            assert all(v is not None and v >= 0 for v in values.values()), values
            # The whole table is in the report.
            sizes = [r.get('size_bytes') for r in c['curve']]
            assert sizes == list(benchlib.imb_sizes(bench, 0, TEST_MSGLOG)) or \
                (bench == ImbBenchmark.BARRIER and sizes == [None])
            # The transport the MPI used, the library it loaded, the binary.
            assert f"on fabric '{c['partition']}'" in c['transport']
            assert c['mpi_library'].startswith('Intel(R) MPI Library')
            assert c['tool_path'].startswith(prefix + '/') and c['imb_version']
            assert f'0:{TEST_MSGLOG}' in c['executable_opts']
            if c['partition'] == 'tcp' and bench in (ImbBenchmark.PINGPONG, ImbBenchmark.UNIBAND):
                # Loopback carried at least the payload IMB reports.
                assert c['link_counters'] and c['link_counters'][0]['tx_bytes'] > 0


@pytest.mark.integration
def test_imb_time_budget_exhausted_fails_with_reason(tmp_path, imb_environment):
    proc, cases = run_reframe(tmp_path, '-c', str(IMB_CHECKS), '-p', f'^{imb_environment.name}$',
                              '-n', names_regex(('hpcnet_imb',), (ImbBenchmark.PINGPONG,)),
                              '-S', 'time_per_size=0.001', partition='tcp')
    (case,) = cases
    assert case['result'] == 'fail' and case['fail_phase'] == 'sanity', proc.stdout[-2000:]
    # IMB either writes its time-out line (named by the check), ends the table
    # silently after the sizes that fitted (a busy host), or, with a budget this
    # small, writes a row of garbage with 0 repetitions
    # ('0   8076104204288000672.00   0.00'): each must fail, never pass.
    reason = case['fail_reason']
    budget = 'time budget (-time 0.001 s per size x 24 sizes'
    assert (('IMB stopped PingPong at' in reason or 'IMB ended the PingPong table early' in reason)
            and budget in reason) or 'truncated or damaged row' in reason, reason


# --------------------------------------------------------------------------
# OSU: the checks against a fake OMB installation
# --------------------------------------------------------------------------

FAKE_SCRIPT = '''#!/bin/sh
# Fake {name} (hpcnet tests): a real MPI program printing the real OMB output
# {sample} on rank 0 (tests/data/fake_osu/fake_osu.c).
rank=${{OMPI_COMM_WORLD_RANK:-${{PMIX_RANK:-${{PMI_RANK:-0}}}}}}
[ "$rank" = 0 ] && echo "{name} $*" >> {prefix}/calls.log
exec {program} {sample} "$(cat {prefix}/mode.{name} 2>/dev/null || echo full)" "$@"
'''
FAKE_SOURCE = Path(__file__).parent / 'data' / 'fake_osu' / 'fake_osu.c'


def osu_subdir(program: str) -> str:
    kind = 'collective' if program in OsuProgram.COLLECTIVES else 'pt2pt'
    return f'libexec/osu-micro-benchmarks/mpi/{kind}'


def make_fake_osu_prefix(root: Path, real: stacks.MpiStack) -> tuple:
    '''A view of a real MPI prefix (like a Spack view) with a fake OSU
    program for every sample; returns (prefix, faked programs).

    Every top-level entry but bin/ is a symlink to the real one; every program
    of the real bin/ is a script exec'ing it (not a symlink: MPI launchers and
    wrappers find their own files from the path they were started through).'''
    prefix = root / f'fake-osu-{real.label}'
    (prefix / 'bin').mkdir(parents=True)
    real_prefix = Path(real.candidate.prefix)
    for entry in sorted(real_prefix.iterdir()):
        if entry.name != 'bin':
            (prefix / entry.name).symlink_to(entry)
    bindir = Path(real.candidate.bindir)
    for program in sorted(bindir.iterdir()):
        if program.is_file() and os.access(program, os.X_OK):
            shim = prefix / 'bin' / program.name
            shim.write_text(f'#!/bin/sh\nexec {program} "$@"\n')
            shim.chmod(0o755)
    fake_program = prefix / 'fake_osu'
    subprocess.run([real.candidate.wrapper, '-O2', '-o', str(fake_program), str(FAKE_SOURCE)],
                   env=real.candidate.env(), check=True)
    faked = []
    for program in OsuProgram.ALL:
        sample = SAMPLES / f'{program}.{SAMPLE_MPI}.txt'
        if not sample.exists():
            continue
        d = prefix / osu_subdir(program)
        d.mkdir(parents=True, exist_ok=True)
        script = d / program
        script.write_text(FAKE_SCRIPT.format(name=program, sample=sample, prefix=prefix,
                                             program=fake_program))
        script.chmod(0o755)
        faked.append(program)
    return prefix, tuple(faked)


@pytest.fixture(scope='module')
def fake_osu(tmp_path_factory):
    '''(environment name, prefix, faked programs, environment variables for
    reframe) of a fresh discovery that sees the fake OMB installation.'''
    if not SAMPLES.is_dir():
        pytest.skip(f'the OSU samples directory {SAMPLES} is missing (real OMB 7.4 outputs; '
                    'set HPCNET_OSU_SAMPLES)')
    found = stacks.discover()
    # Debian's MPIs are found again by the fresh discovery and would take the
    # environment name first: wrap an MPI from another source.
    candidates = sorted({e.mpi.label: e.mpi for e in found.environments
                         if e.mpi.candidate.source != 'debian'}.values(),
                        key=lambda m: mpi.family_names().index(m.family))
    if not candidates:
        pytest.skip('no MPI outside Debian\'s to wrap in a fake OSU prefix (run `make stacks`); '
                    f'found: {", ".join(e.name for e in found.environments) or "none"}')
    root = tmp_path_factory.mktemp('fake-osu')
    prefix, faked = make_fake_osu_prefix(root, candidates[0])
    if not faked:
        pytest.skip(f'no OSU sample in {SAMPLES} (expected e.g. osu_latency.{SAMPLE_MPI}.txt)')
    env = {'HPCNET_STATE_DIR': str(root / 'state'), 'HPCNET_MPI_PREFIXES': str(prefix),
           'HPCNET_SPACK_ENV': ''}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        fresh = stacks.discover()        # also the cache reframe will read
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    mine = [e for e in fresh.environments if e.mpi.candidate.prefix == str(prefix) and e.primary]
    if not mine:
        pytest.fail(f'the fake OSU prefix {prefix} gave no environment: {fresh.rejected}')
    tools = dict(mine[0].mpi.tools)
    assert set(faked) <= set(tools), tools
    assert 'osu' in mine[0].features
    return mine[0].name, prefix, faked, env


@pytest.mark.integration
def test_osu_checks_parse_real_outputs(tmp_path, fake_osu):
    env_name, prefix, faked, env = fake_osu
    proc, cases = run_reframe(tmp_path, '-c', str(OSU_CHECKS), '-p', f'^{env_name}$',
                              '-S', NO_TRANSPORT_PROOF, '-S', NO_LINK_PROOF,
                              '-S', 'full_stats=false', env=env, timeout=600)
    assert len(cases) == len(OsuProgram.ALL) * 2, proc.stdout[-3000:]
    for bench, runs in by_benchmark(cases).items():
        for c in runs:
            if bench not in faked:
                assert c['result'] == 'skip', (bench, c['result'], c['fail_reason'])
                assert f'program {bench} not found' in c['skip_reason']
                continue
            assert c['result'] == 'pass', (bench, c['partition'], c['fail_reason'])
            sample = parse_osu((SAMPLES / f'{bench}.{SAMPLE_MPI}.txt').read_text())
            values = perf(c)
            if bench in OsuProgram.PT2PT_LATENCY:
                assert values == {'latency_8B': sample.row_for_size(8)['avg_latency_us']}
            elif bench in OsuProgram.PT2PT_BANDWIDTH:
                assert values == {f'bandwidth_{k}': sample.row_for_size(s)['bandwidth_MBps']
                                  for k, s in (('64KiB', 65536), ('1MiB', 1 << 20),
                                               ('4MiB', 4 << 20))}
            else:
                assert values == {f'avg_{k}': sample.row_for_size(s)['avg_latency_us']
                                  for k, s in (('8B', 8), ('64KiB', 65536), ('1MiB', 1 << 20))}
            assert [r['size_bytes'] for r in c['curve']] == list(sample.sizes)
            assert c['osu_version'] == '7.4'
            assert c['tool_path'].startswith(str(prefix))
            # Measured inside the ranks (src/mpiprobe.c), not copied.
            assert mpi.library_family(c['mpi_library'])[0] == c['mpi_family']
    # What the checks asked OMB for.
    calls = (prefix / 'calls.log').read_text().splitlines()
    for program in faked:
        want = (f'{program} -m 1048576' if program in OsuProgram.COLLECTIVES
                else f'{program} -m 4194304')
        assert want in calls, calls
    assert proc.returncode == 0


@pytest.mark.integration
def test_osu_damaged_outputs_fail_with_reason(tmp_path, fake_osu):
    env_name, prefix, faked, env = fake_osu
    wanted = (OsuProgram.LATENCY, OsuProgram.BW, OsuProgram.ALLREDUCE)
    if not set(wanted) <= set(faked):
        pytest.skip(f'needs OSU samples of {", ".join(wanted)} in {SAMPLES}')
    (prefix / f'mode.{OsuProgram.LATENCY}').write_text('stop-early\n')
    (prefix / f'mode.{OsuProgram.BW}').write_text('cut-row\n')
    try:
        # full_stats stays on: the allreduce sample has no -f columns.
        proc, cases = run_reframe(tmp_path, '-c', str(OSU_CHECKS), '-p', f'^{env_name}$',
                                  '-S', NO_TRANSPORT_PROOF,
                                  '-n', names_regex(('hpcnet_osu',), wanted), partition='shm',
                                  env=env, timeout=600)
    finally:
        for name in (OsuProgram.LATENCY, OsuProgram.BW):
            (prefix / f'mode.{name}').unlink()
    got = {c['benchmark']: c for c in cases}
    assert set(got) == set(wanted), proc.stdout[-3000:]
    assert all(c['result'] == 'fail' and c['fail_phase'] == 'sanity' for c in got.values())
    assert ('osu_latency: the last size is 524288, expected 4194304: the run stopped early'
            in got[OsuProgram.LATENCY]['fail_reason'])
    assert 'has no line terminator: the output was cut' in got[OsuProgram.BW]['fail_reason']
    assert ('osu_allreduce ran with -f but printed no min_latency_us, max_latency_us'
            in got[OsuProgram.ALLREDUCE]['fail_reason'])
    assert f'{OsuProgram.ALLREDUCE} -m 1048576 -f' in (prefix / 'calls.log').read_text()
    assert proc.returncode != 0


@pytest.mark.integration
def test_osu_link_proof_fails_a_program_that_sent_nothing(tmp_path, fake_osu):
    '''The fake osu_bw prints a whole table but sends nothing: over
    loopback, the link proof holds it to the windows OMB's loops send.'''
    env_name, prefix, faked, env = fake_osu
    if OsuProgram.BW not in faked:
        pytest.skip(f'needs an OSU sample of {OsuProgram.BW} in {SAMPLES}')
    proc, cases = run_reframe(tmp_path, '-c', str(OSU_CHECKS), '-p', f'^{env_name}$',
                              '-S', NO_TRANSPORT_PROOF,
                              '-n', names_regex(('hpcnet_osu',), (OsuProgram.BW,)),
                              partition='tcp', env=env, timeout=600)
    (case,) = cases
    assert case['result'] == 'fail' and case['fail_phase'] == 'sanity', proc.stdout[-3000:]
    assert re.search(r': lo sent \d+ bytes during the run, fewer than the \d+ bytes that '
                     r'osu_bw, 23 sizes 1B..4MiB, window 64, 1738 iterations',
                     case['fail_reason']), case['fail_reason']


@pytest.mark.integration
def test_osu_checks_skip_without_osu(tmp_path):
    '''An MPI environment without OMB: not selected by +osu; forced onto it
    (--skip-prgenv-check), every OSU test skips and names its program.'''
    found = stacks.discover()
    plain = [e for e in found.environments if not any(t.startswith('osu_')
                                                       for t, _ in e.mpi.tools)]
    if not plain:
        pytest.skip('every environment found has OSU programs')
    env_name = plain[0].name
    proc, cases = run_reframe(tmp_path, '-c', str(OSU_CHECKS), '-p', f'^{env_name}$',
                              partition='shm', timeout=300)
    assert not cases, proc.stdout[-2000:]
    proc, cases = run_reframe(tmp_path, '-c', str(OSU_CHECKS), '-p', f'^{env_name}$',
                              '--skip-prgenv-check', partition='shm', timeout=300)
    assert len(cases) == len(OsuProgram.ALL), proc.stdout[-3000:]
    for c in cases:
        assert c['result'] == 'skip', (c['name'], c['result'], c['fail_reason'])
        assert f'program {c["benchmark"]} not found in environment {env_name}' in \
            c['skip_reason']
        assert 'OSU Micro-Benchmarks' in c['skip_reason']
        # ReFrame's own summary line gives the reason too.
        assert f'{env_name} [OSU Micro-Benchmarks (OMB) program {c["benchmark"]} not found' in \
            proc.stdout
    assert proc.returncode == 0
