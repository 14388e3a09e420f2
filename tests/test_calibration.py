"""A link judged against iperf3 on the same link (hpcnet.checklib.calibration):
the files a real calibrated case left (tests/data/calibration/README.md), the
shaping on a path as tc shows it, a busy host told from a slow link by its
CPU pressure, and what the run's summary makes of it."""
import json
import shutil
from pathlib import Path

import pytest

from helpers import record_fault, report_case

from hpcnet import fabrics
from hpcnet.session import verdict
from hpcnet.acceptance.references.references import Basis
from hpcnet.checklib import calibration
from hpcnet.parsers import qdiscs
from hpcnet.constants import MEASUREMENT_WITHHELD
from hpcnet.exitcodes import Exit

DATA = Path(__file__).parent / 'data' / 'calibration'
RECORDED = DATA / 'testbed-1gbit'
BUSY_RECORDED = DATA / 'busy-host'
#: The host's load each recorded case read before its iperf3 runs.
QUIET = {phase: calibration.host_load((RECORDED / calibration.LOG_FILE).read_text(), phase)
         for phase in calibration.PHASES}
BUSY = {phase: calibration.host_load((BUSY_RECORDED / calibration.LOG_FILE).read_text(), phase)
        for phase in calibration.PHASES}
#: `tc -j qdisc show dev v0` of a veth shaped as `hpcnet testbed shape 850mbit` does.
TBF_850MBIT = ('[{"kind":"tbf","handle":"80c4:","root":true,"refcnt":3,'
               '"options":{"rate":106250000,"burst":8181,"lat":50000}}]')
GBIT = 10**9


def test_the_wire_payload_rate():
    assert fabrics.tcp_payload_MBps(GBIT, 1500) == pytest.approx(117.7, abs=0.05)
    assert fabrics.tcp_payload_MBps(GBIT, None) == fabrics.tcp_payload_MBps(GBIT, 1500)
    assert fabrics.tcp_payload_MBps(GBIT, 9000) == pytest.approx(125 * 8948 / 9038)


def test_a_recorded_case_on_a_quiet_host_is_judged_over_iperf3():
    '''The recorded quiet case: nothing shaped below 1 Gbit/s, the host idle
    before both iperf3 runs, iperf3 below the floor (the host's limit): not
    withheld, judged over iperf3.'''
    found = calibration.read(str(RECORDED))
    assert 60 < found.after_MBps < found.before_MBps < 117.7
    assert found.shaped_bps == {'cn1': GBIT, 'cn2': GBIT}
    assert found.host_load == QUIET and found.host_busy() is False
    assert all(load.cpu_busy_pct < calibration.BUSY_CPU_PCT for load in QUIET.values())
    assert found.throttled('eth0', GBIT) == []
    assert found.withheld(GBIT, 1500) is None and found.host_limited(GBIT, 1500)


def test_a_recorded_case_beside_two_spinning_processes_is_withheld():
    found = calibration.read(str(BUSY_RECORDED))
    assert found.host_load == BUSY and found.host_busy() is True
    assert BUSY['before'].cpu_busy_pct > 90 and found.throttled('eth0', GBIT) == []
    assert found.withheld(GBIT, 1500).startswith(
        f'{MEASUREMENT_WITHHELD} (host busy: cores busy 100 %, some task waiting for a core 9.2 % '
        'before; cores busy 98 %, some task waiting for a core 29.4 % after (busy from 40 % busy '
        'or 10 % waiting, over 1 s idle before each iperf3 run)): iperf3 on the same link reached')


def test_the_load_of_an_idle_window_is_read_from_proc_stat_and_psi():
    start = ('hpcnet-host-load before start: 1000000000 cpu  100 0 50 800 50 0 0 0 0 0 '
             '| some avg10=0.00 avg60=0.00 avg300=0.00 total=5000\n')
    end = ('hpcnet-host-load before end: 2000000000 cpu  150 0 100 900 50 0 0 0 0 0 '
           '| some avg10=0.00 avg60=0.00 avg300=0.00 total=205000\n')
    load = calibration.host_load(start + end, 'before')
    assert load == calibration.HostLoad(50.0, 20.0) and load.busy()
    assert calibration.host_load(start + end, 'after') is None
    assert calibration.host_load(start, 'before') is None
    # No /proc/pressure/cpu (a kernel without PSI): the cores' share alone.
    no_psi = calibration.host_load(start.replace('some avg10=0.00 avg60=0.00 avg300=0.00 '
                                                 'total=5000', '') + end, 'before')
    assert no_psi == calibration.HostLoad(50.0, None) and no_psi.busy()
    assert not calibration.HostLoad(10.0, None).busy()
    assert calibration.HostLoad(10.0, 12.0).busy()


