"""Shared pieces of the checks that run prebuilt benchmark suites (IMB, OSU).

Those programs come with the environment (its stack's ``tools``, found by
:mod:`hpcnet.stacks`), not from ``src/``: they print no ``mpi-library:`` line
and no host list, so the proofs :class:`hpcnet.checklib.testlib.MpiBenchmark` owes
are measured around them:

- the program must belong to the environment's MPI: its path is under the
  MPI's prefix (or a prefix discovery attributed benchmark builds to);
- the library really loaded, and the host of each rank, are measured inside
  every rank by ``src/mpiprobe.c``, preloaded into the benchmark (for every
  MPI family, never copied from the environment);
- the transport proof and the link counters are those of every MPI check.

:class:`ToolBenchmark` wires this into the pipeline; the pure functions take
what they need and raise with a message a site engineer can act on.
"""
from __future__ import annotations

import math
import os
import re
import shlex

import reframe.utility.typecheck as typ
from reframe.core.builtins import fixture, run_after, run_before, variable
from reframe.core.exceptions import SanityError

from hpcnet import stacks
from hpcnet.model import Stack
from hpcnet.parsers.imb_command import IMB_SUITES
from hpcnet.parsers.osu import OSU_BENCHMARKS
from hpcnet.sizes import message_sizes
from hpcnet.checklib.builds import build_mpiprobe
from hpcnet.checklib.testlib import MpiBenchmark
from hpcnet.variables import MPI_PREFIXES_ENV

#: The probe src/mpiprobe.c builds (hpcnet.checklib.builds.build_mpiprobe).
PROBE_LIBRARY = 'libhpcnet_mpiprobe.so'

# --------------------------------------------------------------------------
# Names (constants, checked against the parsers' tables at import)
# --------------------------------------------------------------------------


class ImbSuite:
    '''IMB executables (keys of ``extras['tools']``).'''
    MPI1 = 'IMB-MPI1'
    NBC = 'IMB-NBC'


class ImbBenchmark:
    '''IMB benchmark names, spelled as IMB prints them.'''
    PINGPONG = 'PingPong'
    PINGPING = 'PingPing'
    SENDRECV = 'Sendrecv'
    EXCHANGE = 'Exchange'
    UNIBAND = 'Uniband'
    BIBAND = 'Biband'
    BCAST = 'Bcast'
    ALLREDUCE = 'Allreduce'
    REDUCE = 'Reduce'
    REDUCE_SCATTER = 'Reduce_scatter'
    ALLGATHER = 'Allgather'
    GATHER = 'Gather'
    ALLTOALL = 'Alltoall'
    BARRIER = 'Barrier'
    IBCAST = 'Ibcast'
    IALLREDUCE = 'Iallreduce'
    IALLTOALL = 'Ialltoall'
    IBARRIER = 'Ibarrier'

    #: Two ranks exchanging messages: latency t[usec] (or t_avg) and Mbytes/sec.
    P2P = (PINGPONG, PINGPING, SENDRECV, EXCHANGE)
    #: A window of messages per repetition: Mbytes/sec and Msg/sec.
    WINDOWED = (UNIBAND, BIBAND)
    #: One direction of the link busy at a time, as iperf3's one flow.
    ONE_WAY = (PINGPONG, UNIBAND)
    #: Blocking collectives: t_min/t_max/t_avg[usec].
    COLLECTIVES = (BCAST, ALLREDUCE, REDUCE, REDUCE_SCATTER, ALLGATHER, GATHER, ALLTOALL,
                   BARRIER)
    #: What ``hpcnet_imb`` runs (IMB-MPI1).
    MPI1 = P2P + WINDOWED + COLLECTIVES
    #: What ``hpcnet_imb_nbc`` runs (IMB-NBC): t_ovrl, t_pure, t_CPU, overlap[%].
    NBC = (IBCAST, IALLREDUCE, IALLTOALL, IBARRIER)
    #: Reductions work on MPI_FLOAT: IMB skips the sizes below 4 bytes.
    REDUCTIONS = (ALLREDUCE, REDUCE, REDUCE_SCATTER, IALLREDUCE)
    #: Tables without a #bytes column (one row).
    SIZELESS = (BARRIER, IBARRIER)


