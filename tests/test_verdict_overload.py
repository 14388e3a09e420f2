"""Issue 32 item 5: a slow link is a slow link, a busy host is a busy host.

The calibration a testbed case leaves (tests/data/calibration: recorded
iperf3 JSON, tc views of the testbed's own bad-cable fault, recorded CPU
pressure) read as a run reads it, then the case's verdict as the check
(hpcnet.checklib.testlib) and the run's summary give it, then compare of
reports made of those figures."""
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from reframe.core.exceptions import PerformanceError

import conftest
from hpcnet import verdict
from hpcnet.acceptance import compare, statcompare
from hpcnet.acceptance.references import Basis
from hpcnet.checklib import calibration, testlib
from hpcnet.exitcodes import Exit

DATA = Path(__file__).parent / 'data' / 'calibration'
#: The recorded cases' calibration logs (iperf3's lines, the host's load before each run).
QUIET = DATA / 'testbed-1gbit'
BUSY = DATA / 'busy-host'
GBIT = 10**9
WIRE_MBps = calibration.tcp_payload_MBps(GBIT, 1500)
METRIC = 'bandwidth_4MiB_over_iperf3'


def _stage(tmp_path: Path, iperf3_of_wire: float, tc_lines: str, recorded: Path) -> str:
    '''The ``recorded`` calibrated case's stage directory (its host's load),
    its iperf3 runs at ``iperf3_of_wire`` of the wire, its tc views ``tc_lines``.'''
    stage = tmp_path / 'stage'
    shutil.copytree(recorded, stage)
    for phase in calibration.PHASES:
        path = stage / calibration.file_name(phase)
        result = json.loads(path.read_text())
        result['end']['sum_received']['bits_per_second'] = iperf3_of_wire * WIRE_MBps * 8e6
        path.write_text(json.dumps(result))
    (stage / calibration.SHAPER_FILE).write_text(tc_lines)
    return str(stage)


def _verdict_of_the_check(found: calibration.Calibration):
    '''What the check's withheld_judgement makes of a calibration.'''
    case = SimpleNamespace(calibrates_link=lambda: True, calibration=lambda: found,
                           partition=SimpleNamespace(iface='eth0', link_rate_bps=GBIT, mtu=1500))
    return testlib.NetworkRun.withheld_judgement(case)


def _case(result='pass', **extra):
    return {'name': 'hpcnet_p2p %scale=2_nodes %mode=bw', 'system': 'testbed', 'partition': 'eth',
            'environ': 'gcc12-openmpi4', 'result': result, 'hashcode': '5b414a9c', **extra}


def test_verdict_5_a_slow_path_on_a_quiet_host_fails_on_performance(tmp_path):
    '''`hpcnet testbed shape --node cn1 --peer cn2 --rate 700mbit` on an idle
    host: the case fails naming the shaper, never "host overloaded" (exit 3).'''
    tc_lines = (DATA / 'tc' / 'path-cn1-cn2-700mbit.txt').read_text()
    found = calibration.read(_stage(tmp_path, 0.70, tc_lines, QUIET))
    assert found.host_busy() is False and found.withheld(GBIT, 1500) is None
    with pytest.raises(PerformanceError, match='the link is slower than declared: cn1: eth0 is '
                       "shaped to 700 Mbit/s toward the job's other nodes") as failure:
        _verdict_of_the_check(found)
    cases = {('hpcnet_p2p', 'testbed', 'eth', 'gcc12-openmpi4'):
             _case('fail', fail_reason=f'performance error: {failure.value}')}
    lines, code = verdict.summary(cases, [])
    assert code == Exit.FAILED and lines[-1] == 'FAILED: 1 fail', lines
    conftest.FAULT_MATRIX.append(('verdict #5: slow link on a quiet host (cn1-cn2 at 700mbit)',
                                  f'exit {int(code)}', lines[0][:160]))


def _report(path: Path, uuid: str, runs: list) -> str:
    '''A report of one calibrated case per run: (ratio, withheld reason or None).'''
    def case(ratio, withheld):
        if withheld is None:
            return _case(perfvalues={f'testbed:eth:{METRIC}': [ratio, 1.0, -0.1, 0.13, 'ratio',
                                                                'pass']},
                         judgement_basis=Basis.REFERENCES)
        return _case(perfvalues={}, judgement=f'not judged: {withheld}',
                     judgement_basis=Basis.WITHHELD,
                     not_asserted={METRIC: {'value': ratio, 'unit': 'ratio', 'reason': withheld}})
    path.write_text(json.dumps({'session_info': {'uuid': uuid},
                                'runs': [{'testcases': [case(*run)]} for run in runs]}))
    return str(path)


def test_a_quiet_host_below_the_wire_is_judged_over_iperf3(tmp_path):
    '''iperf3 at 0.70 of the wire on a quiet host, nothing on the path shaped
    below the declared rate: the host's limit, not a slow link, so the case
    is judged over iperf3 (like with like): a benchmark as fast as iperf3
    passes, one at 0.70 of iperf3 is REGRESSED in compare.'''
    tc_lines = (DATA / 'testbed-1gbit' / calibration.SHAPER_FILE).read_text()
    found = calibration.read(_stage(tmp_path, 0.70, tc_lines, QUIET))
    assert found.throttled('eth0', GBIT) == [] and _verdict_of_the_check(found) is None
    assert found.ratio(found.before_MBps) == 1.0
    ratio = found.ratio(0.70 * found.before_MBps)
    assert ratio == pytest.approx(0.70) and ratio < 1.0 - 0.10
    before = _report(tmp_path / 'b.json', 'b', [(1.0 - i / 1000, None) for i in range(5)])
    after = _report(tmp_path / 'a.json', 'a', [(ratio + i / 1000, None) for i in range(5)])
    outcome = compare.compare(compare.load_side(before), compare.load_side(after))
    (row,) = outcome.rows
    assert row.result.verdict == statcompare.Verdict.REGRESSED and outcome.exit_code == Exit.FAILED


def test_samples_of_a_busy_host_are_shown_and_the_others_judged(tmp_path):
    '''2 of 5 repeats measured on a busy host: withheld, said in the row
    with why, and the 3 fair ones decide.'''
    floor = calibration.HOST_FLOOR
    found = calibration.read(_stage(tmp_path, floor - 0.05, (DATA / 'testbed-1gbit' /
                                                             calibration.SHAPER_FILE).read_text(),
                                    BUSY))
    reason = _verdict_of_the_check(found)
    assert reason.startswith('measurement withheld (host busy: cores busy 100 %')
    before = _report(tmp_path / 'b.json', 'b', [(1.0 - i / 1000, None) for i in range(5)])
    after = _report(tmp_path / 'a.json', 'a', [(0.70, reason), (1.0, None), (0.70, reason),
                                              (0.999, None), (1.001, None)])
    outcome = compare.compare(compare.load_side(before), compare.load_side(after))
    (row,) = outcome.rows
    assert row.result.n_after == 3
    assert row.withheld == '2 samples withheld after (host busy): shown, not judged'
    assert row.withheld in compare.table(outcome.rows)
    # Every after sample withheld: not decided, never passed or missing.
    all_busy = _report(tmp_path / 'busy.json', 'busy', [(0.70, reason)] * 5)
    outcome = compare.compare(compare.load_side(before), compare.load_side(all_busy))
    assert outcome.exit_code == Exit.UNDECIDED and not outcome.missing_after
    assert outcome.rows[0].result.reason.startswith(
        'not compared: measurement withheld (host busy) whenever it was measured after')

