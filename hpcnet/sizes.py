"""Message sizes: the one size-list helper and the one way sizes are written in names."""
from __future__ import annotations

__all__ = ['message_sizes', 'size_label']


def message_sizes(min_size: int, max_size: int, *, zero: bool = False,
                  endpoints: bool = False) -> tuple:
    '''The message sizes (bytes, ascending) a benchmark runs from ``min_size`` to
    ``max_size``: every power of two in that range, and 0 when ``min_size`` is 0.

    ``zero``: 0 first even above a larger ``min_size`` (IMB prints 0 before the
    powers of ``-msglog a:b``). ``endpoints``: ``min_size`` and ``max_size``
    themselves too, powers of two or not (the socket kernel runs lo, the powers
    of two above it, and hi).

    The kernels' ``--min-size 0 --max-size 16``: ``message_sizes(0, 16)`` is
    (0, 1, 2, 4, 8, 16); IMB ``-msglog 2:4``: ``message_sizes(4, 16, zero=True)``
    is (0, 4, 8, 16); the socket kernel's 100..300: ``message_sizes(100, 300,
    endpoints=True)`` is (100, 128, 256, 300).
    '''
    for name, value in (('min_size', min_size), ('max_size', max_size)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f'message_sizes: {name} must be an int >= 0 (bytes), '
                             f'not {value!r}')
    if min_size > max_size:
        raise ValueError(f'message_sizes: min_size {min_size} is above max_size {max_size}')
    sizes = {1 << k for k in range(max_size.bit_length()) if min_size <= 1 << k <= max_size}
    if zero or min_size == 0:
        sizes.add(0)
    if endpoints:
        sizes |= {min_size, max_size}
    return tuple(sorted(sizes))


def size_label(nbytes: int) -> str:
    '''8 -> '8B', 65536 -> '64KiB', 1048576 -> '1MiB' (performance variable names).'''
    for unit, factor in (('MiB', 1 << 20), ('KiB', 1 << 10)):
        if nbytes >= factor and nbytes % factor == 0:
            return f'{nbytes // factor}{unit}'
    return f'{nbytes}B'
