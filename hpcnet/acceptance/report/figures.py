"""The report's figures: sizes on log axes with plain labels, one width for
every plot, and each figure as a small SVG in a data URI."""
from __future__ import annotations

import io
import re

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator  # noqa: E402


def size_label(x: float, _pos=None) -> str:
    for unit, div in (('M', 1 << 20), ('K', 1 << 10)):
        if x >= div:
            return f'{x / div:g}{unit}'
    return f'{x:g}'


def log_axes(ax, y_log: bool = True) -> None:
    """Message sizes (and values) on log axes with plain tick labels ("64K",
    "100") and no minor ticks: matplotlib's default labels are mathtext,
    slow to lay out, and minor ticks triple the artists to draw."""
    ax.set_xscale('log', base=2)
    ax.xaxis.set_major_locator(LogLocator(base=4, numticks=12))
    ax.xaxis.set_major_formatter(FuncFormatter(size_label))
    ax.xaxis.set_minor_locator(NullLocator())
    if y_log:
        ax.set_yscale('log')
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: f'{y:g}'))
        ax.yaxis.set_minor_locator(NullLocator())


def figure(rows: int = 1, height: float = 3.4, **kwargs):
    """(figure, axes) of the width two plots side by side fill, with fixed
    margins that fit the labels: a tight bounding box would lay out every
    figure twice."""
    fig, axes = plt.subplots(rows, 1, figsize=(6.4, height), **kwargs)
    fig.subplots_adjust(left=0.12, right=0.98, bottom=0.15 * 3.4 / height, top=0.91)
    return fig, axes


def img(fig, tight: bool = False) -> str:
    """The figure as an <img> of SVG in a data URI: vector, so sharp at any
    zoom, and a few KB once path coordinates are whole points and positions
    keep one decimal, and text stays text in one font."""
    buf = io.StringIO()
    with plt.rc_context({'svg.fonttype': 'none', 'font.sans-serif': ['DejaVu Sans']}):
        fig.savefig(buf, format='svg', **({'bbox_inches': 'tight'} if tight else {}))
    plt.close(fig)
    svg = re.sub(r'<metadata>.*?</metadata>', '', buf.getvalue()[buf.getvalue().index('<svg'):],
                 flags=re.S)
    svg = re.sub(r' (x|y|transform)="[^"]*"',
                 lambda m: re.sub(r'(\.\d)\d+', r'\1', m.group(0)), svg)
    # Curves and bands in whole points: half a point is under a screen pixel
    # at the page's size, and a full run's page stays small.
    svg = re.sub(r' d="[^"]*"', lambda m: re.sub(r'(\d)\.\d+', r'\1', m.group(0)), svg)
    # Pairs after a move or line are lines: the "L" of a path without curves goes.
    svg = re.sub(r' d="[^"CQ]*"', lambda m: re.sub(r'\s+L\s+', ' ', m.group(0)), svg)
    svg = re.sub(r' transform="rotate\(-?0 [^"]*\)"', '', svg)
    # Ids nothing refers to (matplotlib's own references are m/p + 10 hex).
    svg = re.sub(r' id="(?![mp][0-9a-f]{10}")[^"]*"', '', svg)
    # One font, said once for every text.
    svg = re.sub(r"font-family: [^;\"]*;? ?", '', svg)
    svg = svg.replace('<style type="text/css">', '<style type="text/css">text{font-family:DejaVu Sans,sans-serif}', 1)
    svg = re.sub(r'>\s+<', '><', re.sub(r'\s*\n\s*', ' ', svg))
    # A data URI needs only %, # and & escaped; single quotes for the SVG's
    # own attributes leave the HTML attribute's double quotes alone.
    uri = (svg.replace('%', '%25').replace('#', '%23').replace('&', '%26')
           .replace("'", '%27').replace('"', "'"))
    return f'<img alt="plot" src="data:image/svg+xml,{uri}">'
