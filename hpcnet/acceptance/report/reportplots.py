"""The report's evidence plots: message-size curves with their spread, the
node-pair heatmaps with the culprits marked, one link's TCP, UDP and MPI
throughput, and before/after curves with their ratio.
"""
from __future__ import annotations

import statistics
from collections import defaultdict

import matplotlib

matplotlib.use('Agg')   # no display: files only
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from matplotlib.patches import Rectangle  # noqa: E402

from hpcnet.acceptance.report.figures import figure, img, log_axes  # noqa: E402
from hpcnet.acceptance.report.reportparts import (display_name, esc, final_cases,  # noqa: E402
                                                  link_throughputs, plot_grid)

BANDS_UP_TO = 6     #: most series a curve plot shades the spread of


def _curve_plot(title: str, series: dict, x_key: str, y_key: str, ylabel: str,
                band: tuple | None = None) -> str:
    """One line per series (label -> list of curves of repeated runs): the
    median over the runs, and the band between min and max of the runs or
    of the per-size ``band`` columns (e.g. min_us..p99_us).  Bands only up to
    BANDS_UP_TO series: more overlap into one shade that shows nothing."""
    fig, ax = figure()
    bands = len(series) <= BANDS_UP_TO
    for label, curves in sorted(series.items()):
        by_size = defaultdict(list)
        low, high = defaultdict(list), defaultdict(list)
        for curve in curves:
            for row in curve:
                if row.get(y_key) is None or float(row[x_key]) <= 0 or float(row[y_key]) <= 0:
                    continue
                size = float(row[x_key])
                by_size[size].append(float(row[y_key]))
                if band:
                    low[size].append(float(row.get(band[0]) or row[y_key]))
                    high[size].append(float(row.get(band[1]) or row[y_key]))
        sizes = sorted(by_size)
        if not sizes:
            continue
        med = [statistics.median(by_size[s]) for s in sizes]
        lo = [min(low[s]) if band else min(by_size[s]) for s in sizes]
        hi = [max(high[s]) if band else max(by_size[s]) for s in sizes]
        (line,) = ax.plot(sizes, med, label=label)
        if bands:
            ax.fill_between(sizes, lo, hi, color=line.get_color(), alpha=0.15, lw=0)
    if not ax.lines:
        plt.close(fig)
        return ''
    log_axes(ax)
    ax.set_xlabel('message size (bytes)')
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return img(fig)


def p2p_curves(cases: list) -> str:
    groups = defaultdict(lambda: defaultdict(list))
    for tc in cases:
        if tc['name'].startswith('hpcnet_p2p ') and tc.get('curve') and tc['result'] != 'skip':
            key = (f'{tc["system"]}:{tc["partition"]}', tc.get('scale', ''), tc.get('mode', ''))
            groups[key][tc['environ']].append(tc['curve'])
    out = []
    for (part, scale, mode), series in sorted(groups.items()):
        title = f'{mode} {part} {scale}'
        out.append(_curve_plot(f'latency (median, band min..p99): {title}', series, 'size_bytes',
                               'median_us', 'one-way us' if mode != 'bw' else 'us per message',
                               band=('min_us', 'p99_us')))
        out.append(_curve_plot(f'bandwidth: {title}', series, 'size_bytes', 'bw_MBps', 'MB/s'))
    return plot_grid(out)


def collective_curves(cases: list) -> str:
    groups = defaultdict(lambda: defaultdict(list))
    for tc in cases:
        if tc['name'].startswith('hpcnet_collectives ') and tc.get('curve'):
            for row in tc['curve']:
                key = (f'{tc["system"]}:{tc["partition"]}', row.get('op'))
                groups[key][tc['environ']].append([row])
    return plot_grid([_curve_plot(f'{op}: {part}', series, 'size_bytes', 't_avg_us',
                               'us (average over ranks)', band=('t_min_us', 't_max_us'))
                   for (part, op), series in sorted(groups.items()) if op != 'barrier'])


#: The panels of a pair case: (title, column, colour map, unit, the quantity
#: whose culprits it marks); reversed maps keep "bright = good" in each.
_PAIR_PANELS = (('bandwidth', 'bw_median_MBps', 'viridis', 'MB/s', 'bandwidth'),
                ('latency', 'lat_mean_us', 'viridis_r', 'us', 'latency'),
                ('first exchange (connection set-up)', 'lat_first_us', 'viridis_r', 'us', None))
#: How a culprit is drawn: a node's row and column and labels, a link's two
#: cells, an inconclusive pair's two cells.
_CULPRIT_STYLE = {'nodes': {'ec': 'red', 'lw': 1.5}, 'links': {'ec': 'red', 'lw': 2.5},
                  'inconclusive': {'ec': 'orange', 'lw': 1.5, 'ls': '--'}}


def _mark_culprits(ax, pos: dict, found: dict) -> None:
    n = len(pos)
    for node in found.get('nodes', []):
        i = pos[node]
        ax.add_patch(Rectangle((i - 0.5, -0.5), 1, n, fill=False, **_CULPRIT_STYLE['nodes']))
        ax.add_patch(Rectangle((-0.5, i - 0.5), n, 1, fill=False, **_CULPRIT_STYLE['nodes']))
        for label in (ax.get_xticklabels()[i], ax.get_yticklabels()[i]):
            label.set_color('red')
            label.set_fontweight('bold')
    for kind in ('links', 'inconclusive'):
        for a, b in found.get(kind, []):
            for x, y in ((pos[a], pos[b]), (pos[b], pos[a])):
                ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, **_CULPRIT_STYLE[kind]))


