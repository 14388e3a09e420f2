"""The pair matrix's schedule (hpcnet.checklib.pairschedule): round counts,
samples that cover every node and are the seed's, and the expected time."""
import pytest

from hpcnet.checklib import pairschedule as ps


@pytest.mark.parametrize('nodes,rounds,per_round,least', [(2, 1, 1, 1), (3, 3, 1, 3), (8, 7, 4, 2),
                                                          (9, 9, 4, 3), (1024, 1023, 512, 2)])
def test_rounds_of_the_circle_method(nodes, rounds, per_round, least):
    assert ps.round_count(nodes) == rounds and ps.pairs_per_round(nodes) == per_round
    assert ps.min_sample_rounds(nodes) == least
    assert ps.plan(nodes, ps.CONCURRENT).pairs == nodes * (nodes - 1) // 2


def test_a_sample_is_its_seeds_and_recorded():
    a = ps.plan(128, ps.CONCURRENT, sample_rounds=8, seed=7)
    assert a == ps.plan(128, ps.CONCURRENT, sample_rounds=8, seed=7)
    assert a.rounds != ps.plan(128, ps.CONCURRENT, sample_rounds=8, seed=8).rounds
    assert len(set(a.rounds)) == 8 and all(0 <= r < 127 for r in a.rounds)
    drawn = ps.plan(128, ps.CONCURRENT, sample_rounds=8)
    assert drawn.seed is not None and drawn.as_dict()['seed'] == drawn.seed
    assert ps.plan(128, ps.CONCURRENT).seed is None


@pytest.mark.parametrize('nodes,sample', [(2, 0), (3, 1), (9, 0), (16, 17), (7, 8)])
def test_a_sample_that_cannot_cover_every_node_is_refused(nodes, sample):
    if sample == 0:
        sample = ps.min_sample_rounds(nodes) - 1 or ps.round_count(nodes) + 1
    with pytest.raises(ps.ScheduleError, match=f'sample_rounds={sample}: {nodes} nodes have '):
        ps.plan(nodes, ps.CONCURRENT, sample_rounds=sample, seed=1)


def test_expected_time_counts_rounds_at_once_and_pairs_in_turns():
    assert ps.plan(8, ps.CONCURRENT, pair_seconds=2.0).expected_seconds == 7 * 2.0
    assert ps.plan(8, ps.TURNS, pair_seconds=2.0).expected_seconds == 28 * 2.0
    assert ps.plan(8, ps.TURNS, sample_rounds=2, seed=3, pair_seconds=1.0).expected_seconds == 8
    assert ps.plan(8, ps.TURNS).expected_seconds is None
    assert ps.plan(8, ps.TURNS).describe() == (
        '8 nodes: 7 rounds of 4 disjoint pairs, 28 pairs, one pair at a time; '
        'expected time: after the first round (job output)')
    assert ps.plan(9, ps.CONCURRENT, sample_rounds=3, seed=5, pair_seconds=1.5).describe().endswith(
        'the pairs of a round at once, a sample of 3 of 9 rounds (seed 5: '
        + ','.join(map(str, ps.plan(9, ps.CONCURRENT, 3, 5).rounds))
        + '); expected first pass 4 s at 1.5 s per pair')


def test_a_pairs_time_is_read_back_from_the_first_pass_as_it_was_expected():
    for order in (ps.CONCURRENT, ps.TURNS):
        schedule = ps.plan(8, order, pair_seconds=0.9)
        assert schedule.measured_pair_seconds(schedule.expected_seconds) == pytest.approx(0.9)
