"""A link judged against iperf3 on the same link (hpcnet.checklib.calibration):
the files a real calibrated case left (tests/data/calibration/README.md), a
throttled shaper, an overloaded host, and what the run's summary makes of it."""
import json
import shutil
from pathlib import Path

import conftest
import pytest

from hpcnet import runner
from hpcnet.acceptance.references import Basis
from hpcnet.checklib import calibration
from hpcnet.constants import HOST_OVERLOADED
from hpcnet.exitcodes import Exit

RECORDED = Path(__file__).parent / "data" / 'calibration' / 'testbed-1gbit'
#: `tc -j qdisc show dev v0` of a veth shaped as `hpcnet testbed shape 850mbit` does.
TBF_850MBIT = ('[{"kind":"tbf","handle":"80c4:","root":true,"refcnt":3,'
               '"options":{"rate":106250000,"burst":8181,"lat":50000}}]')
GBIT = 10**9


def test_the_wire_payload_rate():
    assert calibration.tcp_payload_MBps(GBIT, 1500) == pytest.approx(117.7, abs=0.05)
    assert calibration.tcp_payload_MBps(GBIT, None) == calibration.tcp_payload_MBps(GBIT, 1500)
    assert calibration.tcp_payload_MBps(GBIT, 9000) == pytest.approx(125 * 8948 / 9038)


def test_a_recorded_case_is_a_healthy_link():
    found = calibration.read(str(RECORDED))
    assert 100 < found.before_MBps < 120 and 100 < found.after_MBps < 120
    assert found.shaped_bps == {'cn1': GBIT, 'cn2': GBIT}
    assert found.cpu_pressure.startswith('some avg10=')
    assert found.throttled('eth0', GBIT) == []
    assert found.overloaded(GBIT, 1500) is None


def test_a_link_shaped_below_the_declared_rate_is_named():
    rates = calibration.shaped_rates(f'hpcnet-shaper: cn1 eth0 {TBF_850MBIT}\n'
                                     'hpcnet-shaper: cn2 eth0 []\n')
    assert rates == {'cn1': 850 * 10**6, 'cn2': None}       # cn2: not shaped at all
    found = calibration.Calibration(99.0, 99.5, rates)
    assert found.throttled('eth0', GBIT) == [
        "cn1: eth0 is shaped to 850 Mbit/s (tc tbf), below the partition's link_rate_bps "
        '(1000 Mbit/s)']
    assert found.throttled('eth0', 850 * 10**6) == []


def test_an_overloaded_host_is_not_judged_and_says_why():
    floor = calibration.HOST_FLOOR * calibration.tcp_payload_MBps(GBIT, 1500)
    healthy = calibration.Calibration(floor + 0.1, 117.0, {'cn1': GBIT}, 'some avg10=35.00')
    assert healthy.overloaded(GBIT, 1500) is None
    slow = calibration.Calibration(floor - 0.1, 117.0, {'cn1': GBIT}, 'some avg10=61.20')
    reason = slow.overloaded(GBIT, 1500)
    assert reason.startswith(f'{HOST_OVERLOADED}: iperf3 on the same link reached 105.8 MB/s '
                             'before and 117.0 MB/s after the run, 0.90 and 0.99')
    assert "payload rate 117.7 MB/s (emulating the wire needs 0.90); CPU pressure: " \
           'some avg10=61.20' in reason


@pytest.mark.parametrize('edit, message', [
    (lambda d: (d / calibration.file_name('after')).unlink(),
     'iperf3 wrote no .*calibration-iperf3-after.json'),
    (lambda d: (d / calibration.file_name('before')).write_text('{"error": "unable to connect '
                                                                'to server: Connection refused"}'),
     'iperf3 before the run: iperf3: unable to connect to server'),
    (lambda d: (d / calibration.file_name('before')).write_text('{"end": {}}'),
     'iperf3 before the run: no end.sum_received'),
    (lambda d: (d / calibration.SHAPER_FILE).write_text(
        'hpcnet-shaper: cn1 eth0 Cannot find device "eth0"\n'),
     'cn1: `tc -j qdisc show dev eth0` said: Cannot find device "eth0"'),
    (lambda d: (d / calibration.SHAPER_FILE).write_text(''),
     'no node reported its interface'),
])
def test_a_calibration_that_did_not_happen_is_an_error(tmp_path, edit, message):
    stage = tmp_path / 'stage'
    shutil.copytree(RECORDED, stage)
    edit(stage)
    with pytest.raises(calibration.CalibrationError, match=message):
        calibration.read(str(stage))


