"""The report's node-pair section: the heatmaps of a pair case mark the
culprits the check named and the case's verdict line names them; the first
exchange's cost is drawn beside them."""
import matplotlib.pyplot as plt

from helpers import report_case

from hpcnet.acceptance.report import report, reportplots

HOSTS = [f'cn{i}' for i in range(5)]
CULPRITS = {'bandwidth': {'nodes': ['cn4'], 'links': [['cn1', 'cn2']], 'inconclusive': []},
            'latency': {'nodes': [], 'links': [], 'inconclusive': [['cn0', 'cn3']]}}
ATTRIBUTION = ('rule mad, 6 pairs measured again; bad twice: bandwidth: node cn4; '
               'link cn1-cn2; latency: inconclusive cn0-cn3')


def _pairs_case(hosts=HOSTS, **extra) -> dict:
    table = [{'host_a': a, 'host_b': b, 'bw_median_MBps': 117.0, 'lat_mean_us': 30.0,
              'lat_first_us': 900.0} for i, a in enumerate(hosts) for b in hosts[i + 1:]]
    return report_case(name='hpcnet_pairs %scale=all_nodes', environ='gcc-openmpi',
                       pair_table=table, **extra)


def test_the_verdict_line_names_the_culprits_under_three_panels():
    html = reportplots.pair_heatmaps([_pairs_case(culprits=CULPRITS, attribution=ATTRIBUTION)])
    assert html.count('<figure>') == 1
    assert '<figcaption><b>verdict</b>: rule mad, 6 pairs measured again; bad twice: ' \
           'bandwidth: node cn4; link cn1-cn2; latency: inconclusive cn0-cn3</figcaption>' in html


def test_two_nodes_say_that_attribution_needs_three():
    said = 'not computed: 2 nodes are one pair, reported as measured; ... needs at least 3 nodes'
    html = reportplots.pair_heatmaps([_pairs_case(hosts=HOSTS[:2], attribution=said)])
    assert f'<b>verdict</b>: {said}' in html


def test_culprits_are_marked_on_the_panel_of_their_quantity():
    fig, ax = plt.subplots()
    pos = {h: i for i, h in enumerate(HOSTS)}
    ax.imshow([[1.0] * 5] * 5)
    ax.set_xticks(range(5), HOSTS)
    ax.set_yticks(range(5), HOSTS)
    reportplots._mark_culprits(ax, pos, CULPRITS['bandwidth'])
    # The node: its row and column framed, its labels red; the link: both cells.
    assert len(ax.patches) == 2 + 2
    red = [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels()
           if t.get_color() == 'red']
    assert red == ['cn4', 'cn4']
    cells = {(p.get_x() + 0.5, p.get_y() + 0.5) for p in ax.patches if p.get_width() == 1 == p.get_height()}
    assert cells == {(1, 2), (2, 1)}
    plt.close(fig)


def test_a_failed_pair_case_says_what_it_blames():
    failed = _pairs_case(result='fail', culprits=CULPRITS, attribution=ATTRIBUTION,
                         fail_reason='failed to meet reference: bandwidth_outlier_nodes=1, expected 0')
    html = report.findings([failed], set())
    assert 'bandwidth_outlier_nodes=1, expected 0 (rule mad' in html and 'node cn4' in html
