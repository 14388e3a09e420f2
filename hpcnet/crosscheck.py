"""Our ping-pong against IMB's PingPong, same session, same environment.

Our kernel must not be the bottleneck: its latency at <= 8 B and bandwidth at
>= 1 MiB should be within a few percent of IMB's.  Both report one-way time
(round trip / 2), but IMB averages the repetitions while our figures of merit
are medians, so the ratios are printed both ways: median (what our checks
assert) and mean (the like-for-like comparison with IMB).
"""
from __future__ import annotations

from dataclasses import dataclass

from hpcnet.parsers.table import SIZE_COLUMN
from hpcnet.sizes import size_label

OURS = 'hpcnet_p2p %mode=pingpong'
IMB = 'hpcnet_imb %benchmark=PingPong'
LATENCY_SIZES = (0, 8)
BANDWIDTH_SIZES = (1 << 20, 1 << 22)
#: Targets of the cross-check (issue: ours within 3 % on latency, >= 97 % on bandwidth).
LATENCY_TOLERANCE = 0.03
BANDWIDTH_MIN_RATIO = 0.97
#: IMB prints t[usec] with two decimals.
IMB_TIME_RESOLUTION = 0.01


@dataclass
class Ratio:
    where: str          # system:partition env
    metric: str         # latency_8B, bandwidth_1MiB
    ours_median: float
    ours_mean: float
    imb: float

    @property
    def ratio_median(self) -> float:
        return self.ours_median / self.imb

    @property
    def ratio_mean(self) -> float:
        return self.ours_mean / self.imb

    @property
    def ok(self) -> bool:
        '''Our kernel is not the bottleneck: by median, its latency at most 3 %
        above IMB's (plus half of IMB's last printed digit: it prints t[usec]
        with 2 decimals, +-4 % at 0.13 us) and its bandwidth at least 97 %.
        Means are shown, not judged: per-iteration timing puts every
        preemption in our mean, while IMB's total-time average of a shorter
        loop meets fewer of them.'''
        if self.metric.startswith('latency'):
            return self.ours_median <= self.imb * (1 + LATENCY_TOLERANCE) + IMB_TIME_RESOLUTION / 2
        return self.ratio_median >= BANDWIDTH_MIN_RATIO


def ratios(cases: list) -> list:
    '''Ratios from the final test cases of a ReFrame JSON report.'''
    by_where = {}
    for tc in cases:
        if tc.get('result') not in ('pass', 'xfail'):
            continue
        name = tc['name']
        if name in (OURS, IMB):
            where = f'{tc["system"]}:{tc["partition"]} {tc["environ"]}'
            by_where.setdefault(where, {})[name] = tc['curve']
    out = []
    for where, curves in sorted(by_where.items()):
        if set(curves) != {OURS, IMB}:
            continue
        ours = {int(r[SIZE_COLUMN]): r for r in curves[OURS]}
        imb = {int(r[SIZE_COLUMN]): r for r in curves[IMB]}
        for size in LATENCY_SIZES:
            if size in ours and size in imb:
                out.append(Ratio(where, f'latency_{size_label(size)}', ours[size]['median_us'],
                                 ours[size]['mean_us'], imb[size]['t_usec']))
        for size in BANDWIDTH_SIZES:
            if size in ours and size in imb:
                out.append(Ratio(where, f'bandwidth_{size_label(size)}', ours[size]['bw_MBps'],
                                 size / ours[size]['mean_us'], imb[size]['mbytes_per_sec']))
    return out


def table(rows: list) -> str:
    lines = [f'{"where":40} {"metric":16} {"ours(median)":>12} {"ours(mean)":>11} '
             f'{"IMB":>10} {"median/IMB":>10} {"mean/IMB":>9}  verdict']
    for r in rows:
        lines.append(f'{r.where:40} {r.metric:16} {r.ours_median:12.4g} {r.ours_mean:11.4g} '
                     f'{r.imb:10.4g} {r.ratio_median:10.3f} {r.ratio_mean:9.3f}  '
                     f'{"ok" if r.ok else "OFF TARGET"}')
    return '\n'.join(lines)