class OsuProgram:
    '''OSU Micro-Benchmarks programs (keys of ``extras['tools']``).'''
    LATENCY = 'osu_latency'
    MULTI_LAT = 'osu_multi_lat'
    BW = 'osu_bw'
    BIBW = 'osu_bibw'
    MBW_MR = 'osu_mbw_mr'
    ALLREDUCE = 'osu_allreduce'
    ALLTOALL = 'osu_alltoall'
    ALLGATHER = 'osu_allgather'
    BCAST = 'osu_bcast'
    REDUCE = 'osu_reduce'
    GATHER = 'osu_gather'
    REDUCE_SCATTER = 'osu_reduce_scatter'

    PT2PT_LATENCY = (LATENCY, MULTI_LAT)
    PT2PT_BANDWIDTH = (BW, BIBW)
    MESSAGE_RATE = (MBW_MR,)
    PT2PT = PT2PT_LATENCY + PT2PT_BANDWIDTH + MESSAGE_RATE
    COLLECTIVES = (ALLREDUCE, ALLTOALL, ALLGATHER, BCAST, REDUCE, GATHER, REDUCE_SCATTER)
    ALL = PT2PT + COLLECTIVES


def _check_names():
    for suite, names in ((ImbSuite.MPI1, ImbBenchmark.MPI1), (ImbSuite.NBC, ImbBenchmark.NBC)):
        unknown = [n for n in names if n not in IMB_SUITES[suite]]
        if unknown:
            raise ValueError(f'hpcnet.checklib.benchlib: {unknown} are not {suite} benchmarks')
    unknown = [n for n in OsuProgram.ALL if n not in OSU_BENCHMARKS]
    if unknown:
        raise ValueError(f'hpcnet.checklib.benchlib: {unknown} are not OSU benchmarks')


_check_names()

# The sizes with their own performance variables, and their units, are the
# metric catalogue's (hpcnet.metrics) and hpcnet.constants'.

# IMB defaults
#: Reductions work on MPI_FLOAT: IMB skips the sizes below one float.
IMB_REDUCTION_MIN_SIZE = 4
#: -msglog maxima: 4 MiB for point-to-point, 1 MiB for collectives.
IMB_P2P_MSGLOG_MAX = 22
IMB_COLLECTIVE_MSGLOG_MAX = 20
#: IMB's -time (seconds per message size; IMB's own default): IMB fits its
#: repetitions into it and stops the benchmark ("time-out") once
#: time x number of sizes has passed.
IMB_TIME_PER_SIZE = 10.0
#: ... for Uniband/Biband: a repetition is a window of 64 messages, 256 MiB each
#: way at 4 MiB, and over a Gigabit link 10 s per size runs out at 4 MiB.
IMB_WINDOWED_TIME_PER_SIZE = 20.0
#: -iter for the windowed benchmarks: each repetition is a window of 64
#: messages, timed as one aggregate (IMB prints no per-repetition spread).
#: At most 20 repetitions, and at most IMB_WINDOWED_VOLUME_MB / size of them
#: (at least 1; IMB's overall_vol, in MB, counts one message per repetition,
#: not the window): one window of 64 x 4 MiB at 4 MiB, 2 of 64 x 1 MiB.  IMB's
#: dynamic iteration policy runs every size three times (1 repetition, then
#: about a second's worth, then the timed ones) and its warm-up once more.
#: Their time per setting: docs/measurements.md, "Where the time goes".
IMB_WINDOWED_REPETITIONS = 20
IMB_WINDOWED_VOLUME_MB = 2
#: -iter of the others: IMB's own defaults (at most 1000 repetitions and at
#: most IMB_VOLUME_MB / size of them), the volume cut to what the partition's
#: link moves in IMB_VOLUME_SECONDS: IMB's 40 MB per size is 3 ms at 100
#: Gbit/s but 0.34 s at 1 Gbit/s, and its dynamic policy runs a size 3-4
#: times (docs/measurements.md, "Where the time goes").
IMB_REPETITIONS = 1000
IMB_VOLUME_MB = 40
IMB_VOLUME_SECONDS = 0.1

