"""Our point-to-point kernel against IMB and OSU, same session, same environment.

Our kernel must not be the bottleneck: its latency at <= 8 B and bandwidth at
>= 1 MiB should be within a few percent of the benchmarks sites know.  Each
reference benchmark is paired with the mode of ours that measures the same
thing: IMB PingPong and ``osu_latency`` with our ping-pong (one-way time,
round trip / 2), ``osu_bw`` with our streaming mode (a window of non-blocking
sends, then an acknowledgement), ``osu_bibw`` with our bidirectional one.

One sample of each side is noise on a small host, so every figure is the
median over the session's repeats (``--reruns``): per repeat, ours is its
median over iterations (what our checks assert) and the reference its own
statistic (IMB and OSU average over iterations); the table also shows ours by
mean, the like-for-like statistic.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

from hpcnet.constants import P2PMode, Scale
from hpcnet.parsers.table import SIZE_COLUMN
from hpcnet.sizes import size_label

LATENCY_SIZES = (0, 8)
BANDWIDTH_SIZES = (1 << 20, 1 << 22)
#: Targets of the cross-check: ours within 3 % on latency, >= 97 % on bandwidth.
LATENCY_TOLERANCE = 0.03
BANDWIDTH_MIN_RATIO = 0.97
#: IMB prints t[usec] with two decimals, OSU latency too.
PRINTED_TIME_RESOLUTION = 0.01

OURS_CHECK = 'hpcnet_p2p'


@dataclass(frozen=True)
class Pairing:
    '''A reference benchmark and the mode of our kernel that measures the same.'''
    reference: str               #: as printed: 'IMB PingPong', 'osu_bw'
    check: str                   #: its ReFrame check
    benchmark: str               #: the check's ``benchmark`` parameter
    ours_mode: str               #: our p2p ``mode``
    latency_column: str | None   #: the reference's one-way time column (us)
    bandwidth_column: str | None  #: the reference's bandwidth column (MB/s)


PAIRINGS = (
    Pairing('IMB PingPong', 'hpcnet_imb', 'PingPong', P2PMode.PINGPONG,
            't_usec', 'mbytes_per_sec'),
    Pairing('osu_latency', 'hpcnet_osu', 'osu_latency', P2PMode.PINGPONG,
            'avg_latency_us', None),
    Pairing('osu_bw', 'hpcnet_osu', 'osu_bw', P2PMode.BW, None, 'bandwidth_MBps'),
    Pairing('osu_bibw', 'hpcnet_osu', 'osu_bibw', P2PMode.BIBW, None, 'bandwidth_MBps'),
)


@dataclass
class Ratio:
    where: str          #: system:partition environ
    reference: str      #: 'IMB PingPong', 'osu_bw', ...
    metric: str         #: latency_8B, bandwidth_1MiB
    ours_median: float  #: median over repeats of our per-repeat median
    ours_mean: float    #: median over repeats of our per-repeat mean
    theirs: float       #: median over repeats of the reference's figure
    samples: tuple = (1, 1)   #: (repeats of ours, repeats of theirs)

    @property
    def ratio_median(self) -> float:
        return self.ours_median / self.theirs

    @property
    def ratio_mean(self) -> float:
        return self.ours_mean / self.theirs

    @property
    def ok(self) -> bool:
        '''Our kernel is not the bottleneck: by median, its latency at most 3 %
        above the reference's (plus half of its last printed digit: 2 decimals
        of a microsecond are +-4 % at 0.13 us) and its bandwidth at least 97 %.
        Means are shown, not judged: per-iteration timing puts every
        preemption in our mean, while a total-time average of a shorter loop
        meets fewer of them.'''
        if self.metric.startswith('latency'):
            return (self.ours_median
                    <= self.theirs * (1 + LATENCY_TOLERANCE) + PRINTED_TIME_RESOLUTION / 2)
        return self.ratio_median >= BANDWIDTH_MIN_RATIO


def case_parameters(name: str) -> tuple:
    '''('hpcnet_p2p', {'scale': '1_node', 'mode': 'bw'}) of a test case name
    ('hpcnet_p2p %scale=1_node %mode=bw', optionally followed by ' /hash').'''
    words = name.split(' /')[0].split()
    return words[0], dict(w[1:].split('=', 1) for w in words[1:] if w.startswith('%'))


def _curves(cases: list) -> dict:
    '''{(where, check, variant): [curve of each passed repeat]}; variant is
    our mode or the reference's benchmark.'''
    out = defaultdict(list)
    for tc in cases:
        if tc.get('result') not in ('pass', 'xfail') or not tc.get('curve'):
            continue
        check, params = case_parameters(tc['name'])
        where = f'{tc["system"]}:{tc["partition"]} {tc["environ"]}'
        if check == OURS_CHECK and params.get('scale') == Scale.ONE_NODE:
            out[(where, check, params['mode'])].append(tc['curve'])
        elif 'benchmark' in params:
            out[(where, check, params['benchmark'])].append(tc['curve'])
    return out


def _median_at(curves: list, size: int, column: str) -> float | None:
    values = [row[column] for curve in curves for row in curve
              if int(row[SIZE_COLUMN]) == size and column in row]
    return statistics.median(values) if values else None


def ratios(cases: list) -> list:
    '''Ratios from the test cases of a ReFrame JSON report (every repeat).'''
    curves = _curves(cases)
    wheres = sorted({where for where, _, _ in curves})
    out = []
    for where in wheres:
        for pair in PAIRINGS:
            ours = curves.get((where, OURS_CHECK, pair.ours_mode))
            theirs = curves.get((where, pair.check, pair.benchmark))
            if not ours or not theirs:
                continue
            samples = (len(ours), len(theirs))
            metrics = []
            if pair.latency_column:
                metrics += [(f'latency_{size_label(s)}', s, 'median_us', 'mean_us',
                             pair.latency_column) for s in LATENCY_SIZES]
            if pair.bandwidth_column:
                metrics += [(f'bandwidth_{size_label(s)}', s, 'bw_MBps', None,
                             pair.bandwidth_column) for s in BANDWIDTH_SIZES]
            for metric, size, ours_col, ours_mean_col, their_col in metrics:
                ours_median = _median_at(ours, size, ours_col)
                reference = _median_at(theirs, size, their_col)
                if ours_median is None or not reference:
                    continue
                if ours_mean_col:
                    ours_mean = _median_at(ours, size, ours_mean_col)
                else:      # our bandwidth at the mean time instead of the median
                    ours_mean = statistics.median(
                        row['bw_MBps'] * row['median_us'] / row['mean_us']
                        for curve in ours for row in curve if int(row[SIZE_COLUMN]) == size)
                out.append(Ratio(where, pair.reference, metric, ours_median, ours_mean,
                                 reference, samples))
    return out


def table(rows: list) -> str:
    lines = [f'{"where":34} {"reference":13} {"metric":15} {"n":>5} {"ours(median)":>12} '
             f'{"ours(mean)":>11} {"theirs":>10} {"median/ref":>10} {"mean/ref":>9}  verdict']
    for r in rows:
        lines.append(f'{r.where:34} {r.reference:13} {r.metric:15} '
                     f'{f"{r.samples[0]}/{r.samples[1]}":>5} {r.ours_median:12.4g} '
                     f'{r.ours_mean:11.4g} {r.theirs:10.4g} {r.ratio_median:10.3f} '
                     f'{r.ratio_mean:9.3f}  {"ok" if r.ok else "OFF TARGET"}')
    return '\n'.join(lines)
