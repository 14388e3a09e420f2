"""Issue 32 item 5: a slow link fails its case; a host too busy to measure
fairly withholds the measurement, which is shown, not judged.

The calibration a testbed case leaves (tests/data/calibration: recorded
iperf3 JSON, tc views of the testbed's own bad-cable fault, recorded CPU
pressure) read as a run reads it, then the case's verdict as the check
(hpcnet.checklib.testlib) and the run's summary give it, then compare of
reports made of those figures."""
import json
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from reframe.core.exceptions import PerformanceError

from helpers import record_fault, report_case, write_report
from hpcnet import fabrics
from hpcnet.session import verdict
from hpcnet.acceptance.comparison import compare, comparetext, sides, statcompare
from hpcnet.acceptance.references.references import Basis
from hpcnet import metrics
from hpcnet.checklib import calibrated, calibration, testlib
from hpcnet.exitcodes import Exit
from hpcnet.constants import MEASUREMENT_WITHHELD

DATA = Path(__file__).parent / 'data' / 'calibration'
#: The recorded cases' calibration logs (iperf3's lines, the host's load before each run).
QUIET = DATA / 'testbed-1gbit'
BUSY = DATA / 'busy-host'
GBIT = 10**9
WIRE_MBps = fabrics.tcp_payload_MBps(GBIT, 1500)
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


#: What `hpcnet testbed up` measured of the wire on a clean link (hpcnet.testbed.wire).
PROVEN = 0.99


def _verdict_of_the_check(found: calibration.Calibration, proven: float | None = PROVEN):
    '''What the check's withheld_judgement makes of a calibration, on a
    partition whose host was proven to emulate the wire at ``proven`` (None: not).'''
    case = SimpleNamespace(calibrates_link=lambda: True, calibration=lambda: found,
                           partition=SimpleNamespace(iface='eth0', link_rate_bps=GBIT, mtu=1500,
                                                     wire_efficiency=proven))
    return testlib.NetworkRun.withheld_judgement(case)


def test_verdict_5_a_slow_path_on_a_quiet_host_fails_on_performance(tmp_path):
    '''`hpcnet testbed shape --node cn1 --peer cn2 --rate 700mbit` on an idle
    host proven wire-true: iperf3 measures 0.70 of the wire, and the case
    fails on that measurement, the shaper on the path only named beside it;
    never "measurement withheld" (exit 3).'''
    tc_lines = (DATA / 'tc' / 'path-cn1-cn2-700mbit.txt').read_text()
    found = calibration.read(_stage(tmp_path, 0.70, tc_lines, QUIET))
    assert found.host_busy() is False and found.withheld(GBIT, 1500, PROVEN) is None
    with pytest.raises(PerformanceError, match=r'the link measured slower than the wire: iperf3 '
                       r'82\.4 MB/s at best, 0\.70 of .* on its path: cn1: eth0 is shaped to '
                       "700 Mbit/s toward the job's other nodes") as failure:
        _verdict_of_the_check(found)
    cases = {('hpcnet_p2p', 'testbed', 'eth', 'gcc12-openmpi4'):
             report_case(result='fail', fail_reason=f'performance error: {failure.value}')}
    lines, code = verdict.summary(cases, [])
    assert code == Exit.FAILED and lines[-1] == 'FAILED: 1 fail', lines
    record_fault('verdict #5: slow link on a quiet host (cn1-cn2 at 700mbit)', code, lines[0][:160])


