"""What every section of the report uses: the cases of a set of reports, a
case's name, HTML text, and a grid of plots.
"""
from __future__ import annotations

import html


def final_cases(reports: list) -> list:
    """The final result of every non-fixture case (a repeat keeps them all)."""
    return [tc for r in reports for run in r.get('runs', []) for tc in run.get('testcases', [])
            if not tc.get('fixture')]


def display_name(tc: dict) -> str:
    return tc['name'].split(' /')[0]


def esc(text) -> str:
    """``text`` as HTML text (the report and the trend page)."""
    return html.escape(str(text))


def plot_grid(imgs: list) -> str:
    imgs = [i for i in imgs if i]
    return f'<div class="plots">{"".join(imgs)}</div>' if imgs else ''
