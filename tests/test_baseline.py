"""Baselines: robust references from several sessions, outliers left out and
named, a cap above which a metric is recorded but not asserted, and merging
a baseline of a selection into an existing reference file."""
import copy
import json
import random
from pathlib import Path

import numpy as np
import pytest
from scipy import special
from reframe.utility.sanity import reference_bounds

from helpers import report_case, run_report

from hpcnet.acceptance.references import baseline, references, refmerge, spread

REPORT = Path(__file__).parent / 'data' / 'reports' / 'local-run.json'
INDEX = ['$partition', 'mpi_family', 'mode']


#: The p2p case of the local system's tcp partition, indexed by partition, family and mode.
LOCAL_CASE = {'name': 'hpcnet_p2p %mode=bw /abcd', 'unique_name': 'hpcnet_p2p_0', 'system': 'local',
              'partition': 'tcp', 'result': 'pass', 'reference_index': INDEX}


def _case(env, fam, mode, values, result='pass'):
    return report_case(values, base=LOCAL_CASE, name=f'hpcnet_p2p %mode={mode} /abcd', environ=env,
                       mode=mode, mpi_family=fam, result=result)


def _repeats(var, unit, values, env='gcc12-openmpi4', mode='bw', uuid='s1'):
    return run_report([[_case(env, 'openmpi', mode, {var: (v, unit)})] for v in values], uuid)


def _leaf(doc, env='gcc12-openmpi4', mode='bw'):
    return doc['hpcnet_p2p']['local:tcp'][env][mode]


@pytest.mark.parametrize('var,unit,values,median', [
    ('bandwidth_4MiB', 'MB/s', [117, 116, 118, 117, 20], 117.0),
    ('latency_8B', 'us', [5, 5.1, 4.9, 5, 50], 5.0),
])
def test_one_slow_repeat_is_left_out_named_and_not_bounded(var, unit, values, median):
    """A repeat on the worse side is a slower mode the next run may visit:
    no reference (it was [117, -0.9949, 0.9949] and [5, -1.0, 10.8] with it
    in, and would fail one run in five with it out); recorded and compared."""
    doc = baseline.document([_repeats(var, unit, values)])
    assert 'hpcnet_p2p' not in doc
    reason = doc[references.NOT_ASSERTED]['hpcnet_p2p'][f'local:tcp/gcc12-openmpi4/bw/{var}']
    assert f'1 of 5 samples fell to a slower mode ({values[4]:g} against a median of ' \
        f'{median:g}' in reason
    (out,) = doc[references.PROVENANCE]['left_out']
    assert out == {'metric': f'hpcnet_p2p local:tcp/gcc12-openmpi4/bw/{var}', 'value': values[4],
                   'session': 's1', 'run': 4}


@pytest.mark.parametrize('var,unit,values,median', [
    ('bandwidth_4MiB', 'MB/s', [117, 116, 118, 117, 200], 117.0),
    ('latency_8B', 'us', [5, 5.1, 4.9, 5, 0.5], 5.0),
])
def test_one_fast_repeat_is_left_out_and_the_worse_side_stays_tight(var, unit, values, median):
    doc = baseline.document([_repeats(var, unit, values)])
    value, lower, upper, u = _leaf(doc)[var]
    assert value == median and u == unit
    # Only the worse side is bounded: the lower of a rate, the upper of a time.
    if unit == 'MB/s':
        assert -0.2 < lower < 0 and upper is None
    else:
        assert lower is None and 0 < upper < 0.2
    assert doc[references.UNBOUNDED]['hpcnet_p2p'] == {
        'local:tcp/gcc12-openmpi4/bw/.*': baseline.ONE_SIDED_REASON}
    lo, hi = reference_bounds(value, lower, upper)
    assert all(lo <= v <= hi for v in values[:4])
    assert [o['value'] for o in doc[references.PROVENANCE]['left_out']] == [values[4]]
    references.validate(json.loads(json.dumps(doc)), 'baseline.yaml')