def test_a_shaper_is_no_verdict_of_its_own(tmp_path):
    '''The shaping read on the path explains a measurement, never decides:
    a shaper on a path that measures at the wire judges nothing; where the
    host is not proven to emulate the wire, a shaper withholds the
    measurement (a slow link cannot be told from the host), and a slow link
    with nothing shaped on it still fails where the host is proven.'''
    tc_lines = (DATA / 'tc' / 'path-cn1-cn2-700mbit.txt').read_text()
    at_the_wire = calibration.read(_stage(tmp_path / 'a', 0.99, tc_lines, QUIET))
    assert at_the_wire.throttled('eth0', GBIT) and _verdict_of_the_check(at_the_wire) is None
    slow = calibration.read(_stage(tmp_path / 'b', 0.70, tc_lines, QUIET))
    assert _verdict_of_the_check(slow, proven=None).startswith(
        f'{MEASUREMENT_WITHHELD} (the links are not proven wire-true')
    unshaped = (DATA / 'testbed-1gbit' / calibration.SHAPER_FILE).read_text()
    slow_unshaped = calibration.read(_stage(tmp_path / 'c', 0.85, unshaped, QUIET))
    with pytest.raises(PerformanceError, match='nothing on its path is shaped below the declared'):
        _verdict_of_the_check(slow_unshaped)
    # A clean link within the margin of what the bring-up measured: judged as always.
    clean = calibration.read(_stage(tmp_path / 'd', PROVEN - 0.03, unshaped, QUIET))
    assert _verdict_of_the_check(clean) is None


def _measured_again(stage: str, iperf3_of_wire: float, recorded_phase: str = 'after') -> None:
    '''The job's CONFIRM_PHASE, as it leaves it: iperf3's JSON at
    ``iperf3_of_wire`` and the host's load before it (the recorded
    ``recorded_phase``'s lines).'''
    stage = Path(stage)
    result = json.loads((stage / calibration.file_name(recorded_phase)).read_text())
    result['end']['sum_received']['bits_per_second'] = iperf3_of_wire * WIRE_MBps * 8e6
    (stage / calibration.file_name(calibration.CONFIRM_PHASE)).write_text(
        json.dumps(result, indent='\t'))
    log = stage / calibration.LOG_FILE
    probe = f'hpcnet-host-load {recorded_phase} '
    log.write_text(log.read_text() + ''.join(
        line.replace(probe, f'hpcnet-host-load {calibration.CONFIRM_PHASE} ') + '\n'
        for line in log.read_text().splitlines() if line.startswith(probe)))


def _all_below(stage: str, proven: float = PROVEN) -> bool:
    '''Whether the job measures once more: its shell test, run.'''
    floor_bps = calibration.Calibration.floor(proven) * WIRE_MBps * 8e6
    return subprocess.run(['sh', '-c', calibration.all_below_command(stage, floor_bps)]).returncode == 0


def test_a_slow_link_is_slow_where_it_stays_slow(tmp_path):
    '''Both runs around the benchmark below the floor on a quiet host: the
    job measures once more, and the link is slow only where that run is
    slow too; a moment of the host's other work that slowed both runs is
    judged over iperf3 as always, its ratio bracketed by the two runs.'''
    unshaped = (DATA / 'testbed-1gbit' / calibration.SHAPER_FILE).read_text()
    at_the_wire = _stage(tmp_path / 'a', PROVEN, unshaped, QUIET)
    assert not _all_below(at_the_wire)
    # iperf3's JSON as it writes it (tab-indented), and as json.dumps does.
    dipped = _stage(tmp_path / 'b', 0.85, unshaped, QUIET)
    assert _all_below(dipped)
    _measured_again(dipped, PROVEN - 0.02)
    found = calibration.read(dipped)
    assert found.again_MBps == pytest.approx((PROVEN - 0.02) * WIRE_MBps)
    assert found.host_load[calibration.CONFIRM_PHASE] is not None
    assert _verdict_of_the_check(found) is None
    assert found.ratio(0.85 * WIRE_MBps) == 1.0
    assert found.ratio(0.80 * WIRE_MBps) == pytest.approx(0.80 / 0.85)

    slow = _stage(tmp_path / 'c', 0.85, unshaped, QUIET)
    _measured_again(slow, 0.85)
    with pytest.raises(PerformanceError, match=r'the link measured slower than the wire: iperf3 '
                       r'100\.0 MB/s at best, 0\.85 of'):
        _verdict_of_the_check(calibration.read(slow))
    # iperf3's own layout (tab-indented) read as the compact one.
    for phase in calibration.PHASES:
        path = Path(at_the_wire) / calibration.file_name(phase)
        path.write_text(json.dumps(json.loads(path.read_text()), indent='\t'))
    assert not _all_below(at_the_wire)
    # A run that ended in iperf3's error holds no rate: measured once more.
    failed = Path(_stage(tmp_path / 'd', PROVEN, unshaped, QUIET))
    (failed / calibration.file_name('before')).write_text('{"error": "unable to connect"}')
    (failed / calibration.file_name('after')).write_text('{"error": "unable to connect"}')
    assert _all_below(str(failed))


