"""The Rocks cluster paper, reproduced on the testbed: its Tables I-IV (IMB
PingPong and PingPing over real Gigabit Ethernet, one-way time and throughput
per compiler x MPI) beside ours from a testbed session, with the ratio, and
TCP, UDP and MPI throughput of the same link (the paper's Figure 7).

It reads a ReFrame JSON report of `make testbed-run` (our p2p kernel at scale
2_nodes in every environment, the socket kernel); it runs nothing itself.
`hpcnet paper` prints the tables; `hpcnet report` sets them beside each
testbed session (report_section, named in config/systems/testbed.py).
"""
from __future__ import annotations

import csv
import statistics
from pathlib import Path

from hpcnet.acceptance.report.reportparts import link_throughputs
from hpcnet.constants import REFERENCE_DIR

PAPER_CSV = REFERENCE_DIR / 'paper' / 'rocks-cluster-gbe-imb.csv'
#: The paper's sizes (bytes).
SIZES = (512, 2048, 8192, 32768, 65536, 131072, 262144, 524288, 1048576, 2097152, 4194304)
#: IMB 2016 printed Mbytes/sec with Mbytes of 2^20 bytes.
IMB_MBYTE = 1 << 20


class PaperError(ValueError):
    '''The report holds nothing to set beside the paper.'''


def paper_table(path: Path = PAPER_CSV) -> dict:
    '''(benchmark, size) -> [one-way us of each compiler x MPI of the paper].'''
    table = {}
    with open(path, newline='') as fp:
        for row in csv.DictReader(fp):
            if row['quantity'] != 't_usec':
                continue
            values = [float(v) for k, v in row.items()
                      if k not in ('table', 'benchmark', 'quantity', 'size_bytes')]
            table[(row['benchmark'], int(row['size_bytes']))] = values
    return table


def mbit_s(size: int, one_way_us: float) -> float:
    return size * 8 / one_way_us


def our_curves(report: dict, statistic: str = 'median_us') -> dict:
    '''(benchmark, environment) -> {size: one-way us} of our passed p2p runs
    across two nodes (PingPong: mode pingpong, PingPing: mode pingping), as
    ``statistic`` of each size's samples (a column of the kernel's table).'''
    modes = {'pingpong': 'PingPong', 'pingping': 'PingPing'}
    curves = {}
    for run in report.get('runs', []):
        for tc in run.get('testcases', []):
            if (tc.get('name', '').startswith('hpcnet_p2p ') and tc.get('scale') == '2_nodes'
                    and tc.get('mode') in modes and tc.get('result') in ('pass', 'xfail')):
                curves[(modes[tc['mode']], tc['environ'])] = {
                    int(r['size_bytes']): r[statistic] for r in tc.get('curve', [])}
    return curves


def tables(report: dict, paper: dict | None = None) -> str:
    '''The paper's Tables I-IV with ours beside them, and Figure 7's data.'''
    paper = paper or paper_table()
    curves = our_curves(report)
    if not curves:
        raise PaperError('the report has no passed hpcnet_p2p ping-pong or ping-ping at scale '
                         '2_nodes: run `make testbed-run` (or `hpcnet testbed run -n hpcnet_p2p`)')
    lines = []
    for bench, label in (('PingPong', 'Tables I-II'), ('PingPing', 'Tables III-IV')):
        envs = sorted(env for b, env in curves if b == bench)
        lines.append(f'\nIMB {bench} over Gigabit Ethernet ({label}): one-way time in us and '
                     'throughput in Mbit/s (SI); paper = range over gcc/PGI x MPICH 3.2/Open MPI 1.10')
        head = f'{"size":>8} {"paper us":>19} {"paper Mbit/s":>13}'
        head += ''.join(f' {env + " us":>22} {"Mbit/s":>7} {"/paper":>6}' for env in envs)
        lines.append(head)
        for size in SIZES:
            theirs = paper.get((bench, size))
            if not theirs:
                continue
            mean = statistics.mean(theirs)
            row = (f'{size:>8} {min(theirs):>9.2f}-{max(theirs):<9.2f} '
                   f'{mbit_s(size, mean):>13.1f}')
            for env in envs:
                ours = curves[(bench, env)].get(size)
                row += (f' {ours:>22.2f} {mbit_s(size, ours):>7.1f} {ours / mean:>6.3f}'
                        if ours else f' {"-":>22} {"-":>7} {"-":>6}')
            lines.append(row)
    link = link_throughputs(report)
    if link:
        lines.append('\nTCP, UDP and MPI throughput of the same link (Figure 7), Mbit/s of payload:')
        lines.append(f'{"size":>8} {"TCP":>8} {"UDP":>8} {"MPI":>8}')
        for size in sorted(link):
            v = link[size]
            lines.append(f'{size:>8}' + ''.join(f' {v[k]:>8.1f}' if k in v else f' {"-":>8}'
                                                 for k in ('TCP', 'UDP', 'MPI')))
    lines.append('\nRatios near 1 from 64 KiB up: the emulated link carries payload as a real '
                 'wire does.  Below that the paper\'s times include its NICs\' latency '
                 '(~45 us one way); ours are the host\'s (veth, no netem to add a NIC\'s).')
    return '\n'.join(lines)


def report_section(report: dict) -> str:
    """The tables beside one session in `hpcnet report` (the testbed site
    file's report_sections, hpcnet.siteconfig.sites.REPORT_SECTIONS); '' where the
    session holds none of the runs they compare."""
    try:
        return tables(report)
    except PaperError:
        return ''
