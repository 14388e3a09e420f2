"""Errors a user can cause get one message naming what was wrong and what is
valid; the build flags reach the compiler."""
import functools
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import run_reframe
from helpers import run_hpcnet

from hpcnet.constants import CONFIG_DIR

CHECKS = Path(__file__).parent / 'checks'


#: hpcnet with stdout and stderr as one stream, as a terminal shows them.
hpcnet = functools.partial(run_hpcnet, stderr=subprocess.STDOUT, timeout=300)


def test_unknown_system_lists_the_valid_ones():
    res = hpcnet('run', '--system', 'nosuch')
    assert res.returncode == 2
    assert 'hpcnet: error: --system nosuch: no such system (valid: example, local, testbed' in res.stdout
    res = hpcnet('run', '--system', 'local:ib')
    assert "system local has no partition 'ib' (valid: shm, tcp)" in res.stdout


def test_environment_pattern_matching_nothing_fails():
    res = hpcnet('run', '-p', '^no-such-env$')
    assert res.returncode == 2
    assert '-p ^no-such-env$: matches no environment (valid: ' in res.stdout
    assert 'Traceback' not in res.stdout


def test_bad_mpi_prefix_is_one_message(tmp_path):
    res = hpcnet('stacks', '--refresh', env={'HPCNET_MPI_PREFIXES': str(tmp_path)})
    assert res.returncode == 2
    assert f"HPCNET_MPI_PREFIXES: '{tmp_path}' has no bin/mpicc" in res.stdout
    assert 'Traceback' not in res.stdout


def test_fabrics_validate(tmp_path):
    res = hpcnet('fabrics', 'validate')
    assert res.returncode == 0 and 'ok: system local: shm (shm), tcp (tcp)' in res.stdout
    bad = tmp_path / 'fabrics.yaml'
    table = yaml.safe_load((CONFIG_DIR / 'fabrics.yaml').read_text())
    # A string where a list of launcher arguments belongs (was split into characters).
    table['fabrics']['tcp']['openmpi']['launcher_options'] = '--bind-to none'
    bad.write_text(yaml.safe_dump(table))
    res = hpcnet('fabrics', 'validate', str(bad))
    assert res.returncode == 2
    assert "launcher_options: '--bind-to none' is not a list of strings" in res.stdout


def test_warnings_as_errors_reach_the_compiler(tmp_path):
    proc, cases = run_reframe(tmp_path, '-c', str(CHECKS / 'build_flags.py'), '-n', 'build_warns',
                              '-p', 'builtin', retries=0, system='local:tcp', timeout=120)
    (case,) = cases
    assert case['result'] == 'fail' and case['fail_phase'].startswith('compile'), proc.stdout[-2000:]
    build_sh = (Path(case['stagedir']) / 'rfm_build.sh').read_text()
    assert "'CFLAGS=-O2 -Wall -Wextra -Werror'" in build_sh
    # Binaries of a by-hand build in src/ are never taken as this build's.
    assert build_sh.index('rm -rf bin') < build_sh.index('make ')
    err = (Path(case['stagedir']) / 'rfm_build.err').read_text()
    assert 'unused_variable' in err and '-Werror' in err


def test_run_without_references_says_not_judged(one_env_per_stack):
    res = hpcnet('run', '--report-name', 'test-not-judged', '--system', 'local:shm', '-c', 'checks/p2p.py',
                 '-n', 'hpcnet_p2p.*mode=pingpong', '-p', f'^{one_env_per_stack[0]}$',
                 '-S', 'time_per_size_ms=2',
                 env={'HPCNET_REFERENCE_DIR': str(Path(__file__).parent / 'no-such-dir')})
    assert res.returncode == 0, res.stdout[-2000:]
    # Grouped by reason, and the last word says what was and was not judged.
    assert f'NOT JUDGED (1): {Path(__file__).parent / "no-such-dir" / "local.yaml"} does not exist' \
        in res.stdout, res.stdout[-2000:]
    last = res.stdout.strip().splitlines()[-2]
    assert last.startswith('hpcnet: PASSED: ') and 'performance: 0 case(s) judged against references, 1 recorded, not judged' in last \
        and 'hpcnet baseline' in last, last


