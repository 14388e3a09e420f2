"""The one error type of every parser of benchmark output (our kernels, IMB, OSU)."""
from __future__ import annotations


class BenchmarkOutputError(ValueError):
    """A benchmark output that cannot be trusted: truncated, malformed or unexpected.

    ``source`` names where the text came from (a file name, ``'<output>'``), ``line`` is
    the 1-based line number the problem was found at (``None`` when it concerns the
    output as a whole) and ``reason`` says what was found and what was expected.
    ``str(error)`` is ``"<source>:<line>: <reason>"``.
    """

    def __init__(self, source: str, line: int | None, reason: str):
        self.source = source
        self.line = line
        self.reason = reason
        where = f'{source}:{line}' if line is not None else source
        super().__init__(f'{where}: {reason}')

    def __reduce__(self):  # keep the error picklable (ReFrame may copy exceptions)
        return (type(self), (self.source, self.line, self.reason))


class RowNotFound(BenchmarkOutputError, KeyError):
    """No row, or no single row, for a size: also a KeyError, as for a missing key."""

    def __str__(self) -> str:  # KeyError would quote the message
        return ValueError.__str__(self)