def _group_with_slow_modes() -> list:
    """Five sessions of ten steady metrics of one group, three of which fall
    once to a slower mode (3 of 50 samples, above EXCURSION_LIMIT)."""
    values = {f'bandwidth_{size}': [1000.0, 1001.0, 999.0, 1000.5, 999.5]
              for size in ('8B', '16KiB', '64KiB', '256KiB', '512KiB', '1MiB', '2MiB', '4MiB',
                           '128KiB', '32KiB')}
    for var in ('bandwidth_8B', 'bandwidth_16KiB', 'bandwidth_64KiB'):
        values[var][2] = 400.0
    reports = [run_report([[_case('gcc12-openmpi4', 'openmpi', 'bw', {
        var: (v[i], 'MB/s') for var, v in values.items()})]], f's{i}') for i in range(5)]
    return reports


def test_a_group_with_slower_modes_is_not_asserted():
    """Ten metrics of one group, five sessions; three metrics fall once to a
    slower mode (3 of 50 samples, above EXCURSION_LIMIT): the group has
    modes, and none of its metrics gets a bound, steady ones included."""
    reports = _group_with_slow_modes()
    b = baseline.build(reports)
    assert not b.references
    reasons = b.not_asserted['hpcnet_p2p']
    assert 'fell to a slower mode (6.0%, above 1%)' in reasons[
        'local:tcp/gcc12-openmpi4/bw/bandwidth_4MiB']


def test_metrics_a_site_declares_not_asserted_decide_nothing_beside_them():
    """The slower modes of metrics the file's site declares not asserted (as
    the testbed declares the sizes below 4 MiB) neither unassert nor widen
    the steady metrics of their group, and get no entry of the baseline's."""
    reports = _group_with_slow_modes()
    existing = {references.NOT_ASSERTED: {'hpcnet_p2p': {
        '$index': INDEX, 'local:tcp/.*/.*/bandwidth_(8B|16KiB|64KiB)': 'small messages',
        'local:tcp/gcc12-openmpi4/bw/bandwidth_2MiB': 'baseline spread: needs +/-50%'}}}
    declared = baseline.site_not_asserted(existing)
    assert declared == {'hpcnet_p2p': {'local:tcp/.*/.*/bandwidth_(8B|16KiB|64KiB)':
                                       'small messages'}}
    assert not baseline.build(reports).references
    b = baseline.build(reports, declared=declared)
    assert set(b.references['hpcnet_p2p']['local:tcp']['gcc12-openmpi4']['bw']) == {
        f'bandwidth_{size}' for size in ('256KiB', '512KiB', '1MiB', '2MiB', '4MiB', '128KiB',
                                         '32KiB')}
    assert not b.not_asserted and not b.left_out
    merged = refmerge.merge(existing, baseline.document(reports, declared=declared))
    assert merged[references.NOT_ASSERTED]['hpcnet_p2p'] == {
        '$index': INDEX, 'local:tcp/.*/.*/bandwidth_(8B|16KiB|64KiB)': 'small messages'}


def test_outlier_rule_is_median_plus_minus_3_5_robust_sigma_outside_the_floor():
    # sigma = 1.4826 x MAD 1 = 1.48: 100 +/- 5.19 stays, 106 goes.
    assert spread.outliers([99, 100, 101, 100, 105]) == []
    assert spread.outliers([99, 100, 101, 100, 106]) == [4]
    # MAD 0: only what the floor would not accept anyway is an outlier.
    assert spread.outliers([100, 100, 100, 100, 102]) == []
    assert spread.outliers([100, 100, 100, 100, 104]) == [4]
    # Too few samples to tell.
    assert spread.outliers([100, 20]) == []
    # A sample as far out as its whole session drifted is drift, not an outlier.
    values = [98.0, 98.9, 99.2, 98.8, 101.4, 103.3]
    assert spread.outliers(values) == [5]
    assert spread.outliers(values, sessions=['a', 'a', 'b', 'b', 'c', 'c']) == []


def _k_spread(values, dof, observations, alpha=spread.RUN_ALPHA, variance=None):
    """The prediction term of the rule, for a metric without a prior."""
    if variance is None:
        variance = float(np.var(np.log(values), ddof=1))
    return float(np.expm1(spread.prediction_factor(dof, observations, alpha) * variance ** 0.5))