def test_a_host_busy_while_measured_once_more_withholds(tmp_path):
    '''The confirmation measured on a busy host decides nothing: the
    measurement is withheld, as for the two runs around the benchmark.'''
    unshaped = (DATA / 'testbed-1gbit' / calibration.SHAPER_FILE).read_text()
    stage = _stage(tmp_path, 0.85, unshaped, QUIET)
    shutil.copyfile(BUSY / calibration.LOG_FILE, Path(stage) / calibration.LOG_FILE)
    _measured_again(stage, 0.85, recorded_phase='before')
    (Path(stage) / calibration.LOG_FILE).write_text(
        (QUIET / calibration.LOG_FILE).read_text() + ''.join(
            line.replace('hpcnet-host-load before ', f'hpcnet-host-load {calibration.CONFIRM_PHASE} ')
            + '\n' for line in (BUSY / calibration.LOG_FILE).read_text().splitlines()
            if line.startswith('hpcnet-host-load before ')))
    found = calibration.read(stage)
    assert found.host_load[calibration.CONFIRM_PHASE].busy()
    assert _verdict_of_the_check(found).startswith(f'{MEASUREMENT_WITHHELD} (host busy')


def _ratio_report(path: Path, uuid: str, runs: list) -> str:
    '''A report of one calibrated case per run: (ratio, withheld reason or None).'''
    def calibrated(ratio, withheld):
        if withheld is None:
            return report_case({METRIC: ratio}, judgement_basis=Basis.REFERENCES)
        return report_case(perfvalues={}, judgement=f'not judged: {withheld}',
                           judgement_basis=Basis.WITHHELD,
                           not_asserted={METRIC: {'value': ratio, 'unit': 'ratio',
                                                  'reason': withheld}})
    return write_report(path, [calibrated(*run) for run in runs], uuid)


def test_a_quiet_host_below_the_wire_is_judged_over_iperf3(tmp_path):
    '''iperf3 at 0.70 of the wire on a quiet host, nothing on the path shaped
    below the declared rate: the host's limit, not a slow link, so the case
    is judged over iperf3 (like with like): a benchmark as fast as iperf3
    passes, one at 0.70 of iperf3 is REGRESSED in compare.'''
    tc_lines = (DATA / 'testbed-1gbit' / calibration.SHAPER_FILE).read_text()
    found = calibration.read(_stage(tmp_path, 0.70, tc_lines, QUIET))
    assert found.throttled('eth0', GBIT) == [] and _verdict_of_the_check(found, None) is None
    assert found.ratio(found.before_MBps) == 1.0
    ratio = found.ratio(0.70 * found.before_MBps)
    assert ratio == pytest.approx(0.70) and ratio < 1.0 - 0.10
    before = _ratio_report(tmp_path / 'b.json', 'b', [(1.0 - i / 1000, None) for i in range(5)])
    after = _ratio_report(tmp_path / 'a.json', 'a', [(ratio + i / 1000, None) for i in range(5)])
    outcome = compare.compare(sides.load_side(before), sides.load_side(after))
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
    before = _ratio_report(tmp_path / 'b.json', 'b', [(1.0 - i / 1000, None) for i in range(5)])
    after = _ratio_report(tmp_path / 'a.json', 'a', [(0.70, reason), (1.0, None), (0.70, reason),
                                                    (0.999, None), (1.001, None)])
    outcome = compare.compare(sides.load_side(before), sides.load_side(after))
    (row,) = outcome.rows
    assert row.result.n_after == 3
    assert row.withheld == '2 samples withheld after (host busy): shown, not judged'
    assert row.withheld in comparetext.table(outcome.rows)
    # Every after sample withheld: not decided, never passed or missing.
    all_busy = _ratio_report(tmp_path / 'busy.json', 'busy', [(0.70, reason)] * 5)
    outcome = compare.compare(sides.load_side(before), sides.load_side(all_busy))
    assert outcome.exit_code == Exit.UNDECIDED and not outcome.missing_after
    assert outcome.rows[0].result.reason.startswith(
        'not compared: measurement withheld (host busy) whenever it was measured after')


