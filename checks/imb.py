"""Intel(R) MPI Benchmarks (IMB-MPI1, IMB-NBC) between two ranks, one
benchmark per test, with the IMB that comes with the environment's MPI.

The whole IMB table goes into the report (``curve``); performance variables at
the sizes of hpcnet.benchlib. The binary is the environment's
(``extras['tools']``): environments without it are not selected (``+imb``,
``+imb-nbc``) and a test that gets one anyway is skipped, naming what is
missing. Knobs (``-S``): ``msglog_max`` (IMB -msglog 0:N; default 22 = 4 MiB
point-to-point, 20 = 1 MiB collectives), ``time_per_size`` (IMB -time, s),
``repetitions`` (IMB -iter).
"""
import math

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.exceptions import SanityError

from hpcnet import hooks
from hpcnet.benchlib import (BANDWIDTH_SIZES, COLLECTIVE_PERF_SIZES, IMB_COLLECTIVE_MSGLOG_MAX,
                             IMB_P2P_MSGLOG_MAX, IMB_STARTUP_MARGIN_S, IMB_TIME_PER_SIZE,
                             IMB_WINDOW, IMB_WINDOWED_REPETITIONS, LATENCY_SIZES,
                             MSG_RATE_SIZES, MSG_RATE_UNIT, PERCENT_UNIT, ImbBenchmark, ImbSuite,
                             ToolBenchmark, check_imb_timeout, check_values, curve_rows,
                             imb_sizes)
from hpcnet.constants import Feature, Unit
from hpcnet.parsers.errors import BenchmarkOutputError
from hpcnet.parsers.imb import imb_command, parse_imb

#: Messages each of the two ranks sends per repetition: the payload the
#: link counters must account for (collectives: algorithm-dependent, none).
LINK_PAYLOAD = {
    ImbBenchmark.PINGPONG: (1, 1),
    ImbBenchmark.PINGPING: (1, 1),
    ImbBenchmark.SENDRECV: (1, 1),
    ImbBenchmark.EXCHANGE: (2, 2),      # to the left and to the right neighbour
    ImbBenchmark.UNIBAND: (IMB_WINDOW, 0),
    ImbBenchmark.BIBAND: (IMB_WINDOW, IMB_WINDOW),
}
#: Latency column of the point-to-point benchmarks.
LATENCY_COLUMN = {
    ImbBenchmark.PINGPONG: 't_usec',
    ImbBenchmark.PINGPING: 't_usec',
    ImbBenchmark.SENDRECV: 't_avg_usec',
    ImbBenchmark.EXCHANGE: 't_avg_usec',
}
#: Columns that are counts, not measurements.
COUNT_COLUMNS = ('bytes', 'group', 'defects')


