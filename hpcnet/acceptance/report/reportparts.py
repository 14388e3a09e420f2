"""What every section of the report uses: the cases of a set of reports, a
case's name, HTML text, and a grid of plots; and one link's TCP, UDP and
MPI throughput (the link section, and a site file's own sections).
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


def link_throughputs(report: dict) -> dict:
    '''size -> {'TCP': Mbit/s, 'UDP': ..., 'MPI': ...} on the same link: the
    socket kernel's tcp_stream and udp_stream, our MPI streaming (bw).'''
    out = {}
    for run in report.get('runs', []):
        for tc in run.get('testcases', []):
            if tc.get('result') not in ('pass', 'xfail'):
                continue
            name = tc.get('name', '')
            if name.startswith('hpcnet_sockets ') and tc.get('scale') == '2_nodes' and \
                    tc.get('test') in ('tcp_stream', 'udp_stream'):
                kind = tc['test'].split('_')[0].upper()
                for r in tc.get('curve', []):
                    out.setdefault(int(r['size_bytes']), {})[kind] = r['recv_MBps'] * 8
            elif name.startswith('hpcnet_p2p ') and tc.get('scale') == '2_nodes' and \
                    tc.get('mode') == 'bw':
                for r in tc.get('curve', []):
                    out.setdefault(int(r['size_bytes']), {}).setdefault('MPI', r['bw_MBps'] * 8)
    return out
