"""Parser of OSU Micro-Benchmarks (OMB) MPI outputs.

An OMB 7.4 output (the samples in ``shared/samples``) looks like::

    <blank line>
    # OSU MPI Latency Test v7.4
    # Datatype: MPI_CHAR.
    # Size       Avg Latency(us)
    1                       0.12
    2                       0.12
    ...

Where the strings come from (OMB sources; read in the 7.4 tree of
``johnpzh/osu-micro-benchmarks-7.4-ext`` and the 7.x tree of ``yqin/osu-micro-benchmarks``):

* the title is ``#define BENCHMARK "OSU MPI%s Latency Test"`` of each benchmark (``%s`` is
  the accelerator tag, e.g. ``-CUDA``), printed through ``HEADER "# " BENCHMARK " v"
  PACKAGE_VERSION``;
* the column header is printed by ``print_only_header()`` / ``print_header_*()`` in
  ``c/util/osu_util_mpi.c`` and ``print_header()`` in ``c/util/osu_util.c``:
  ``"%-*s" "# Size"`` then ``"%*s"`` (FIELD_WIDTH) ``"Avg Latency(us)"`` (7.4 pt2pt
  latency and collectives) or ``"Latency (us)"`` (``print_header`` LAT, older pt2pt,
  one-sided), ``"Bandwidth (MB/s)"``; with ``-f`` ``"Min Latency(us)"``, ``"Max
  Latency(us)"``, ``"Iterations"``; ``"Validation"`` with ``-c``; ``"P%d Tail Lat(us)"`` /
  ``"P%d Tail BW(MB/s)"`` with ``--tail-lat``; ``"Transmit Size"`` with derived datatypes;
  non-blocking collectives ``"Overall(us)"``, ``"Compute(us)"``, ``"Pure Comm.(us)"``,
  ``"Overlap(%)"`` (and with ``-f`` ``"Coll. Init(us)"``, ``"MPI_Test(us)"``,
  ``"MPI_Wait(us)"``, ``"Min Comm.(us)"``, ``"Max Comm.(us)"``); without a size column
  (barriers) ``"# Avg Latency(us)"`` / ``"# Overall(us)"``;
* ``osu_mbw_mr`` (``c/mpi/pt2pt/standard/osu_mbw_mr.c``) prints ``# [ pairs: N ] [ window
  size: W ]`` and ``"# Size" "MB/s" "Messages/s"``; 7.1 printed its title twice and the
  ``# Datatype`` line after the column header (both accepted).

Rules (strict; anything else is a :class:`BenchmarkOutputError` naming source and line):

* Lines starting with ``[<digits>]`` (MPI library output) are ignored everywhere; other
  lines before the title are ignored (launcher chatter); between title and column header,
  ``#`` lines are kept in :attr:`OsuOutput.info` and other lines ignored.
* The column header is the ``#`` line whose text starts with ``Size`` or a known column
  label; each label must be in :data:`OSU_COLUMNS` (or a tail-percentile label): an unknown
  one is an error naming it and the known labels.
* After the header every non-blank line is a row (or an ignored ``[N]`` line): exactly one
  field per column, numbers (integers for size, iterations, transmit size; ``Pass``/``Fail``
  for Validation, stored as 1.0/0.0); sizes strictly increase. A second ``# Datatype``
  section (``--type all``) or any other ``#`` line after the rows is an error.
* OMB prints no end marker. At least one row is required, and the last row must end with a
  line terminator (OMB writes whole lines; a last line without one was cut while being
  written). A run stopped between two rows cannot be seen in the text: pass
  ``expect_max_size`` (the ``-m`` maximum, default 4194304 for pt2pt, 1048576 for
  collectives) so that a last size different from it is an error.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, NamedTuple

from .errors import BenchmarkOutputError
from .table import INTEGER, LINE_FROM_LIBRARY, NUMBER, SIZE_COLUMN, ParsedTable

__all__ = ['BenchmarkOutputError', 'OsuOutput', 'OsuBenchmark', 'parse_osu', 'OSU_BENCHMARKS',
           'OSU_COLUMNS']

#: OMB column label -> normalized name (keys of the row dicts). Tail-latency labels
#: ``P<n> Tail Lat(us)`` / ``P<n> Tail BW(MB/s)`` map to ``p<n>_latency_us`` /
#: ``p<n>_bandwidth_MBps``.
OSU_COLUMNS: Mapping[str, str] = {
    'Size': SIZE_COLUMN,
    'Latency (us)': 'latency_us',
    'Avg Latency(us)': 'avg_latency_us',
    'Min Latency(us)': 'min_latency_us',
    'Max Latency(us)': 'max_latency_us',
    'Iterations': 'iterations',
    'Bandwidth (MB/s)': 'bandwidth_MBps',
    'MB/s': 'bandwidth_MBps',                # osu_mbw_mr
    'Messages/s': 'messages_per_s',          # osu_mbw_mr
    'Validation': 'validation',
    'Transmit Size': 'transmit_size',
    'Overall(us)': 'overall_us',             # non-blocking collectives
    'Compute(us)': 'compute_us',
    'Coll. Init(us)': 'coll_init_us',
    'MPI_Test(us)': 'mpi_test_us',
    'MPI_Wait(us)': 'mpi_wait_us',
    'Pure Comm.(us)': 'pure_comm_us',
    'Min Comm.(us)': 'min_comm_us',
    'Max Comm.(us)': 'max_comm_us',
    'Overlap(%)': 'overlap_percent',
}
_TAIL_LABELS = (('P<n> Tail Lat(us)', re.compile(r'P(\d{1,2}) Tail Lat\(us\)'), 'p{}_latency_us'),
                ('P<n> Tail BW(MB/s)', re.compile(r'P(\d{1,2}) Tail BW\(MB/s\)'),
                 'p{}_bandwidth_MBps'))
_INT_COLUMNS = frozenset({SIZE_COLUMN, 'iterations', 'transmit_size'})


class OsuBenchmark(NamedTuple):
    """What :data:`OSU_BENCHMARKS` knows of one OMB benchmark."""
    kind: str                      # 'pt2pt-latency', 'pt2pt-bandwidth', 'pt2pt-message-rate',
                                   # 'collective', 'collective-nonblocking'
    title: str                     # the title without accelerator tag and version
    perf_columns: tuple[str, ...]  # performance columns it may print; the first one present
                                   # in an output is its headline figure (OsuOutput.headline)
    unit: str                      # unit of the headline figure


_LAT = ('avg_latency_us', 'latency_us', 'min_latency_us', 'max_latency_us')
_BW = ('bandwidth_MBps',)
_NBC = ('overall_us', 'pure_comm_us', 'compute_us', 'overlap_percent', 'coll_init_us',
        'mpi_test_us', 'mpi_wait_us', 'min_comm_us', 'max_comm_us')


def _coll(title: str) -> OsuBenchmark:
    return OsuBenchmark('collective', f'OSU MPI {title} Latency Test', _LAT, 'us')


def _nbc(title: str) -> OsuBenchmark:
    return OsuBenchmark('collective-nonblocking', f'OSU MPI Non-blocking {title} Latency Test',
                        _NBC, 'us')


#: OMB MPI benchmark name -> kind, title and performance columns (titles from the
#: ``#define BENCHMARK`` of each source file, OMB 7.x).
OSU_BENCHMARKS: Mapping[str, OsuBenchmark] = {
    'osu_latency': OsuBenchmark('pt2pt-latency', 'OSU MPI Latency Test', _LAT, 'us'),
    'osu_multi_lat': OsuBenchmark('pt2pt-latency', 'OSU MPI Multi Latency Test', _LAT, 'us'),
    'osu_latency_mt': OsuBenchmark('pt2pt-latency', 'OSU MPI Multi-threaded Latency Test',
                                   _LAT, 'us'),
    'osu_latency_mp': OsuBenchmark('pt2pt-latency', 'OSU MPI Multi-process Latency Test',
                                   _LAT, 'us'),
    'osu_latency_persistent': OsuBenchmark('pt2pt-latency', 'OSU MPI Latency Persistent Test',
                                           _LAT, 'us'),
    'osu_bw': OsuBenchmark('pt2pt-bandwidth', 'OSU MPI Bandwidth Test', _BW, 'MB/s'),
    'osu_bibw': OsuBenchmark('pt2pt-bandwidth', 'OSU MPI Bi-Directional Bandwidth Test', _BW,
                             'MB/s'),
    'osu_bw_persistent': OsuBenchmark('pt2pt-bandwidth', 'OSU MPI Bandwidth Persistent Test',
                                      _BW, 'MB/s'),
    'osu_bibw_persistent': OsuBenchmark(
        'pt2pt-bandwidth', 'OSU MPI Bi-Directional Bandwidth Persistent Test', _BW, 'MB/s'),
    'osu_mbw_mr': OsuBenchmark('pt2pt-message-rate',
                               'OSU MPI Multiple Bandwidth / Message Rate Test',
                               ('bandwidth_MBps', 'messages_per_s'), 'MB/s'),
    'osu_allgather': _coll('Allgather'),
    'osu_allgatherv': _coll('Allgatherv'),
    'osu_allreduce': _coll('Allreduce'),
    'osu_alltoall': _coll('All-to-All Personalized Exchange'),
    'osu_alltoallv': _coll('All-to-Allv Personalized Exchange'),
    'osu_alltoallw': _coll('All-to-Allw Personalized Exchange'),
    'osu_barrier': _coll('Barrier'),
    'osu_bcast': _coll('Broadcast'),
    'osu_gather': _coll('Gather'),
    'osu_gatherv': _coll('Gatherv'),
    'osu_reduce': _coll('Reduce'),
    'osu_reduce_scatter': _coll('Reduce_scatter'),
    'osu_reduce_scatter_block': _coll('Reduce_scatter_block'),
    'osu_scatter': _coll('Scatter'),
    'osu_scatterv': _coll('Scatterv'),
    'osu_iallgather': _nbc('Allgather'),
    'osu_iallgatherv': _nbc('Allgatherv'),
    'osu_iallreduce': _nbc('Allreduce'),
    'osu_ialltoall': _nbc('All-to-All Personalized Exchange'),
    'osu_ialltoallv': _nbc('All-to-Allv Personalized Exchange'),
    'osu_ialltoallw': _nbc('All-to-Allw Personalized Exchange'),
    'osu_ibarrier': _nbc('Barrier'),
    'osu_ibcast': _nbc('Broadcast'),
    'osu_igather': _nbc('Gather'),
    'osu_igatherv': _nbc('Gatherv'),
    'osu_ireduce': _nbc('Reduce'),
    'osu_ireduce_scatter': _nbc('Reduce_scatter'),
    'osu_ireduce_scatter_block': _nbc('Reduce_scatter_block'),
    'osu_iscatter': _nbc('Scatter'),
    'osu_iscatterv': _nbc('Scatterv'),
}
# Titles other OMB releases used for the same benchmark.
_TITLE_ALIASES = {
    'OSU MPI Non-blocking All-to-All Latency Test': 'osu_ialltoall',        # OMB 5.x
    'OSU MPI Non-blocking All-to-Allv Latency Test': 'osu_ialltoallv',
}


def _title_key(title: str) -> str:
    """Title -> comparison key: accelerator tag dropped, case and spaces ignored (OMB 7.5
    prints 'Personalized ExchangeLatency Test' for the non-blocking all-to-alls)."""
    title = re.sub(r'^OSU MPI-(?:CUDA MANAGED|CUDA|OPENACC|ROCM|CXL|MANAGED)\b', 'OSU MPI',
                   title.strip())
    return re.sub(r'\s+', '', title).lower()


_BY_TITLE: dict[str, str] = {_title_key(b.title): name for name, b in OSU_BENCHMARKS.items()}
_BY_TITLE.update({_title_key(t): name for t, name in _TITLE_ALIASES.items()})


@dataclass(frozen=True)
class OsuOutput(ParsedTable):
    """A parsed OMB output: one table; the table methods come from :class:`ParsedTable`.

    ``benchmark`` is the OMB program (``'osu_latency'``), ``title`` the title line without
    ``#`` and version (``'OSU MPI Latency Test'``), ``version`` OMB's (``'7.4'``, '' if not
    printed), ``columns`` the normalized column names (:data:`OSU_COLUMNS`), ``rows`` one
    dict per row (``size_bytes``/``iterations`` ints, the rest floats), ``datatype`` from
    ``# Datatype: MPI_CHAR.``, ``info`` the other ``#`` lines between title and rows.
    """
    benchmark: str
    title: str
    version: str
    columns: tuple[str, ...]
    rows: tuple[dict[str, float], ...]
    datatype: str | None = None
    info: tuple[str, ...] = ()
    source: str = '<output>'
    header_line: int = 0

    SIZE_HEADER = 'Size'

    @property
    def table_line(self) -> int:
        return self.header_line

    def describe(self) -> str:
        return f'{self.benchmark} output'

    @property
    def headline(self) -> tuple[str, str]:
        """``(column, unit)`` of the main figure: the first of the benchmark's
        ``perf_columns`` present (e.g. ``('avg_latency_us', 'us')`` for OMB 7.4 osu_latency,
        ``('latency_us', 'us')`` for older releases)."""
        info = OSU_BENCHMARKS.get(self.benchmark)
        candidates = info.perf_columns if info else ()
        for name in candidates:
            if name in self.columns:
                return name, info.unit  # type: ignore[union-attr]
        raise self.error(f'has none of the expected performance columns '
                         f'({", ".join(candidates) or "benchmark unknown"}); its columns are '
                         f'{", ".join(self.columns)}')


_TITLE = re.compile(r'^#\s*(?P<title>OSU\b.*?)(?:\s+v(?P<version>\d[\w.\-]*))?\s*$')
_DATATYPE = re.compile(r'^#\s*Datatype:\s*(?P<type>\S+?)\.?\s*$')
_LABELS = sorted(OSU_COLUMNS, key=len, reverse=True)


def _header_labels(body: str) -> list[tuple[str, str]] | None:
    """``body`` (a '#' line without '#') -> [(label, normalized)] if it is a column header
    (starts with 'Size' or a known label), None if it is another comment line. Raises
    ValueError naming an unknown label."""
    text = body.strip()
    starts = [lbl for lbl in _LABELS if text.startswith(lbl)]
    if not starts and not any(rx.match(text) for _, rx, _ in _TAIL_LABELS):
        return None
    found: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        for lbl in _LABELS:
            if text.startswith(lbl, pos):
                found.append((lbl, OSU_COLUMNS[lbl]))
                pos += len(lbl)
                break
        else:
            for _, rx, fmt in _TAIL_LABELS:
                m = rx.match(text, pos)
                if m:
                    found.append((m.group(0), fmt.format(m.group(1))))
                    pos = m.end()
                    break
            else:
                unknown = re.split(r'\s{2,}', text[pos:])[0]
                raise ValueError(unknown)
    return found


def parse_osu(text: str, source: str = '<output>', expect_benchmark: str | None = None,
              expect_max_size: int | None = None) -> OsuOutput:
    """Parse one OMB MPI benchmark output; see the module docstring for the rules.

    ``expect_benchmark`` (e.g. ``'osu_latency'``): error if the title names another
    benchmark; it also names an output whose title is not in :data:`OSU_BENCHMARKS`
    (without it, an unknown title is an error). ``expect_max_size``: error unless the last
    row has this size (catches a run cut short between two rows).
    """
    def fail(line: int | None, reason: str) -> BenchmarkOutputError:
        return BenchmarkOutputError(source, line, reason)

    if expect_benchmark is not None and not isinstance(expect_benchmark, str):
        raise TypeError('expect_benchmark must be a benchmark name such as "osu_latency"')
    lines = text.splitlines()
    title: str | None = None
    title_line = 0
    version = ''
    datatype: str | None = None
    info: list[str] = []
    columns: tuple[str, ...] | None = None
    header_line = 0
    rows: list[dict[str, float]] = []
    last_row_line = 0

    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip('\r\n')
        stripped = line.strip()
        if not stripped or LINE_FROM_LIBRARY.match(stripped):
            continue
        if title is None:
            m = _TITLE.match(stripped)
            if m:
                title, version, title_line = m.group('title'), m.group('version') or '', number
            continue                          # anything before the title: not OMB's
        if stripped.startswith('#'):
            m = _TITLE.match(stripped)
            if m:
                if m.group('title') == title and not rows:
                    continue                  # OMB 7.1 osu_mbw_mr prints its title twice
                raise fail(number, f'a second OSU title {m.group("title")!r} (first at line '
                                   f'{title_line}): outputs of several runs are concatenated')
            m = _DATATYPE.match(stripped)
            if m:
                if rows:
                    raise fail(number, f'a second datatype section ({m.group("type")}) after '
                                       'the rows: run one datatype per invocation')
                datatype = m.group('type')
                continue
            try:
                labels = _header_labels(stripped[1:])
            except ValueError as err:
                known = ', '.join(list(OSU_COLUMNS) + [t for t, _, _ in _TAIL_LABELS])
                raise fail(number, f'unexpected OSU column {str(err)!r} in the column header '
                                   f'{stripped!r}; known columns: {known}') from None
            if labels is not None:
                if columns is not None:
                    raise fail(number, f'a second column header (first at line {header_line})'
                                       f'{" after the rows" if rows else ""}: {stripped!r}')
                names = tuple(n for _, n in labels)
                if len(set(names)) != len(names):
                    raise fail(number, f'repeated column in the header {stripped!r}')
                if SIZE_COLUMN in names and names.index(SIZE_COLUMN) != 0:
                    raise fail(number, f'Size is not the first column of {stripped!r}')
                columns, header_line = names, number
                continue
            if rows:
                raise fail(number, f'unexpected comment line after the rows: {stripped!r}')
            info.append(stripped)
            continue
        if columns is None:
            fields = stripped.split()
            if all(NUMBER.match(f) for f in fields):
                raise fail(number, f'a data row before the column header ("# Size ..."): '
                                   f'{stripped!r}')
            continue                          # launcher/library chatter before the table
        if stripped.startswith('DATA VALIDATION ERROR'):
            raise fail(number, f'OMB reported a validation error: {stripped!r}')
        rows.append(_parse_row(stripped, columns, rows, number, fail))
        last_row_line = number

    if title is None:
        raise fail(None, 'not an OSU Micro-Benchmarks output: no "# OSU ... Test vX.Y" title line')
    key = _title_key(title)
    benchmark = _BY_TITLE.get(key)
    if benchmark is None:
        if expect_benchmark is None:
            known = '; '.join(f'{n}: {b.title!r}' for n, b in OSU_BENCHMARKS.items())
            raise fail(title_line, f'unknown OSU benchmark title {title!r}; known titles: '
                                   f'{known} (pass expect_benchmark= to accept it)')
        benchmark = expect_benchmark
    elif expect_benchmark is not None and benchmark != expect_benchmark:
        raise fail(title_line, f'expected {expect_benchmark} output, but the title '
                               f'{title!r} is that of {benchmark}')
    if columns is None:
        raise fail(len(lines) or None, f'{benchmark}: no column header ("# Size  ...") after the '
                                       'title: the run failed before printing its table')
    if not rows:
        raise fail(len(lines) or None, f'{benchmark}: the table (header at line {header_line}) '
                                       'has no rows: the run failed or was cut short')
    if not text.endswith(('\n', '\r')) and last_row_line == len(lines):
        raise fail(last_row_line, f'{benchmark}: the last row {lines[-1].strip()!r} has no line '
                                  'terminator: the output was cut while it was written')
    if expect_max_size is not None:
        if SIZE_COLUMN not in columns:
            raise fail(header_line, f'{benchmark}: expect_max_size={expect_max_size} but the '
                                    'output has no Size column')
        last = rows[-1][SIZE_COLUMN]
        if last != expect_max_size:
            raise fail(last_row_line, f'{benchmark}: the last size is {last}, expected '
                                      f'{expect_max_size}: the run stopped early (or ran with '
                                      'another -m)')
    return OsuOutput(benchmark=benchmark, title=title, version=version, columns=columns,
                     rows=tuple(rows), datatype=datatype, info=tuple(info), source=source,
                     header_line=header_line)


def _parse_row(stripped: str, columns: tuple[str, ...], rows: list[dict[str, float]],
               number: int, fail) -> dict[str, float]:
    fields = stripped.split()
    if len(fields) != len(columns):
        raise fail(number, f'row has {len(fields)} fields, expected {len(columns)} '
                           f'({" ".join(columns)}): {stripped!r} (a truncated or damaged row, '
                           'or a foreign line inside the table)')
    row: dict[str, float] = {}
    for name, token in zip(columns, fields):
        if name == 'validation':
            if token not in ('Pass', 'Fail'):
                raise fail(number, f'Validation is {token!r}, expected Pass or Fail: '
                                   f'{stripped!r}')
            row[name] = 1.0 if token == 'Pass' else 0.0
        elif name in _INT_COLUMNS:
            if not INTEGER.match(token):
                raise fail(number, f'{name} is {token!r}, expected an integer: {stripped!r}')
            row[name] = int(token)
        else:
            if not NUMBER.match(token):
                raise fail(number, f'{name} is {token!r}, expected a number: {stripped!r}')
            row[name] = float(token)
    if SIZE_COLUMN in row and rows and row[SIZE_COLUMN] <= rows[-1][SIZE_COLUMN]:
        raise fail(number, f'size {row[SIZE_COLUMN]} after {rows[-1][SIZE_COLUMN]}: sizes must '
                           'increase')
    return row