def test_a_link_shaped_below_the_declared_rate_is_named():
    rates = qdiscs.path_rates(f'hpcnet-shaper: cn1 eth0 {TBF_850MBIT}\n'
                              'hpcnet-shaper: cn2 eth0 []\n')
    assert rates == {'cn1': (850 * 10**6, 'tbf 80c4:'), 'cn2': (None, 'not shaped')}
    found = calibration.Calibration(99.0, 99.5, {'cn1': 850 * 10**6, 'cn2': None},
                                    {'cn1': 'tbf 80c4:'}, QUIET)
    assert found.throttled('eth0', GBIT) == [
        "cn1: eth0 is shaped to 850 Mbit/s toward the job's other nodes (tc tbf 80c4:), below the "
        "partition's link_rate_bps (1000 Mbit/s)"]
    assert found.throttled('eth0', 850 * 10**6) == []


def test_a_slowed_path_is_seen_under_an_htb_root(tmp_path):
    '''The testbed's bad cable (`testbed shape --node cn1 --peer cn2 --rate
    700mbit`: an htb root, a tbf per class, a u32 filter per peer), as tc
    shows it on both nodes: the path's rate is 700 Mbit/s, set by the tbf
    under each node's class of the other; a root-only reading saw nothing.'''
    text = (DATA / 'tc' / 'path-cn1-cn2-700mbit.txt').read_text()
    assert qdiscs.path_rates(text) == {'cn1': (700 * 10**6, 'tbf 8002:'),
                                       'cn2': (700 * 10**6, 'tbf 8004:')}
    shutil.copytree(RECORDED, tmp_path / 'stage')
    (tmp_path / 'stage' / calibration.SHAPER_FILE).write_text(text)
    found = calibration.read(str(tmp_path / 'stage'))
    assert found.shaped_by == {'cn1': 'tbf 8002:', 'cn2': 'tbf 8004:'}
    assert [t.split(' (tc')[0] for t in found.throttled('eth0', GBIT)] == [
        "cn1: eth0 is shaped to 700 Mbit/s toward the job's other nodes",
        "cn2: eth0 is shaped to 700 Mbit/s toward the job's other nodes"]


def test_a_slowed_path_to_another_node_is_not_this_paths():
    '''cn1's path to cn3 at 700 Mbit/s: a frame to cn2 matches no filter and
    takes the htb's default class, whose tbf sends at 1 Gbit/s.'''
    cn1 = (DATA / 'tc' / 'path-cn1-cn3-700mbit.txt').read_text()
    cn2 = ''.join(line + '\n' for line in
                  (DATA / 'tc' / 'path-cn1-cn2-700mbit.txt').read_text().splitlines()
                  if ' cn2 ' in line)
    assert qdiscs.path_rates(cn1 + cn2)['cn1'] == (GBIT, 'tbf 800b:')
    # Where the peers' addresses are unknown, every rate on the interface counts.
    no_address = ''.join(line + '\n' for line in (cn1 + cn2).splitlines()
                         if not line.startswith('hpcnet-address'))
    assert qdiscs.path_rates(no_address)['cn1'] == (700 * 10**6, 'tbf 800c:')


def test_a_slow_htb_class_caps_the_path():
    '''An htb class's ceil is a shaper too, and so is its parent's.'''
    qdisc = ('[{"kind":"htb","handle":"1:","root":true,"options":{"r2q":10,"default":"0x10"}},'
             '{"kind":"fq_codel","handle":"8010:","parent":"1:10","options":{}}]')
    classes = ('class htb 1:1 root rate 800Mbit ceil 800Mbit burst 1600b cburst 1600b ;'
               'class htb 1:10 parent 1:1 leaf 8010: prio 0 rate 100Mbit ceil 900Mbit burst 1600b ;')
    text = f'hpcnet-shaper: cn1 eth0 {qdisc}\nhpcnet-classes: cn1 eth0 {classes}\n'
    assert qdiscs.path_rates(text) == {'cn1': (800 * 10**6, 'htb class 1:1')}


def _calibration(MBps: float, before, after) -> calibration.Calibration:
    return calibration.Calibration(MBps, MBps + 0.5, {'cn1': GBIT, 'cn2': GBIT}, {},
                                   {'before': before, 'after': after})


def test_a_quiet_host_below_the_wire_is_judged_over_iperf3():
    '''iperf3 at 0.70 of the wire with the host idle (the recorded reading),
    on a host not proven to emulate the wire, and nothing on the path shaped
    below the declared rate: not withheld, the host's limit as far as
    anything measured says, and the figure judged over iperf3 like with
    like, with a note saying so.  Proven wire-true, the same reading is a
    slow link (tests/test_withheld_measurements.py).'''
    wire = fabrics.tcp_payload_MBps(GBIT, 1500)
    found = _calibration(0.70 * wire, QUIET['before'], QUIET['after'])
    assert found.host_busy() is False and found.throttled('eth0', GBIT) == []
    assert found.withheld(GBIT, 1500) is None
    assert found.ratio(0.70 * wire) == 1.0
    assert found.ratio(0.50 * wire) == pytest.approx(0.50 / 0.70)
    assert found.host_limited_note(GBIT, 1500).startswith(
        'the host below the wire and not proven to emulate it, no shaper on the path below the '
        'declared rate (cores busy 4 %, '
        'some task waiting for a core 1.2 % before; cores busy 16 %, some task waiting for a core '
        '2.0 % after (busy from 40 % busy or 10 % waiting, over 1 s idle before each iperf3 run))')
    assert found.host_limited_note(GBIT, 1500).endswith('judged over iperf3 on the same link')


