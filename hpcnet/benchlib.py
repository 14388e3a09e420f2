"""Shared pieces of the checks that run prebuilt benchmark suites (IMB, OSU).

Those programs come with the environment (``extras['tools']``, filled by
:mod:`hpcnet.stacks`), not from ``src/``: they print no ``mpi-library:`` line
and no host list, so the proofs :class:`hpcnet.testlib.MpiBenchmark` owes
are made here from what the run does print:

- the program must belong to the environment's MPI: its path is under the
  MPI's prefix (or a prefix discovery attributed benchmark builds to);
- the library really loaded is checked where the MPI names it in its own
  report (Intel MPI's ``[0] MPI startup(): Intel(R) MPI Library, Version ...``
  with ``I_MPI_DEBUG``, which the fabric table switches on); otherwise the
  environment's MPI is recorded as such;
- the transport proof is the fabric table's, as for every MPI check.

:class:`ToolBenchmark` wires this into the pipeline; the pure functions take
what they need and raise with a message a site engineer can act on.
"""
from __future__ import annotations

import math
import os
import re
from types import SimpleNamespace

import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, variable
from reframe.core.exceptions import SanityError

from hpcnet import hooks, linkstats, stacks
from hpcnet.constants import COLLECTIVE_SIZES, P2P_BANDWIDTH_SIZES, P2P_LATENCY_SIZES
from hpcnet.parsers.imb import IMB_SUITES
from hpcnet.parsers.osu import OSU_BENCHMARKS
from hpcnet.testlib import MpiBenchmark

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
            raise ValueError(f'hpcnet.benchlib: {unknown} are not {suite} benchmarks')
    unknown = [n for n in OsuProgram.ALL if n not in OSU_BENCHMARKS]
    if unknown:
        raise ValueError(f'hpcnet.benchlib: {unknown} are not OSU benchmarks')


_check_names()

#: Units of the figures that hpcnet.constants.Unit does not name.
MSG_RATE_UNIT = 'msg/s'
PERCENT_UNIT = '%'

# Sizes with their own performance variables (the whole table is in ``curve``).
LATENCY_SIZES = P2P_LATENCY_SIZES          # 0 and 8 bytes, where present
BANDWIDTH_SIZES = P2P_BANDWIDTH_SIZES      # 64 KiB, 1 MiB, 4 MiB
#: Message rate: small messages (its figure of merit) and the bandwidth sizes.
MSG_RATE_SIZES = (8,) + P2P_BANDWIDTH_SIZES
#: Collectives: per-rank sizes (8 B, 64 KiB, 1 MiB), as hpcnet_collectives.
COLLECTIVE_PERF_SIZES = COLLECTIVE_SIZES

# IMB defaults
#: -msglog maxima: 4 MiB for point-to-point, 1 MiB for collectives.
IMB_P2P_MSGLOG_MAX = 22
IMB_COLLECTIVE_MSGLOG_MAX = 20
#: IMB's -time (seconds per message size; IMB's own default): IMB fits its
#: repetitions into it and stops the benchmark ("time-out") once
#: time x number of sizes has passed.
IMB_TIME_PER_SIZE = 10.0
#: -iter for the windowed benchmarks: each repetition is a window of 64
#: messages, so 100 repetitions are 6400 messages per size (IMB's 1000 takes
#: minutes per size over a slow TCP path).
IMB_WINDOWED_REPETITIONS = 100
#: IMB's window (messages in flight per repetition of Uniband/Biband).
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


# --------------------------------------------------------------------------
# Pure functions
# --------------------------------------------------------------------------

#: Lines in a benchmark's stdout that are not the benchmark's own and may land
#: anywhere, tables included: the suite's link counters (hpcnet.linkstats,
#: printed before and after the run) and the transport reports the fabric
#: table switches on.  Anything else stays, for the strict parsers to judge.
FOREIGN_LINES = (
    re.compile(r'^hpcnet-link: '),                         # hpcnet.linkstats
    re.compile(r'^\[\d+\.\d+\]\s+\[[^\]\s]+:\d+:\d+\]'),  # UCX log (UCX_LOG_LEVEL)
    re.compile(r'^\[[^\]\s]+:\d+\] '),                      # Open MPI opal_output [host:pid]
    re.compile(r'^libfabric:\d+:'),                         # libfabric FI_LOG_LEVEL
)