#: IMB's window (messages in flight per repetition of Uniband/Biband), passed
#: as -window_size: IMB 2021's default is 256 (IMB 2019's and OSU's 64).  Left
#: to IMB, every repetition moved 4x the volume the link counters and the
#: -iter volume assumed, at the same MB/s.
IMB_WINDOW = 64
#: Launch, MPI_Init and finalize on top of IMB's own time budget.
IMB_STARTUP_MARGIN_S = 60

# OSU defaults (OMB's own maxima)
OSU_PT2PT_MAX_SIZE = 4 * 1024 * 1024
OSU_COLLECTIVE_MAX_SIZE = 1024 * 1024
#: Smallest size every OSU table must have: sizes below one element of the
#: datatype are skipped by OMB (MPI_FLOAT reductions start at 4 B), and the
#: first size differs between releases (0 or 1).
OSU_MIN_REQUIRED_SIZE = 8
#: OMB's own iteration counts (c/util/osu_util.h of 7.x): (iterations + warm-up)
#: up to OSU_LARGE_MESSAGE_SIZE and above it, per kind of program.
OSU_LARGE_MESSAGE_SIZE = 8192
OSU_LOOPS = {'latency': (10000 + 100, 1000 + 10), 'bandwidth': (100 + 10, 20 + 2),
             'collective': (1000 + 100, 100 + 10),
             'message rate': (100 + 10, 100 + 10)}    # osu_mbw_mr: no fewer for large ones
#: Messages in flight per iteration of the bandwidth programs (OMB's window).
OSU_WINDOW = 64
#: The job's time limit: this many times the seconds OMB's sweep keeps the
#: partition's link busy (a full sweep to 4 MiB is minutes on 1 Gbit/s), plus
#: launch, MPI_Init and finalize (as for IMB).
OSU_TIME_FACTOR = 3


# --------------------------------------------------------------------------
# Pure functions
# --------------------------------------------------------------------------


def osu_wire_seconds(program: str, max_size: int, link_rate_bps: int) -> float:
    '''Seconds the OMB ``program``'s default sweep up to ``max_size`` keeps
    one direction of a ``link_rate_bps`` link busy: a latency program sends
    each message there and back in turn; a bandwidth program a window of them
    per iteration (both directions at once for osu_bibw); a collective of two
    ranks about a message each way.'''
    kind = ('latency' if program in OsuProgram.PT2PT_LATENCY else
            'collective' if program in OsuProgram.COLLECTIVES else
            'message rate' if program in OsuProgram.MESSAGE_RATE else 'bandwidth')
    per_iteration = {'latency': 2, 'collective': 2}.get(kind, OSU_WINDOW)
    small, large = OSU_LOOPS[kind]
    total_bytes = sum(size * per_iteration * (large if size > OSU_LARGE_MESSAGE_SIZE else small)
                      for size in message_sizes(1, max_size))
    return total_bytes * 8 / link_rate_bps


def osu_time_limit(program: str, max_size: int, link_rate_bps: int | None) -> int | None:
    '''The job's time limit in seconds for that sweep (OSU_TIME_FACTOR times
    its wire time, plus IMB_STARTUP_MARGIN_S); None on a partition without a
    declared link rate (its own time limit holds).'''
    if not link_rate_bps:
        return None
    return math.ceil(IMB_STARTUP_MARGIN_S
                     + OSU_TIME_FACTOR * osu_wire_seconds(program, max_size, link_rate_bps))


def imb_volume_mb(link_rate_bps: int | None) -> int:
    '''IMB's overall volume per size (MB) on a link of ``link_rate_bps``
    (None: unknown, IMB's default): IMB_VOLUME_MB where the link moves it
    within IMB_VOLUME_SECONDS, less on a slower link, at least 1.'''
    if not link_rate_bps:
        return IMB_VOLUME_MB
    return max(1, min(IMB_VOLUME_MB, int(link_rate_bps / 8 * IMB_VOLUME_SECONDS / 1e6)))


