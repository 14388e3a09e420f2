"""Parser of Intel(R) MPI Benchmarks (IMB) outputs (the command line: hpcnet.parsers.imb_command).

Covers the stdout of IMB-MPI1, IMB-NBC, IMB-RMA and IMB-P2P (checked against IMB 2021.7
built with Open MPI 4.1.4 / MPICH 4.0.2, and IMB 2021.11 as shipped in Intel MPI 2021.19:
see ``tests/data/imb/README.md``). An output looks like::

    #----------------------------------------------------------------
    #    Intel(R) MPI Benchmarks 2021.7, MPI-1 part
    #----------------------------------------------------------------
    # Date                  : Sat Nov 21 04:16:40 2026
    # Machine               : x86_64
    # MPI Version           : 3.1
    ...
    # Calling sequence was:

    # /opt/imb/bin/IMB-MPI1 PingPong
    ...
    # List of Benchmarks to run:

    # PingPong

    #---------------------------------------------------
    # Benchmarking PingPong
    # #processes = 2
    #---------------------------------------------------
           #bytes #repetitions      t[usec]   Mbytes/sec
                0         1000         0.10         0.00
                1         1000         0.16         6.28
    ...

    # All processes entering MPI_Finalize

A section may also carry ``# ( 1 additional process waiting in MPI_Barrier)`` (``-npmin``),
``#    MODE: AGGREGATE`` / ``NON-AGGREGATE`` (IMB-RMA, IMB-EXT), or be a ``-multi`` section:
``# Benchmarking Multi-Allreduce`` with ``# ( 2 groups of 1 processes each running
simultaneous )`` and a ``Group`` column, its rows split by blank lines. A benchmark that
cannot run prints ``# !! Benchmark Stencil2D is invalid for 2 processes !!`` instead.

Rules (strict: anything else is a :class:`BenchmarkOutputError` naming source and line):

* Lines starting with ``[<digits>]`` are the MPI library's (``[0] MPI startup(): ...`` with
  ``I_MPI_DEBUG``): ignored everywhere, inside tables too.
* Outside tables, other lines that are not IMB's (launcher or library chatter) are ignored
  and kept in :attr:`ImbOutput.foreign_lines`; but a line that looks like table data (a
  column header or a row of numbers) outside a benchmark section is an error.
* Inside a table (from its column header to the next ``#`` line) every line is a row,
  a blank line (``-multi`` separates sizes with them) or an ignored ``[N]`` line. Anything
  else is an error: a foreign line there cannot be told from a damaged row. Every row has
  exactly one field per column, each a plain number (integers for ``#bytes``,
  ``#repetitions`` and ``Group``); ``#bytes`` strictly increases (per group).
* A column name outside :data:`IMB_COLUMNS` is an error naming it and the known ones.
* The output must end with ``# All processes entering MPI_Finalize``; a section with no
  table, a table with no rows, a row cut short: errors. ``allow_incomplete=True`` accepts
  a run without the final line (``complete=False``), dropping a last line that has no
  line terminator (it was cut while being written).
* ``Invalid benchmark name foo`` (IMB then runs its whole default list instead!) is kept in
  :attr:`ImbOutput.invalid_names` rather than raised: the output itself is well formed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

from .errors import BenchmarkOutputError
from .table import INTEGER, LINE_FROM_LIBRARY, NUMBER, SIZE_COLUMN, ParsedTable

__all__ = ['BenchmarkOutputError', 'ImbTable', 'ImbOutput', 'parse_imb', 'IMB_COLUMNS']

#: IMB column header -> normalized name (the keys of every row dict).
IMB_COLUMNS: Mapping[str, str] = {
    '#bytes': SIZE_COLUMN,
    '#repetitions': 'repetitions',
    'Group': 'group',                    # -multi 1
    't[usec]': 't_usec',                 # PingPong, PingPing, IMB-RMA, IMB-P2P
    'Mbytes/sec': 'mbytes_per_sec',      # 10^6 bytes/s
    'Msg/sec': 'msg_per_sec',            # Uniband, Biband, IMB-P2P
    't_min[usec]': 't_min_usec',         # collectives, Sendrecv, Exchange, *_pure
    't_max[usec]': 't_max_usec',
    't_avg[usec]': 't_avg_usec',
    't_ovrl[usec]': 't_ovrl_usec',       # IMB-NBC, IMB-RMA Truly_passive_put
    't_pure[usec]': 't_pure_usec',
    't_CPU[usec]': 't_cpu_usec',         # IMB-NBC
    'overlap[%]': 'overlap_percent',     # IMB-NBC
    'defects': 'defects',                # IMB built with -DCHECK
}
_INT_COLUMNS = frozenset({SIZE_COLUMN, 'repetitions', 'group'})

@dataclass(frozen=True)
class ImbTable(ParsedTable):
    """One benchmark section of an IMB output; the table methods come from
    :class:`ParsedTable`.

    ``rows`` are dicts keyed by the normalized names of ``columns`` (see
    :data:`IMB_COLUMNS`); ``size_bytes``, ``repetitions`` and ``group`` are ints, the rest
    floats. ``processes`` is ``#processes`` (per group in a ``-multi`` section),
    ``mode`` the IMB-RMA/EXT ``MODE:`` (``'AGGREGATE'``, ``'NON-AGGREGATE'``) or None,
    ``groups`` the number of simultaneous groups of a ``-multi`` section (else 1),
    ``waiting`` the "additional processes waiting in MPI_Barrier", ``line`` the line number
    of the ``# Benchmarking`` line. A ``-multi 1`` table has one row per group and size:
    ``row_for_size(size, group=1)``.
    """
    benchmark: str
    processes: int
    columns: tuple[str, ...]
    rows: tuple[dict[str, float], ...]
    mode: str | None = None
    groups: int = 1
    waiting: int = 0
    line: int = 0
    source: str = '<output>'

    SIZE_HEADER = '#bytes'
    KEY_COLUMNS = ('group',)

    @property
    def table_line(self) -> int:
        return self.line

    def describe(self) -> str:
        extra = f', mode {self.mode}' if self.mode else ''
        extra += f', {self.groups} groups' if self.groups > 1 else ''
        return f'IMB table {self.benchmark} (#processes = {self.processes}{extra})'


@dataclass(frozen=True)
class ImbOutput:
    """A whole IMB output.

    ``version`` is IMB's (``'2021.7'``), ``part`` the suite part (``'MPI-1'``, ``'MPI-NBC'``,
    ``'MPI-RMA'``, ``'IMB-P2P'``), ``complete`` whether ``# All processes entering
    MPI_Finalize`` was seen. ``header`` holds every ``# Key : value`` line of the preamble
    (``'Date'``, ``'Machine'``, ``'MPI Version'`` (the MPI standard version the library
    reports, e.g. ``'3.1'``), ``'Minimum message length in bytes'``, ...). ``skipped`` lists
    ``(benchmark, processes)`` IMB declared invalid ("!! Benchmark X is invalid for N
    processes !!"), ``invalid_names`` the names IMB rejected, ``foreign_lines`` the
    ``(line number, text)`` of ignored non-IMB lines outside tables (``[N]`` lines excluded).
    """
    version: str
    tables: tuple[ImbTable, ...]
    complete: bool
    part: str = ''
    header: Mapping[str, str] = field(default_factory=dict)
    calling_sequence: str | None = None
    benchmarks_listed: tuple[str, ...] = ()
    skipped: tuple[tuple[str, int], ...] = ()
    invalid_names: tuple[str, ...] = ()
    foreign_lines: tuple[tuple[int, str], ...] = ()
    source: str = '<output>'

    @property
    def mpi_version(self) -> str | None:
        """The MPI standard version the library reports (``'3.1'``)."""
        return self.header.get('MPI Version')

    def _header_bytes(self, which: str) -> int | None:
        value = self.header.get(f'{which} message length in bytes')
        return int(value) if value is not None and value.isdigit() else None

    @property
    def min_message_bytes(self) -> int | None:
        return self._header_bytes('Minimum')

    @property
    def max_message_bytes(self) -> int | None:
        return self._header_bytes('Maximum')

    @property
    def benchmarks(self) -> tuple[str, ...]:
        """The benchmarks that have a table, in output order, without repetition."""
        names: list[str] = []
        for t in self.tables:
            if t.benchmark not in names:
                names.append(t.benchmark)
        return tuple(names)

    def table(self, benchmark: str, processes: int | None = None,
              mode: str | None = None, groups: int | None = None) -> ImbTable:
        """The one table of ``benchmark`` (case-insensitive), narrowed by ``processes``,
        ``mode`` and ``groups`` when several match; an error lists what is present."""
        found = [t for t in self.tables
                 if t.benchmark.lower() == benchmark.lower()
                 and (processes is None or t.processes == processes)
                 and (mode is None or (t.mode or '').lower() == mode.lower())
                 and (groups is None or t.groups == groups)]
        if len(found) == 1:
            return found[0]
        wanted = benchmark + ''.join(
            f', {k}={v!r}' for k, v in (('processes', processes), ('mode', mode),
                                         ('groups', groups)) if v is not None)
        present = '; '.join(
            f'{t.benchmark} (#processes = {t.processes}'
            + (f', mode {t.mode}' if t.mode else '')
            + (f', {t.groups} groups' if t.groups > 1 else '') + ')'
            for t in self.tables) or 'none'
        if not found:
            skipped = [s for s in self.skipped if s[0].lower() == benchmark.lower()]
            note = (f' (IMB declared {benchmark} invalid for '
                    f'{", ".join(str(s[1]) for s in skipped)} processes)' if skipped else '')
            raise BenchmarkOutputError(
                self.source, None, f'no IMB table for {wanted}{note}; tables present: {present}')
        raise BenchmarkOutputError(
            self.source, None,
            f'{len(found)} IMB tables match {wanted}: narrow with processes=, mode= or '
            f'groups=; tables present: {present}')


_IMB_TITLE = re.compile(
    r'^#\s*Intel\s*\(R\)\s*MPI\s+Benchmarks\s+(?P<version>.+?)\s*,\s*(?P<part>.+?)\s+part\s*$')
_BENCHMARKING = re.compile(r'^#\s*Benchmarking\s+(?P<name>\S+)\s*$')
_PROCESSES = re.compile(r'^#\s*#processes\s*=\s*(?P<n>\d+)\s*$')
_WAITING = re.compile(
    r'^#\s*\(\s*(?P<n>\d+)\s+additional\s+process(?:es)?\s+waiting\s+in\s+MPI_Barrier\s*\)\s*$')
_GROUPS = re.compile(
    r'^#\s*\(\s*(?P<groups>\d+)\s+groups?\s+of\s+(?P<n>\d+)\s+process(?:es)?\s+each\s+'
    r'running\s+simultaneous(?:ly)?\s*\)\s*$')
_MODE = re.compile(r'^#\s*MODE\s*:\s*(?P<mode>\S+)\s*$')
_FINALIZE = re.compile(r'^#\s*All processes entering MPI_Finalize\s*$')
_INVALID_FOR = re.compile(
    r'^#\s*!!\s*Benchmark\s+(?P<name>\S+)\s+is\s+invalid\s+for\s+(?P<n>\d+)\s+process(?:es)?\s*!!')
_INVALID_NAME = re.compile(r'^Invalid benchmark name\s+(?P<name>\S+)\s*$')
_KEY_VALUE = re.compile(r'^#\s*(?P<key>[A-Za-z][A-Za-z0-9_ ()/.-]*?)\s*:\s*(?P<value>.*?)\s*$')
_LIST_ENTRY = re.compile(r'^# (?P<name>[A-Za-z][\w-]*)\s*$')
_TABLE_START_TOKENS = frozenset({'#bytes', '#repetitions', 'Group'})


class _Section:
    def __init__(self, name: str, line: int):
        self.multi = name.startswith('Multi-')
        self.benchmark = name[len('Multi-'):] if self.multi else name
        self.line = line
        self.processes: int | None = None
        self.groups = 1
        self.waiting = 0
        self.mode: str | None = None
        self.columns: tuple[str, ...] = ()
        self.header_line = 0
        self.rows: list[dict[str, float]] = []


def _looks_like_row(text: str) -> bool:
    tokens = text.split()
    return bool(tokens) and all(NUMBER.match(t) for t in tokens)


def parse_imb(text: str, source: str = '<output>', *, allow_incomplete: bool = False) -> ImbOutput:
    """Parse a whole IMB-MPI1/NBC/RMA/P2P stdout; see the module docstring for the rules.

    Raises :class:`BenchmarkOutputError` (with ``source`` and the line number) when the
    output is truncated or malformed.
    """
    def fail(line: int | None, reason: str) -> BenchmarkOutputError:
        return BenchmarkOutputError(source, line, reason)

    lines = text.splitlines()
    if allow_incomplete and lines and not text.endswith(('\n', '\r')):
        lines = lines[:-1]          # cut while being written: not a line IMB finished

    version: str | None = None
    part = ''
    header: dict[str, str] = {}
    calling_sequence: str | None = None
    listed: list[str] = []
    skipped: list[tuple[str, int]] = []
    invalid_names: list[str] = []
    foreign: list[tuple[int, str]] = []
    tables: list[ImbTable] = []
    complete_at: int | None = None

    section: _Section | None = None
    in_table = False
    pending: str | None = None      # 'calling' / 'list': a multi-line header item

    def close_table(at: int) -> None:
        nonlocal section, in_table
        assert section is not None
        if not section.rows:
            raise fail(at, f'the {section.benchmark} table (columns at line '
                           f'{section.header_line}) has no rows: output truncated or damaged')
        tables.append(ImbTable(
            benchmark=section.benchmark, processes=section.processes or 0,
            columns=section.columns, rows=tuple(section.rows), mode=section.mode,
            groups=section.groups, waiting=section.waiting, line=section.line, source=source))
        section, in_table = None, False

    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip('\r\n')
        stripped = line.strip()
        # IMB's comment lines start with '#' in column 0; column headers are indented
        # ('       #bytes #repetitions ...', ' #repetitions  t_min[usec] ...').
        comment = line.startswith('#')
        if LINE_FROM_LIBRARY.match(stripped):
            continue                                    # [0] MPI startup(): ...

        if in_table:
            assert section is not None
            if not stripped:
                continue                                # -multi: blank line between sizes
            if not comment:
                section.rows.append(_parse_row(stripped, section, number, fail))
                continue
            close_table(number)                          # a '#' line ends the table

        if section is not None:                          # between '# Benchmarking' and columns
            if not stripped:
                continue
            if comment:
                m = _PROCESSES.match(stripped)
                if m:
                    section.processes = int(m.group('n'))
                    continue
                m = _WAITING.match(stripped)
                if m:
                    section.waiting = int(m.group('n'))
                    continue
                m = _GROUPS.match(stripped)
                if m:
                    section.groups = int(m.group('groups'))
                    section.processes = int(m.group('n'))
                    continue
                m = _MODE.match(stripped)
                if m:
                    section.mode = m.group('mode')
                    continue
                if _BENCHMARKING.match(stripped) or _FINALIZE.match(stripped) \
                        or _INVALID_FOR.match(stripped):
                    raise fail(number, f'the {section.benchmark} section (line {section.line})'
                                       ' ended before its table: expected a column header '
                                       f'({", ".join(IMB_COLUMNS)})')
                continue                                 # '#----', '#', '# Group 0: 0', ...
            # the column header
            tokens = stripped.split()
            unknown = [t for t in tokens if t not in IMB_COLUMNS]
            if unknown:
                raise fail(number, f'unexpected IMB column {unknown[0]!r} in the '
                                   f'{section.benchmark} table header; known columns: '
                                   f'{", ".join(IMB_COLUMNS)}')
            names = tuple(IMB_COLUMNS[t] for t in tokens)
            if len(set(names)) != len(names):
                raise fail(number, f'repeated column in the {section.benchmark} table header '
                                   f'{stripped!r}')
            if section.processes is None:
                raise fail(number, f'the {section.benchmark} section (line {section.line}) has '
                                   'no "#processes = N" (or "N groups of M processes") line')
            section.columns = names
            section.header_line = number
            in_table = True
            continue

        # ---- outside sections ----
        if not stripped:
            continue
        if comment:
            m = _IMB_TITLE.match(stripped)
            if m:
                if version is not None:
                    raise fail(number, 'a second IMB header ("Intel(R) MPI Benchmarks ..."): '
                                       'outputs of several runs are concatenated')
                version, part = m.group('version'), m.group('part')
                pending = None
                continue
            m = _BENCHMARKING.match(stripped)
            if m:
                if version is None:
                    raise fail(number, 'benchmark section before the IMB header '
                                       '("#    Intel(R) MPI Benchmarks <version>, ... part")')
                if complete_at is not None:
                    raise fail(number, 'benchmark section after "# All processes entering '
                                       f'MPI_Finalize" (line {complete_at})')
                section = _Section(m.group('name'), number)
                pending = None
                continue
            if _FINALIZE.match(stripped):
                if complete_at is None:
                    complete_at = number
                pending = None
                continue
            m = _INVALID_FOR.match(stripped)
            if m:
                skipped.append((m.group('name'), int(m.group('n'))))
                continue
            body = stripped[1:].strip()
            if pending == 'calling' and body:
                calling_sequence = body
                pending = None
                continue
            if pending == 'list':
                m = _LIST_ENTRY.match(stripped)
                if m:
                    listed.append(m.group('name'))
                    continue
                if not body or stripped.startswith('#  '):
                    continue                            # '#' alone, indented description
                pending = None
            if version is not None and not tables and complete_at is None:
                if body.startswith('Calling sequence was'):
                    pending = 'calling'
                    continue
                if body.startswith('List of Benchmarks to run'):
                    pending = 'list'
                    continue
                m = _KEY_VALUE.match(stripped)
                if m and not stripped.startswith('#-'):
                    header.setdefault(m.group('key'), m.group('value'))
            continue
        # a line that is not IMB's own, outside any table
        m = _INVALID_NAME.match(stripped)
        if m:
            invalid_names.append(m.group('name'))
            continue
        first = stripped.split()[0]
        if first in _TABLE_START_TOKENS or _looks_like_row(stripped):
            raise fail(number, f'table data outside a benchmark section: {stripped!r} (expected '
                               'it after "# Benchmarking <name>" and "# #processes = N")')
        foreign.append((number, line))

    end = len(lines)
    if in_table:
        close_table(end)
    elif section is not None:
        raise fail(end, f'output ends inside the {section.benchmark} section (line '
                        f'{section.line}) before its table: truncated')
    if version is None:
        raise fail(None, 'not an IMB output: no "#    Intel(R) MPI Benchmarks <version>, '
                         '<suite> part" header line')
    if complete_at is None and not allow_incomplete:
        last = (f'; last table {tables[-1].benchmark} (line {tables[-1].line}) ends at its '
                f'size {tables[-1].rows[-1].get(SIZE_COLUMN, "?")}' if tables else '')
        raise fail(end, 'no "# All processes entering MPI_Finalize" line: the run did not '
                        f'finish or its output is truncated{last}')
    return ImbOutput(
        version=version, tables=tuple(tables), complete=complete_at is not None, part=part,
        header=header, calling_sequence=calling_sequence, benchmarks_listed=tuple(listed),
        skipped=tuple(skipped), invalid_names=tuple(invalid_names),
        foreign_lines=tuple(foreign), source=source)


_ROW_HINT = ' (a truncated or damaged row, or a foreign line inside the table)'


def _parse_row(stripped: str, section: _Section, number: int, fail) -> dict[str, float]:
    fields = stripped.split()
    columns = section.columns
    if len(fields) != len(columns):
        raise fail(number, f'{section.benchmark} row has {len(fields)} fields, expected '
                           f'{len(columns)} ({" ".join(columns)}): {stripped!r}{_ROW_HINT}')
    row: dict[str, float] = {}
    for name, token in zip(columns, fields):
        if name in _INT_COLUMNS:
            if not INTEGER.match(token):
                raise fail(number, f'{section.benchmark} row: {name} is {token!r}, expected '
                                   f'an integer: {stripped!r}{_ROW_HINT}')
            row[name] = int(token)
        else:
            if not NUMBER.match(token):
                raise fail(number, f'{section.benchmark} row: {name} is {token!r}, expected '
                                   f'a number: {stripped!r}{_ROW_HINT}')
            row[name] = float(token)
    if SIZE_COLUMN in row:
        group = row.get('group')
        previous = [r[SIZE_COLUMN] for r in section.rows if r.get('group') == group]
        if previous and row[SIZE_COLUMN] <= previous[-1]:
            raise fail(number, f'{section.benchmark} row: #bytes {row[SIZE_COLUMN]} after '
                               f'{previous[-1]}: sizes must increase')
    return row
