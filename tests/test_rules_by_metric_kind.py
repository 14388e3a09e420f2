"""One family of rules by metric kind, through `hpcnet compare BEFORE.json
AFTER.json` as a site runs it (fault-matrix rows): counts and proportions
judged repeat by repeat (errors where there were none, the share of bad
repeats, their magnitudes), a zero among a continuous metric's samples
judged without a rule switch, the printed step as a floor of the
tolerance, and a slow mode the before side visited that grew after.  The
reports are shaped as ReFrame's JSON run reports (helpers.run_report), one
case per repeat, with the metric catalogue's units."""
from helpers import TESTBED_CASE, fault_row, report_case, run_hpcnet, wobble, write_report
from hpcnet.acceptance.comparison import countjudge, statcompare
from hpcnet.exitcodes import Exit

UDP = {**TESTBED_CASE, 'name': 'hpcnet_sockets %mode=udp_stream'}
PAIRS = {**TESTBED_CASE, 'name': 'hpcnet_pairs %scale=all_nodes'}
NBC = {**TESTBED_CASE, 'name': 'hpcnet_imb_nbc %benchmark=Iallreduce'}
IMB = {**TESTBED_CASE, 'name': 'hpcnet_imb %benchmark=PingPong'}
LOSS, OUTLIERS, OVERLAP = 'udp_loss_100Mbit_1KiB', 'bandwidth_outlier_nodes', 'overlap_1MiB'


def _compare(tmp_path, case: dict, metric: str, before: list, after: list):
    '''`hpcnet compare` of a report with one repeat per value of ``before``
    against one of ``after`` (``metric`` of ``case``).'''
    sides = []
    for side, values in (('before', before), ('after', after)):
        sides.append(write_report(tmp_path / f'{side}.json',
                                  [report_case({metric: v}, base=case) for v in values], side))
    return run_hpcnet('compare', *sides)


def _printed(values: list, decimals: int = 2) -> list:
    '''The values as a benchmark prints them.'''
    return [round(v, decimals) for v in values]


def _with(values: list, at: dict) -> list:
    '''``values`` with the repeats numbered in ``at`` set to its values.'''
    return [at.get(i, v) for i, v in enumerate(values)]


def test_udp_loss_in_a_minority_of_repeats_where_there_was_none_regresses(tmp_path):
    res = _compare(tmp_path, UDP, LOSS, [0.0] * 5, _with([0.0] * 5, {1: 35.2, 3: 39.8}))
    fault_row('47.2: UDP loss 0 % -> 35-40 % in 2 of 5 repeats (a flapping link)', res,
              Exit.FAILED, shown='errors where there were none: nonzero in 2 of 5 repeats after')
    res = _compare(tmp_path, UDP, LOSS, [0.0] * 15,
                   _with([0.0] * 15, dict(zip(range(0, 14, 2), _printed(wobble(37.5, 7, 16, 0.06))))))
    fault_row('47.2: UDP loss 0 % -> 35-40 % in 7 of 15 repeats', res, Exit.FAILED,
              shown='errors where there were none: nonzero in 7 of 15 repeats after')


def test_an_outlier_node_in_half_the_allocations_regresses(tmp_path):
    res = _compare(tmp_path, PAIRS, OUTLIERS, [0] * 15, _with([0] * 15, dict.fromkeys(range(7), 1)))
    fault_row('47.2: pair matrix outlier nodes 0 -> 1 in 7 of 15 repeats (a bad node in '
              'half the allocations)', res, Exit.FAILED,
              shown='errors where there were none: nonzero in 7 of 15 repeats after (1, 1, 1')


def test_an_overlap_lost_in_half_the_repeats_regresses(tmp_path):
    before = _printed(wobble(30.0, 15, 1))
    after = _with(_printed(wobble(30.0, 15, 2)), dict.fromkeys(range(1, 15, 2), 0.0))
    res = _compare(tmp_path, NBC, OVERLAP, before, after)
    fault_row('47.2: NBC overlap 30 % -> 0 in 7 of 15 repeats (higher is better)', res,
              Exit.FAILED, shown='a zero where there was none: at 0 in 7 of 15 repeats after')


def test_a_share_of_bad_repeats_that_rose_or_a_loss_that_grew_regresses(tmp_path):
    '''Bad repeats on both sides: Fisher's exact test on their shares; in
    every repeat on both sides: their magnitudes.'''
    res = _compare(tmp_path, UDP, LOSS, _with([0.0] * 15, {4: 0.1}),
                   _with([0.0] * 15, {i: 0.1 for i in range(0, 15, 2)}))
    fault_row('47.2: UDP loss in 1 of 15 repeats before, 8 of 15 after', res, Exit.FAILED,
              shown="the share of bad repeats rose: nonzero in 8 of 15 repeats after")
    res = _compare(tmp_path, UDP, LOSS, _printed(wobble(0.1, 5, 3)), _printed(wobble(30.0, 5, 4)))
    fault_row('47.2: UDP loss 0.1 % -> 30 % in every repeat (the same share, a larger loss)',
              res, Exit.FAILED, shown='the nonzero values: after is')


