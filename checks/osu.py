"""OSU Micro-Benchmarks between two ranks: point-to-point latency, bandwidth,
bidirectional bandwidth, message rate, and blocking collectives, one program
per test, with the OMB installed with the environment's MPI.

The programs are found by hpcnet.stacks (``extras['tools']``: the MPI
prefix's bin and libexec/osu-micro-benchmarks/mpi/{pt2pt,collective});
environments without OMB are not selected (``+osu``), and a test whose program
is missing is skipped, naming it. The whole table goes into the report
(``curve``); performance variables at the sizes of hpcnet.checklib.benchlib.

Options: ``-m <max>`` (4 MiB point-to-point, 1 MiB collectives: OMB's own
maxima). Only the maximum is passed: OMB ignores a minimum of 0 (its
``set_min_message_size`` rejects it, and the error is lost), so the first size
is OMB's own (0 or 1 depending on benchmark and release). ``-f`` (min, max,
iterations) for collectives (``full_stats``); ``-x``/``-i`` only when set
(``warmup``, ``iterations``): OMB's defaults already use fewer iterations for
large messages, which ``-i`` would undo.

Time limit: OSU_TIME_FACTOR times the seconds OMB's default sweep keeps the
partition's link busy, plus a start-up margin, where that is longer than the
partition's own limit (benchlib.osu_time_limit).
"""
import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.exceptions import SanityError

from hpcnet.checklib import linkbytes, sanity
from hpcnet.checklib.sanity import sanity_from_output_errors
from hpcnet.checklib.benchlib import (OSU_COLLECTIVE_MAX_SIZE, OSU_MIN_REQUIRED_SIZE,
                                      OSU_PT2PT_MAX_SIZE, OsuProgram, ToolBenchmark,
                                      osu_time_limit)
from hpcnet.constants import Feature
from hpcnet.metrics import COLLECTIVE_SIZES
from hpcnet.parsers import parsed_once
from hpcnet.parsers.osu import parse_osu
from hpcnet.parsers.table import SIZE_COLUMN
from hpcnet.sizes import message_sizes

#: Columns that are counts or verdicts, not measurements.
COUNT_COLUMNS = (SIZE_COLUMN, 'iterations', 'transmit_size', 'validation')
#: Columns that may be 0 at size 0 (0 bytes in any time is 0 MB/s).
ZERO_AT_SIZE0 = ('bandwidth_MBps',)
#: Columns that may be 0 at any size (non-blocking collectives: no overlap at all).
NONNEGATIVE_COLUMNS = ('overlap_percent',)
#: What -f adds to a blocking collective's table.
FULL_STATS_COLUMNS = ('min_latency_us', 'max_latency_us')


