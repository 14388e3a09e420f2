"""Parser of the output of our own MPI kernels (src/p2p.c, collectives.c, pairs.c).

The format ("hpcnet kernel output format 1") is documented in src/README.md.
In short, on the kernel's stdout::

    hpcnet-kernel: p2p 1            <- first recognised line: kernel name, format version
    mpi-library: Open MPI v4.1.4, ...
    compiler: gcc 12.2.0            <- the compiler that built it
    ranks: 2
    host: 0 node001                 <- one per rank
    host: 1 node002
    mode: pingpong                  <- further `key: value` header lines
    columns: size_bytes iterations min_us ...
    row: 0 1000 0.11 ...            <- whitespace separated, in the order of `columns:`
    validation: passed 24
    done: ok                        <- last recognised line: the run completed

Lines starting with ``#`` and blank lines are comments.

MPI libraries and launchers write their own lines into the same stdout (Open
MPI help messages, Intel MPI ``[0] MPI startup(): ...`` with I_MPI_DEBUG,
UCX ``[1700000000.123] [host:pid] ...`` logs, ...).  Therefore only lines of
the form ``<key>: <value>`` (``<key>`` matching ``[a-z][a-z0-9-]*``, at the
start of the line) whose key is in :data:`KNOWN_KEYS` are interpreted, and they
are checked strictly; every other line is ignored as noise and kept in
:attr:`KernelOutput.noise`.  A known key can therefore not be used by noise
without making the parse fail, which is what we want.

Strictness: unknown format version, missing ``hpcnet-kernel:``, ``mpi-library:``,
``columns:`` or final ``done: ok`` (truncated output), a row with the wrong
number of fields, a non-numeric / NaN / infinite value in a numeric column,
duplicate header keys, recognised lines after ``done: ok``, an ``error:`` line
(when stderr is merged into stdout) all raise
:class:`~hpcnet.parsers.errors.BenchmarkOutputError`, whose message names the source, the
line number and what was wrong or expected.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field

from .errors import BenchmarkOutputError
from .table import NUMBER, ParsedTable, Value

__all__ = [
    'FORMAT_VERSIONS',
    'KNOWN_KEYS',
    'KernelOutput',
    'parse_kernel_output',
    'parse_kernel_output_file',
]

#: Format versions this parser understands.
FORMAT_VERSIONS = frozenset({1})

#: Every key the kernels print (the ONE place to extend when a kernel gets a
#: new header line).  Lines with other keys are treated as MPI noise.
KNOWN_KEYS = frozenset({
    # structure, all kernels
    'hpcnet-kernel', 'mpi-library', 'ranks', 'host', 'columns', 'row', 'done', 'error',
    # the compiler that built the kernel: family and version (outputs from
    # before it have none)
    'compiler',
    # common options (p2p, collectives); precision-pct: adaptive runs only
    'warmup', 'iters', 'precision-pct', 'time-per-size-ms', 'min-iters', 'max-iters', 'validate',
    'validation',
    # p2p, pairs: payload bytes each rank sent, in rank order
    'bytes-sent',
    # p2p
    'mode', 'window', 'window-bytes', 'recv-slots', 'bw-formula', 'batch-us', 'first-exchange-us',
    'second-exchange-us',
    # collectives
    'ops', 'root', 'reduction',
    # pairs; the outlier rule of its second pass and what it decided
    'pairs', 'rounds', 'schedule', 'lat-size', 'bw-size', 'samples', 'bw-samples',
    'outlier-rule', 'mad-k', 'outlier-floor', 'bw-of-best', 'lat-threshold-us', 'bw-threshold-mbps',
    'retested',
    'retest-rounds', 'rounds-of-all-pairs', 'first-pass-seconds', 'reference-pairs',
    # sockets (src/sockets.c: TCP/UDP without MPI, same output format)
    'test', 'transport', 'server', 'client-host', 'server-host', 'role-from',
    'sndbuf-requested', 'rcvbuf-requested', 'sndbuf', 'rcvbuf', 'server-sndbuf', 'server-rcvbuf',
    'duration-ms', 'windows', 'nodelay', 'recv-size', 'rate-mbps', 'paced-sizes', 'udp-timeout-ms',
    'first-rtt-us',
})

#: Header keys whose value must be a finite number.
NUMERIC_HEADER_KEYS = frozenset({
    'ranks', 'warmup', 'precision-pct', 'time-per-size-ms', 'min-iters', 'max-iters', 'window',
    'window-bytes', 'recv-slots', 'batch-us', 'root',
    'first-exchange-us', 'second-exchange-us', 'pairs', 'rounds', 'lat-size', 'bw-size',
    'samples', 'bw-samples', 'windows', 'mad-k', 'outlier-floor', 'bw-of-best', 'lat-threshold-us',
    'bw-threshold-mbps', 'retested', 'retest-rounds', 'rounds-of-all-pairs', 'first-pass-seconds',
    'reference-pairs',
})

#: pairs: the outlier rules its second pass knows (src/pairs.c).
PAIRS_OUTLIER_RULES = ('none', 'mad', 'clusterkit')

#: Columns holding text (operation names, host names); all others are numbers.
STRING_COLUMNS = frozenset({'op', 'host_a', 'host_b'})

#: Numeric columns that must hold non-negative integers (p2p's `batch`:
#: iterations per sample; outputs from before it have no such column).
INTEGER_COLUMNS = frozenset({'size_bytes', 'iterations', 'batch', 'rank_a', 'rank_b', 'count',
                             'lat_outlier', 'bw_outlier', 'retest', 'lat_retest_outlier',
                             'bw_retest_outlier'})

# Lines the parser does not store in `header` (they have their own fields).
_STRUCTURAL_KEYS = frozenset({'hpcnet-kernel', 'mpi-library', 'host', 'columns', 'row', 'done', 'error'})

_KEY_LINE = re.compile(r'([a-z][a-z0-9-]*):(?:[ \t]+(.*))?$')
_NONFINITE = re.compile(r'[+-]?(?:nan|inf|infinity)(?:\(.*\))?$', re.IGNORECASE)
_INTEGER = re.compile(r'\d+$')
_COLUMN_NAME = re.compile(r'[A-Za-z][A-Za-z0-9_]*$')
_KERNEL_ID = re.compile(r'([a-z][a-z0-9_-]*)\s+(\S+)$')
_HOST = re.compile(r'(\d+)\s+(\S+)$')


@dataclass(frozen=True)
class KernelOutput(ParsedTable):
    """One parsed kernel run; the table methods come from :class:`ParsedTable`."""

    kernel: str
    format_version: int
    mpi_library: str
    hosts: dict[int, str]
    header: dict[str, str]
    columns: tuple[str, ...]
    rows: tuple[dict[str, Value], ...]
    source: str = '<output>'
    #: Ignored (noise) lines as (line number, text).
    noise: tuple[tuple[int, str], ...] = field(default=(), repr=False)

    #: collectives: one row per operation and size; sockets udp_stream: one
    #: per paced rate and size.
    KEY_COLUMNS = ('op', 'rate_mbps')

    def describe(self) -> str:
        return f'{self.kernel} output'

    def row_label(self, row: dict[str, Value], index: int) -> str:
        if 'rank_a' in row and 'rank_b' in row:       # pairs: one row per pair of ranks
            return f'pair {int(row["rank_a"])}-{int(row["rank_b"])}'
        return super().row_label(row, index)

    def header_float(self, key: str) -> float:
        """A header value as a number, e.g. ``header_float('first-exchange-us')``."""
        if key not in self.header:
            raise self.error(f'has no {key!r} line')
        try:
            value = float(self.header[key])
        except ValueError:
            raise self.error(f'{key}: {self.header[key]!r} is not a number') from None
        return value

    @property
    def validated(self) -> int | None:
        """N of ``validation: passed N``; None if the run did not validate."""
        value = self.header.get('validation')
        return int(value.split()[1]) if value else None


def _number(text: str) -> float | None:
    """Finite float of a plain decimal number, None if `text` is not one."""
    if not NUMBER.match(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def _show(line: str, limit: int = 120) -> str:
    return repr(line if len(line) <= limit else line[:limit] + '...')


def parse_kernel_output(text: str, source: str = '<output>',
                        expect_kernel: str | None = None) -> KernelOutput:
    """Parse the stdout of one hpcnet kernel run (see the module documentation)."""
    kernel: str | None = None
    version = 0
    mpi_library: str | None = None
    hosts: dict[int, str] = {}
    header: dict[str, str] = {}
    columns: tuple[str, ...] | None = None
    rows: list[dict[str, Value]] = []
    noise: list[tuple[int, str]] = []
    done_line = 0
    last_known = (0, '')

    lines = text.splitlines()
    cut_short = bool(text) and not text.endswith(('\n', '\r'))

    def fail(lineno: int, line: str, what: str) -> BenchmarkOutputError:
        if cut_short and lineno == len(lines):
            what += '; the output ends inside this line (truncated?)'
        return BenchmarkOutputError(source, lineno, f'{what} (line: {_show(line)})')

    for lineno, raw in enumerate(lines, start=1):
        line = raw.rstrip()
        if not line.strip() or line.startswith('#'):
            continue
        m = _KEY_LINE.match(line)
        if not m or m.group(1) not in KNOWN_KEYS:
            noise.append((lineno, raw))
            continue
        key, value = m.group(1), (m.group(2) or '').strip()

        if key == 'error':
            raise fail(lineno, line, f'the kernel reported an error: {value}')
        if kernel is None and key != 'hpcnet-kernel':
            raise fail(lineno, line,
                       f"'{key}:' before the 'hpcnet-kernel:' line; expected "
                       "'hpcnet-kernel: <name> <format version>' first")
        if done_line:
            raise fail(lineno, line, f"'{key}:' after 'done: ok' (line {done_line}); "
                       'two runs in one output?')
        if not value:
            raise fail(lineno, line, f"empty value for '{key}:'")
        last_known = (lineno, line)

        if key == 'hpcnet-kernel':
            if kernel is not None:
                raise fail(lineno, line, "second 'hpcnet-kernel:' line; two runs in one output?")
            km = _KERNEL_ID.match(value)
            if not km:
                raise fail(lineno, line, "expected 'hpcnet-kernel: <name> <format version>'")
            if not _INTEGER.match(km.group(2)) or int(km.group(2)) not in FORMAT_VERSIONS:
                raise fail(lineno, line,
                           f'unsupported format version {km.group(2)!r} (this parser '
                           f'understands {", ".join(map(str, sorted(FORMAT_VERSIONS)))})')
            kernel, version = km.group(1), int(km.group(2))
            if expect_kernel is not None and kernel != expect_kernel:
                raise fail(lineno, line, f'output of kernel {kernel!r}, expected {expect_kernel!r}')
        elif key == 'done':
            if value != 'ok':
                raise fail(lineno, line, f"expected 'done: ok', got 'done: {value}'")
            done_line = lineno
        elif key == 'mpi-library':
            if mpi_library is not None:
                raise fail(lineno, line, "duplicate 'mpi-library:' line")
            mpi_library = value
        elif key == 'host':
            hm = _HOST.match(value)
            if not hm:
                raise fail(lineno, line, "expected 'host: <rank> <processor name>'")
            rank = int(hm.group(1))
            if rank in hosts:
                raise fail(lineno, line, f'duplicate host line for rank {rank}')
            hosts[rank] = hm.group(2)
        elif key == 'columns':
            if columns is not None:
                raise fail(lineno, line, "duplicate 'columns:' line")
            names = tuple(value.split())
            bad = [n for n in names if not _COLUMN_NAME.match(n)]
            if bad:
                raise fail(lineno, line, f'bad column name(s) {", ".join(map(repr, bad))}')
            if len(set(names)) != len(names):
                raise fail(lineno, line, 'duplicate column names')
            columns = names
        elif key == 'row':
            if columns is None:
                raise fail(lineno, line, "'row:' before the 'columns:' line")
            fields = value.split()
            if len(fields) != len(columns):
                raise fail(lineno, line, f'row has {len(fields)} fields, expected {len(columns)} '
                           f'({" ".join(columns)})')
            row: dict[str, Value] = {}
            for name, text_value in zip(columns, fields):
                if name in STRING_COLUMNS:
                    row[name] = text_value
                    continue
                if _NONFINITE.match(text_value):
                    raise fail(lineno, line, f'column {name}: value {text_value!r} is not finite')
                number = _number(text_value)
                if number is None:
                    raise fail(lineno, line, f'column {name}: {text_value!r} is not a number')
                if name in INTEGER_COLUMNS and not _INTEGER.match(text_value):
                    raise fail(lineno, line,
                               f'column {name}: {text_value!r} is not a non-negative integer')
                row[name] = number
            rows.append(row)
        else:
            if key in header:
                raise fail(lineno, line, f"duplicate '{key}:' line")
            if key in NUMERIC_HEADER_KEYS:
                if _NONFINITE.match(value):
                    raise fail(lineno, line, f'{key}: value {value!r} is not finite')
                if _number(value) is None:
                    raise fail(lineno, line, f'{key}: {value!r} is not a number')
            elif key == 'iters' and value != 'adaptive' and not _INTEGER.match(value):
                raise fail(lineno, line, "iters: expected a number or 'adaptive'")
            elif key == 'validate' and value not in ('on', 'off'):
                raise fail(lineno, line, "validate: expected 'on' or 'off'")
            elif key == 'validation' and not re.match(r'passed \d+$', value):
                raise fail(lineno, line, "validation: expected 'passed <number of checks>'")
            elif key == 'bytes-sent' and not re.match(r'\d+(?: \d+)*$', value):
                raise fail(lineno, line, 'bytes-sent: expected one byte count per rank')
            elif key == 'rate-mbps' and not all(_number(r) is not None for r in value.split(',')):
                raise fail(lineno, line, 'rate-mbps: expected rates (Mbit/s) separated by commas')
            elif key == 'outlier-rule' and value not in PAIRS_OUTLIER_RULES:
                raise fail(lineno, line, f'outlier-rule: expected one of {", ".join(PAIRS_OUTLIER_RULES)}')
            elif key == 'paced-sizes' and value != 'all' and not re.match(r'\d+(?:,\d+)*$', value):
                raise fail(lineno, line, "paced-sizes: expected 'all' or sizes separated by commas")
            header[key] = value

    if kernel is None:
        if not text.strip():
            raise BenchmarkOutputError(source, None, 'empty output; expected hpcnet kernel output')
        raise BenchmarkOutputError(
            source, None, "no 'hpcnet-kernel: <name> <version>' line; not hpcnet kernel output "
            f'({len(noise)} unrecognised lines)')
    if mpi_library is None:
        raise BenchmarkOutputError(source, None, "no 'mpi-library:' line in the header")
    if columns is None:
        raise BenchmarkOutputError(
            source, last_known[0], "output ends without a 'columns:' line (truncated?); "
            f'last recognised line: {_show(last_known[1])}')
    if not done_line:
        raise BenchmarkOutputError(
            source, last_known[0], "no final 'done: ok' line: the run did not complete "
            f'(truncated output?); last recognised line: {_show(last_known[1])}')
    if 'ranks' in header:
        nranks = float(header['ranks'])
        if set(hosts) != set(range(int(nranks))) or nranks != int(nranks):
            raise BenchmarkOutputError(
                source, None, f"'ranks: {header['ranks']}' but host lines for ranks "
                f'{sorted(hosts) or "none"}')

    return KernelOutput(kernel=kernel, format_version=version, mpi_library=mpi_library,
                        hosts=hosts, header=header, columns=columns, rows=tuple(rows),
                        source=source, noise=tuple(noise))


def parse_kernel_output_file(path: str | 'os.PathLike[str]',
                             expect_kernel: str | None = None) -> KernelOutput:
    """Parse a file holding a kernel's stdout (undecodable bytes are replaced)."""
    try:
        with open(path, encoding='utf-8', errors='replace') as f:
            text = f.read()
    except OSError as err:
        raise BenchmarkOutputError(os.fspath(path), None,
                                   f'cannot read kernel output: {err}') from err
    return parse_kernel_output(text, source=os.fspath(path), expect_kernel=expect_kernel)

