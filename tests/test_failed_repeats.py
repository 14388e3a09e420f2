"""Issue 32, items 1, 3 and 8: every repeat counts, no command reads a report
it did not write in this invocation, and the contract's row 3 for a case
nothing can fail and for a declared fabric skipped.  The reports are made of
the cases of a recorded run (tests/data/reports/local-run.json) arranged as
`hpcnet run --repeats K` writes them; ReFrame itself is replaced by a fake
that writes such a report where `--report-file` says (the verdict is hpcnet's,
after ReFrame has run), so each row runs the command's own entry."""
import json
import subprocess
from pathlib import Path

import pytest

from helpers import record_fault, report_case, run_report, write_report
from hpcnet import cli
from hpcnet.session import runner, verdict
from hpcnet.acceptance.references import references
from hpcnet.acceptance.references.references import Basis
from hpcnet.variables import REPORTS_DIR_ENV
from hpcnet.exitcodes import Exit

RECORDED = json.loads((Path(__file__).parent / 'data' / 'reports' / 'local-run.json').read_text())
P2P = 'hpcnet_p2p %scale=1_node %mode=pingpong'
#: The passed pingpong case of Open MPI over tcp in the recorded run.
PASSED = next(tc for run in RECORDED['runs'] for tc in run['testcases']
              if tc['name'] == P2P and tc['partition'] == 'tcp' and tc['environ'] == 'gcc12-openmpi4'
              and tc['result'] == 'pass')
#: A failure naming MPICH 4.0.2's finalize hang, as recorded.
KNOWN_ISSUE = next(tc for run in RECORDED['runs'] for tc in run['testcases']
                   if tc['result'] == 'fail' and 'known issue' in (tc.get('fail_reason') or ''))
WRONG_TRANSPORT = ("sanity error: transport: openmpi used vader on fabric 'tcp' (the partition "
                   "declares tcp: the run did not cross the fabric)")


def _failed(tc: dict, reason: str) -> dict:
    return {**tc, 'result': 'fail', 'fail_phase': 'sanity', 'fail_reason': reason,
            'perfvalues': {}}


def _repeats_report(repeats: list, retried: list = ()) -> dict:
    '''A run report of ``repeats`` (one list of cases per repeat), with
    the cases run again (hpcnet_retried).'''
    return run_report(repeats, RECORDED['session_info']['uuid'],
                      {**RECORDED['session_info'], 'num_cases': sum(map(len, repeats))},
                      restored_cases=[], hpcnet_retried=list(retried))


@pytest.fixture
def fake_reframe(tmp_path, monkeypatch):
    '''ReFrame replaced: each session writes the next of the reports queued in
    ``sessions`` (a report, or None for no report) to its --report-file and
    exits with its code.  The checks before running (discovery, site files)
    are not this test's.'''
    reports = tmp_path / 'reports'
    monkeypatch.setenv(REPORTS_DIR_ENV, str(reports))
    monkeypatch.setattr(runner, '_check_before_running', lambda args, env: None)
    monkeypatch.setattr(runner, 'session_prefix', lambda name, args: tmp_path / 'sessions' / name)
    sessions, commands = [], []
    real_run = subprocess.run

    def run(cmd, *args, **kwargs):
        if '--report-file' not in cmd:     # not ReFrame (git, say)
            return real_run(cmd, *args, **kwargs)
        commands.append(cmd)
        data, rc = sessions.pop(0)
        if data is not None:
            Path(cmd[cmd.index('--report-file') + 1]).write_text(json.dumps(data))
        return subprocess.CompletedProcess(cmd, rc)
    monkeypatch.setattr(runner.subprocess, 'run', run)
    return sessions, commands, reports


def test_a_case_that_failed_in_one_repeat_fails_the_report():
    '''`hpcnet report` of a --repeats 5 report whose case failed its transport
    proof in repeat 2 and passed in repeat 5: FAILED, naming the repeat.'''
    repeats = [[PASSED], [_failed(PASSED, WRONG_TRANSPORT)], [PASSED], [PASSED], [PASSED]]
    lines, code = verdict.reports_summary([_repeats_report(repeats)])
    assert code == Exit.FAILED, lines
    assert f'FAILED in repeat 2 of 5: {P2P} @local:tcp+gcc12-openmpi4: {WRONG_TRANSPORT}' in lines
    assert lines[-1].startswith('FAILED: 1 fail'), lines
    record_fault('verdict #1: a case failed in repeat 2 of 5, passed in 5 (hpcnet report)',
                 code, lines[-1])


