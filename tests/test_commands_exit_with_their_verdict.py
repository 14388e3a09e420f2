"""A command that prints a verdict exits with it: `hpcnet report` of a
FAILED session exits 1 (of a PASSED one 0, of NOTHING RAN 3), and `hpcnet
compare` against a report whose repeat failed its sanity names the repeat
and its reason: after, the case fails (exit 1); before, the repeat is left
out and the comparison decides on the others.  The reports are shaped as
`hpcnet run --repeats K` writes them (helpers.run_report), fed through the
real commands."""
from helpers import fault_row, report_case, run_hpcnet, wobble, write_report
from hpcnet.exitcodes import Exit

WRONG_TRANSPORT = ("sanity error: transport: openmpi used vader on fabric 'tcp' (the partition "
                   "declares tcp: the run did not cross the fabric)")
CASE = 'hpcnet_p2p %scale=2_nodes %mode=bw @testbed:eth +gcc12-openmpi4'


def _repeats(n: int, seed: int) -> list:
    '''n passed repeats of the testbed's bandwidth case, wobbling 1 %.'''
    return [report_case({'bandwidth_4MiB': v}) for v in wobble(117.0, n, seed)]


def _failed(tc: dict, reason: str = WRONG_TRANSPORT) -> dict:
    return {**tc, 'result': 'fail', 'fail_phase': 'sanity', 'fail_reason': reason,
            'perfvalues': {}}


def _report(tmp_path, name: str, runs: list) -> str:
    return write_report(tmp_path / f'{name}.json', runs, name)


def _page_env(tmp_path) -> dict:
    return {'HPCNET_REPORTS_DIR': str(tmp_path / 'reports')}


def test_report_of_a_failed_session_exits_1(tmp_path):
    runs = _repeats(5, 1)
    runs[1] = _failed(runs[1])
    res = run_hpcnet('report', _report(tmp_path, 'failed', runs), '-o', str(tmp_path / 'p.html'),
                     env=_page_env(tmp_path))
    fault_row('exit codes: hpcnet report of a session whose repeat 2 of 5 failed', res,
              Exit.FAILED, shown='FAILED in repeat 2 of 5')
    assert 'hpcnet: FAILED: exit code 1' in res.stdout and (tmp_path / 'p.html').is_file()


def test_report_of_a_passed_session_exits_0(tmp_path):
    res = run_hpcnet('report', _report(tmp_path, 'passed', _repeats(5, 2)), '-o',
                     str(tmp_path / 'p.html'), env=_page_env(tmp_path))
    fault_row('exit codes: hpcnet report of a session that passed (healthy)', res, Exit.OK,
              shown='PASSED: 1 pass')


def test_report_of_a_session_that_ran_nothing_exits_3(tmp_path):
    skipped = {**report_case(), 'result': 'skip', 'skip_reason': 'needs 2 nodes', 'perfvalues': {}}
    res = run_hpcnet('report', _report(tmp_path, 'skipped', [skipped]), '-o',
                     str(tmp_path / 'p.html'), env=_page_env(tmp_path))
    fault_row('exit codes: hpcnet report of a session that ran nothing', res, Exit.UNDECIDED,
              shown='NOTHING RAN')


def test_compare_fails_a_case_whose_repeat_failed_after(tmp_path):
    '''The four repeats that passed measured what the baseline did: before,
    UNCHANGED and exit 0, the failed repeat unnamed.'''
    before = _report(tmp_path, 'before', _repeats(5, 3))
    runs = _repeats(5, 4)
    runs[1] = _failed(runs[1])
    res = run_hpcnet('compare', before, _report(tmp_path, 'after', runs))
    line = fault_row('exit codes: compare, repeat 2 of 5 after failed its sanity, the others '
                     'unchanged', res, Exit.FAILED, shown='(a failed repeat fails its case')
    assert line == (f'FAILED: repeat 2 of 5 of session after (after): {CASE}: {WRONG_TRANSPORT} '
                    '(a failed repeat fails its case, whatever its other repeats measured)')
    # The metric's row names it too, and the summary counts it.
    assert ('its case FAILED in repeat 2 of 5 of session after (after): '
            + WRONG_TRANSPORT) in res.stdout, res.stdout
    assert 'hpcnet: 0 regressed, 0 missing after, 1 failed repeat(s) after, ' in res.stdout
    assert res.stdout.strip().splitlines()[-1] == 'hpcnet: FAILED'


def test_compare_leaves_out_a_repeat_that_failed_before_and_names_it(tmp_path):
    runs = _repeats(5, 5)
    runs[3] = _failed(runs[3], 'sanity error: job timed out')
    res = run_hpcnet('compare', _report(tmp_path, 'before', runs),
                     _report(tmp_path, 'after', _repeats(5, 6)))
    line = fault_row('exit codes: compare, repeat 4 of 5 before failed, after healthy (healthy)',
                     res, Exit.OK, shown='left out: ')
    assert line.startswith(f'left out: repeat 4 of 5 of session before (before): {CASE}: '
                           'sanity error: job timed out'), line
    assert 'UNCHANGED' in res.stdout and ' 4+5 ' in res.stdout, res.stdout


def test_compare_of_a_repeat_that_failed_on_its_references_judges_its_figures(tmp_path):
    '''A repeat failed only on its references measured: its figure is a
    sample, judged by the statistics, not a failed repeat.'''
    runs = _repeats(5, 7)
    runs[2] = {**runs[2], 'result': 'fail', 'fail_phase': 'performance',
               'fail_reason': 'performance error: bandwidth_4MiB below reference'}
    res = run_hpcnet('compare', _report(tmp_path, 'before', _repeats(5, 8)),
                     _report(tmp_path, 'after', runs))
    assert res.returncode == Exit.OK, res.stdout
    assert 'failed repeat' not in res.stdout and ' 5+5 ' in res.stdout, res.stdout
