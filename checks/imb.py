"""Intel(R) MPI Benchmarks (IMB-MPI1, IMB-NBC) between two ranks, one
benchmark per test, with the IMB that comes with the environment's MPI.

The whole IMB table goes into the report (``curve``); performance variables at
the sizes of hpcnet.checklib.benchlib. The binary is the environment's
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

from hpcnet.checklib import linkbytes, sanity
from hpcnet.checklib.sanity import sanity_from_output_errors
from hpcnet.checklib.benchlib import (IMB_COLLECTIVE_MSGLOG_MAX, IMB_P2P_MSGLOG_MAX,
                                      IMB_REPETITIONS, IMB_STARTUP_MARGIN_S, IMB_TIME_PER_SIZE,
                                      IMB_WINDOW, IMB_WINDOWED_REPETITIONS,
                                      IMB_WINDOWED_TIME_PER_SIZE, IMB_WINDOWED_VOLUME_MB,
                                      ImbBenchmark, ImbSuite, ToolBenchmark, check_imb_timeout,
                                      imb_budget_note, imb_sizes, imb_volume_mb)
from hpcnet.constants import Feature
from hpcnet.metrics import COLLECTIVE_SIZES
from hpcnet.parsers import parsed_once
from hpcnet.parsers.imb import parse_imb
from hpcnet.parsers.imb_command import imb_command
from hpcnet.parsers.table import SIZE_COLUMN

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
COUNT_COLUMNS = (SIZE_COLUMN, 'group', 'defects')
#: Measurements that are > 0 even at 0 bytes; the others (times, MB/s) may be 0.00 there.
POSITIVE_AT_SIZE0 = ('repetitions', 'msg_per_sec')
#: Measurements that may be 0 at any size (IMB-NBC: no overlap at all).
NONNEGATIVE_COLUMNS = ('overlap_percent',)
#: The IMB executable of each benchmark, and the environment feature that says it is there.
SUITE_OF = {**{name: ImbSuite.MPI1 for name in ImbBenchmark.MPI1},
            **{name: ImbSuite.NBC for name in ImbBenchmark.NBC}}
SUITE_FEATURE = {ImbSuite.MPI1: Feature.IMB, ImbSuite.NBC: Feature.IMB_NBC}


class ImbBase(ToolBenchmark):
    '''One IMB benchmark (parameter ``benchmark`` of the subclasses) with the
    IMB executable that runs it.'''
    tool_suite = 'Intel(R) MPI Benchmarks (IMB)'
    tags = {'imb', 'mpi'}
    reference_index = ['$partition', 'mpi_family', 'benchmark']
    #: IMB -msglog 0:msglog_max; None: IMB_P2P_MSGLOG_MAX point-to-point,
    #: IMB_COLLECTIVE_MSGLOG_MAX collectives.
    msglog_max = variable(int, type(None), value=None)
    #: IMB -time: seconds per message size (also sets the job's time limit);
    #: None: IMB_TIME_PER_SIZE, IMB_WINDOWED_TIME_PER_SIZE for Uniband/Biband.
    time_per_size = variable(float, type(None), value=None)
    #: IMB -iter (maximum repetitions); None: IMB's own, with the volume per
    #: size cut to the link's rate (benchlib.imb_volume_mb), and for the
    #: windowed benchmarks IMB_WINDOWED_REPETITIONS, IMB_WINDOWED_VOLUME_MB.
    repetitions = variable(int, type(None), value=None)
    #: IMB's version, as its header prints it.
    imb_version = variable(str, value='', loggable=True)

    @run_after('init')
    def select_suite(self):
        self.tool = SUITE_OF[self.benchmark]
        # A prebuilt binary: its result does not depend on the compiler.
        self.valid_prog_environs = [f'+{SUITE_FEATURE[self.tool]} +{Feature.PRIMARY}']

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

    @run_after('init')
    def set_time_per_size(self):
        if self.time_per_size is None:
            self.time_per_size = (IMB_WINDOWED_TIME_PER_SIZE
                                  if self.benchmark in ImbBenchmark.WINDOWED else IMB_TIME_PER_SIZE)

    @run_after('setup')
    def set_command(self):
        self.descr = f'IMB {self.benchmark} over {self.current_partition.fullname}'
        repetitions = self.repetitions
        if repetitions is None:
            repetitions = ((IMB_WINDOWED_REPETITIONS, IMB_WINDOWED_VOLUME_MB)
                           if self.benchmark in ImbBenchmark.WINDOWED
                           else (IMB_REPETITIONS, imb_volume_mb(self.link_rate_bps)))
        # -npmin: only the table with every rank (IMB would also run 2, 4, ...).
        args = imb_command([self.benchmark], msglog=(0, self.msglog()), suite=self.tool,
                           executable=self.tool_path, npmin=self.num_tasks,
                           iterations=repetitions, time_limit=self.time_per_size,
                           window_size=(IMB_WINDOW if self.benchmark in ImbBenchmark.WINDOWED
                                        else None))
        self.executable_opts = args[1:]
        if self.time_limit is None:
            self.time_limit = math.ceil(self.num_samples() * self.time_per_size
                                        + IMB_STARTUP_MARGIN_S)

    @run_after('setup')
    def set_perf_variables(self):
        sizes = self.expected_sizes()
        bench = self.benchmark
        if bench in LATENCY_COLUMN:
            self._perf('latency', sizes, LATENCY_COLUMN[bench])
            self._perf('bandwidth', sizes, 'mbytes_per_sec')
        elif bench in ImbBenchmark.WINDOWED:
            self._perf('bandwidth', sizes, 'mbytes_per_sec')
            self._perf('msgrate', sizes, 'msg_per_sec')
        elif bench in ImbBenchmark.NBC:
            self._perf('overall', sizes, 't_ovrl_usec', COLLECTIVE_SIZES)
            self._perf('pure', sizes, 't_pure_usec', COLLECTIVE_SIZES)
            self._perf('overlap', sizes, 'overlap_percent', COLLECTIVE_SIZES)
        else:
            self._perf('avg', sizes, 't_avg_usec', COLLECTIVE_SIZES)
            self._perf('max', sizes, 't_max_usec', COLLECTIVE_SIZES)

    def _perf(self, quantity, sizes, column, perf_sizes=None):
        '''``quantity`` at the sizes of its catalogue entry (of ``perf_sizes``,
        where a collective's 0 B is its barrier's only) that IMB ran.'''
        if not sizes:       # a barrier: one row, named like hpcnet_collectives' 0 B
            self.add_metric(quantity, self._value(None, column), 0)
            return
        for size in perf_sizes or self.metric(quantity).sizes:
            if size in sizes:
                name = self.add_metric(quantity, self._value(size, column), size)
                if quantity == 'bandwidth' and self.benchmark in ImbBenchmark.ONE_WAY:
                    self.calibrated_metrics.append(name)

    @sn.deferrable
    def _value(self, size, column):
        table = self.imb_table()
        with sanity_from_output_errors():
            row = table.rows[0] if size is None else table.row_for_size(size)
        return row[column]

    @parsed_once
    def imb_table(self):
        '''The benchmark's table, parsed and checked.'''
        text = self.benchmark_output()
        check_imb_timeout(text, self.benchmark, self.time_per_size, self.num_samples())
        with sanity_from_output_errors():
            out = parse_imb(text, source=self.stdout_path())
            if out.invalid_names:
                raise SanityError(f'IMB rejected the benchmark name(s) '
                                  f'{", ".join(out.invalid_names)} (and then ran its default list)')
            table = out.table(self.benchmark, processes=self.num_tasks)
            try:
                sanity.check_sizes(table.sizes, self.expected_sizes())
            except SanityError as err:
                # IMB also ends a table silently when the budget runs out.
                raise SanityError(f'{err}: IMB ended the {self.benchmark} table early; '
                                  + imb_budget_note(self.time_per_size, self.num_samples())) \
                    from None
            values = [c for c in table.columns if c not in COUNT_COLUMNS]
            table.require_finite_positive(
                values, zero_ok_at_size0=[c for c in values if c not in POSITIVE_AT_SIZE0],
                nonnegative=NONNEGATIVE_COLUMNS)
        defects = [table.row_label(row, index) for index, row in enumerate(table.rows)
                   if row.get('defects', 0)]
        if defects:
            raise SanityError(f'IMB {self.benchmark} found defects in the received data at '
                              f'{", ".join(defects)}')
        self.imb_version = out.version
        return table

    @sanity_function
    def assert_valid(self):
        table = self.imb_table()
        if self.benchmark in LINK_PAYLOAD and self.num_tasks == 2:
            self.prove_run(bytes_per_rank=[
                sum(r[SIZE_COLUMN] * r['repetitions'] * n for r in table.rows)
                for n in LINK_PAYLOAD[self.benchmark]])
        else:
            # Collectives: the least any algorithm moves, over the
            # #repetitions IMB printed for each size (hpcnet.checklib.linkbytes.imb).
            self.prove_run(link_bound=lambda hosts: linkbytes.imb(self.benchmark, table.rows,
                                                                  hosts))
        self.curve = [dict(row) for row in table.rows]
        return True


@rfm.simple_test
class hpcnet_imb(ImbBase):
    '''IMB-MPI1: point-to-point, windowed bandwidth and blocking collectives.'''
    benchmark = parameter(ImbBenchmark.MPI1)


@rfm.simple_test
class hpcnet_imb_nbc(ImbBase):
    '''IMB-NBC: non-blocking collectives (overall, pure and overlap).'''
    benchmark = parameter(ImbBenchmark.NBC)
