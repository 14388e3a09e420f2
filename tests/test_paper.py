"""hpcnet paper (hpcnet.testbed.paper): the Rocks cluster paper's tables beside a testbed session."""
import pytest

from helpers import run_report
from hpcnet.testbed import paper


def _curves_report(one_way_us):
    '''A session whose ping-pong cases measured ``one_way_us`` ({size: us}),
    beside a socket stream.'''
    curve = [{'size_bytes': s, 'median_us': t, 'bw_MBps': s / t} for s, t in one_way_us.items()]
    return run_report([[
        {'name': 'hpcnet_p2p %scale=2_nodes %mode=pingpong /1', 'scale': '2_nodes',
         'mode': 'pingpong', 'result': 'pass', 'environ': 'gcc12-openmpi4', 'curve': curve},
        {'name': 'hpcnet_p2p %scale=1_node %mode=pingpong /2', 'scale': '1_node',
         'mode': 'pingpong', 'result': 'pass', 'environ': 'gcc12-mpich4', 'curve': curve},
        {'name': 'hpcnet_sockets %scale=2_nodes %test=tcp_stream /3', 'scale': '2_nodes',
         'test': 'tcp_stream', 'result': 'pass', 'curve': [{'size_bytes': 65536, 'recv_MBps': 117.5}]},
    ]])


def test_the_paper_is_read_as_recorded():
    table = paper.paper_table()
    assert table[('PingPong', 4 << 20)] == [35980.06, 35840.50, 35859.50, 35862.71]
    assert ('PingPing', 512) in table and len(table) == 2 * len(paper.SIZES)


def test_tables_set_ours_beside_the_paper():
    text = paper.tables(_curves_report({512: 10.0, 4 << 20: 36208.0}))
    # Only the two-node run is set beside it; the ratio is ours over the paper's mean.
    assert 'gcc12-openmpi4 us' in text and 'gcc12-mpich4' not in text
    row = [l for l in text.splitlines() if l.strip().startswith('4194304')][0]
    assert '35840.50-35980.06' in row and '36208.00' in row and '1.009' in row
    assert 'TCP, UDP and MPI throughput' in text and '940.0' in text


def test_a_report_without_two_node_runs_is_refused():
    with pytest.raises(paper.PaperError, match='no passed hpcnet_p2p'):
        paper.tables({'runs': [{'testcases': []}]})


def test_the_report_section_is_the_tables_or_nothing():
    report = _curves_report({512: 10.0, 4 << 20: 36208.0})
    assert paper.report_section(report) == paper.tables(report)
    assert paper.report_section({'runs': [{'testcases': []}]}) == ''
