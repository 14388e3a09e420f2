"""The IMB command line: which benchmarks of which suite, with which options
(checked against what IMB accepts, since IMB runs its whole default list when
given a name it does not know)."""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

__all__ = ['imb_command', 'IMB_SUITES', 'IMB_MPI1_BENCHMARKS', 'IMB_NBC_BENCHMARKS',
           'IMB_RMA_BENCHMARKS', 'IMB_P2P_BENCHMARKS', 'IMB_ITER_POLICIES']

# Benchmark names as printed by `IMB-<suite> -list` (IMB 2021.11, Intel MPI 2021.19);
# "(non-default)" ones only run when named.
IMB_MPI1_BENCHMARKS: tuple[str, ...] = (
    'PingPong', 'PingPing', 'Sendrecv', 'Exchange', 'Allreduce', 'Reduce', 'Reduce_local',
    'Reduce_scatter', 'Reduce_scatter_block', 'Allgather', 'Allgatherv', 'Gather', 'Gatherv',
    'Scatter', 'Scatterv', 'Alltoall', 'Alltoallv', 'Bcast', 'Barrier',
    # non-default
    'Uniband', 'Biband', 'PingPongAnySource', 'PingPongSpecificSource',
    'PingPingAnySource', 'PingPingSpecificSource',
)
_NBC_OPS = ('Iallgather', 'Iallgatherv', 'Iallreduce', 'Ialltoall', 'Ialltoallv', 'Ibarrier',
            'Ibcast', 'Igather', 'Igatherv', 'Ireduce', 'Ireduce_scatter', 'Iscatter',
            'Iscatterv')
IMB_NBC_BENCHMARKS: tuple[str, ...] = _NBC_OPS + tuple(f'{b}_pure' for b in _NBC_OPS)
IMB_RMA_BENCHMARKS: tuple[str, ...] = (
    'Accumulate', 'All_get_all', 'All_put_all', 'Bidir_get', 'Bidir_put', 'Compare_and_swap',
    'Exchange_get', 'Exchange_put', 'Fetch_and_op', 'Get_accumulate', 'Get_all_local',
    'Get_local', 'One_get_all', 'One_put_all', 'Put_all_local', 'Put_local',
    'Truly_passive_put', 'Unidir_get', 'Unidir_put',
)
IMB_P2P_BENCHMARKS: tuple[str, ...] = (
    'PingPong', 'PingPing', 'Unirandom', 'Birandom', 'Corandom', 'Stencil2D', 'Stencil3D',
    'SendRecv_Replace',
)
#: suite (executable name) -> its benchmark names; the order is the inference order of
#: :func:`imb_command` when no suite is given.
IMB_SUITES: Mapping[str, tuple[str, ...]] = {
    'IMB-MPI1': IMB_MPI1_BENCHMARKS,
    'IMB-NBC': IMB_NBC_BENCHMARKS,
    'IMB-RMA': IMB_RMA_BENCHMARKS,
    'IMB-P2P': IMB_P2P_BENCHMARKS,
}
#: values of ``-iter_policy`` (``IMB-MPI1 -help iter_policy``)
IMB_ITER_POLICIES: tuple[str, ...] = ('dynamic', 'multiple_np', 'auto', 'off')


def _canonical(names: Sequence[str], suite: str) -> list[str] | None:
    known = {b.lower(): b for b in IMB_SUITES[suite]}
    out = [known.get(n.lower()) for n in names]
    return None if any(o is None for o in out) else out  # type: ignore[return-value]


def imb_command(benchmarks: str | Iterable[str], msglog=None,
                iter_policy: str | None = None, *, suite: str | None = None,
                executable: str | None = None, npmin: int | None = None,
                iterations=None, time_limit: float | None = None,
                mem_gb: float | None = None, multi: int | None = None,
                sync: bool | None = None, window_size: int | None = None,
                extra: Sequence[str] = ()) -> list[str]:
    """The argument list running ``benchmarks`` with IMB, e.g.
    ``['IMB-MPI1', 'PingPong', 'Allreduce', '-msglog', '0:10']``.

    Names are checked (case-insensitively; emitted in IMB's spelling) against
    :data:`IMB_SUITES`: an unknown one is an error listing the valid names. This matters:
    given an unknown name, IMB-MPI1 prints "Invalid benchmark name" and runs its whole
    default list. ``suite`` (``'IMB-MPI1'``, ``'IMB-NBC'``, ``'IMB-RMA'``, ``'IMB-P2P'``)
    defaults to the first suite knowing every name; ``executable`` replaces argv[0] (a path
    to the binary), default the suite name.

    Options: ``msglog`` (``-msglog``: an int ``max`` or ``(min, max)`` / ``'min:max'``,
    0 <= min < max <= 30), ``iter_policy`` (one of :data:`IMB_ITER_POLICIES`), ``npmin``,
    ``iterations`` (``-iter``: an int or up to 3 ints), ``time_limit`` (``-time`` seconds
    per size), ``mem_gb`` (``-mem``), ``multi`` (0 or 1), ``sync`` (``-sync on/off``),
    ``window_size`` (``-window_size``: messages in flight per repetition of Uniband and
    Biband; IMB 2021's default is 256, not the 64 of IMB 2019 and OSU), ``extra``
    (appended verbatim). IMB-P2P only takes ``msglog`` and ``iterations``.
    """
    names = [benchmarks] if isinstance(benchmarks, str) else list(benchmarks)
    suite, canonical = _suite_and_names(names, suite)
    args: list[str] = [executable or suite, *canonical]
    p2p = suite == 'IMB-P2P'
    if msglog is not None:
        args += ['-msglog', _msglog(msglog)]
    if iterations is not None:
        args += ['-iter', _iterations(iterations, p2p)]
    others = {'iter_policy': iter_policy, 'npmin': npmin, 'time_limit': time_limit,
              'mem_gb': mem_gb, 'multi': multi, 'sync': sync, 'window_size': window_size}
    if p2p:
        given = [k for k, v in others.items() if v is not None]
        if given:
            raise ValueError(f'imb_command: IMB-P2P does not take {", ".join(given)} (only '
                             'msglog and iterations)')
    args += _options(iter_policy, npmin, window_size, time_limit, mem_gb, multi, sync)
    args += [str(e) for e in extra]
    return args


