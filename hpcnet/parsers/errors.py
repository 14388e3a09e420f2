"""The error raised by the benchmark-output parsers (IMB, OSU)."""
from __future__ import annotations

from typing import Optional


class BenchmarkOutputError(ValueError):
    """A benchmark output that cannot be trusted: truncated, malformed or unexpected.

    ``source`` names where the text came from (a file name, ``'<output>'``), ``line`` is
    the 1-based line number the problem was found at (``None`` when it concerns the
    output as a whole) and ``reason`` says what was found and what was expected.
    ``str(error)`` is ``"<source>:<line>: <reason>"``.
    """

    def __init__(self, source: str, line: Optional[int], reason: str):
        self.source = source
        self.line = line
        self.reason = reason
        where = f'{source}:{line}' if line is not None else source
        super().__init__(f'{where}: {reason}')

    def __reduce__(self):  # keep the error picklable (ReFrame may copy exceptions)
        return (type(self), (self.source, self.line, self.reason))


# The exact spelling of a number in IMB and OSU tables: no 'nan', 'inf', '1_000' or hex,
# which float() would accept.
NUMBER_RE = r'[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?'
INTEGER_RE = r'[+-]?\d+'