def benchmark_text(text: str) -> str:
    '''``text`` without the lines of :data:`FOREIGN_LINES` (line terminators
    kept, so a last line cut while being written still shows).'''
    return ''.join(line for line in text.splitlines(keepends=True)
                   if not any(p.match(line) for p in FOREIGN_LINES))


def tool_missing_reason(tool: str, what: str, environ_name: str, environ_extras: dict):
    '''Why ``tool`` cannot run in this environment, or None when it can.'''
    tools = environ_extras.get('tools') or {}
    if tools.get(tool):
        return None
    prefix = environ_extras.get('mpi_prefix', '(no MPI prefix)')
    where = ', '.join(os.path.join(prefix, sub) for sub in stacks.TOOL_SUBDIRS)
    return (f'{what} program {tool} not found in environment {environ_name}: hpcnet.stacks '
            f'looked in {where} (tools found: {", ".join(sorted(tools)) or "none"}); install '
            f'{what} against this MPI, or list a prefix that has it in HPCNET_MPI_PREFIXES')


def _under(path: str, root: str) -> bool:
    root = os.path.normpath(root)
    return os.path.normpath(path).startswith(root.rstrip(os.sep) + os.sep)


def check_tool_prefix(tool: str, path: str, environ_extras: dict, environ_name: str) -> None:
    '''The program must belong to the environment's MPI: installed under its
    prefix, or under a prefix discovery attributed to it (``tool_prefixes``:
    Spack builds of IMB/OSU against that MPI).'''
    roots = [environ_extras.get('mpi_prefix', '')] + list(environ_extras.get('tool_prefixes', ()))
    roots = [r for r in roots if r]
    if not any(_under(path, r) for r in roots):
        raise SanityError(f'{tool} at {path} is not under the prefix of the MPI of environment '
                          f'{environ_name} ({", ".join(roots) or "no prefix known"}): it may '
                          'be built against another MPI')


_STARTUP = re.compile(r'^\[\d+\] MPI startup\(\): (?P<text>.*?)\s*$', re.M)
_PIN_ROW = re.compile(r'^\[0\] MPI startup\(\): (?P<rank>\d+)\s+(?P<pid>\d+)\s+(?P<host>\S+)\s+\{',
                      re.M)


def runtime_library(mpi_output: str):
    '''The MPI library the run loaded, as the library itself reported it at
    start-up (Intel MPI with I_MPI_DEBUG), or None.'''
    for m in _STARTUP.finditer(mpi_output):
        if stacks.library_family(m.group('text')):
            return m.group('text')
    return None


def rank_hosts(mpi_output: str) -> dict:
    '''rank -> host from Intel MPI's pinning table (I_MPI_DEBUG), or {}.'''
    return {int(m.group('rank')): m.group('host') for m in _PIN_ROW.finditer(mpi_output)}


_IMB_TIMEOUT = re.compile(r'^\s*(?P<size>\d+)\s+time-out\.', re.M)


def check_imb_timeout(text: str, benchmark: str, time_per_size: float, num_sizes: int) -> None:
    '''IMB stops a benchmark whose time x sizes budget ran out and says so
    inside the table: name that, not the damaged row it leaves.'''
    m = _IMB_TIMEOUT.search(text)
    if m:
        raise SanityError(
            f'IMB stopped {benchmark} at {m.group("size")} B: its time budget (-time '
            f'{time_per_size:g} s per size x {num_sizes} sizes = {time_per_size * num_sizes:g} s) '
            'ran out; the path is slower than the budget allows (raise time_per_size, or lower '
            'msglog_max or repetitions)')


def imb_sizes(benchmark: str, msglog_min: int, msglog_max: int) -> tuple:
    '''The #bytes IMB prints for ``-msglog min:max``: 0, then every power of
    two from 2^min to 2^max; reductions skip sizes below one float; () for
    the tables without sizes (barriers).'''
    if benchmark in ImbBenchmark.SIZELESS:
        return ()
    lowest = 4 if benchmark in ImbBenchmark.REDUCTIONS else 1
    return (0,) + tuple(1 << k for k in range(msglog_min, msglog_max + 1) if 1 << k >= lowest)


def osu_required_sizes(max_size: int) -> tuple:
    '''Sizes every OSU table up to ``max_size`` must have (see
    :data:`OSU_MIN_REQUIRED_SIZE`); the last one is ``max_size``.'''
    return hooks.powers_of_two(OSU_MIN_REQUIRED_SIZE, max_size)