def _two_metrics_report(path: Path, uuid: str, runs: list, link_rate_bps: int = GBIT) -> str:
    '''A report of one calibrated case per run: (absolute MB/s, ratio to iperf3).'''
    return write_report(path, [report_case({'bandwidth_4MiB': absolute, METRIC: ratio},
                                           link_rate_bps=link_rate_bps,
                                           judgement_basis=Basis.REFERENCES)
                               for absolute, ratio in runs], uuid)


#: latency_0B [us] of hpcnet_p2p %mode=bw on the testbed (ci/benchmarks/accept_trials.py,
#: docs/measurements.md "The accept benchmark"): a baseline whose 5 sessions met only the
#: host's fast mode, and the first round of a clean accept that met both.
HOST_LATENCY_FAST_MODE = [6.0941, 6.0294, 6.4462, 6.1268, 5.8721]
HOST_LATENCY_BOTH_MODES = [7.9318, 5.9331, 6.4972, 6.1731, 8.5465]


def _latency_report(path: Path, uuid: str, runs: list, with_ratio: bool) -> str:
    '''A report of one case per run: (latency_8B in us, ratio to iperf3);
    ``with_ratio``: the case is judged over iperf3 (its nodes share one
    host's cores), else a real cluster's case, with no ratio.'''
    def measured(latency, ratio):
        values = {'latency_8B': latency, **({METRIC: ratio} if with_ratio else {})}
        return report_case(values, link_rate_bps=GBIT, judgement_basis=Basis.REFERENCES)
    return write_report(path, [measured(*run) for run in runs], uuid)


@pytest.mark.parametrize('with_ratio, latency_verdict, code', [
    (True, statcompare.Verdict.SHOWN, Exit.OK),
    (False, statcompare.Verdict.REGRESSED, Exit.FAILED)])
def test_a_latency_is_judged_by_the_ratios_where_the_nodes_share_a_host(
        tmp_path, with_ratio, latency_verdict, code):
    '''The testbed's latency over a veth is the host's: with the case's
    ratios to iperf3 unchanged, its slow mode is shown, not a regression.
    The same samples in a case with no ratio (a real cluster's) regress.'''
    ratios = [1.0 + i / 1000 for i in range(5)]
    before = _latency_report(tmp_path / 'b.json', 'b', list(zip(HOST_LATENCY_FAST_MODE, ratios)),
                             with_ratio)
    after = _latency_report(tmp_path / 'a.json', 'a', list(zip(HOST_LATENCY_BOTH_MODES, ratios)),
                            with_ratio)
    outcome = compare.compare(sides.load_side(before), sides.load_side(after))
    rows = {row.metric: row.result for row in outcome.rows}
    assert rows['latency_8B'].verdict == latency_verdict, rows['latency_8B'].reason
    assert outcome.exit_code == code
    if with_ratio:
        assert rows[METRIC].verdict == statcompare.Verdict.UNCHANGED
        assert f"judged by the case's ratios over iperf3 ({METRIC})" in rows['latency_8B'].reason
        assert 'a slower mode' in rows['latency_8B'].reason