def test_tolerance_rule_and_its_constants():
    steady = [100.0, 100.2, 99.9, 100.1, 100.0]
    assert spread.tolerance(steady) == spread.TOLERANCE_FLOOR == 0.03
    noisy = [100.0, 98.0, 102.0, 99.0, 101.0]
    k5 = spread.prediction_factor(4, 5)
    assert k5 == pytest.approx(3.747 * 1.2 ** 0.5, abs=0.001)      # t(4, 0.99) x sqrt(1 + 1/5)
    assert spread.tolerance(noisy) == pytest.approx(_k_spread(noisy, 4, 5), rel=1e-6)
    # Six sessions, each steady (+/-0.1), their medians 94-106: the drift
    # between sessions sets it (6 observations, 5 dof), not the 30 samples.
    medians = [94, 97, 100, 100, 103, 106]
    values = [m + d for m in medians for d in (-0.1, 0, 0.1, 0, 0)]
    sessions = [s for s in 'abcdef' for _ in range(5)]
    est = spread.estimate(values, sessions)
    assert est.sessions == 6 and '(5 dof) x 3.6 over 6 observations' in est.reason
    assert est.tolerance == pytest.approx(_k_spread(medians, 5, 6), rel=1e-6)
    # Every kept sample of the baseline is inside its own reference.
    assert spread.estimate([100, 100, 100, 100, 100, 102.5]).tolerance >= 0.0375
    # One sample: its spread is unknown, no bound is a fair one.  A zero
    # median (a count): absolute bounds.
    one = spread.estimate([42.37])
    assert one.tolerance == float('inf') and not one.asserted and 'spread is unknown' in one.reason
    assert spread.estimate([0, 0, 0, 0]).tolerance == 0.03


def test_a_smaller_chance_per_value_widens_the_tolerance():
    noisy = [100.0, 98.0, 102.0, 99.0, 101.0]
    shared = spread.estimate(noisy, alpha=spread.RUN_ALPHA / 300).tolerance
    assert shared == pytest.approx(_k_spread(noisy, 4, 5, spread.RUN_ALPHA / 300), rel=1e-6)
    assert shared > 1.5 * spread.estimate(noisy).tolerance


def test_two_print_steps_are_the_tightest_tolerance():
    # IMB prints two decimals: three equal samples of 0.24 us are 0.235-0.245,
    # and the next run's 0.26 is two steps away.
    assert spread.print_step([0.24, 0.24, 0.25]) == pytest.approx(0.01)
    assert spread.print_step([15354.1, 14314.8, 15052.0]) == pytest.approx(0.1)
    # Two values may be round by chance: no step is told from them.
    assert spread.print_step([10.0, 12.0]) == 0.0
    assert spread.print_step([6.6725, 6.6825, 6.7001]) == pytest.approx(0.0001)
    est = spread.estimate([0.24, 0.24, 0.24], ['a', 'b', 'c'])
    assert est.tolerance == pytest.approx(2 * 0.01 / 0.24) and 'print steps' in est.reason


def test_metrics_that_agreed_by_chance_get_the_spread_of_their_group():
    """Three sessions of eight metrics of one test, partition and unit: seven
    drift by a few per cent between sessions, one's three values happen to
    agree.  The group's spread (limma's empirical Bayes prior) bounds that
    one too, where its own 2 degrees of freedom would say 0."""
    drifts = [(1.00, 1.04, 0.97), (1.03, 0.98, 1.00), (0.96, 1.00, 1.03), (1.00, 0.97, 1.04),
              (1.02, 1.00, 0.97), (0.98, 1.03, 1.00), (1.00, 1.02, 0.96), (1.0, 1.0, 1.0)]
    # The steady one last, a catalogued bandwidth: bounded below only.
    sizes = ('64KiB', '1MiB', '16KiB', '8B', '256KiB', '2MiB', '512KiB', '4MiB')
    reports = [run_report([[_case('gcc12-openmpi4', 'openmpi', 'bw', {
        f'bandwidth_{size}': (1000.0 * d[i], 'MB/s') for size, d in zip(sizes, drifts)})]], f's{i}')
        for i in range(3)]
    prior = spread.fit_prior([float(np.var(np.log(d), ddof=1)) for d in drifts[:7]], [2] * 7)
    # The seven vary alike (no more than chi-square with 2 dof says): the
    # prior is their common variance, with infinite weight.
    assert prior.dof == float('inf') and 0.02 < prior.variance ** 0.5 < 0.04
    b = baseline.build(reports)
    steady = _leaf(b.references)['bandwidth_4MiB']
    # 8 metrics share RUN_ALPHA.
    expected = _k_spread(None, prior.dof, 3, spread.RUN_ALPHA / 8, prior.variance)
    assert steady[0] == 1000.0 and steady[1] == pytest.approx(-round(expected, 4)) \
        and steady[2] is None
    # Without its group (one metric), three equal values say nothing: the floor.
    alone = baseline.build([run_report([[_case('gcc12-openmpi4', 'openmpi', 'bw', {
        'bandwidth_16KiB': (1000.0, 'MB/s')})]], f's{i}') for i in range(3)])
    assert _leaf(alone.references)['bandwidth_16KiB'][1] == -0.03