def _mark_leaves(ax, hosts: list, leaf_of: dict, uplinks) -> None:
    '''The switch boundaries (a line between leaves) and each bad uplink's
    leaf as a dashed red band of rows and columns.'''
    n = len(hosts)
    for i in range(1, n):
        if leaf_of.get(hosts[i]) != leaf_of.get(hosts[i - 1]):
            ax.axhline(i - 0.5, color='white', lw=1.2)
            ax.axvline(i - 0.5, color='white', lw=1.2)
    for leaf in uplinks or []:
        mine = [i for i, h in enumerate(hosts) if leaf_of.get(h) == leaf]
        if mine:
            lo, size = mine[0] - 0.5, len(mine)
            ax.add_patch(Rectangle((lo, -0.5), size, n, fill=False, ec='red', lw=1.5, ls='--'))
            ax.add_patch(Rectangle((-0.5, lo), n, size, fill=False, ec='red', lw=1.5, ls='--'))


def pair_heatmaps(cases: list) -> str:
    """Per pair case across two or more nodes (one node has no pairs to set
    beside each other): bandwidth, latency and the first exchange's cost of
    every pair, the culprits the check named marked on the quantity they
    are bad in (nodes: row, column and label in red; links: red cells;
    inconclusive pairs: dashed orange cells), and the case's verdict line
    naming them.  Where the partition's switch tree is known (the case's
    ``switch_leaves``, host -> leaf) the nodes are ordered by leaf, with a
    line between leaves and a bad uplink's leaf in dashed red."""
    out = []
    for tc in cases:
        if not (tc['name'].startswith('hpcnet_pairs') and tc.get('pair_table')):
            continue
        leaf_of = tc.get('switch_leaves') or {}
        hosts = sorted({r[end] for r in tc['pair_table'] for end in ('host_a', 'host_b')},
                       key=lambda h: (leaf_of.get(h, ''), h))
        if len(hosts) < 2:
            continue
        pos = {h: i for i, h in enumerate(hosts)}
        fig, axes = plt.subplots(1, len(_PAIR_PANELS), figsize=(12.6, 3.8))
        for ax, (title, column, cmap, unit, quantity) in zip(axes, _PAIR_PANELS):
            grid = [[float('nan')] * len(hosts) for _ in hosts]
            for r in tc['pair_table']:
                a, b = pos[r['host_a']], pos[r['host_b']]
                grid[a][b] = grid[b][a] = float(r[column])
            im = ax.imshow(grid, cmap=cmap)
            ax.set_xticks(range(len(hosts)), hosts, rotation=90, fontsize=7)
            ax.set_yticks(range(len(hosts)), hosts, fontsize=7)
            fig.colorbar(im, ax=ax, label=unit, shrink=0.8)
            ax.set_title(title, fontsize=8)
            found = (tc.get('culprits') or {}).get(quantity, {}) if quantity else {}
            if quantity:
                _mark_culprits(ax, pos, found)
            if leaf_of:
                _mark_leaves(ax, hosts, leaf_of, found.get('uplinks'))
        fig.suptitle(f'node pairs {tc["system"]}:{tc["partition"]} {tc["environ"]}', fontsize=9)
        verdict = tc.get('attribution') or 'not attributed'
        out.append(f'<figure>{img(fig, tight=True)}<figcaption><b>verdict</b>: {esc(verdict)}'
                   '</figcaption></figure>')
    return '\n'.join(out)


def link_throughput(reports: list) -> str:
    out = []
    for report in reports:
        by_size = link_throughputs(report)
        fig, ax = figure()
        for proto in ('TCP', 'UDP', 'MPI'):
            pts = sorted((s, v[proto]) for s, v in by_size.items() if v.get(proto))
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker='.', label=proto)
        if not ax.lines:
            plt.close(fig)
            continue
        log_axes(ax, y_log=False)
        ax.set_xlabel('message size (bytes)')
        ax.set_ylabel('Mbit/s')
        ax.set_title('TCP, UDP and MPI throughput of the same link', fontsize=10)
        ax.legend()
        ax.grid(True, alpha=0.3)
        out.append(img(fig))
    return plot_grid(out)


def before_after_curves(before_side, after_side) -> str:
    """Before/after curves with a ratio panel for every point-to-point case
    both sides (sides.Side) ran."""
    def curves(side) -> dict:
        return {(display_name(tc), tc['system'], tc['partition'], tc['environ']): tc['curve']
                for tc in final_cases(side.reports)
                if tc.get('curve') and tc['name'].startswith('hpcnet_p2p')}
    before, after = curves(before_side), curves(after_side)
    plots = []
    for key in sorted(set(before) & set(after)):
        y = 'bw_MBps' if 'mode=bw' in key[0] or 'bibw' in key[0] else 'median_us'
        b = {float(r['size_bytes']): float(r[y]) for r in before[key] if float(r['size_bytes']) > 0}
        a = {float(r['size_bytes']): float(r[y]) for r in after[key] if float(r['size_bytes']) > 0}
        sizes = sorted(s for s in set(a) & set(b) if a[s] > 0 and b[s] > 0)
        if not sizes:
            continue
        fig, (top, bottom) = figure(2, 4.2, sharex=True, gridspec_kw={'height_ratios': [3, 1]})
        top.plot(sizes, [b[s] for s in sizes], marker='.', label='before')
        top.plot(sizes, [a[s] for s in sizes], marker='.', label='after')
        log_axes(top)
        top.set_ylabel(y)
        top.legend(fontsize=7)
        top.set_title(f'{key[0]} @{key[1]}:{key[2]} +{key[3]}', fontsize=8)
        bottom.plot(sizes, [a[s] / b[s] for s in sizes], marker='.', color='k')
        bottom.axhline(1.0, color='grey', lw=0.8)
        bottom.set_ylabel('after/before')
        log_axes(bottom, y_log=False)
        bottom.set_xlabel('message size (bytes)')
        plots.append(img(fig))
    return plot_grid(plots)
