"""What a case judged over iperf3 on its own link (nodes that share one
host's cores) shows and what it judges, through `hpcnet compare` as a site
runs it (fault-matrix rows): the figures that scale with the host (MB/s,
µs) are shown, their ratios over iperf3 decide; a ratio of two figures of
the same run and a count of bad nodes are the same on a busy host and a
quiet one, and are judged as on any partition."""
from helpers import TESTBED_CASE, fault_row, report_case, run_hpcnet, wobble, write_report
from hpcnet import metrics
from hpcnet.exitcodes import Exit

PAIRS = {**TESTBED_CASE, 'name': 'hpcnet_pairs %scale=all_nodes'}
RATIO = 'bandwidth_median_pair_over_iperf3'
HEALTHY = {RATIO: 1.0, 'bandwidth_median_pair': 110.0, 'latency_median_pair': 40.0,
           'latency_worst_over_median': 1.05, 'bandwidth_worst_over_median': 0.97,
           'bandwidth_outlier_nodes': 0}


def _repeats(values: dict, repeats: int, seed: int, **changed) -> list:
    '''``repeats`` cases of the pair matrix, each metric of ``values`` (with
    ``changed`` over them) wobbling by 0.5 % (counts exact).'''
    merged = {**values, **changed}
    columns = {name: ([value] * repeats if isinstance(value, int) else
                      wobble(value, repeats, seed + i, 0.005))
               for i, (name, value) in enumerate(sorted(merged.items()))}
    return [report_case({name: column[r] for name, column in columns.items()}, base=PAIRS)
            for r in range(repeats)]


def _compare(tmp_path, after: list):
    before = write_report(tmp_path / 'before.json', _repeats(HEALTHY, 5, 1), 'before')
    return run_hpcnet('compare', before, write_report(tmp_path / 'after.json', after, 'after'))


def test_a_scale_free_ratio_of_the_run_is_judged(tmp_path):
    res = _compare(tmp_path, _repeats(HEALTHY, 5, 2, latency_worst_over_median=3.1))
    fault_row('47.5: shared host: worst pair latency over the median 1.05 -> 3.1, the ratio '
              'over iperf3 unchanged', res, Exit.FAILED, shown='latency_worst_over_median')
    assert 'REGRESSED' in next(line for line in res.stdout.splitlines()
                               if 'latency_worst_over_median' in line), res.stdout


def test_an_outlier_node_is_judged(tmp_path):
    res = _compare(tmp_path, _repeats(HEALTHY, 5, 2, bandwidth_outlier_nodes=1))
    fault_row('47.5: shared host: outlier nodes 0 -> 1, the ratio over iperf3 unchanged', res,
              Exit.FAILED, shown='errors where there were none')


def test_a_slower_host_is_shown_not_judged(tmp_path):
    '''Every absolute figure 20 % worse, its ratio over iperf3 the same: the
    host was slower, the link the same.'''
    res = _compare(tmp_path, _repeats(HEALTHY, 5, 2, bandwidth_median_pair=88.0,
                                      latency_median_pair=50.0))
    fault_row('47.5: shared host: the host 20 % slower, every ratio the same (healthy)', res,
              Exit.OK)
    rows = [line for line in res.stdout.splitlines() if '_median_pair ' in line
            or line.rstrip().endswith('_median_pair')]
    assert all('REGRESSED' not in line for line in rows), res.stdout


def test_the_units_that_scale_with_the_host():
    assert metrics.counterpart('hpcnet_pairs', 'latency_worst_over_median', {RATIO}) is None
    assert metrics.counterpart('hpcnet_pairs', 'bandwidth_outlier_nodes', {RATIO}) is None
    assert metrics.counterpart('hpcnet_pairs', 'bandwidth_median_pair', {RATIO}) == RATIO
    assert metrics.counterpart('hpcnet_pairs', 'latency_median_pair', {RATIO}).startswith(
        "the case's ratios over iperf3")