class ImbBase(ToolBenchmark):
    tool_suite = 'Intel(R) MPI Benchmarks (IMB)'
    #: IMB -msglog 0:msglog_max; None: IMB_P2P_MSGLOG_MAX point-to-point,
    #: IMB_COLLECTIVE_MSGLOG_MAX collectives.
    msglog_max = variable(int, type(None), value=None)
    #: IMB -time: seconds per message size (also sets the job's time limit).
    time_per_size = variable(float, value=IMB_TIME_PER_SIZE)
    #: IMB -iter (maximum repetitions); None: IMB's own, except the windowed
    #: benchmarks (IMB_WINDOWED_REPETITIONS).
    repetitions = variable(int, type(None), value=None)
    #: IMB's version, as its header prints it.
    imb_version = variable(str, value='', loggable=True)

    def msglog(self) -> int:
        if self.msglog_max is not None:
            return self.msglog_max
        if self.benchmark in ImbBenchmark.P2P + ImbBenchmark.WINDOWED:
            return IMB_P2P_MSGLOG_MAX
        return IMB_COLLECTIVE_MSGLOG_MAX

    def expected_sizes(self) -> tuple:
        return imb_sizes(self.benchmark, 0, self.msglog())

    def num_samples(self) -> int:
        '''Rows IMB prints (what its time budget is multiplied by).'''
        return max(1, len(self.expected_sizes()))

    @run_after('setup')
    def set_command(self):
        self.descr = f'IMB {self.benchmark} over {self.current_partition.fullname}'
        repetitions = self.repetitions
        if repetitions is None and self.benchmark in ImbBenchmark.WINDOWED:
            repetitions = IMB_WINDOWED_REPETITIONS
        # -npmin: only the table with every rank (IMB would also run 2, 4, ...).
        args = imb_command([self.benchmark], msglog=(0, self.msglog()), suite=self.tool,
                           executable=self.tool_path, npmin=self.num_tasks,
                           iterations=repetitions, time_limit=self.time_per_size)
        self.executable_opts = args[1:]
        if self.time_limit is None:
            self.time_limit = math.ceil(self.num_samples() * self.time_per_size
                                        + IMB_STARTUP_MARGIN_S)
        if self.benchmark not in LINK_PAYLOAD or self.num_tasks != 2:
            self.check_link_counters = False

    @run_after('setup')
    def set_perf_variables(self):
        sizes = self.expected_sizes()
        bench = self.benchmark
        if bench in LATENCY_COLUMN:
            self._perf('latency', LATENCY_SIZES, sizes, LATENCY_COLUMN[bench], Unit.US)
            self._perf('bandwidth', BANDWIDTH_SIZES, sizes, 'mbytes_per_sec', Unit.MBPS)
        elif bench in ImbBenchmark.WINDOWED:
            self._perf('bandwidth', BANDWIDTH_SIZES, sizes, 'mbytes_per_sec', Unit.MBPS)
            self._perf('msgrate', MSG_RATE_SIZES, sizes, 'msg_per_sec', MSG_RATE_UNIT)
        elif bench in ImbBenchmark.NBC:
            self._perf('overall', COLLECTIVE_PERF_SIZES, sizes, 't_ovrl_usec', Unit.US)
            self._perf('pure', COLLECTIVE_PERF_SIZES, sizes, 't_pure_usec', Unit.US)
            self._perf('overlap', COLLECTIVE_PERF_SIZES, sizes, 'overlap_percent', PERCENT_UNIT)
        else:
            self._perf('avg', COLLECTIVE_PERF_SIZES, sizes, 't_avg_usec', Unit.US)
            self._perf('max', COLLECTIVE_PERF_SIZES, sizes, 't_max_usec', Unit.US)

    def _perf(self, name, perf_sizes, sizes, column, unit):
        if not sizes:       # a barrier: one row, named like hpcnet_collectives' 0 B
            self.add_perf(f'{name}_{hooks.size_label(0)}', self._value(None, column), unit)
            return
        for size in perf_sizes:
            if size in sizes:
                self.add_perf(f'{name}_{hooks.size_label(size)}', self._value(size, column), unit)

    @sn.deferrable
    def _value(self, size, column):
        table = self.imb_table()
        try:
            row = table.rows[0] if size is None else table.row_for_size(size)
        except BenchmarkOutputError as err:
            raise SanityError(str(err)) from None
        return row[column]

    def imb_table(self):
        '''The benchmark's table (parsed and checked once).'''
        cached = getattr(self, '_imb_table', None)
        if cached is not None:
            return cached
        text = self.benchmark_output()
        check_imb_timeout(text, self.benchmark, self.time_per_size, self.num_samples())
        try:
            out = parse_imb(text, source=self.stdout_path())
            if out.invalid_names:
                raise SanityError(f'IMB rejected the benchmark name(s) '
                                  f'{", ".join(out.invalid_names)} (and then ran its default list)')
            table = out.table(self.benchmark, processes=self.num_tasks)
        except BenchmarkOutputError as err:
            raise SanityError(str(err)) from None
        hooks.check_sizes(table.sizes, self.expected_sizes())
        values = [c for c in table.columns if c not in COUNT_COLUMNS]
        check_values(table.rows, values, 'bytes', f'IMB {self.benchmark}',
                     zero_at_size0=[c for c in values if c not in ('repetitions', 'msg_per_sec')],
                     nonnegative=('overlap_percent',))
        bad = [r for r in table.rows if r.get('defects', 0)]
        if bad:
            raise SanityError(f'IMB {self.benchmark} found defects in the received data at '
                              f'{", ".join(str(r.get("bytes", "")) for r in bad)} B')
        self.imb_version = out.version
        self._imb_output = out
        self._imb_table = table
        return table

    @sanity_function
    def assert_valid(self):
        table = self.imb_table()
        out = self._imb_output
        self.prove_run(f'IMB {out.version} reports MPI standard {out.mpi_version or "?"}')
        if self.check_link_counters:
            per_rep = LINK_PAYLOAD[self.benchmark]
            self.check_link_payload([sum(r['bytes'] * r['repetitions'] * n for r in table.rows)
                                     for n in per_rep])
        self.curve = curve_rows(table.rows, 'bytes')
        return True


@rfm.simple_test
class hpcnet_imb(ImbBase):
    '''IMB-MPI1: point-to-point, windowed bandwidth and blocking collectives.'''
    benchmark = parameter(ImbBenchmark.MPI1)
    tool = ImbSuite.MPI1
    # A prebuilt binary: its result does not depend on the compiler.
    valid_prog_environs = [f'+{Feature.IMB} +{Feature.PRIMARY}']
    tags = {'imb', 'mpi'}


@rfm.simple_test
class hpcnet_imb_nbc(ImbBase):
    '''IMB-NBC: non-blocking collectives (overall, pure and overlap).'''
    benchmark = parameter(ImbBenchmark.NBC)
    tool = ImbSuite.NBC
    valid_prog_environs = [f'+{Feature.IMB_NBC} +{Feature.PRIMARY}']
    tags = {'imb', 'mpi'}
