"""Adding a metric is one catalogue entry plus the line of the check that
measures it: a metric registered here the way hpcnet.metrics holds its own,
named by the check's one line, and a report whose case carries it is judged
by compare, shown on the HTML page and exported by the metrics index."""
import io
import json
import random
import types

import pytest

from hpcnet import metrics
from hpcnet.acceptance.comparison import compare, sides, statcompare
from hpcnet.acceptance.history import metricindex
from hpcnet.acceptance.references import baseline
from hpcnet.acceptance.report import report
from hpcnet.checklib.testlib import JudgedByReferences

TEST = 'hpcnet_p2p'
#: The new metrics: a time at the bandwidth sizes, and a rate judged over
#: iperf3 (its ratio entry beside it) where its case's nodes share one host.
JITTER = metrics.Metric(TEST, 'jitter', metrics.Unit.US, metrics.Better.LOWER,
                        frozenset(metrics.PartitionKind.ALL), sizes=metrics.P2P_BANDWIDTH_SIZES)
GOODPUT = metrics.Metric(TEST, 'goodput', metrics.Unit.MBPS, metrics.Better.HIGHER,
                         frozenset(metrics.PartitionKind.ALL), judged_over='goodput')
GOODPUT_RATIO = metrics.Metric(TEST, 'goodput', metrics.Unit.RATIO, metrics.Better.HIGHER,
                               frozenset({metrics.PartitionKind.NETWORK}), ratio=True)


@pytest.fixture
def catalogued(monkeypatch):
    monkeypatch.setattr(metrics, 'CATALOGUE', metrics.CATALOGUE + (JITTER, GOODPUT, GOODPUT_RATIO))


def _check_line(quantity: str, size=None) -> tuple:
    """(name, unit) of the performance variable a check's one line
    ``self.add_metric(quantity, value, size)`` declares."""
    check = type(TEST, (), {'perf_variables': {}})()
    for method in ('metric', 'add_metric'):
        setattr(check, method, types.MethodType(getattr(JudgedByReferences, method), check))
    name = check.add_metric(quantity, 1.0, size)
    return name, check.perf_variables[name].unit


def _case(values: dict) -> dict:
    return {'name': f'{TEST} %scale=2_nodes %mode=bw /5b414a9c', 'system': 'testbed',
            'partition': 'eth', 'environ': 'gcc12-openmpi4', 'result': 'pass', 'fixture': False,
            'job_nodelist': ['cn1', 'cn2'],
            'perfvalues': {f'testbed:eth:{var}': [value, None, None, None, unit, 'pass']
                           for var, (value, unit) in values.items()}}


def _session(uuid: str, start: float, runs: list) -> dict:
    return {'session_info': {'uuid': uuid, 'time_start_unix': start, 'time_end_unix': start + 60},
            'runs': [{'run_index': i, 'testcases': [_case(v)]} for i, v in enumerate(runs)]}


def _runs(jitter_us: float, seed: int, ratio: bool = False) -> list:
    rng = random.Random(seed)
    name, unit = JITTER.name_for(4 * 1024 * 1024), JITTER.unit
    runs = []
    for _ in range(10):
        values = {name: (jitter_us * (1 + rng.uniform(-0.01, 0.01)), unit),
                  'goodput': (100.0 * (1 + rng.uniform(-0.01, 0.01)), metrics.Unit.MBPS)}
        if ratio:
            values['goodput_over_iperf3'] = (0.97 * (1 + rng.uniform(-0.01, 0.01)),
                                             metrics.Unit.RATIO)
        runs.append(values)
    return runs


def _compared(before: dict, after: dict):
    return compare.compare(sides.Side('before', [before]), sides.Side('after', [after]))


def _verdicts(outcome) -> dict:
    return {row.metric: row.result for row in outcome.rows}


def test_the_check_line_names_and_units_the_variable_by_its_entry(catalogued):
    assert _check_line('jitter', 65536) == ('jitter_64KiB', metrics.Unit.US)
    assert _check_line('goodput') == ('goodput', metrics.Unit.MBPS)
    with pytest.raises(metrics.CatalogueError, match='jitter_8B is not a name of hpcnet_p2p'):
        _check_line('jitter', 8)
    with pytest.raises(metrics.CatalogueError, match="no quantity 'wobble'"):
        _check_line('wobble')


def test_a_catalogued_metric_is_judged_and_an_uncatalogued_one_is_not(monkeypatch):
    before = _session('b', 1e9, _runs(50.0, 1))
    after = _session('a', 1e9 + 86400, _runs(60.0, 2))
    monkeypatch.setattr(metrics, 'CATALOGUE', metrics.CATALOGUE)
    unknown = _verdicts(_compared(before, after))['jitter_4MiB']
    assert unknown.verdict == statcompare.Verdict.INCONCLUSIVE
    assert 'not in the metric catalogue' in unknown.reason
    monkeypatch.setattr(metrics, 'CATALOGUE', metrics.CATALOGUE + (JITTER, GOODPUT, GOODPUT_RATIO))
    # Lower is better for a time: 50 -> 60 us is a regression.
    assert _verdicts(_compared(before, after))['jitter_4MiB'].verdict == \
        statcompare.Verdict.REGRESSED


def test_a_case_with_the_ratio_is_judged_over_iperf3_by_the_entry(catalogued):
    before = _session('b', 1e9, _runs(50.0, 1, ratio=True))
    after = _session('a', 1e9 + 86400, _runs(50.0, 2, ratio=True))
    verdicts = _verdicts(_compared(before, after))
    assert verdicts['goodput'].verdict == statcompare.Verdict.SHOWN
    assert 'judged by goodput_over_iperf3' in verdicts['goodput'].reason
    # A metric without a ratio of its own: the case's ratios together decide.
    assert "judged by the case's ratios over iperf3 (goodput_over_iperf3)" in \
        verdicts['jitter_4MiB'].reason
    assert verdicts['goodput_over_iperf3'].verdict != statcompare.Verdict.SHOWN
    # The baseline asserts the ratio only, as compare judges it.
    built = baseline.build([before])
    assert set(built.references[TEST]['testbed:eth']) == {'goodput_over_iperf3'}
    assert {p.split('/')[-1] for p in built.not_asserted[TEST] if p != '$index'} == \
        {'goodput', 'jitter_4MiB'}


def test_the_page_shows_it_and_the_index_exports_it_in_the_catalogue_unit(catalogued, tmp_path):
    before = _session('b', 1e9, _runs(50.0, 1))
    after = _session('a', 1e9 + 86400, _runs(60.0, 2))
    outcome = _compared(before, after)
    html = report.render([before, after], verdict=f'FAILED: {outcome.summary()}',
                         comparison_of=(outcome, sides.Side('before', [before]),
                                        sides.Side('after', [after])))
    shown = [line for line in html.splitlines() if 'jitter_4MiB' in line]
    assert shown and any('REGRESSED' in line for line in shown), shown
    db = metricindex.store_reports(tmp_path / 'results.db', [before, after])
    out = io.StringIO()
    metricindex.export_ndjson(db, out)
    rows = [json.loads(line) for line in out.getvalue().splitlines()
            if json.loads(line)['metric'] == 'jitter_4MiB']
    assert len(rows) == 20
    assert {(r['catalogue_unit'], r['better']) for r in rows} == \
        {(metrics.Unit.US, metrics.Better.LOWER)}