def test_a_busy_host_withholds_the_measurement_and_says_why():
    floor = calibration.HOST_FLOOR * fabrics.tcp_payload_MBps(GBIT, 1500)
    assert _calibration(floor + 0.1, BUSY['before'], BUSY['after']).withheld(GBIT, 1500) is None
    slow = _calibration(floor - 0.1, QUIET['before'], BUSY['after'])     # busy after the run
    assert slow.host_busy() and not slow.host_limited(GBIT, 1500)
    assert slow.ratio(floor - 0.1) == 1.0
    reason = slow.withheld(GBIT, 1500)
    assert reason.startswith(f'{MEASUREMENT_WITHHELD} (host busy: cores busy 4 %, some task '
                             'waiting for a core 1.2 % before; cores busy 98 %, some task waiting '
                             'for a core 29.4 % after (busy from 40 % busy or 10 % waiting, over 1 s '
                             'idle before each iperf3 run)): iperf3 on the same link reached '
                             '105.8 MB/s before and 106.3 MB/s after the run, 0.90 and 0.90')
    assert 'payload rate 117.7 MB/s (emulating the wire needs 0.90)' in reason
    # No load readable: the host's load is unknown, and nothing is judged on it.
    unknown = _calibration(floor - 0.1, None, None)
    assert unknown.host_busy() is None and not unknown.host_limited(GBIT, 1500)
    assert unknown.withheld(GBIT, 1500).startswith(
        f"{MEASUREMENT_WITHHELD} (host load unknown: the host's load unread (/proc/stat))")


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


def test_a_busy_host_makes_the_run_not_decided():
    reason = calibration.Calibration(95.0, 101.0, {'cn1': GBIT}, {}, BUSY).withheld(GBIT, 1500)
    cases = {('hpcnet_p2p', 'testbed', 'eth', env):
             report_case(environ=env, judgement=judgement, judgement_basis=basis)
             for env, judgement, basis in (
                 ('gcc12-openmpi4', f'not judged: {reason}', Basis.WITHHELD),
                 ('gcc12-mpich4', 'judged against reference/testbed.yaml', Basis.REFERENCES))}
    lines, code = verdict.summary(cases, [])
    assert code == Exit.UNDECIDED
    assert f'NOT JUDGED (1): {reason}' in lines
    assert lines[-1] == (f'NOT DECIDED: 2 pass; 1 case(s) not judged: {MEASUREMENT_WITHHELD} '
                         '(NOT JUDGED says why; run again when that has passed)')
    record_fault('measurement withheld (iperf3 0.81 of the wire, cores 100 % busy)', code, lines[-1])


def test_the_last_line_counts_judged_and_unjudged_cases():
    cases = {('hpcnet_p2p', 'testbed', 'eth', env):
             report_case(environ=env, judgement=judgement, judgement_basis=basis)
             for env, judgement, basis in (
                 ('gcc12-openmpi4', 'not judged: no metric of this case is asserted',
                  Basis.NOTHING_ASSERTED),
                 ('gcc12-mpich4', 'judged against reference/testbed.yaml', Basis.REFERENCES))}
    lines, code = verdict.summary(cases, [])
    assert code == Exit.OK
    assert lines[-1] == ('PASSED: 2 pass; performance: 1 case(s) judged against references, '
                         '1 recorded, not judged (NOT JUDGED says why)')


def test_calibrated_ratios_have_a_worse_side_bound_and_no_upper_one():
    """reference/testbed.yaml's `*_over_iperf3`: a lower bound (the worse
    side of a rate), no upper bound, and $unbounded says why for each
    (iperf3's own one-second figure moves too much on a quiet host to bound
    a ratio over it from above)."""
    import re

    import yaml
    from hpcnet.constants import REFERENCE_DIR

    def ratios(node, keys=()):
        for key, value in node.items():
            if isinstance(value, dict):
                yield from ratios(value, (*keys, key))
            elif key.endswith('_over_iperf3') and isinstance(value, list):
                yield keys, key, value

    document = yaml.safe_load((REFERENCE_DIR / 'testbed.yaml').read_text())
    found = list(ratios({k: v for k, v in document.items() if not k.startswith('$')}))
    assert found
    for keys, key, value in found:
        assert value[1] in (-0.10, -0.15) and value[2] is None and value[3] == 'ratio', (keys, key)
        reasons = document['$unbounded'][keys[0]]
        assert any(re.fullmatch(pattern, key) for pattern in reasons), (keys, key)


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