def test_perflog_holds_every_value_reference_and_result(own_history, one_env_per_stack, tmp_path):
    refdir = tmp_path / 'refs'
    refdir.mkdir()
    (refdir / 'local.yaml').write_text(
        'hpcnet_p2p:\n  $index: [$partition, mpi_family, mode]\n  local:shm:\n    .*:\n'
        '      pingpong:\n        latency_8B: [1000.0, null, 0.5, us]\n'
        "$not_asserted:\n  hpcnet_p2p:\n    'local:shm/.*/(latency_0B|bandwidth_.*)': not under test\n"
        "$unbounded:\n  hpcnet_p2p:\n    'local:shm/.*/pingpong/latency_8B': the log is under test\n")
    res = hpcnet('run', '--report-name', 'test-perflog', '--system', 'local:shm',
                 '-n', 'hpcnet_p2p.*mode=pingpong', '-p', f'^{one_env_per_stack[0]}$',
                 '-S', 'time_per_size_ms=2', env={'HPCNET_REFERENCE_DIR': str(refdir)})
    assert res.returncode == 0, res.stdout[-2000:]
    log = own_history / 'perflogs' / 'local' / 'shm' / 'hpcnet_p2p.log'
    lines = [l for l in log.read_text().splitlines() if one_env_per_stack[0] in l]
    latency = [l for l in lines if '|latency_8B=' in l][-1].split('|')
    # completion time|name|environ|var=value|unit|ref (l, u)|result|judgement|library|spec
    value = float(latency[3].split('=')[1])
    assert value > 0 and latency[4] == 'us'
    assert latency[5].startswith('ref=1000.0 (l=') and latency[5].endswith(', u=0.5)'), latency
    assert latency[6] == 'pass'
    assert latency[7].startswith('judged against') and latency[8]
    # Last, the MPI's Spack spec: empty for a build of no package manager.
    assert len(latency) == 10 and (latency[9] == '' or '@' in latency[9]), latency
    # A value kept, not asserted, is logged too, with ReFrame's "no reference".
    kept = [l for l in lines if '|latency_0B=' in l][-1].split('|')
    assert float(kept[3].split('=')[1]) > 0 and kept[4] == 'us', kept
    assert kept[5].startswith('ref=0 (l=') and kept[6] == 'pass', kept


def test_only_named_known_issues_are_retried(tmp_path):
    from hpcnet import stacks
    mpich4 = [e.name for e in stacks.discover().environments
              if e.stack().known_issue and e.primary]
    if not mpich4:
        pytest.fail('no environment with a named known issue (Debian MPICH 4.0.2 over UCX)')
    res = hpcnet('run', '--report-name', 'test-retry', '--system', 'local:shm', '-c', str(CHECKS / 'retry.py'),
                 '-n', '^retry_', '-p', f'^{mpich4[0]}$',
                 '-S', f'retry_known_issue.marker={tmp_path / "known"}',
                 '-S', 'retry_known_issue.failing_attempts=2',
                 '-S', f'retry_known_issue_every_time.marker={tmp_path / "always"}',
                 '-S', f'retry_other_failure.marker={tmp_path / "other"}')
    retries = [l for l in res.stdout.splitlines() if 'retrying (attempt' in l]
    # Failed twice, passed on the last attempt allowed; each retry said.
    assert 'PASSED ONLY ON RETRY (attempt 3): retry_known_issue %' in res.stdout, res.stdout[-3000:]
    assert [l.split('attempt ')[1][:6] for l in retries if 'issue: retry_known_issue %' in l] == \
        ['2 of 3', '3 of 3'], retries
    # Retries stop: a known issue that fails every time fails the session.
    assert 'FAILED 3 TIMES: retry_known_issue_every_time %' in res.stdout, res.stdout[-3000:]
    assert (tmp_path / 'always').read_text().count('attempt') == 3
    assert not [l for l in retries if 'retry_other_failure' in l]
    assert (tmp_path / 'other').read_text().count('attempt') == 1
    assert res.returncode == 1          # the other failure is final