def test_healthy_counts_and_proportions_pass(tmp_path):
    '''Zeros on both sides, the same rare loss on both, errors gone (some
    to none), an overlap that wobbles: each passes.'''
    res = _compare(tmp_path, UDP, LOSS, [0.0] * 5, [0.0] * 5)
    fault_row('47.2 healthy: UDP loss 0 % in every repeat before and after', res, Exit.OK)
    res = _compare(tmp_path, UDP, LOSS, _with([0.0] * 15, {3: 0.1, 9: 0.2}),
                   _with([0.0] * 15, {5: 0.1, 11: 0.1}))
    fault_row('47.2 healthy: UDP loss 0.1-0.2 % in 2 of 15 repeats before and after', res,
              Exit.OK)
    res = _compare(tmp_path, PAIRS, OUTLIERS, [1, 0, 1, 0, 0], [0] * 5)
    fault_row('47.2 healthy: an outlier node in 2 of 5 repeats before, none after', res,
              Exit.OK, shown='some to none: nonzero in 0 of 5 repeats after, 2 of 5 before')
    assert 'IMPROVED' in res.stdout
    res = _compare(tmp_path, NBC, OVERLAP, _printed(wobble(30.0, 15, 5)),
                   _printed(wobble(30.0 * 0.99, 15, 6)))
    fault_row('47.2 healthy: NBC overlap 30 % wobbling 1 %', res, Exit.OK)


def test_a_zero_among_the_samples_before_switches_no_rule(tmp_path):
    '''A bandwidth with one repeat that printed 0 before: a healthy -0.3 %
    passes, a 10 % loss still fails, both by the rule of every continuous
    metric.'''
    before = _with(_printed(wobble(117.0, 15, 7), 1), {6: 0.0})
    res = _compare(tmp_path, TESTBED_CASE, 'bandwidth_4MiB', before,
                   _printed(wobble(117.0 * 0.997, 15, 8), 1))
    fault_row('47.2 healthy: a zero among 15 bandwidth samples before, 0.3 % lower after',
              res, Exit.OK)
    assert '1 unchanged' in res.stdout, res.stdout
    res = _compare(tmp_path, TESTBED_CASE, 'bandwidth_4MiB', before,
                   _printed(wobble(117.0 * 0.9, 15, 9), 1))
    fault_row('47.2: a zero among 15 bandwidth samples before, 10 % lower after', res,
              Exit.FAILED, shown='even the best plausible slowdown is beyond')


def test_a_zero_in_a_healthy_latency_series_passes(tmp_path):
    '''IMB prints 0.00 us at 0 bytes on a fast path: a zero on each side.'''
    res = _compare(tmp_path, IMB, 'latency_0B', _with(_printed(wobble(0.24, 15, 10)), {2: 0.0}),
                   _with(_printed(wobble(0.24, 15, 11)), {9: 0.0}))
    fault_row('47.2 healthy: IMB latency 0.24 us with a 0.00 among 15 repeats each side', res,
              Exit.OK)


def test_a_printed_step_is_not_a_regression(tmp_path):
    '''0.24 -> 0.25 us is one step of IMB's two decimals (+4.2 % against the
    3 % floor); two print steps are the floor of the tolerance, as in the
    baseline, and three are beyond it.'''
    before = [0.24] * 5
    res = _compare(tmp_path, IMB, 'latency_0B', before, [0.25] * 5)
    fault_row('47.4 healthy: IMB latency 0.24 -> 0.25 us (one printed step)', res, Exit.OK)
    res = _compare(tmp_path, IMB, 'latency_0B', before, [0.27] * 5)
    fault_row('47.4: IMB latency 0.24 -> 0.27 us (three printed steps)', res, Exit.FAILED,
              shown='beyond the 8.3 % tolerance (2 print steps of 0.01)')


def test_a_slow_mode_the_before_side_visited_that_grew_regresses(tmp_path):
    '''1 of 25 repeats at 60 % of the bandwidth before, 5 of 15 after: no
    sample after is slower than the slowest before, the medians agree, and
    the share of the slow mode rose (Fisher's exact p = 0.021).'''
    before = _with(_printed(wobble(117.0, 25, 12), 1), {17: 70.2})
    slow = dict(zip(range(1, 15, 3), _printed(wobble(70.2, 5, 13), 1)))
    res = _compare(tmp_path, TESTBED_CASE, 'bandwidth_4MiB', before,
                   _with(_printed(wobble(117.0, 15, 14), 1), slow))
    fault_row('47.3: a slow mode at 60 % in 1 of 25 repeats before, 5 of 15 after', res,
              Exit.FAILED, shown='a slow mode grew: 5 of 15 samples after below')
    assert '1 of 25 before' in res.stdout, res.stdout
    res = _compare(tmp_path, TESTBED_CASE, 'bandwidth_4MiB', before,
                   _with(_printed(wobble(117.0, 15, 15), 1), {8: 70.0}))
    fault_row('47.3 healthy: the slow mode in 1 of 25 repeats before, 1 of 15 after', res,
              Exit.OK)


def test_one_error_in_five_repeats_where_there_were_none_and_a_short_side():
    '''The count rule on its own: one error in 5 repeats after 5 without is
    a regression naming it; 2 repeats before are too few to judge.'''
    tol = statcompare.Tolerance(0.03, 'the 3 % floor')
    result = countjudge.compare_counts([0] * 5, [0, 0, 0, 2, 0], higher_better=False,
                                       tolerance=tol, alpha=0.05)
    assert result.verdict == statcompare.Verdict.REGRESSED, result.reason
    assert result.reason.startswith('errors where there were none: nonzero in 1 of 5 repeats '
                                    'after (2)'), result.reason
    result = countjudge.compare_counts([0, 0], [1, 1, 1], higher_better=False, tolerance=tol,
                                       alpha=0.05)
    assert (result.verdict, result.more_samples) == (statcompare.Verdict.INCONCLUSIVE, 1)