#: Lines in a benchmark's stdout that are not the benchmark's own and may land
#: anywhere, tables included: the suite's link counters (hpcnet.fabrics,
#: printed before and after the run) and the transport reports the fabric
#: table switches on.  Anything else stays, for the strict parsers to judge.
FOREIGN_LINES = (
    re.compile(r'^hpcnet-link: '),                         # hpcnet.fabrics
    re.compile(r'^\[\d+\.\d+\]\s+\[[^\]\s]+:\d+:\d+\]'),  # UCX log (UCX_LOG_LEVEL)
    re.compile(r'^\[[^\]\s]+:\d+\] '),                      # Open MPI opal_output [host:pid]
    re.compile(r'^libfabric:\d+:'),                         # libfabric FI_LOG_LEVEL
)


def benchmark_text(text: str) -> str:
    '''``text`` without the lines of :data:`FOREIGN_LINES` (line terminators
    kept, so a last line cut while being written still shows).'''
    return ''.join(line for line in text.splitlines(keepends=True)
                   if not any(p.match(line) for p in FOREIGN_LINES))


def tool_missing_reason(tool: str, what: str, stack: Stack):
    '''Why ``tool`` cannot run in this environment, or None when it can.'''
    if stack.tool(tool):
        return None
    prefix = stack.mpi_prefix or '(no MPI prefix)'
    where = ', '.join(os.path.join(prefix, sub) for sub in stacks.TOOL_SUBDIRS)
    return (f'{what} program {tool} not found in environment {stack.environ}: hpcnet.stacks '
            f'looked in {where} (tools found: {", ".join(name for name, _ in stack.tools) or "none"}); '
            f'install {what} against this MPI, or list a prefix that has it in {MPI_PREFIXES_ENV}')


def _under(path: str, root: str) -> bool:
    root = os.path.normpath(root)
    return os.path.normpath(path).startswith(root.rstrip(os.sep) + os.sep)


def check_tool_prefix(tool: str, path: str, stack: Stack) -> None:
    '''The program must belong to the environment's MPI: installed under its
    prefix, or under a prefix discovery attributed to it (``tool_prefixes``:
    Spack builds of IMB/OSU against that MPI).'''
    roots = [r for r in (stack.mpi_prefix, *stack.tool_prefixes) if r]
    if not any(_under(path, r) for r in roots):
        raise SanityError(f'{tool} at {path} is not under the prefix of the MPI of environment '
                          f'{stack.environ} ({", ".join(roots) or "no prefix known"}): it may '
                          'be built against another MPI')


_PROBE = re.compile(r'^hpcnet-mpi-library: (\S+) (\S+) (.*?)\s*$', re.M)


def measured_libraries(text: str) -> dict:
    '''rank -> (host, library) as src/mpiprobe.c printed them from inside
    each rank of a prebuilt benchmark.'''
    found = {}
    for rank, host, library in _PROBE.findall(text):
        if not rank.isdigit():
            raise SanityError(f'the MPI probe could not tell its rank (host {host}): the '
                              'launcher set none of OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, '
                              'SLURM_PROCID')
        # A script around the benchmark (a wrapper exec'ing it) is probed
        # too, and has no MPI: the program's own line wins.
        if library != 'none' or int(rank) not in found:
            found[int(rank)] = (host, library)
    return found


def measured_library(text: str, ranks: int) -> tuple:
    '''(library, {rank: host}): the one MPI library every rank loaded.'''
    found = measured_libraries(text)
    if sorted(found) != list(range(ranks)):
        raise SanityError(f'the MPI probe reported ranks {sorted(found)}, expected 0..{ranks - 1}: '
                          'the benchmark did not run with the probe preloaded')
    libraries = {library for _, library in found.values()}
    if len(libraries) != 1 or libraries == {'none'}:
        raise SanityError(f'the ranks loaded {len(libraries)} MPI libraries: '
                          f'{"; ".join(sorted(libraries))}')
    return libraries.pop(), {rank: host for rank, (host, _) in found.items()}


_IMB_TIMEOUT = re.compile(r'^\s*(?P<size>\d+)\s+time-out\.', re.M)


def check_imb_timeout(text: str, benchmark: str, time_per_size: float, num_sizes: int) -> None:
    '''IMB stops a benchmark whose time x sizes budget ran out and says so
    inside the table: name that, not the damaged row it leaves.'''
    m = _IMB_TIMEOUT.search(text)
    if m:
        raise SanityError(f'IMB stopped {benchmark} at {m.group("size")} B: '
                          + imb_budget_note(time_per_size, num_sizes))