def test_a_case_the_host_was_too_busy_to_judge_is_measured_again(tmp_path):
    refdir = tmp_path / 'refs'
    refdir.mkdir()
    res = hpcnet('run', '--report-name', 'test-remeasure', '--system', 'local:shm',
                 '-c', str(CHECKS / 'retry.py'), '-n', '^remeasure_', '-p', '^builtin$',
                 '-S', f'remeasure_overloaded_once.marker={tmp_path / "once"}',
                 '-S', f'remeasure_overloaded_every_time.marker={tmp_path / "always"}',
                 env={'HPCNET_REFERENCE_DIR': str(refdir)})
    out = res.stdout
    assert 'MEASURED AGAIN (attempt 2): remeasure_overloaded_once ' in out, out[-3000:]
    assert (tmp_path / 'once').read_text().count('attempt') == 2
    # Still too busy after every attempt allowed: not judged, never a pass.
    assert 'NOT JUDGED 3 TIMES: remeasure_overloaded_every_time ' in out, out[-3000:]
    assert (tmp_path / 'always').read_text().count('attempt') == 3
    assert 'retrying (attempt 2 of 3), measurement withheld: remeasure_overloaded_once' in out
    assert 'NOT DECIDED: 2 pass; 1 case(s) not judged: measurement withheld' in out
    assert res.returncode == 3