def _suite_and_names(names: list[str], suite: str | None) -> tuple:
    """(suite, the names in IMB's spelling): ``suite`` or the first suite
    knowing every name; ValueError naming the valid names otherwise."""
    if not names:
        raise ValueError('imb_command: no benchmark given (IMB would run its whole default '
                         'list); name them, e.g. ["PingPong"]')
    for n in names:
        if not isinstance(n, str) or not n.strip() or n.strip() != n:
            raise ValueError(f'imb_command: invalid benchmark name {n!r}')
    if suite is not None:
        if suite not in IMB_SUITES:
            raise ValueError(f'imb_command: unknown IMB suite {suite!r}; valid suites: '
                             f'{", ".join(IMB_SUITES)}')
        canonical = _canonical(names, suite)
        if canonical is None:
            bad = [n for n in names if _canonical([n], suite) is None]
            elsewhere = [s for s in IMB_SUITES if s != suite and _canonical(bad, s)]
            hint = f' ({", ".join(bad)} belong(s) to {elsewhere[0]})' if elsewhere else ''
            raise ValueError(f'imb_command: unknown {suite} benchmark name(s) '
                             f'{", ".join(repr(b) for b in bad)}{hint}; valid {suite} names: '
                             f'{", ".join(IMB_SUITES[suite])}')
        return suite, canonical
    for candidate in IMB_SUITES:
        canonical = _canonical(names, candidate)
        if canonical is not None:
            return candidate, canonical
    bad = [n for n in names if not any(_canonical([n], s) for s in IMB_SUITES)]
    if not bad:
        raise ValueError(f'imb_command: {", ".join(names)} are not all in one IMB '
                         f'suite; run them separately or pass suite=')
    valid = '; '.join(f'{s}: {", ".join(b)}' for s, b in IMB_SUITES.items()
                      if s in ('IMB-MPI1', 'IMB-NBC'))
    raise ValueError(f'imb_command: unknown IMB benchmark name(s) '
                     f'{", ".join(repr(b) for b in bad)}; valid names: {valid} '
                     f'(also IMB-RMA and IMB-P2P: see IMB_SUITES)')


def _iterations(iterations, p2p: bool) -> str:
    """The value of ``-iter``: 1 to 3 positive ints (2 for IMB-P2P)."""
    values = [iterations] if isinstance(iterations, int) else list(iterations)
    if not 1 <= len(values) <= 3 or not all(
            isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
        raise ValueError(f'imb_command: iterations must be a positive int or 1 to 3 '
                         f'positive ints, not {iterations!r}')
    if p2p and len(values) > 2:
        raise ValueError('imb_command: IMB-P2P takes "-iter max[,numerator]" (2 values)')
    return ','.join(str(v) for v in values)


def _options(iter_policy, npmin, window_size, time_limit, mem_gb, multi, sync) -> list[str]:
    """The options of IMB-MPI1, IMB-NBC and IMB-RMA that were given, each checked."""
    args: list[str] = []
    if iter_policy is not None:
        if iter_policy not in IMB_ITER_POLICIES:
            raise ValueError(f'imb_command: unknown iter_policy {iter_policy!r}; valid: '
                             f'{", ".join(IMB_ITER_POLICIES)}')
        args += ['-iter_policy', iter_policy]
    for flag, count in (('-npmin', npmin), ('-window_size', window_size)):
        if count is not None:
            if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                raise ValueError(f'imb_command: {flag[1:]} must be an int >= 1, not {count!r}')
            args += [flag, str(count)]
    for flag, value in (('-time', time_limit), ('-mem', mem_gb)):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f'imb_command: {flag} must be a positive number, not {value!r}')
            args += [flag, repr(float(value)) if isinstance(value, float) else str(value)]
    if multi is not None:
        if multi not in (0, 1) or isinstance(multi, bool):
            raise ValueError(f'imb_command: multi must be 0 or 1, not {multi!r}')
        args += ['-multi', str(multi)]
    if sync is not None:
        args += ['-sync', 'on' if sync else 'off']
    return args


def _msglog(msglog) -> str:
    if isinstance(msglog, str):
        parts = msglog.split(':')
        try:
            values = [int(p) for p in parts]
        except ValueError:
            raise ValueError(f'imb_command: msglog {msglog!r} is not "max" or "min:max"') from None
    elif isinstance(msglog, int) and not isinstance(msglog, bool):
        values = [msglog]
    else:
        values = list(msglog)
    if len(values) == 1:
        (hi,) = values
        if not (isinstance(hi, int) and 0 <= hi <= 30):
            raise ValueError(f'imb_command: msglog max must be an int in 0..30 (2^max bytes), '
                             f'not {msglog!r}')
        return str(hi)
    if len(values) != 2 or not all(isinstance(v, int) and not isinstance(v, bool)
                                   for v in values):
        raise ValueError(f'imb_command: msglog must be max or (min, max), not {msglog!r}')
    lo, hi = values
    if not 0 <= lo < hi <= 30:
        raise ValueError(f'imb_command: msglog needs 0 <= min < max <= 30 (IMB: "min < max", '
                         f'"max must be less than 31"), not {lo}:{hi}')
    return f'{lo}:{hi}'