def imb_budget_note(time_per_size: float, num_sizes: int) -> str:
    '''Why IMB may end a table early (with its time-out line, or silently
    after the sizes that fitted).'''
    return (f'its time budget (-time {time_per_size:g} s per size x {num_sizes} sizes = '
            f'{time_per_size * num_sizes:g} s) ran out; the path is slower than the budget allows '
            '(raise time_per_size, or lower msglog_max or repetitions)')


def imb_sizes(benchmark: str, msglog_min: int, msglog_max: int) -> tuple:
    '''The #bytes IMB prints for ``-msglog min:max``: 0, then every power of
    two from 2^min to 2^max; reductions skip sizes below one float; () for
    the tables without sizes (barriers).'''
    if benchmark in ImbBenchmark.SIZELESS:
        return ()
    lowest = IMB_REDUCTION_MIN_SIZE if benchmark in ImbBenchmark.REDUCTIONS else 1
    return message_sizes(max(1 << msglog_min, lowest), 1 << msglog_max, zero=True)


# --------------------------------------------------------------------------
# ReFrame base class
# --------------------------------------------------------------------------

class ToolBenchmark(MpiBenchmark):
    '''An MPI benchmark program that comes with the environment.

    Subclasses set :attr:`tool` (key of ``extras['tools']``) and
    :attr:`tool_suite` (what to install, for the skip reason) before the
    ``setup`` stage ends, and call :meth:`prove_run` in their sanity function.
    '''

    #: Key of the program in the environment's ``extras['tools']``.
    tool = variable(str, value='')
    #: The suite it belongs to, as a person would name it.
    tool_suite = variable(str, value='')
    #: The program that ran (absolute path), logged with every value.
    tool_path = variable(str, value='', loggable=True)
    #: The whole table: one dict per size (JSON report).
    curve = variable(typ.List[typ.Dict[str, object]], value=[], loggable=True)

    #: Preloaded into every rank: measures the MPI library it loaded.
    mpiprobe = fixture(build_mpiprobe, scope='environment')

    @run_after('setup')
    def locate_tool(self):
        reason = tool_missing_reason(self.tool, self.tool_suite, self.stack)
        if reason is not None:
            self.skip_because(reason)
        self.tool_path = self.stack.tool(self.tool)
        self.executable = shlex.quote(self.tool_path)

    @run_before('run')
    def preload_probe(self):
        # Into the benchmark's processes only, not the launcher's.
        probe = os.path.join(self.mpiprobe.stagedir, 'bin', PROBE_LIBRARY)
        self.executable_opts = [shlex.quote(f'LD_PRELOAD={probe}'), self.executable,
                                *self.executable_opts]
        self.executable = 'env'

    def stdout_path(self) -> str:
        return os.path.join(self.stagedir, self.stdout.evaluate())

    def benchmark_output(self) -> str:
        '''The program's stdout without the lines of :data:`FOREIGN_LINES`.'''
        try:
            with open(self.stdout_path(), errors='replace') as fp:
                return benchmark_text(fp.read())
        except OSError as err:
            raise SanityError(f'{self.stdout_path()}: {err.strerror}') from None

    def prove_run(self, bytes_per_rank: list | None = None, link_bound=None):
        '''The program belongs to the environment's MPI, and the run goes
        through the one sanity step of every MPI run with the library and the
        hosts measured inside the ranks; the link counters are held against
        ``bytes_per_rank`` (payload each rank sent) where the benchmark's
        table gives it, else against ``link_bound(hosts)`` (a
        :class:`hpcnet.checklib.linkbytes.LinkBound` from the ranks' hosts).'''
        check_tool_prefix(self.tool, self.tool_path, self.stack)
        library, hosts = measured_library(self.job_output(), self.num_tasks)
        by_host = None
        if bytes_per_rank is not None:
            by_host = {}
            for rank, nbytes in enumerate(bytes_per_rank):
                by_host[hosts[rank]] = by_host.get(hosts[rank], 0) + int(nbytes)
        bound = link_bound(hosts) if link_bound is not None and by_host is None else None
        self.prove(library, hosts, by_host, link_bound=bound)
