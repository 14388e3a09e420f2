"""Verdict faults of the metric catalogue (issue 32, items 6, 9 and 10), each
fed to the command a site runs and built from recorded reports
(tests/data): its exit code names the verdict, and the rows join the
session's fault matrix (conftest)."""
import copy
import json
from pathlib import Path

import yaml

from helpers import fault_row, perfvalues, report_case, run_hpcnet, wobble, write_report
from hpcnet.acceptance.references import baseline
from hpcnet.constants import REFERENCE_DIR
from hpcnet.exitcodes import Exit

DATA = Path(__file__).parent / 'data'
LOCAL_RUN = DATA / 'reports' / 'local-run.json'
TESTBED_SESSIONS = DATA / 'history' / 'testbed-12-sessions.json'


def _recorded_case(name: str, partition: str, environ: str) -> dict:
    '''A case of the recorded local run, as it was recorded.'''
    report = json.loads(LOCAL_RUN.read_text())
    return next(tc for run in report['runs'] for tc in run['testcases']
                if tc['name'].startswith(name) and tc['partition'] == partition
                and tc['environ'] == environ)


def _side(path: Path, uuid: str, recorded: dict, runs: list) -> str:
    '''A report of the ``recorded`` case repeated once per item of ``runs``,
    each {variable: (value, unit)} as its perfvalues.'''
    return write_report(path, [report_case(values, base=recorded) for values in runs], uuid)


def _pairs_runs(worst_over_median: float, n: int, seed: int) -> list:
    '''The recorded pair matrix's metrics, its latency's worst pair at
    ``worst_over_median`` times the median pair.'''
    case = _recorded_case('hpcnet_pairs', 'tcp', 'gcc12-openmpi4')
    recorded = {k.split(':')[-1]: (v[0], v[4]) for k, v in case['perfvalues'].items()
                if k.split(':')[-1] != 'outlier_node_count'}    # since split per quantity
    out = []
    for i, ratio in enumerate(wobble(worst_over_median, n, seed)):
        values = {var: (value * (1 + 0.002 * i), unit) for var, (value, unit) in recorded.items()}
        median = values['latency_median_pair'][0]
        values['latency_worst_pair'] = (median * ratio, 'us')
        values['latency_worst_over_median'] = (ratio, 'ratio')
        out.append(values)
    return case, out


def test_a_ratio_better_lower_is_judged_lower(tmp_path):
    '''latency_worst_over_median is a ratio better low: 1.05 -> 3.1 (one
    pair three times slower than the median) is a regression, whatever the
    unit's spelling; its baseline bounds the upper side.'''
    case, before = _pairs_runs(1.05, 5, 1)
    _, after = _pairs_runs(3.1, 5, 2)
    res = run_hpcnet('compare', _side(tmp_path / 'b.json', 'before', case, before),
                     _side(tmp_path / 'a.json', 'after', case, after))
    fault_row('verdict #6: latency_worst_over_median (a ratio) 1.05 -> 3.1', res, Exit.FAILED)
    regressed = [line for line in res.stdout.splitlines() if line.startswith('REGRESSED')]
    assert len(regressed) == 2 and all('latency_worst' in line for line in regressed), res.stdout
    assert 'IMPROVED' not in res.stdout
    doc = baseline.document([json.loads((tmp_path / 'b.json').read_text())])
    (leaf,) = doc['hpcnet_pairs']['local:tcp'].values()
    lower, upper = leaf['latency_worst_over_median'][1:3]
    assert lower is None and upper > 0, leaf
    lower, upper = leaf['bandwidth_worst_over_median'][1:3]
    assert lower < 0 and upper is None, leaf


def test_the_count_rule_needs_as_many_samples_as_any_rule(tmp_path):
    '''Link counters (0 when healthy) are judged by the count rule: never
    on fewer than statcompare.MIN_SAMPLES a side (5+1 was "unchanged").'''
    case = _recorded_case('hpcnet_preflight', 'tcp', 'builtin')
    recorded = {k.split(':')[-1]: (v[0], v[4]) for k, v in case['perfvalues'].items()}
    before = _side(tmp_path / 'b.json', 'before', case, [recorded] * 5)
    res = run_hpcnet('compare', before, _side(tmp_path / 'a.json', 'after', case, [recorded]))
    fault_row('verdict #9: link counters 0 -> 0 on 5+1 samples (the count rule)', res, Exit.UNDECIDED)
    assert 'not compared: 5+1 samples: fewer than 3 on a side cannot be judged' in res.stdout
    res = run_hpcnet('compare', before, _side(tmp_path / 'a3.json', 'after3', case, [recorded] * 3))
    assert res.returncode == Exit.OK, res.stdout