@rfm.simple_test
class hpcnet_osu(ToolBenchmark):
    '''One OSU Micro-Benchmarks program, two ranks on one node.'''
    benchmark = parameter(OsuProgram.ALL)
    tool_suite = 'OSU Micro-Benchmarks (OMB)'
    reference_index = ['$partition', 'mpi_family', 'benchmark']
    # A prebuilt binary: its result does not depend on the compiler.
    valid_prog_environs = [f'+{Feature.OSU} +{Feature.PRIMARY}']
    tags = {'osu', 'mpi'}
    #: Largest message (-m); None: OSU_PT2PT_MAX_SIZE / OSU_COLLECTIVE_MAX_SIZE.
    max_size = variable(int, type(None), value=None)
    #: -f for collectives: min/max latency and iterations (max_* variables).
    full_stats = variable(typ.Bool, value=True)
    #: -x (warm-up iterations) and -i (iterations); None: OMB's defaults.
    warmup = variable(int, type(None), value=None)
    iterations = variable(int, type(None), value=None)
    #: OMB's version, as its title prints it.
    osu_version = variable(str, value='', loggable=True)

    @run_after('init')
    def set_tool(self):
        self.tool = self.benchmark

    def is_collective(self) -> bool:
        return self.benchmark in OsuProgram.COLLECTIVES

    def size_max(self) -> int:
        if self.max_size is not None:
            return self.max_size
        return OSU_COLLECTIVE_MAX_SIZE if self.is_collective() else OSU_PT2PT_MAX_SIZE

    @run_after('setup')
    def set_options(self):
        self.descr = f'OSU {self.benchmark} over {self.current_partition.fullname}'
        opts = ['-m', str(self.size_max())]
        if self.is_collective() and self.full_stats:
            opts.append('-f')
        if self.warmup is not None:
            opts += ['-x', str(self.warmup)]
        if self.iterations is not None:
            opts += ['-i', str(self.iterations)]
        self.executable_opts = opts
        # OMB's own iteration counts: a budget from the bytes they move on the link,
        # where it is longer than the partition's own limit.
        if self.time_limit is None and self.warmup is None and self.iterations is None:
            budget = osu_time_limit(self.benchmark, self.size_max(), self.link_rate_bps)
            own = self.current_partition.time_limit
            if budget is not None and (own is None or budget > typ.Duration(own)):
                self.time_limit = budget

    @parsed_once
    def osu_output(self):
        '''The parsed, checked table.'''
        with sanity_from_output_errors():
            out = parse_osu(self.benchmark_output(), source=self.stdout_path(),
                            expect_benchmark=self.benchmark, expect_max_size=self.size_max())
            out.headline        # the benchmark's figure of merit is there
            sanity.check_sizes(out.sizes, message_sizes(OSU_MIN_REQUIRED_SIZE, self.size_max()))
            if self.is_collective() and self.full_stats:
                missing = [c for c in FULL_STATS_COLUMNS if c not in out.columns]
                if missing:
                    raise SanityError(f'{self.benchmark} ran with -f but printed no '
                                      f'{", ".join(missing)} (columns: {", ".join(out.columns)}): '
                                      'this OMB ignores -f; set full_stats=False to accept it')
            out.require_finite_positive([c for c in out.columns if c not in COUNT_COLUMNS],
                                        zero_ok_at_size0=ZERO_AT_SIZE0,
                                        nonnegative=NONNEGATIVE_COLUMNS)
        failed = [r[SIZE_COLUMN] for r in out.rows if r.get('validation', 1.0) != 1.0]
        if failed:
            raise SanityError(f'{self.benchmark} data validation failed at sizes {failed}')
        self.osu_version = out.version
        return out

    @sanity_function
    def assert_valid(self):
        out = self.osu_output()
        # Per size, the messages OMB's loops send (its defaults or -i/-x;
        # the Iterations column where -f prints it): hpcnet.checklib.linkbytes.osu.
        self.prove_run(link_bound=lambda hosts: linkbytes.osu(
            self.benchmark, out.rows, hosts, iterations=self.iterations, warmup=self.warmup,
            datatype=out.datatype))
        self.curve = [dict(row) for row in out.rows]
        return True

    @run_before('performance')
    def set_perf_variables(self):
        # Here, not at setup: which optional sizes (0 B) and columns
        # (Latency (us) or Avg Latency(us)) an OMB prints depends on its release.
        out = self.osu_output()
        headline, _ = out.headline
        bench = self.benchmark
        if bench in OsuProgram.PT2PT_LATENCY:
            self._perf('latency', headline)
        elif bench in OsuProgram.PT2PT_BANDWIDTH:
            self._perf('bandwidth', 'bandwidth_MBps')
        elif bench in OsuProgram.MESSAGE_RATE:
            self._perf('bandwidth', 'bandwidth_MBps')
            self._perf('msgrate', 'messages_per_s')
        else:
            self._perf('avg', headline, COLLECTIVE_SIZES)
            if 'max_latency_us' in out.columns:
                self._perf('max', 'max_latency_us', COLLECTIVE_SIZES)

    def _perf(self, quantity, column, sizes=None):
        '''``quantity`` at the sizes of its catalogue entry (of ``sizes``, where
        a collective's 0 B is a barrier's only) that OMB printed.'''
        present = self.osu_output().sizes
        for size in sizes or self.metric(quantity).sizes:
            if size in present:
                self.add_metric(quantity, self._value(size, column), size)

    @sn.deferrable
    def _value(self, size, column):
        with sanity_from_output_errors():
            return self.osu_output().row_for_size(size)[column]