def test_the_recorded_client_result_is_iperf3s():
    result = json.loads((RECORDED / calibration.file_name('before')).read_text())
    assert result['start']['version'].startswith('iperf 3')
    assert calibration.iperf3_received_MBps(result, 'x') == pytest.approx(
        result['end']['sum_received']['bits_per_second'] / 8e6)


def _case(env, judgement, basis, result='pass'):
    return {'name': 'hpcnet_p2p', 'system': 'testbed', 'partition': 'eth', 'environ': env,
            'result': result, 'judgement': judgement, 'judgement_basis': basis}


def test_an_overloaded_host_makes_the_run_not_decided():
    reason = calibration.Calibration(95.0, 101.0, {'cn1': GBIT}).overloaded(GBIT, 1500)
    cases = {('hpcnet_p2p', 'testbed', 'eth', env): _case(env, judgement, basis)
             for env, judgement, basis in (
                 ('gcc12-openmpi4', f'not judged: {reason}', Basis.HOST_OVERLOADED),
                 ('gcc12-mpich4', 'judged against reference/testbed.yaml', Basis.REFERENCES))}
    lines, code = runner.summary(cases, [])
    assert code == Exit.UNDECIDED
    assert f'NOT JUDGED (1): {reason}' in lines
    assert lines[-1] == (f'NOT DECIDED: 2 pass; 1 case(s) not judged: {HOST_OVERLOADED} '
                         '(run again on a quieter host)')
    conftest.FAULT_MATRIX.append(('testbed host overloaded (iperf3 0.81 of the wire)',
                                  f'exit {int(code)}', lines[-1]))


def test_the_last_line_counts_judged_and_unjudged_cases():
    cases = {('hpcnet_p2p', 'testbed', 'eth', env): _case(env, judgement, basis)
             for env, judgement, basis in (
                 ('gcc12-openmpi4', 'not judged: no metric of this case is asserted',
                  Basis.NOTHING_ASSERTED),
                 ('gcc12-mpich4', 'judged against reference/testbed.yaml', Basis.REFERENCES))}
    lines, code = runner.summary(cases, [])
    assert code == Exit.OK
    assert lines[-1] == ('PASSED: 2 pass; performance: 1 case(s) judged against references, '
                         '1 recorded, not judged (NOT JUDGED says why)')


def test_calibrated_upper_bounds_follow_from_the_wire_and_the_host_floor():
    '''reference/testbed.yaml's `*_over_iperf3` upper bound: our figure at
    most ABOVE_WIRE above the wire over an iperf3 still judged at HOST_FLOOR.'''
    import yaml
    from hpcnet.constants import REFERENCE_DIR

    def ratios(node):
        for key, value in node.items():
            if isinstance(value, dict):
                yield from ratios(value)
            elif key.endswith('_over_iperf3'):
                yield key, value

    found = list(ratios(yaml.safe_load((REFERENCE_DIR / 'testbed.yaml').read_text())))
    assert found
    upper = round((1 + calibration.ABOVE_WIRE) / calibration.HOST_FLOOR - 1, 2)
    assert {(key, tuple(value[2:])) for key, value in found} == {
        (key, (upper, 'ratio')) for key, _ in found}


def test_a_figure_is_judged_against_the_bracket_of_the_two_iperf3_runs():
    '''A testbed run (make testbed-run, tcp_stream at 1 MiB): the host slowed
    down during the case, iperf3 read 117.6 MB/s before and 107.3 after, and
    our stream 100.0 in its slowed windows: 0.85 of the faster run, 0.93 of
    the slower one, which is what the case is judged by.'''
    found = calibration.Calibration(before_MBps=117.55, after_MBps=107.31, shaped_bps={})
    assert found.over(100.04) == pytest.approx(100.04 / 107.31)
    assert found.over(110.0) == 1.0                       # between the two runs
    assert found.over(120.0) == pytest.approx(120.0 / 117.55)
    assert calibration.Calibration(117.0, 117.0, {}).over(117.0) == 1.0
