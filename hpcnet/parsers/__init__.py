"""Parsers of benchmark outputs (our kernels, IMB, OSU) and of what tc prints of a
node's shaping (qdiscs).

Every parser returns a :class:`~hpcnet.parsers.table.ParsedTable` (size column
``size_bytes``) and raises :class:`~hpcnet.parsers.errors.BenchmarkOutputError`.

A check parses its output once, in whichever pipeline stage first needs it, with
:func:`parsed_once`::

    class hpcnet_osu(ToolBenchmark):
        @parsed_once
        def osu_output(self):
            return parse_osu(...)        # checked here, then cached

The result is kept on the test instance (ReFrame deep-copies a test per case before it
runs, so each case parses its own output), per method and per arguments; a call that
raises is not cached, so every stage that asks again gets the same error.
"""
from __future__ import annotations

import functools

__all__ = ['parsed_once']

# The instance attribute holding every parsed_once result of that instance.
_CACHE_ATTRIBUTE = '_hpcnet_parsed_once'


def parsed_once(method):
    """Decorate a method so that it runs once per instance and per arguments (which must
    be hashable); its result is returned from then on. Exceptions are not cached."""
    @functools.wraps(method)
    def cached(self, *args, **kwargs):
        results = vars(self).setdefault(_CACHE_ATTRIBUTE, {})
        key = (method.__qualname__, args, tuple(sorted(kwargs.items())))
        if key not in results:
            results[key] = method(self, *args, **kwargs)
        return results[key]
    return cached