def test_a_failure_in_one_repeat_fails_the_run_beside_a_retried_known_issue(fake_reframe):
    '''The fallback on ReFrame's exit code no longer hides it: another
    case's known issue was retried (and passed), one case failed in repeat
    2 of 3.  The retry runs that repeat once (no --reruns).'''
    sessions, commands, _ = fake_reframe
    mpich = {**PASSED, 'environ': 'gcc12-mpich4', 'hashcode': '913790b9'}
    repeats = [[PASSED, mpich], [_failed(PASSED, WRONG_TRANSPORT), _failed(mpich, KNOWN_ISSUE['fail_reason'])],
               [PASSED, mpich]]
    sessions += [(_repeats_report(repeats), 1), (_repeats_report([[mpich]]), 0)]
    run = runner.run_suite('run', ['--system', 'local:tcp', '--reruns', '2'])
    assert run.code == Exit.FAILED
    assert '--reruns' not in commands[1] and '/913790b9' in commands[1]
    data = json.loads(run.report.read_text())
    (retried,) = data['hpcnet_retried']
    assert (retried['repeat'], retried['repeats'], retried['attempts']) == (2, 3, 2)
    lines, code = verdict.reports_summary([data])
    assert code == Exit.FAILED
    assert any(l.startswith('PASSED ONLY ON RETRY (attempt 2) in repeat 2 of 3: ') for l in lines)
    assert any(l.startswith(f'FAILED in repeat 2 of 3: {P2P} @local:tcp+gcc12-openmpi4') for l in lines)
    record_fault('verdict #1: repeat 2 of 3 failed beside a retried known issue (hpcnet run)',
                 run.code, lines[-1])


def test_a_known_issue_in_one_repeat_passed_on_retry_passes(fake_reframe):
    sessions, _, _ = fake_reframe
    repeats = [[PASSED], [_failed(PASSED, KNOWN_ISSUE['fail_reason'])], [PASSED]]
    sessions += [(_repeats_report(repeats), 1), (_repeats_report([[PASSED]]), 0)]
    run = runner.run_suite('run', ['--system', 'local:tcp', '--reruns', '2'])
    assert run.code == Exit.OK
    lines, code = verdict.reports_summary([json.loads(run.report.read_text())])
    assert code == Exit.OK and lines[0].startswith('PASSED ONLY ON RETRY (attempt 2) in repeat 2 '
                                                   'of 3: '), lines
    # An older report's retried entry names no repeat: it was the last one's.
    old = _repeats_report([[PASSED], [_failed(PASSED, KNOWN_ISSUE['fail_reason'])]],
                          [{**PASSED, 'first_attempt': KNOWN_ISSUE['fail_reason'], 'retried_for': 'known issue'}])
    assert verdict.reports_summary([old])[1] == Exit.OK


def test_reframe_failing_outside_any_case_fails_also_after_a_retry(fake_reframe):
    '''ReFrame exited 1 with no failed repeat in its report, while a case was
    measured again (its measurement withheld): never a pass.'''
    sessions, _, _ = fake_reframe
    busy = {**PASSED, 'judgement_basis': Basis.WITHHELD,
            'judgement': 'not judged: measurement withheld (host busy: iperf3 at 0.81 of the wire)'}
    judged = {**PASSED, 'judgement_basis': Basis.REFERENCES, 'judgement': 'judged against x'}
    sessions += [(_repeats_report([[busy]]), 1), (_repeats_report([[judged]]), 0)]
    run = runner.run_suite('run', ['--system', 'local:tcp'])
    assert run.code == Exit.FAILED
    record_fault('verdict #1: reframe exited 1, no failed case, a case measured again', run.code,
                 'FAILED: reframe exited 1 with no failed case in the report')


def _clean_report(path: Path, uuid: str, values: list) -> str:
    '''A report of len(values) repeats of the recorded pingpong case.'''
    return write_report(path, [report_case({'bandwidth_4MiB': v}, base=PASSED, not_asserted={})
                               for v in values], uuid)


def test_accept_never_reads_last_weeks_report(fake_reframe, tmp_path, capsys):
    '''A typo in -n selects no case: accept says so and is not decided; it
    never compares last week's accept-latest.json with the baseline.'''
    sessions, _, reports = fake_reframe
    reports.mkdir()
    values = [4881.7 * (1 + 0.001 * (i % 5 - 2)) for i in range(15)]
    base = _clean_report(tmp_path / 'base.json', 'base', values)
    _clean_report(reports / 'accept-latest.json', 'last-week', values)
    sessions.append((_repeats_report([]), 0))
    code = cli.main(['accept', '--baseline', str(base), '--repeats', '3', '--system', 'local:tcp',
                     '-n', 'hpcnet_p2pp'])
    out = capsys.readouterr().out
    assert code == Exit.UNDECIDED, out
    assert 'last-week' not in out and 'no test case was selected by' in out, out
    assert out.strip().splitlines()[-1] == 'hpcnet: NOT DECIDED: exit code 3', out
    (why,) = [l for l in out.splitlines() if 'ran nothing' in l]
    assert why == 'hpcnet: a round of 3 repeats ran nothing (exit code 3): no samples to compare'
    record_fault('verdict #3: accept: a round that selects no case (-n typo)', code, why)


def test_baseline_never_reads_last_weeks_report(fake_reframe, tmp_path, capsys):
    sessions, _, reports = fake_reframe
    reports.mkdir()
    _clean_report(reports / 'baseline-latest.json', 'last-week', [4881.7] * 5)
    sessions += [(_repeats_report([]), 0)] * 2
    written = tmp_path / 'local.yaml'
    code = cli.main(['baseline', '--sessions', '2', '-o', str(written), '--system', 'local:tcp',
                     '-n', 'hpcnet_p2pp'])
    out = capsys.readouterr().out
    assert code == Exit.UNDECIDED, out
    assert not written.exists()
    last = out.strip().splitlines()[-1]
    assert 'baseline session 1 ran nothing' in last, out
    record_fault('verdict #3: baseline: a session that selects no case (-n typo)', code, last)