def test_units_are_converted_across_sides_or_refused(tmp_path):
    '''The receiver's capacity in Gbit/s before and in Mbit/s after, at
    half the speed, is a regression (was "improved +49900 %"); a unit that
    does not convert is not compared.'''
    case = _recorded_case('hpcnet_sockets %scale=1_node %test=udp_stream', 'tcp', 'builtin')
    var = 'udp_receiver_capacity_1KiB'
    before = _side(tmp_path / 'b.json', 'before', case,
                   [{var: (v, 'Gbit/s')} for v in wobble(4.7, 5, 1)])
    after = _side(tmp_path / 'a.json', 'after', case,
                  [{var: (v, 'Mbit/s')} for v in wobble(2350.0, 5, 2)])
    res = run_hpcnet('compare', before, after)
    fault_row('verdict #9: Gbit/s before, Mbit/s after at half the speed', res, Exit.FAILED)
    (line,) = [line for line in res.stdout.splitlines() if line.startswith('REGRESSED')]
    assert 0.48 < float(line.split()[1]) < 0.52, res.stdout
    odd = _side(tmp_path / 'o.json', 'odd', case, [{var: (v, 'msg/s')} for v in wobble(4.7e3, 5, 3)])
    res = run_hpcnet('compare', before, odd)
    fault_row('verdict #9: a unit that does not convert (msg/s after Gbit/s)', res, Exit.UNDECIDED)
    assert "not compared: the after side's unit 'msg/s' does not convert to 'Mbit/s'" in res.stdout


def _shipped_with(tmp_path: Path, test: str, path: tuple, entry: list, unbounded=None) -> Path:
    '''The shipped testbed reference file with one entry set (and an
    $unbounded reason for it), written where `refs validate` reads it.'''
    doc = yaml.safe_load((REFERENCE_DIR / 'testbed.yaml').read_text())
    node = doc[test]
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = entry
    if unbounded:
        doc.setdefault('$unbounded', {}).setdefault(test, {})[unbounded] = 'faster is no fault'
    out = tmp_path / 'testbed.yaml'
    out.write_text(yaml.safe_dump(doc))
    return out


def test_refs_validate_refuses_absurd_bounds_and_wrong_units(tmp_path):
    pairs = ('testbed:eth', '.*')
    for fault, test, path, entry, unbounded, message in [
        ('a time bounded at +100000 %', 'hpcnet_pairs', (*pairs, 'latency_median_pair'),
         [200.0, -0.1, 1000.0, 'us'], None, 'upper threshold 1000 accepts 100100% of the value'),
        ('a rate whose worse (lower) bound is null, with a reason', 'hpcnet_pairs',
         (*pairs, 'bandwidth_median_pair'), [117.7, None, 0.02, 'MB/s'],
         'testbed:eth/.*/bandwidth_median_pair',
         'lower threshold is null, but bandwidth_median_pair is better higher'),
        ('a reference in Gbit/s for a metric in MB/s', 'hpcnet_iperf3', ('testbed:eth', 'throughput'),
         [0.94, -0.05, 0.02, 'Gbit/s'], None,
         "unit 'Gbit/s' is not the unit of throughput (valid: MB/s"),
    ]:
        shipped = _shipped_with(tmp_path, test, path, entry, unbounded)
        res = run_hpcnet('refs', 'validate', str(shipped))
        fault_row(f'verdict #9: refs validate: {fault}', res, Exit.USAGE)
        assert message in res.stderr and str(shipped) in res.stderr, res.stderr
    assert run_hpcnet('refs', 'validate', str(REFERENCE_DIR / 'testbed.yaml')).returncode == Exit.OK


def _testbed_side(path: Path, uuid: str, sessions: list, halve: str | None = None) -> str:
    '''The recorded testbed sessions as one report of their runs; with
    ``halve``, that not-asserted variable's value is half the recorded one
    in perfvalues, while the recorded copy stays in not_asserted.'''
    cases = []
    for session in sessions:
        for run in session['runs']:
            for tc in run['testcases']:
                tc = copy.deepcopy(tc)
                if halve:
                    kept = tc['not_asserted'][halve]
                    tc['perfvalues'].update(perfvalues(tc, {halve: (kept['value'] / 2,
                                                                    kept['unit'])}))
                cases.append(tc)
    return write_report(path, cases, uuid)


def test_a_value_has_one_source_and_old_reports_still_read(tmp_path):
    '''A value kept but not asserted lives in perfvalues; a report that also
    holds a copy in not_asserted (as reports once did) is read from
    perfvalues, and one recorded with the value in not_asserted alone still
    reads it from there.'''
    recorded = json.loads(TESTBED_SESSIONS.read_text())
    # Sessions 1-3 and 5-7: every link at 1 Gbit/s (tests/data/history/README.md).
    steady = [recorded[i] for i in (0, 1, 2, 4, 5, 6)]
    before = _testbed_side(tmp_path / 'b.json', 'before', steady)
    same = _testbed_side(tmp_path / 's.json', 'same', steady)
    res = run_hpcnet('compare', before, same)
    assert res.returncode in (Exit.OK, Exit.UNDECIDED), res.stdout + res.stderr
    assert 'latency_8B [us]' in res.stdout and 'REGRESSED' not in res.stdout, res.stdout
    # bandwidth_64KiB_over_iperf3: not asserted on the testbed and judged by
    # compare (a ratio decides its case).
    disagree = _testbed_side(tmp_path / 'd.json', 'disagree', steady,
                             halve='bandwidth_64KiB_over_iperf3')
    res = run_hpcnet('compare', before, disagree)
    fault_row('verdict #10: a not-asserted value whose second copy disagrees (perfvalues halved)', res,
              Exit.FAILED)
    (line,) = [line for line in res.stdout.splitlines() if line.startswith('REGRESSED')]
    assert line.rstrip().endswith('bandwidth_64KiB_over_iperf3 [ratio]'), res.stdout
