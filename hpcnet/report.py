"""`hpcnet report`: one self-contained HTML page a site engineer reads after
a run — the verdict matrix, what failed and why, message-size curves with
their spread, the node-pair heatmap with outliers named, collectives, TCP /
UDP / MPI throughput of one link, the Rocks paper's tables, efficiency
against the wire, and provenance.  With a comparison, before/after curves
overlaid with a ratio panel and the verdict table of `hpcnet compare`.

Everything is embedded (plots as PNG data URIs, no script or style from
the network), so the file can be mailed or published as a CI artifact.
"""
from __future__ import annotations

import base64
import html
import io
import statistics
from collections import defaultdict

import matplotlib

matplotlib.use('Agg')   # no display: files only
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

from hpcnet import paper  # noqa: E402
from hpcnet.references import NOT_JUDGED  # noqa: E402

#: Cell colours of the verdict matrix.
_COLOURS = {'pass': '#c8e6c9', 'fail': '#ffcdd2', 'skip': '#eeeeee', 'not judged': '#fff9c4',
            'retried': '#ffe0b2', 'xfail': '#e1bee7'}
#: The page checks itself in a browser: a plot that did not decode, or a
#: script error, marks the body (tests/test_report.py reads it back).
_SELF_CHECK = '''<script>
window.addEventListener('error', function () { document.body.dataset.errors = 'script'; });
window.addEventListener('load', function () {
  var bad = Array.prototype.filter.call(document.images, function (i) {
    return !(i.complete && i.naturalWidth > 0); });
  document.body.dataset.plots = document.images.length;
  document.body.dataset.brokenPlots = bad.length;
});
</script>'''


def _cases(reports: list) -> list:
    """The final result of every non-fixture case (a repeat keeps them all)."""
    return [tc for r in reports for run in r.get('runs', []) for tc in run.get('testcases', [])
            if not tc.get('fixture')]


def _display(tc: dict) -> str:
    return tc['name'].split(' /')[0]


def _verdict(tc: dict, retried: set) -> str:
    if (tc['name'], tc['system'], tc['partition'], tc['environ']) in retried:
        return 'retried'
    if tc['result'] == 'pass' and str(tc.get('judgement', '')).startswith(NOT_JUDGED):
        return 'not judged'
    return tc['result']


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format='png', dpi=90, bbox_inches='tight')
    plt.close(fig)
    return ('<img alt="plot" src="data:image/png;base64,'
            + base64.b64encode(buf.getvalue()).decode() + '">')


def _esc(text) -> str:
    return html.escape(str(text))


def verdict_matrix(cases: list, retried: set) -> str:
    columns = sorted({f'{tc["system"]}:{tc["partition"]} {tc["environ"]}' for tc in cases})
    rows = defaultdict(dict)
    for tc in cases:
        rows[_display(tc)][f'{tc["system"]}:{tc["partition"]} {tc["environ"]}'] = tc
    out = ['<table class="matrix"><tr><th>check</th>'
           + ''.join(f'<th class="v">{_esc(c)}</th>' for c in columns) + '</tr>']
    for name in sorted(rows):
        cells = []
        for col in columns:
            tc = rows[name].get(col)
            if tc is None:
                cells.append('<td></td>')
                continue
            v = _verdict(tc, retried)
            cells.append(f'<td style="background:{_COLOURS.get(v, "#fff")}" '
                         f'title="{_esc(tc.get("fail_reason") or tc.get("skip_reason") or tc.get("judgement") or v)}">'
                         f'{_esc(v)}</td>')
        out.append(f'<tr><th>{_esc(name)}</th>{"".join(cells)}</tr>')
    return '\n'.join(out) + '</table>'


def failures(cases: list) -> str:
    failed = [tc for tc in cases if tc['result'] == 'fail']
    if not failed:
        return '<p>No case failed.</p>'
    return '<ul>' + ''.join(
        f'<li><b>{_esc(_display(tc))}</b> @{_esc(tc["system"])}:{_esc(tc["partition"])}'
        f'+{_esc(tc["environ"])}: <code>{_esc(" ".join((tc.get("fail_reason") or "").split())[:400])}'
        '</code></li>' for tc in failed) + '</ul>'


def skips(cases: list) -> str:
    """Every reason a case did not run, with how many cases it kept out."""
    reasons = defaultdict(list)
    for tc in cases:
        if tc['result'] == 'skip':
            reasons[tc.get('skip_reason') or '(no reason recorded)'].append(tc)
    if not reasons:
        return '<p>Every selected case ran.</p>'
    return '<ul>' + ''.join(
        f'<li>{len(tcs)} case(s), e.g. <b>{_esc(_display(tcs[0]))}</b> '
        f'@{_esc(tcs[0]["system"])}:{_esc(tcs[0]["partition"])}+{_esc(tcs[0]["environ"])}: '
        f'<code>{_esc(reason)}</code></li>' for reason, tcs in sorted(reasons.items())) + '</ul>'