def test_a_host_slower_than_at_the_baseline_is_judged_over_iperf3(tmp_path):
    '''The accept benchmark's clean trial on a host 5 % slower than when the
    baseline was made: the absolute MB/s moved with the host (5+15 samples
    "not decided" before), its ratio to iperf3 on the same link did not.
    The ratio decides; the absolute figure is shown, not judged.'''
    before = _two_metrics_report(tmp_path / 'b.json', 'b',
                                 [(104.0 + i / 10, 1.0 - i / 1000) for i in range(5)])
    after = _two_metrics_report(tmp_path / 'a.json', 'a',
                                [(98.5 + i / 10, 1.0 + i / 1000) for i in range(15)])
    outcome = compare.compare(sides.load_side(before), sides.load_side(after))
    verdicts = {row.metric: row.result.verdict for row in outcome.rows}
    assert verdicts == {'bandwidth_4MiB': statcompare.Verdict.SHOWN,
                        METRIC: statcompare.Verdict.UNCHANGED}
    assert outcome.exit_code == Exit.OK and not outcome.undecided()
    assert f'shown, not judged: judged by {METRIC}' in comparetext.table(outcome.rows)
    healthy = outcome.summary()
    # The link itself slower: the ratio regresses, whatever the host did.
    slow = _two_metrics_report(tmp_path / 's.json', 's',
                               [(90.0 + i / 10, 0.86 + i / 1000) for i in range(15)])
    outcome = compare.compare(sides.load_side(before), sides.load_side(slow))
    assert {row.metric: row.result.verdict for row in outcome.rows}[METRIC] == \
        statcompare.Verdict.REGRESSED and outcome.exit_code == Exit.FAILED
    # The wire itself slower (a link negotiated at 900 Mbit/s): iperf3 slows
    # alike, so the absolute figure is judged too, naming the link's rate.
    renegotiated = _two_metrics_report(tmp_path / 'r.json', 'r',
                                       [(98.5 + i / 10, 1.0 + i / 1000) for i in range(15)],
                                       link_rate_bps=9 * GBIT // 10)
    outcome = compare.compare(sides.load_side(before), sides.load_side(renegotiated))
    rows = {row.metric: row for row in outcome.rows}
    assert rows['bandwidth_4MiB'].result.verdict == statcompare.Verdict.REGRESSED
    assert 'link rate: 1000000000 -> 900000000' in rows['bandwidth_4MiB'].changed
    assert outcome.exit_code == Exit.FAILED
    record_fault('verdict #11: host 5 % slower than at the baseline, link the same', Exit.OK,
                 healthy)


def _link_report(path: Path, uuid: str, runs: list) -> str:
    '''A report of one calibrated case per run: (absolute MB/s, ratio to
    iperf3, link_over_wire, shaped rate), or (None, None, link_over_wire,
    shaped rate) for a repeat that failed on a slow link (no values).'''
    def case(absolute, ratio, link, shaped):
        calibration_fields = {'link_calibration': {metrics.LINK_OVER_WIRE: link,
                                                   metrics.LINK_BELOW_WIRE: int(absolute is None),
                                                   'shaped_bps': {'cn1': shaped, 'cn2': GBIT}},
                              'link_rate_bps': GBIT}
        if absolute is None:
            return report_case({}, result='fail', fail_phase='performance',
                               fail_reason='performance error: the link measured slower than '
                                           'the wire', **calibration_fields)
        return report_case({'bandwidth_4MiB': absolute, METRIC: ratio},
                           judgement_basis=Basis.REFERENCES, **calibration_fields)
    return write_report(path, [case(*run) for run in runs], uuid)


def test_a_slower_link_is_found_by_measuring_it(tmp_path):
    '''The link's own measured figure (iperf3 over the wire's payload rate,
    link_over_wire) is judged like any metric: a link slow in every repeat,
    whose cases failed on it and left no benchmark figure, is REGRESSED by
    the statistics; a shaper that appears on the path while the link
    measures the same fails nothing: its figures are judged on their own
    samples, and the link's own figure is unchanged.'''
    clean = [(110.0 + i / 10, 1.0 - i / 1000, 1.00 + i / 1000, GBIT) for i in range(5)]
    before = _link_report(tmp_path / 'b.json', 'b', clean)
    slow = _link_report(tmp_path / 's.json', 's',
                        [(None, None, 0.74 + i / 1000, 850 * 10**6) for i in range(5)])
    outcome = compare.compare(sides.load_side(before), sides.load_side(slow))
    rows = {row.metric: row.result for row in outcome.rows}
    assert rows[metrics.LINK_OVER_WIRE].verdict == statcompare.Verdict.REGRESSED
    assert outcome.exit_code == Exit.FAILED
    # A shaper read on the path, the link measuring as before: no failure of its own.
    shaped = _link_report(tmp_path / 'h.json', 'h',
                          [(109.0 + i / 10, 1.0 + i / 1000, 1.00 - i / 1000, 900 * 10**6)
                           for i in range(5)])
    outcome = compare.compare(sides.load_side(before), sides.load_side(shaped))
    rows = {row.metric: row for row in outcome.rows}
    assert rows['bandwidth_4MiB'].result.verdict == statcompare.Verdict.UNCHANGED
    assert any(line.startswith('link shaped (tc): ') for line in rows['bandwidth_4MiB'].changed)
    assert rows[metrics.LINK_OVER_WIRE].result.verdict == statcompare.Verdict.UNCHANGED
    assert rows[metrics.LINK_BELOW_WIRE].result.verdict == statcompare.Verdict.UNCHANGED
    assert outcome.exit_code == Exit.OK


def test_a_link_slow_in_one_allocation_of_five_is_a_regression_of_the_statistics(tmp_path):
    '''A node slow in one allocation of five: one repeat failed on its slow
    link, whose one low link_over_wire is a lone sample the continuous rule
    cannot tell from a glitch; link_below_wire counts it, and a slow link
    where there was none is a regression of the counts' rule.'''
    clean = [(110.0 + i / 10, 1.0 - i / 1000, 1.00 + i / 1000, GBIT) for i in range(5)]
    before = _link_report(tmp_path / 'b.json', 'b', clean)
    one_slow = clean[:2] + [(None, None, 0.73, GBIT)] + clean[3:]
    outcome = compare.compare(sides.load_side(before),
                              sides.load_side(_link_report(tmp_path / 'o.json', 'o', one_slow)))
    rows = {row.metric: row.result for row in outcome.rows}
    assert rows[metrics.LINK_OVER_WIRE].verdict == statcompare.Verdict.INCONCLUSIVE
    assert rows[metrics.LINK_BELOW_WIRE].verdict == statcompare.Verdict.REGRESSED
    assert 'in 1 of 5 repeats after' in rows[metrics.LINK_BELOW_WIRE].reason
    assert outcome.exit_code == Exit.FAILED


def test_the_case_records_its_link_over_the_wire_where_the_wire_is_proven(tmp_path):
    '''What a calibrated case keeps in link_calibration: the link's fastest
    run over the wire's payload rate, on a partition proven to emulate the
    wire only (elsewhere the host's limit cannot be told from the link's).'''
    unshaped = (DATA / 'testbed-1gbit' / calibration.SHAPER_FILE).read_text()
    stage = _stage(tmp_path, 0.97, unshaped, QUIET)
    for proven, recorded in ((PROVEN, True), (None, False)):
        case = SimpleNamespace(stagedir=stage, link_calibration={},
                               partition=SimpleNamespace(iface='eth0', link_rate_bps=GBIT,
                                                         mtu=1500, wire_efficiency=proven))
        calibrated.JudgedOverIperf3.calibration.__wrapped__(case)
        assert (metrics.LINK_OVER_WIRE in case.link_calibration) == recorded
        assert (metrics.LINK_BELOW_WIRE in case.link_calibration) == recorded
        if recorded:
            assert case.link_calibration[metrics.LINK_OVER_WIRE] == pytest.approx(0.97)
            assert case.link_calibration[metrics.LINK_BELOW_WIRE] == 0
    # Below the floor proven at bring-up, the host quiet: a slow link, counted.
    case = SimpleNamespace(stagedir=_stage(tmp_path / 'slow', 0.80, unshaped, QUIET),
                           link_calibration={},
                           partition=SimpleNamespace(iface='eth0', link_rate_bps=GBIT, mtu=1500,
                                                     wire_efficiency=PROVEN))
    calibrated.JudgedOverIperf3.calibration.__wrapped__(case)
    assert case.link_calibration[metrics.LINK_BELOW_WIRE] == 1