def test_limma_prior_against_its_published_behaviour():
    """fit_prior follows limma's fitFDist: variances drawn from a scaled
    F(d, d0) give back about s0^2 and d0; variances that agree more than
    chi-square allows give an infinite d0 (every metric takes the prior)."""
    rng = np.random.default_rng(7)
    s0sq, d0, d = 0.0004, 8.0, 4
    true = s0sq * d0 / rng.chisquare(d0, 4000)
    sample = true * rng.chisquare(d, 4000) / d
    prior = spread.fit_prior(list(sample), [d] * 4000)
    assert prior.variance == pytest.approx(s0sq, rel=0.1) and prior.dof == pytest.approx(d0, rel=0.25)
    assert spread._trigamma_inverse(float(special.polygamma(1, 2.5))) == pytest.approx(2.5)


def test_a_metric_wider_than_the_cap_is_recorded_not_asserted():
    sessions = [run_report([[_case('gcc12-openmpi4', 'openmpi', 'bw', {
        'bandwidth_4MiB': (v, 'MB/s'), 'bandwidth_1MiB': (1000 + i, 'MB/s')})]], f's{i}')
        for i, v in enumerate([100, 140, 70, 120, 85])]
    doc = baseline.document(sessions)
    leaf = _leaf(doc)
    assert 'bandwidth_4MiB' not in leaf and leaf['bandwidth_1MiB'][0] == 1002.0
    exempt = dict(doc[references.NOT_ASSERTED]['hpcnet_p2p'])
    # The index of the patterns' paths, for a test with no entry of its own.
    assert exempt.pop(references.INDEX) == ['$partition', '$environ', 'mode']
    ((pattern, reason),) = exempt.items()
    assert pattern == r'local:tcp/gcc12-openmpi4/bw/bandwidth_4MiB'
    assert reason.startswith('baseline spread: too noisy to judge: retake or widen by hand: '
                             'needs +/-') and 'above the 40% cap: recorded and ' \
        'compared, not asserted' in reason and 'spread 27.39% (4 dof)' in reason
    assert doc[references.PROVENANCE]['not_asserted'] == 1
    assert doc[references.PROVENANCE]['too_noisy'] == [
        'hpcnet_p2p local:tcp/gcc12-openmpi4/bw/bandwidth_4MiB: ' + reason.split(': ', 3)[3]
        .removesuffix(': recorded and compared, not asserted')]
    # Every bound written stays inside what validation accepts.
    references.validate(json.loads(json.dumps(doc)), 'baseline.yaml')
    # testlib's not-asserted lookup finds it by the case's path.
    refs = references.TestReferences(Path('x'), {}, True, tuple(exempt.items()))
    assert refs.not_asserted_reason('local:tcp/gcc12-openmpi4/bw/bandwidth_4MiB') == reason
    assert refs.not_asserted_reason('local:tcp/gcc12-openmpi5/bw/bandwidth_4MiB') is None


def test_a_case_judged_over_iperf3_asserts_its_ratios_only():
    '''The testbed's 0-byte latency of five sessions that all met its fast
    mode (docs/measurements.md, "The accept benchmark again"): the ratio is
    asserted, the latency and the absolute MB/s are the host's.'''
    latency = [6.0941, 6.0294, 6.4462, 6.1268, 5.8721]
    sessions = [run_report([[_case('gcc12-openmpi4', 'openmpi', 'bw', {
        'latency_0B': (v, 'us'), 'bandwidth_4MiB': (115.0 + i / 10, 'MB/s'),
        'bandwidth_4MiB_over_iperf3': (1.0 + i / 1000, 'ratio')})]], f's{i}')
        for i, v in enumerate(latency)]
    doc = baseline.document(sessions)
    assert set(_leaf(doc)) == {'bandwidth_4MiB_over_iperf3'}
    exempt = doc[references.NOT_ASSERTED]['hpcnet_p2p']
    for var in ('latency_0B', 'bandwidth_4MiB'):
        reason = exempt[f'local:tcp/gcc12-openmpi4/bw/{var}']
        assert reason.startswith(references.OVER_IPERF3_REASON)
        assert references.written_by_baseline(reason)
    assert baseline.site_not_asserted(doc) == {'hpcnet_p2p': {}}
    references.validate(json.loads(json.dumps(doc)), 'baseline.yaml')