def _curve_plot(title: str, series: dict, x_key: str, y_key: str, ylabel: str,
                band: tuple | None = None) -> str:
    """One line per series (label -> list of curves of repeated runs): the
    median over the runs, and the band between min and max of the runs or
    of the per-size ``band`` columns (e.g. min_us..p99_us)."""
    fig, ax = plt.subplots(figsize=(7, 3.6))
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
        (line,) = ax.plot(sizes, med, marker='.', label=label)
        ax.fill_between(sizes, lo, hi, color=line.get_color(), alpha=0.15)
    ax.set_xscale('log', base=2)
    ax.set_yscale('log')
    ax.set_xlabel('message size (bytes)')
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which='both', alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=7)
    return _png(fig) if ax.lines else ''


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
    return '\n'.join(o for o in out if o) or '<p>No point-to-point curves in these sessions.</p>'


def collective_curves(cases: list) -> str:
    groups = defaultdict(lambda: defaultdict(list))
    for tc in cases:
        if tc['name'].startswith('hpcnet_collectives ') and tc.get('curve'):
            for row in tc['curve']:
                key = (f'{tc["system"]}:{tc["partition"]}', row.get('op'))
                groups[key][tc['environ']].append([row])
    out = [_curve_plot(f'{op}: {part}', series, 'size_bytes', 't_avg_us', 'us (average over ranks)',
                       band=('t_min_us', 't_max_us'))
           for (part, op), series in sorted(groups.items()) if op != 'barrier']
    return '\n'.join(o for o in out if o) or '<p>No collective curves in these sessions.</p>'


def pair_heatmaps(cases: list) -> str:
    out = []
    for tc in cases:
        if not (tc['name'].startswith('hpcnet_pairs') and tc.get('pair_table')):
            continue
        hosts = sorted({r['host_a'] for r in tc['pair_table']} | {r['host_b'] for r in tc['pair_table']})
        if len(hosts) < 2:
            continue
        pos = {h: i for i, h in enumerate(hosts)}
        grid = [[float('nan')] * len(hosts) for _ in hosts]
        for r in tc['pair_table']:
            a, b = pos[r['host_a']], pos[r['host_b']]
            grid[a][b] = grid[b][a] = float(r['bw_mean_MBps'])
        fig, ax = plt.subplots(figsize=(4.2, 3.6))
        im = ax.imshow(grid, cmap='viridis')
        ax.set_xticks(range(len(hosts)), hosts, rotation=90, fontsize=7)
        ax.set_yticks(range(len(hosts)), hosts, fontsize=7)
        fig.colorbar(im, ax=ax, label='MB/s')
        ax.set_title(f'pair bandwidth {tc["system"]}:{tc["partition"]} {tc["environ"]}', fontsize=8)
        outliers = tc.get('outliers') or {}
        named = ', '.join(f'{k}: {", ".join(v)}' for k, v in outliers.items() if v) or 'none'
        out.append(f'<figure>{_png(fig)}<figcaption>outlier nodes: {_esc(named)}'
                   '</figcaption></figure>')
    return '\n'.join(out) or '<p>No multi-node pair matrix in these sessions.</p>'


def link_throughput(reports: list) -> str:
    out = []
    for report in reports:
        try:
            by_size = paper.link_throughputs(report)
        except paper.PaperError:
            continue
        if not by_size:
            continue
        fig, ax = plt.subplots(figsize=(7, 3.6))
        for proto in ('TCP', 'UDP', 'MPI'):
            pts = sorted((s, v[proto]) for s, v in by_size.items() if v.get(proto))
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker='.', label=proto)
        if not ax.lines:
            plt.close(fig)
            continue
        ax.set_xscale('log', base=2)
        ax.set_xlabel('message size (bytes)')
        ax.set_ylabel('Mbit/s')
        ax.set_title('TCP, UDP and MPI throughput of the same link')
        ax.legend()
        ax.grid(True, alpha=0.3)
        out.append(_png(fig))
    return '\n'.join(out) or '<p>No TCP/UDP/MPI runs across two nodes in these sessions.</p>'


def paper_tables(reports: list) -> str:
    out = []
    for report in reports:
        try:
            out.append(f'<pre>{_esc(paper.tables(report))}</pre>')
        except paper.PaperError as err:
            out.append(f'<p>{_esc(err)}</p>')
    return '\n'.join(out)


def efficiencies(cases: list) -> str:
    rows = []
    for tc in cases:
        for key, val in (tc.get('perfvalues') or {}).items():
            if key.split(':')[-1].startswith('efficiency') and val[0] is not None:
                rows.append(f'<tr><td>{_esc(_display(tc))}</td><td>{_esc(tc["system"])}:'
                            f'{_esc(tc["partition"])}</td><td>{_esc(tc["environ"])}</td>'
                            f'<td>{_esc(key.split(":")[-1])}</td><td>{val[0]:.3f}</td></tr>')
    if not rows:
        return '<p>No partition with a wire rate (link_rate_bps) in these sessions.</p>'
    return ('<table><tr><th>check</th><th>partition</th><th>environment</th><th>metric</th>'
            '<th>of the wire</th></tr>' + ''.join(rows) + '</table>')


