"""The one base of every parsed benchmark table: a kernel run, an IMB table, an OSU output.

Rows are dicts keyed by normalized column names. The message size is always the
:data:`SIZE_COLUMN` (``size_bytes``) column, whatever the output calls it (IMB ``#bytes``,
OSU ``Size``). Every lookup and the one value check raise
:class:`~hpcnet.parsers.errors.BenchmarkOutputError` naming the source, the table and
what is present.
"""
from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from typing import ClassVar, Iterable

from .errors import BenchmarkOutputError, RowNotFound

__all__ = ['SIZE_COLUMN', 'ParsedTable', 'Value', 'NUMBER', 'INTEGER', 'LINE_FROM_LIBRARY']

#: The message-size column of every parsed table (bytes).
SIZE_COLUMN = 'size_bytes'

#: The exact spelling of a number in a table field: no 'nan', 'inf', '1_000' or hex,
#: which float() would accept.
NUMBER = re.compile(r'^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$')
INTEGER = re.compile(r'^[+-]?\d+$')
#: A line the MPI library wrote into the benchmark's output (``[0] MPI startup(): ...``
#: with Intel MPI's I_MPI_DEBUG): ignored wherever it appears, tables included.
LINE_FROM_LIBRARY = re.compile(r'^\[\d+\]')

Value = float | int | str


class ParsedTable(ABC):
    """Lookups and checks over ``columns`` and ``rows`` (and ``source``, for errors).

    Subclasses are frozen dataclasses holding those three fields; they say what they are
    in messages (:meth:`describe`), which line errors about the whole table point at
    (:attr:`table_line`), how the output spells the size column (``SIZE_HEADER``) and
    which columns tell apart several rows of one size (``KEY_COLUMNS``).
    """

    columns: tuple[str, ...]
    rows: tuple[dict[str, Value], ...]
    source: str

    #: The size column as the output prints it.
    SIZE_HEADER: ClassVar[str] = SIZE_COLUMN
    #: Columns that select one of several rows of the same size (IMB ``group``, kernel ``op``).
    KEY_COLUMNS: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def describe(self) -> str:
        """What this table is, to start error messages with (``'p2p output'``)."""

    @property
    def table_line(self) -> int | None:
        """The line errors about the whole table point at; None: the output as a whole."""
        return None

    def error(self, reason: str,
              error_type: type[BenchmarkOutputError] = BenchmarkOutputError
              ) -> BenchmarkOutputError:
        """``error_type`` at this table's source and line, the reason after :meth:`describe`."""
        return error_type(self.source, self.table_line, f'{self.describe()} {reason}')

    @property
    def sizes(self) -> tuple[int, ...]:
        """Sorted distinct message sizes; () without a size column (barriers, pair matrix)."""
        if SIZE_COLUMN not in self.columns:
            return ()
        return tuple(sorted({int(row[SIZE_COLUMN]) for row in self.rows}))

    def _require_columns(self, names: Iterable[str]) -> None:
        for name in names:
            if name not in self.columns:
                raise self.error(f'has no column {name!r}; its columns are '
                                 f'{", ".join(self.columns) or "none"}')

    def rows_where(self, **match: Value) -> list[dict[str, Value]]:
        """Copies of the rows whose columns equal all given values, in output order, e.g.
        ``rows_where(op='allreduce')``; numbers compare as numbers (8 matches 8.0)."""
        self._require_columns(match)
        return [dict(row) for row in self.rows
                if all(row[name] == value for name, value in match.items())]

    def column(self, name: str, **match: Value) -> tuple[Value, ...]:
        """The values of one column over the (matching) rows, in output order."""
        self._require_columns([name])
        return tuple(row[name] for row in self.rows_where(**match))

    def row_for_size(self, size: int, **match: Value) -> dict[str, Value]:
        """A copy of the single row of message size ``size`` (and the other ``match``es).

        Raises :class:`~hpcnet.parsers.errors.RowNotFound` naming the sizes present when
        there is no such row, or the columns to narrow it down with when there are several.
        """
        if SIZE_COLUMN not in self.columns:
            spelled = (f' ({self.SIZE_HEADER} in the output)'
                       if self.SIZE_HEADER != SIZE_COLUMN else '')
            raise self.error(f'has no {SIZE_COLUMN} column{spelled} (columns: '
                             f'{", ".join(self.columns) or "none"}), so it has no row for size '
                             f'{size}', RowNotFound)
        found = self.rows_where(**{SIZE_COLUMN: size}, **match)
        wanted = f'size {size}' + ''.join(f' {name}={value}' for name, value in match.items())
        if not found:
            present = sorted({int(row[SIZE_COLUMN]) for row in self.rows_where(**match)})
            raise self.error(f'has no row for {wanted}; sizes present: '
                             f'{", ".join(map(str, present)) or "none"}', RowNotFound)
        if len(found) > 1:
            keys = [f'{name}= (values {", ".join(str(row[name]) for row in found)})'
                    for name in self.KEY_COLUMNS
                    if name in self.columns and name not in match
                    and len({row[name] for row in found}) > 1]
            raise self.error(f'has {len(found)} rows for {wanted}; narrow it down with more '
                             f'columns, e.g. {"; ".join(keys) or "another column="}', RowNotFound)
        return found[0]

    def row_label(self, row: dict[str, Value], index: int) -> str:
        """How messages name row number ``index`` (0-based): by its size, else 'the only
        row' or its position."""
        if SIZE_COLUMN in row:
            return f'{int(row[SIZE_COLUMN])} B'
        return 'the only row' if len(self.rows) == 1 else f'row {index + 1}'

    def require_finite_positive(self, columns: Iterable[str],
                                zero_ok_at_size0: Iterable[str] = (),
                                nonnegative: Iterable[str] = (),
                                what: str | None = None) -> None:
        """Every value of ``columns`` is finite and > 0; ``zero_ok_at_size0`` columns may be 0
        in the row of size 0 (0 bytes in any time: IMB prints 0.00 MB/s), ``nonnegative``
        ones (losses, overlap %) may be 0 anywhere. The error names ``what`` (default
        :meth:`describe`), the column, the row (its size) and the value."""
        columns = tuple(columns)
        self._require_columns(columns)
        zero_ok_at_size0, nonnegative = frozenset(zero_ok_at_size0), frozenset(nonnegative)
        what = what or self.describe()
        for index, row in enumerate(self.rows):
            for name in columns:
                value = row[name]
                zero_ok = name in nonnegative or (name in zero_ok_at_size0
                                                  and row.get(SIZE_COLUMN) == 0)
                if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
                    bound = '' if not math.isfinite(value) else \
                        f' (must be {">= 0" if zero_ok else "> 0"})'
                    raise BenchmarkOutputError(
                        self.source, self.table_line,
                        f'{what}: {name} at {self.row_label(row, index)} is {value}{bound}')