def _perturbed(report, uuid, drift, noise, seed, runs=1):
    """``report`` as another session: every value x (1 + drift), each run
    with its own noise (uniform within +/- noise)."""
    rng = random.Random(seed)
    out = {'session_info': {'uuid': uuid}, 'runs': []}
    for r in range(runs):
        run = copy.deepcopy(report['runs'][0])
        run['run_index'] = r
        for tc in run['testcases']:
            # The recording predates the pairs check's outlier_node_count
            # split into bandwidth_/latency_outlier_nodes.
            tc.get('perfvalues', {}).pop(f'{tc["system"]}:{tc["partition"]}:outlier_node_count', None)
            # ... and the paced UDP streams (loss per rate, capacity unpaced).
            for old in ('loss_1KiB', 'loss_32KiB', 'throughput_1KiB', 'throughput_32KiB'):
                if tc['name'].startswith('hpcnet_sockets'):
                    tc.get('perfvalues', {}).pop(f'{tc["system"]}:{tc["partition"]}:{old}', None)
            for val in (tc.get('perfvalues') or {}).values():
                if val[0] is not None:
                    val[0] = val[0] * (1 + drift) * (1 + rng.uniform(-noise, noise))
        out['runs'].append(run)
    return out


def test_a_clean_session_right_after_the_baseline_passes_it():
    """A/A through the reference gate: a baseline of three sessions of two
    runs of the recorded local run, each session drifted (+/-2 %) and each
    run noisy (+/-1.5 %), then a fourth session drifted within what the
    baseline saw: every value of it lies within its reference or is a
    not-asserted metric, as ReFrame computes the bounds."""
    real = json.loads(REPORT.read_text())
    base = [_perturbed(real, f'base{i}', d, 0.015, i, runs=2)
            for i, d in enumerate((-0.02, 0.0, 0.02))]
    doc = baseline.document(base)
    references.validate(json.loads(json.dumps(doc)), 'local.yaml')
    after = _perturbed(real, 'after', 0.015, 0.015, 99, runs=3)
    checked = 0
    for tc in baseline.judged_cases([after]):
        cls = tc['name'].split()[0]
        index, keys = baseline.index_keys(tc)
        not_asserted = (doc.get(references.NOT_ASSERTED) or {}).get(cls, {})
        for var, value, _ in baseline.perf_samples(tc):
            path = '/'.join((*keys, var))
            node = doc.get(cls)
            for k in keys:
                node = (node or {}).get(k)
            ref = (node or {}).get(var)
            if ref is None:
                assert any(__import__('re').fullmatch(p, path) for p in not_asserted
                           if p != references.INDEX), path
                continue
            lo, hi = reference_bounds(ref[0], ref[1], ref[2])
            assert lo <= value <= hi, (cls, path, value, ref)
            checked += 1
    assert checked > 100
    # Halved bandwidths fail the same references.
    broken = _perturbed(real, 'broken', 0.0, 0.0, 1)
    halved = [(ref, v * 0.5) for tc in baseline.judged_cases([broken])
              for var, v, _ in baseline.perf_samples(tc) if var.startswith('bandwidth_')
              for ref in [_ref_of(doc, tc, var)] if ref]
    assert halved and all(not reference_bounds(r[0], r[1], r[2])[0] <= v for r, v in halved)


def _ref_of(doc, tc, var):
    _, keys = baseline.index_keys(tc)
    node = doc.get(tc['name'].split()[0])
    for k in keys:
        node = (node or {}).get(k)
    return (node or {}).get(var)