def provenance(reports: list, cases: list) -> str:
    libs = defaultdict(set)
    for tc in cases:
        for key in ('mpi_library', 'transport'):
            if tc.get(key) and tc[key] != 'none':
                libs[tc['environ']].add(f'{key}: {tc[key]}')
    sessions = ''.join(
        f'<li>{_esc(r.get("session_info", {}).get("uuid", "?"))}: '
        f'{_esc(r.get("session_info", {}).get("time_start", ""))} on '
        f'{_esc(r.get("session_info", {}).get("hostname", ""))}, ReFrame '
        f'{_esc(r.get("session_info", {}).get("version", ""))}, '
        f'{len(r.get("runs", []))} run(s)</li>' for r in reports)
    envs = ''.join(f'<li><b>{_esc(env)}</b><br>' + '<br>'.join(_esc(x) for x in sorted(v))
                   + '</li>' for env, v in sorted(libs.items()))
    nodes = sorted({n for tc in cases for n in (tc.get('job_nodelist') or [])})
    return (f'<ul>{sessions}</ul><p>nodes: {_esc(", ".join(nodes) or "local")}</p>'
            f'<ul>{envs}</ul>')


def comparison(rows: list, before_side, after_side) -> str:
    """The verdict table of `hpcnet compare` and before/after curves with a
    ratio panel for every regressed metric's check."""
    from hpcnet import compare
    parts = [f'<pre>{_esc(compare.table(rows))}</pre>']
    before = {(_display(tc), tc['system'], tc['partition'], tc['environ']): tc['curve']
              for tc in _cases(before_side.reports) if tc.get('curve') and tc['name'].startswith('hpcnet_p2p')}
    after = {(_display(tc), tc['system'], tc['partition'], tc['environ']): tc['curve']
             for tc in _cases(after_side.reports) if tc.get('curve') and tc['name'].startswith('hpcnet_p2p')}
    for key in sorted(set(before) & set(after)):
        y = 'bw_MBps' if 'mode=bw' in key[0] or 'bibw' in key[0] else 'median_us'
        b = {float(r['size_bytes']): float(r[y]) for r in before[key] if float(r['size_bytes']) > 0}
        a = {float(r['size_bytes']): float(r[y]) for r in after[key] if float(r['size_bytes']) > 0}
        sizes = sorted(s for s in set(a) & set(b) if a[s] > 0 and b[s] > 0)
        if not sizes:
            continue
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 4.4), sharex=True,
                                          gridspec_kw={'height_ratios': [3, 1]})
        top.plot(sizes, [b[s] for s in sizes], marker='.', label='before')
        top.plot(sizes, [a[s] for s in sizes], marker='.', label='after')
        top.set_yscale('log')
        top.set_ylabel(y)
        top.legend(fontsize=7)
        top.set_title(f'{key[0]} @{key[1]}:{key[2]} +{key[3]}', fontsize=8)
        bottom.plot(sizes, [a[s] / b[s] for s in sizes], marker='.', color='k')
        bottom.axhline(1.0, color='grey', lw=0.8)
        bottom.set_ylabel('after/before')
        bottom.set_xscale('log', base=2)
        bottom.set_xlabel('message size (bytes)')
        parts.append(_png(fig))
    return '\n'.join(parts)


def render(reports: list, retried: set = frozenset(), title: str = 'hpcnet report',
           comparison_html: str = '') -> str:
    """The whole page."""
    cases = _cases(reports)
    counts = defaultdict(int)
    for tc in cases:
        counts[_verdict(tc, retried)] += 1
    summary = ', '.join(f'{n} {v}' for v, n in sorted(counts.items()))
    sections = [('Verdicts', f'<p>{_esc(summary)}</p>' + verdict_matrix(cases, retried)),
                ('What failed, and why', failures(cases)),
                ('What did not run, and why', skips(cases))]
    if comparison_html:
        sections.append(('Before and after', comparison_html))
    sections += [('Point-to-point: the whole message-size curve', p2p_curves(cases)),
                 ('Node pairs', pair_heatmaps(cases)),
                 ('Collectives', collective_curves(cases)),
                 ('One link: TCP, UDP and MPI', link_throughput(reports)),
                 ('The Rocks cluster paper, Tables I-IV', paper_tables(reports)),
                 ('Efficiency against the wire', efficiencies(cases)),
                 ('Provenance', provenance(reports, cases))]
    body = '\n'.join(f'<section><h2>{_esc(h)}</h2>\n{content}</section>' for h, content in sections)
    return f'''<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{_esc(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; font-size: 12px; }}
td, th {{ border: 1px solid #ccc; padding: 2px 5px; text-align: left; }}
th.v {{ writing-mode: vertical-rl; transform: rotate(180deg); font-weight: normal; }}
img {{ max-width: 100%; margin: 4px; }}
pre {{ font-size: 12px; background: #f6f6f6; padding: 6px; overflow-x: auto; }}
figure {{ display: inline-block; margin: 4px; }}
</style>{_SELF_CHECK}</head>
<body><h1>{_esc(title)}</h1>
{body}
</body></html>
'''


def retried_keys(report: dict) -> set:
    return {(tc['name'], tc['system'], tc['partition'], tc['environ'])
            for tc in report.get('hpcnet_retried', []) if tc.get('result') == 'pass'}