def test_baseline_then_judged_then_compared(one_env_per_stack, tmp_path):
    '''hpcnet baseline: K repeats -> a reference file with provenance (an
    existing one is kept, the diff shown); the next run is judged against
    it; hpcnet compare of the two sessions prints the verdict table.'''
    refdir = tmp_path / 'refs'
    refdir.mkdir()
    env = {'HPCNET_REFERENCE_DIR': str(refdir)}
    select = ['--system', 'local:shm', '-n', 'hpcnet_p2p.*scale=1_node.*mode=pingpong',
              '-p', f'^{one_env_per_stack[0]}$', '-S', 'time_per_size_ms=2']
    res = hpcnet('baseline', '--sessions', '3', *select, env=env)
    # Not decided (3) only with a metric named too noisy to judge.
    too_noisy = 'too noisy to judge: retake or widen by hand' in res.stdout
    assert res.returncode == (3 if too_noisy else 0), res.stdout[-3000:]
    written = refdir / 'local.yaml'
    data = yaml.safe_load(written.read_text())
    prov = data['$provenance']
    assert prov['repeats'] == 3 and prov['passed_cases'] == 3, prov
    assert one_env_per_stack[0] in prov['environments'] and prov['suite_commit']
    # Each metric is either bounded, or too variable over 3 sessions to bound
    # (recorded and compared, not asserted, with its spread as the reason).
    leaf = data.get('hpcnet_p2p', {}).get('local:shm')
    if leaf and 'latency_8B' in next(iter(leaf.values()))['pingpong']:
        value = next(iter(leaf.values()))['pingpong']['latency_8B']
        assert value[0] > 0 and value[2] >= 0.03 and value[3] == 'us', value
    else:
        reasons = data['$not_asserted']['hpcnet_p2p']
        assert any(k.endswith('latency_8B') and v.startswith('baseline spread: ')
                   for k, v in reasons.items()), reasons
    # Again: the file is kept, the new baseline written beside it.
    res = hpcnet('baseline', '--sessions', '3', *select, env=env)
    too_noisy = 'too noisy to judge: retake or widen by hand' in res.stdout
    assert res.returncode == (3 if too_noisy else 0) and 'exists and was kept' in res.stdout, \
        res.stdout[-3000:]
    assert (refdir / 'local.yaml.baseline').exists() and 'not the baseline' in res.stdout
    # The next run is judged against the baseline.
    res = hpcnet('run', '--report-name', 'after-baseline', *select, '--repeats', '3', env=env)
    # Judged against the baseline, or not judged because the baseline found
    # every metric too variable to bound: never for want of a file.
    assert 'does not exist' not in res.stdout, res.stdout[-3000:]
    assert 'NOT JUDGED' not in res.stdout or 'baseline spread: too variable to bound' in res.stdout, \
        res.stdout[-3000:]
    reports = Path(os.environ['HPCNET_REPORTS_DIR'])
    assert (reports / 'after-baseline-latest.html').exists()
    res = hpcnet('compare', str(reports / 'baseline-latest.json'),
                 str(reports / 'after-baseline-latest.json'))
    # The baseline's last session (one sample) against three: never a pass,
    # always "not decided", and more samples after cannot make up for it.
    assert res.returncode == 3, res.stdout[-3000:]
    assert 'one-sided 95% bounds of each shift against its tolerance' in res.stdout
    assert 'latency_8B [us]' in res.stdout and ' 1+3 ' in res.stdout, res.stdout[-3000:]
    assert 'fewer than 3 samples before cannot be judged' in res.stdout, res.stdout[-3000:]
    assert 'NOT DECIDED: more samples after would not decide it' in res.stdout
    # Stored sessions are sides too: the baseline is the three sessions the
    # written file's provenance names, not the newer candidate's.
    accepted = data['$provenance']['sessions']
    res = hpcnet('compare', 'baseline', str(reports / 'after-baseline-latest.json'), env=env)
    (before,) = [l for l in res.stdout.splitlines() if l.startswith('before: baseline (sessions ')]
    assert sorted(before.split('(sessions ')[1].rstrip(')').split(', ')) == accepted, before
    # 3 + 3 samples can reach the one-sided 95 % bounds: decided or not by
    # how far the shared host moved the figures, never a usage error.
    assert ' 3+3 ' in res.stdout and res.returncode in (0, 1, 3), res.stdout[-3000:]
    candidate = json.loads((reports / 'baseline-latest.json').read_text())['session_info']['uuid']
    assert candidate not in accepted
    # The accepted baseline's own session compared with it: refused, naming the session.
    res = hpcnet('compare', 'baseline', accepted[-1], '--include-baselines', env=env)
    assert res.returncode == 2 and 'share session(s)' in res.stdout, res.stdout


def test_accept_repeats_until_decided_or_budget(one_env_per_stack, tmp_path):
    '''hpcnet accept: K repeats compared with the system's baseline; what is
    still undecided is run again, only those cases, up to --max-repeats;
    the verdict table, the report with its before/after section, and an
    exit code of the contract (never 0 while a metric is undecided).'''
    refdir = tmp_path / 'refs'
    refdir.mkdir()
    env = {'HPCNET_REFERENCE_DIR': str(refdir)}
    select = ['--system', 'local:shm', '-n', 'hpcnet_p2p.*scale=1_node.*mode=pingpong',
              '-p', f'^{one_env_per_stack[0]}$', '-S', 'time_per_size_ms=2']
    made = hpcnet('baseline', '--sessions', '3', *select, env=env)
    # Not decided (3) only with a metric named too noisy to judge.
    too_noisy = 'too noisy to judge: retake or widen by hand' in made.stdout
    assert made.returncode == (3 if too_noisy else 0), made.stdout[-3000:]
    res = hpcnet('accept', '--repeats', '3', '--max-repeats', '5', *select, env=env)
    out = res.stdout
    assert res.returncode in (0, 1, 3), out[-3000:]
    assert 'hpcnet: baseline: baseline (sessions ' in out, out[-3000:]
    verdict_line = [l for l in out.splitlines() if l.startswith('hpcnet: ') and 'exit code' in l][-1]
    words = {0: 'PASSED', 1: 'FAILED', 3: 'NOT DECIDED'}[res.returncode]
    assert verdict_line.startswith(f'hpcnet: {words}: exit code {res.returncode}'), verdict_line
    summary = [l for l in out.splitlines() if ' regressed, ' in l][-1]
    undecided = int(summary.split(' not decided')[0].rsplit(', ', 1)[-1])
    # Never a pass with a metric undecided; more repeats were run where one was.
    assert (res.returncode == 3) == (undecided > 0 and 'FAILED' not in verdict_line), summary
    if 'more repeats of the cases that hold them' in out:
        assert ' -n /' in out           # only the undecided cases, by hash
        assert ' metrics not decided (' in out and ' of hpcnet_p2p ' in out   # named
    assert 'after:  accept: ' in out and 'repeats in ' in out
    page = Path(os.environ['HPCNET_REPORTS_DIR']) / 'accept-latest.html'
    assert page.exists() and 'Before and after' in page.read_text()