def test_round_trip_per_environment_and_failed_cases_left_out(tmp_path):
    report = run_report([[
        _case('gcc12-openmpi4', 'openmpi', 'pingpong', {'latency_8B': (10.0 * f, 'us')}),
        _case('clang14-openmpi4', 'openmpi', 'pingpong', {'latency_8B': (12.0 * f, 'us')}),
        _case('gcc12-mpich4', 'mpich', 'pingpong', {'latency_8B': (20.0 * f, 'us')}),
        _case('gcc12-openmpi5', 'openmpi', 'pingpong', {'latency_8B': (30.0 * f, 'us')}, 'fail')]
        for f in (1.0, 1.001, 0.999, 1.0005, 0.9995)], 's1')
    doc = baseline.document([report])
    node = doc['hpcnet_p2p']
    # Measured per environment: Open MPI 4 and 5 (or one MPI by two
    # compilers) are never merged into one wide reference.
    assert node['$index'] == ['$partition', '$environ', 'mode']
    assert node['local:tcp']['gcc12-openmpi4']['pingpong']['latency_8B'] == [10.0, None, 0.03, 'us']
    assert set(node['local:tcp']) == {'gcc12-openmpi4', 'clang14-openmpi4', 'gcc12-mpich4'}
    prov = doc[references.PROVENANCE]
    assert prov['passed_cases'] == 15 and prov['repeats'] == 5 and prov['reframe'].startswith('4.')
    assert prov['sessions'] == ['s1'] and 'one session' in prov['note']
    assert prov['updated']['hpcnet_p2p']['$index'] == ['$partition', '$environ', 'mode']
    p = tmp_path / 'local.yaml'
    p.write_text(references.dump(doc))
    references.load(p)


def _doc(*cases, uuid='new'):
    return baseline.document([run_report([list(cases)] * 5, uuid)])


def test_merge_replaces_only_what_the_baseline_measured():
    existing = {
        references.PROVENANCE: {'date': 'old', 'sessions': ['old'], 'updated': {
            'hpcnet_p2p': {'$index': ['$partition', '$environ', 'mode'],
                           'cases': ['local:tcp/gcc12-openmpi4/bw', 'local:tcp/gcc12-mpich4/bw']}}},
        'hpcnet_p2p': {'$index': ['$partition', '$environ', 'mode'], 'local:tcp': {
            'gcc12-openmpi4': {'bw': {'bandwidth_4MiB': [900.0, -0.1, 0.5, 'MB/s']}},
            'gcc12-mpich4': {'bw': {'bandwidth_4MiB': [800.0, -0.1, 0.5, 'MB/s']}}},
            'local:shm': {'.*': {'bw': {'bandwidth_4MiB': [5000.0, -0.1, 0.5, 'MB/s']}}}},
        'hpcnet_iperf3': {'local:tcp': {'throughput': [1000.0, -0.1, 0.5, 'MB/s']}},
        references.NOT_ASSERTED: {
            'hpcnet_p2p': {'local:tcp/.*/latency_.*': "the site's own reason",
                           'local:tcp/gcc12-openmpi4/bw/bandwidth_1MiB': 'baseline spread: old',
                           'local:tcp/gcc12-mpich4/bw/bandwidth_1MiB': 'baseline spread: old'},
            'hpcnet_sockets': {'.*': 'not under test'}},
        references.UNBOUNDED: {
            'hpcnet_p2p': {'local:tcp/gcc12-openmpi4/bw/.*': baseline.ONE_SIDED_REASON,
                           'local:tcp/gcc12-mpich4/bw/.*': baseline.ONE_SIDED_REASON,
                           'local:shm/.*/bw/rate_.*': "the site's own reason"}},
    }
    new = _doc(_case('gcc12-openmpi4', 'openmpi', 'bw', {'bandwidth_4MiB': (1000.0, 'MB/s'),
                                                         'bandwidth_1MiB': (990.0, 'MB/s'),
                                                         'latency_8B': (5.0, 'us')}))
    merged = refmerge.merge(existing, new)
    p2p = merged['hpcnet_p2p']
    assert p2p['local:tcp']['gcc12-openmpi4']['bw']['bandwidth_4MiB'] == [1000.0, -0.03, None, 'MB/s']
    assert p2p['local:tcp']['gcc12-mpich4'] == existing['hpcnet_p2p']['local:tcp']['gcc12-mpich4']
    assert p2p['local:shm'] == existing['hpcnet_p2p']['local:shm']
    assert merged['hpcnet_iperf3'] == existing['hpcnet_iperf3']
    na = merged[references.NOT_ASSERTED]
    assert na['hpcnet_sockets'] == {'.*': 'not under test'}
    # The site's reason stands; the old baseline's reason for what was
    # measured again is gone (now a reference), the one for an entry not
    # measured stays.
    assert p2p['local:tcp']['gcc12-openmpi4']['bw']['bandwidth_1MiB'][0] == 990.0
    assert na['hpcnet_p2p'] == {'local:tcp/.*/latency_.*': "the site's own reason",
                                'local:tcp/gcc12-mpich4/bw/bandwidth_1MiB': 'baseline spread: old'}
    # One-sided entries: the site's reason and the old baseline's for the
    # case not measured again stay; the measured case has the new one.
    assert merged[references.UNBOUNDED] == {'hpcnet_p2p': {
        'local:tcp/gcc12-openmpi4/bw/.*': baseline.ONE_SIDED_REASON,
        'local:tcp/gcc12-mpich4/bw/.*': baseline.ONE_SIDED_REASON,
        'local:shm/.*/bw/rate_.*': "the site's own reason"}}
    prov = merged[references.PROVENANCE]
    assert prov['sessions'] == ['new']
    assert prov['updated'] == {'hpcnet_p2p': {'$index': ['$partition', '$environ', 'mode'],
                                              'cases': ['local:tcp/gcc12-openmpi4/bw']}}
    assert prov['kept'] == {'hpcnet_p2p': '2 entries', 'hpcnet_iperf3': 'all entries'}
    (old,) = prov['earlier']
    assert old['date'] == 'old' and old['updated']['hpcnet_p2p']['cases'] == \
        ['local:tcp/gcc12-mpich4/bw']
    references.validate(json.loads(json.dumps(merged)), 'merged.yaml')
    # Merging again: the older block, now without entries, is dropped.
    again = refmerge.merge(merged, _doc(_case('gcc12-mpich4', 'mpich', 'bw', {
        'bandwidth_4MiB': (850.0, 'MB/s')}), uuid='third'))
    assert [b['sessions'] for b in again[references.PROVENANCE]['earlier']] == [['new']]
    # Into an empty or missing file: the baseline itself.
    assert refmerge.merge({}, new) == new and refmerge.merge(None, new) == new