def test_a_case_nothing_can_fail_is_not_decided(fake_reframe):
    '''Every metric of a case left unasserted by the baseline's spread, beside
    a case judged against references: not decided, naming the case.'''
    sessions, _, _ = fake_reframe
    spread = f'{references.SPREAD_REASON}: 1 of 15 samples in a slower mode'
    unasserted = {**PASSED, 'judgement_basis': Basis.NOTHING_ASSERTED,
                  'judgement': 'not judged: no metric of this case is asserted in local.yaml',
                  'not_asserted': {k.split(':')[-1]: {'value': v[0], 'unit': v[4], 'reason': spread}
                                   for k, v in PASSED['perfvalues'].items()}}
    judged = {**PASSED, 'environ': 'gcc12-mpich5', 'judgement_basis': Basis.REFERENCES,
              'judgement': 'judged against local.yaml'}
    sessions.append((_repeats_report([[unasserted, judged]]), 0))
    run = runner.run_suite('run', ['--system', 'local:tcp'])
    assert run.code == Exit.UNDECIDED
    lines, _ = verdict.reports_summary([json.loads(run.report.read_text())])
    named = [l for l in lines if l.endswith('nothing can fail them')]
    assert named and named[0].startswith(f'NOT DECIDED: {P2P} @local:tcp+gcc12-openmpi4: '
                                         'bandwidth_1MiB, '), lines
    assert 'too noisy to judge: retake or widen by hand' in named[0], lines
    record_fault('verdict #8: every metric of a case unasserted by the baseline spread',
                 run.code, named[0])
    # A site's own reason for each metric is a decision, as a missing file is.
    declared = {**unasserted, 'not_asserted': {k: {**v, 'reason': "latency is the host's"}
                                               for k, v in unasserted['not_asserted'].items()}}
    assert verdict.summary({('a',): [declared], ('b',): [judged]}, [])[1] == Exit.OK


def test_a_declared_fabric_skipped_beside_a_pass_is_not_decided(fake_reframe):
    sessions, _, _ = fake_reframe
    reason = 'gcc12-impi2021 cannot use fabric tcp on this host: libfabric.so.1 not found'
    skipped = {**PASSED, 'environ': 'gcc12-impi2021', 'result': 'skip', 'skip_reason': reason,
               'perfvalues': {}}
    sessions.append((_repeats_report([[skipped, PASSED]]), 0))
    run = runner.run_suite('run', ['--system', 'local:tcp'])
    assert run.code == Exit.UNDECIDED
    lines, code = verdict.reports_summary([json.loads(run.report.read_text())])
    named = [l for l in lines if 'skipped, but' in l]
    assert lines[-1].startswith('NOT DECIDED: 1 pass, 1 skip; ') and code == Exit.UNDECIDED and named == [
        f'NOT DECIDED: {P2P} @local:tcp+gcc12-impi2021: skipped, but its partition declares the '
        f'fabric: {reason}'], lines
    record_fault('verdict #8: a stack skipped on its declared fabric beside a pass',
                 run.code, named[0])
    # Any other skip (no second node, no iperf3) beside a pass stays a pass.
    other = {**skipped, 'skip_reason': 'iperf3 is not on PATH (install the iperf3 package)'}
    assert verdict.summary({('a',): [other], ('b',): [PASSED]}, [])[1] == Exit.OK


def test_samples_come_from_every_repeat_and_from_a_repeat_passed_on_retry():
    """Baseline and compare take a sample from each of the 3 repeats: two
    that passed, and the one that passed only on its known issue's retry."""
    from hpcnet.acceptance.comparison import compare, sides
    from hpcnet.acceptance.references import baseline
    values = [4800.0, 4900.0, 5000.0]
    repeats = [[{**PASSED, 'perfvalues': {'local:tcp:bandwidth_4MiB': [v, 0, None, None, 'MB/s', 'pass']}}]
               for v in values]
    repeats[1] = [_failed(repeats[1][0], KNOWN_ISSUE['fail_reason'])]
    retried = {**PASSED, 'perfvalues': {'local:tcp:bandwidth_4MiB': [values[1], 0, None, None, 'MB/s', 'pass']},
               'first_attempt': KNOWN_ISSUE['fail_reason'], 'attempts': 2,
               'retried_for': 'known issue', 'repeat': 2, 'repeats': 3}
    report = _repeats_report(repeats, [retried])
    got = sorted(v for tc in baseline.judged_cases([report])
                 for var, v, _ in baseline.perf_samples(tc) if var == 'bandwidth_4MiB')
    assert got == values
    sampled = compare.samples(sides.Side('s', [report])).values
    assert sorted(sampled[(P2P, 'local:tcp', 'gcc12-openmpi4', 'bandwidth_4MiB')][1]) == values
