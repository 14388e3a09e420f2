"""What the pair matrix blames (hpcnet.checklib.analysis.culprits), on
synthetic kernel rows: a bad node, a bad link, a clean matrix, two nodes, an
inconclusive pattern, and the retest rule (an outlier once is not bad)."""
import pytest

from hpcnet.checklib.analysis import (RETEST_CONTROL, RETEST_OUTLIER, AttributionError, Culprits,
                                      bad_twice, culprits)


def _rows(nodes: int, outliers=(), again=None, controls=(), unsteady=(), prefix='bw'):
    '''The kernel's rows for ``nodes`` hosts cn0..: ``outliers`` the pairs the
    first pass flagged (measured again: retest 1), ``again`` those still
    outliers then (default: all of them), ``controls`` the control pairs
    (retest 2) and ``unsteady`` the controls that were outliers when retested.'''
    outliers = {tuple(sorted(p)) for p in outliers}
    again = outliers if again is None else {tuple(sorted(p)) for p in again}
    controls = {tuple(sorted(p)) for p in controls}
    unsteady = {tuple(sorted(p)) for p in unsteady}
    rows = []
    for a in range(nodes):
        for b in range(a + 1, nodes):
            pair = (a, b)
            row = {'rank_a': a, 'rank_b': b, 'host_a': f'cn{a}', 'host_b': f'cn{b}',
                   'retest': (RETEST_OUTLIER if pair in outliers else
                              RETEST_CONTROL if pair in controls else 0)}
            for p in ('bw', 'lat'):
                judged = p == prefix
                row[f'{p}_outlier'] = int(judged and pair in outliers)
                row[f'{p}_retest_outlier'] = int(judged and (pair in again or pair in unsteady))
            rows.append(row)
    return rows


def _pairs_of(node: int, nodes: int):
    return [(node, other) for other in range(nodes) if other != node]


def test_a_node_whose_pairs_are_all_bad_is_named_and_no_link():
    rows = _rows(8, outliers=_pairs_of(3, 8))
    assert culprits(rows, 'bandwidth') == Culprits(nodes=('cn3',))
    assert culprits(rows, 'latency') == Culprits()


@pytest.mark.parametrize('nodes', [3, 4])
def test_a_bad_node_on_three_and_four_nodes(nodes):
    assert culprits(_rows(nodes, outliers=_pairs_of(0, nodes)), 'bandwidth').nodes == ('cn0',)


def test_a_node_needs_more_than_half_of_its_pairs_bad():
    # 4 of 7 pairs: a node; its bad pairs are explained by it, not links.
    assert culprits(_rows(8, outliers=_pairs_of(5, 8)[:4]), 'bandwidth') == Culprits(nodes=('cn5',))
    # 3 of 6 pairs (7 nodes) is half, not most: nothing is put on the node.
    found = culprits(_rows(7, outliers=_pairs_of(5, 7)[:3]), 'bandwidth')
    assert found.nodes == () and len(found.inconclusive) == 3 and found.links == ()


def test_one_bad_pair_between_good_nodes_is_a_link_and_neither_node():
    rows = _rows(8, outliers=[(1, 6)], controls=[(1, 0), (6, 0)])
    found = culprits(rows, 'bandwidth')
    assert found == Culprits(links=(('cn1', 'cn6'),))
    assert found.describe() == 'link cn1-cn6'
    assert found.as_dict() == {'nodes': [], 'links': [['cn1', 'cn6']], 'inconclusive': []}


def test_a_link_on_three_nodes():
    assert culprits(_rows(3, outliers=[(0, 1)], controls=[(0, 2), (1, 2)]),
                    'bandwidth').links == (('cn0', 'cn1'),)


def test_clean_matrix_names_nothing():
    found = culprits(_rows(8), 'bandwidth')
    assert found == Culprits() and found.describe() == 'none'


def test_two_nodes_cannot_be_attributed():
    with pytest.raises(AttributionError, match='2 nodes: .* needs at least 3'):
        culprits(_rows(2, outliers=[(0, 1)]), 'bandwidth')


def test_two_bad_pairs_sharing_a_node_are_inconclusive():
    found = culprits(_rows(8, outliers=[(1, 2), (1, 3)]), 'bandwidth')
    assert found == Culprits(inconclusive=(('cn1', 'cn2'), ('cn1', 'cn3')))
    assert found.describe() == 'inconclusive cn1-cn2, cn1-cn3'


def test_a_node_and_a_link_elsewhere_are_both_named():
    rows = _rows(8, outliers=_pairs_of(7, 8) + [(1, 2)], controls=[(1, 0), (2, 0)])
    found = culprits(rows, 'bandwidth')
    assert found == Culprits(nodes=('cn7',), links=(('cn1', 'cn2'),))
    assert found.describe() == 'node cn7; link cn1-cn2'


def test_an_outlier_once_then_fine_is_not_reported():
    rows = _rows(8, outliers=[(1, 6)], again=[], controls=[(1, 0), (6, 0)])
    row = next(r for r in rows if (r['rank_a'], r['rank_b']) == (1, 6))
    assert row['bw_outlier'] and not bad_twice(row, 'bandwidth')
    assert culprits(rows, 'bandwidth') == Culprits()
    # A node's pairs slow in the first pass only: no node either.
    assert culprits(_rows(8, outliers=_pairs_of(3, 8), again=[]), 'bandwidth') == Culprits()


def test_a_control_pair_slow_when_retested_is_not_bad_but_unsettles_the_link():
    # The control (cn1, cn0) was fine first, an outlier when measured again:
    # bad once, so not reported; but cn1 was not steady during the retest,
    # so its bad pair is no proven link.
    rows = _rows(8, outliers=[(1, 6)], controls=[(1, 0), (6, 0)], unsteady=[(1, 0)])
    assert culprits(rows, 'bandwidth') == Culprits(inconclusive=(('cn1', 'cn6'),))


def test_each_quantity_is_judged_on_its_own_columns():
    rows = _rows(8, outliers=[(2, 5)], controls=[(2, 0), (5, 0)], prefix='lat')
    assert culprits(rows, 'latency').links == (('cn2', 'cn5'),)
    assert culprits(rows, 'bandwidth') == Culprits()