def check_values(rows, columns, size_key, what, zero_at_size0=(), nonnegative=()) -> None:
    '''Every value of ``columns`` is finite and > 0; ``zero_at_size0`` columns
    may be 0 at size 0 (0 bytes in 0 s: IMB prints 0.00), ``nonnegative``
    ones (overlap %) may be 0 anywhere.'''
    for row in rows:
        size = row.get(size_key)
        where = f'{int(size)} B' if size is not None else 'the only row'
        for col in columns:
            v = row[col]
            if not math.isfinite(v):
                raise SanityError(f'{what}: {col} at {where} is {v}')
            zero_ok = col in nonnegative or (col in zero_at_size0 and size == 0)
            if v < 0 or (v == 0 and not zero_ok):
                raise SanityError(f'{what}: {col} at {where} is {v} (must be > 0)')


def curve_rows(rows, size_key) -> list:
    '''Table rows for the report: the size under ``size_bytes`` (as in the
    kernels' curves), every other column under the parser's name.'''
    return [{('size_bytes' if k == size_key else k): v for k, v in row.items()} for row in rows]


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
    #: Why the test was skipped, when the program is missing (the JSON
    #: report keeps no skip reason of its own).
    tool_missing = variable(str, value='', loggable=True)
    #: The whole table: one dict per size (JSON report).
    curve = variable(typ.List[typ.Dict[str, object]], value=[], loggable=True)

    @run_after('setup')
    def locate_tool(self):
        env = self.current_environ
        reason = tool_missing_reason(self.tool, self.tool_suite, env.name, env.extras)
        if reason is not None:
            self.tool_missing = reason
            self.skip(reason)
        self.tool_path = env.extras['tools'][self.tool]
        self.executable = self.tool_path

    def stdout_path(self) -> str:
        return os.path.join(self.stagedir, self.stdout.evaluate())

    def benchmark_output(self) -> str:
        '''The program's stdout without the lines of :data:`FOREIGN_LINES`.'''
        try:
            with open(self.stdout_path(), errors='replace') as fp:
                return benchmark_text(fp.read())
        except OSError as err:
            raise SanityError(f'{self.stdout_path()}: {err.strerror}') from None

    def prove_run(self, reported: str = '') -> None:
        '''Program, library, hosts and transport (``reported``: what the
        program says of the MPI, for the record).'''
        env = self.current_environ
        check_tool_prefix(self.tool, self.tool_path, env.extras, env.name)
        text = self.job_output()
        library = runtime_library(text)
        hosts = rank_hosts(text)
        if library is not None:
            self.check_common(SimpleNamespace(mpi_library=library, hosts=hosts))
            return
        # The MPI printed no library report: the prefix check above is the
        # proof; record what ran.
        if self.num_nodes > 1 and len(set(hosts.values())) < self.num_nodes:
            raise SanityError(f'ranks were meant to run on {self.num_nodes} nodes, but the '
                              f'output of {env.extras["mpi_family"]} names no hosts to prove it')
        self.mpi_library = (f'{env.extras["mpi_family"]} {env.extras["mpi_version"]} '
                            f'(environment {env.name}{"; " + reported if reported else ""})')
        if self.verify_transport:
            self.transport = hooks.check_transport(self.fabric_settings, text)

    def check_link_payload(self, bytes_per_rank: list) -> None:
        '''The fabric interface sent at least what the ranks sent (partitions
        naming an ``iface``; see MpiBenchmark.check_link).'''
        if self.link_iface() is None:
            return
        text = self.job_output()
        hosts = rank_hosts(text)
        if not hosts and self.num_nodes == 1:
            try:
                deltas = linkstats.parse(text)
            except linkstats.LinkStatsError as err:
                raise SanityError(f'link counters: {err}') from None
            if len(deltas) == 1:
                hosts = {rank: deltas[0].host for rank in range(len(bytes_per_rank))}
        if len(hosts) < len(bytes_per_rank):
            raise SanityError(f'cannot attribute the payload of {len(bytes_per_rank)} ranks to '
                              f'hosts (known: {hosts}) for the link counter check')
        by_host = {}
        for rank, nbytes in enumerate(bytes_per_rank):
            by_host[hosts[rank]] = by_host.get(hosts[rank], 0) + int(nbytes)
        self.check_link(by_host)

    def add_perf(self, name: str, value, unit: str) -> None:
        self.perf_variables[name] = sn.make_performance_function(value, unit)