def test_merge_replaces_a_test_whose_index_differs_and_says_so():
    existing = {'hpcnet_p2p': {'$index': ['$partition', 'mpi_family', 'mode'], 'local:tcp': {
        '.*': {'bw': {'bandwidth_4MiB': [117.7, -0.1, 0.02, 'MB/s']}}}},
        references.NOT_ASSERTED: {'hpcnet_p2p': {'local:tcp/.*/.*/latency_.*': "host's"}}}
    new = _doc(_case('gcc12-openmpi4', 'openmpi', 'bw', {'bandwidth_4MiB': (1000.0, 'MB/s')}))
    merged = refmerge.merge(existing, new)
    assert merged['hpcnet_p2p'] == new['hpcnet_p2p']
    assert merged[references.NOT_ASSERTED] == existing[references.NOT_ASSERTED]
    prov = merged[references.PROVENANCE]
    assert prov['replaced']['hpcnet_p2p'].startswith(
        "$index ['$partition', 'mpi_family', 'mode'] -> ['$partition', '$environ', 'mode']")
    assert 'kept' not in prov and 'earlier' not in prov


def test_the_shipped_testbed_file_keeps_everything_outside_a_selection():
    testbed = references.load(references.REFERENCE_DIR / 'testbed.yaml')
    new = baseline.document([run_report([[{
        'name': 'hpcnet_iperf3 /abcd', 'system': 'testbed', 'partition': 'eth', 'environ': 'builtin',
        'result': 'pass', 'reference_index': ['$partition'],
        'perfvalues': {'testbed:eth:throughput_over_iperf3': [1.01, 0, None, None, 'ratio',
                                                              'pass']}}]] * 3, 'tb')])
    merged = refmerge.merge(testbed, new)
    assert merged['hpcnet_iperf3']['testbed:eth']['throughput_over_iperf3'][0] == 1.01
    for test in ('hpcnet_p2p', 'hpcnet_sockets', 'hpcnet_pairs', 'hpcnet_imb', 'hpcnet_preflight'):
        assert merged[test] == testbed[test]
    assert merged[references.NOT_ASSERTED] == testbed[references.NOT_ASSERTED]
    references.validate(json.loads(json.dumps(merged)), 'testbed.yaml')