def test_an_option_reframe_rejects_is_a_usage_error(tmp_path):
    # Passed through to ReFrame, which rejects it before anything runs.
    res = hpcnet('run', '--system', 'local', '--no-such-reframe-option',
                 env={'HPCNET_REPORTS_DIR': str(tmp_path)})
    assert res.returncode == 2, res.stdout
    assert 'unrecognized arguments: --no-such-reframe-option' in res.stdout
    assert 'reframe rejected its command line (exit code 2, its message above); nothing ran' \
        in res.stdout


def test_testbed_baseline_and_accept_run_their_sessions_on_the_testbed(monkeypatch):
    """`hpcnet testbed baseline|accept` bring the testbed up, run the
    command of that name with every ReFrame session inside the head node
    (its prefix and environment) and --system testbed, and bring it down."""
    from hpcnet import cli, testbed
    from hpcnet.session import runner
    from hpcnet.commands import baseline as baseline_command
    from hpcnet.commands import testbed as testbed_command

    seen = []

    class FakeTestbed:
        rdma_absent_reason = None

        def head_prefix(self, cwd=None):
            return ['nsenter', '--head']

        def env(self, base=None):
            return {**(base or {}), 'SLURM_CONF': '/tb/slurm.conf'}

        def down(self):
            seen.append('down')

    def fake_run(name, reframe_args, prefix=(), env=None, judged_elsewhere=''):
        seen.append((name, list(reframe_args), runner._launch.prefix,
                     runner._launch.environment({})['SLURM_CONF']))
        return 0

    monkeypatch.setattr(testbed, 'Testbed', FakeTestbed)
    monkeypatch.setattr(testbed_command, 'up_from_options',
                        lambda tb, opts: seen.append(opts.nodes) or {'wire': 'wire-true: ...'})
    monkeypatch.setattr(baseline_command, 'run', lambda args: fake_run(
        'baseline', args.reframe_args) or args.sessions)
    assert cli.main(['testbed', 'baseline', '--nodes', '3', '--sessions', '2', '-n', 'hpcnet_p2p']) == 2
    assert seen == [3, ('baseline', ['--system', 'testbed', '-n', 'hpcnet_p2p'],
                        ('nsenter', '--head'), '/tb/slurm.conf'), 'down']
    assert runner._launch == runner.Launch()


def test_ctrl_c_is_one_line_and_130(monkeypatch, capsys):
    from hpcnet import cli
    from hpcnet.commands import fabrics
    from hpcnet.exitcodes import Exit

    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(fabrics, 'run', interrupted)
    assert cli.main(['fabrics', 'validate']) == Exit.INTERRUPTED == 130
    assert capsys.readouterr().err == 'hpcnet: interrupted: nothing decided\n'
