"""Output fit for a log file (issue 33): ReFrame's console without colour
where hpcnet's standard output is no terminal, the cases skipped for one
reason on one line with their count, and the long phases said on stderr."""
import io
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import env_regex
from test_stacks import CC, make_fake_mpi

from hpcnet.longwork import progress
from hpcnet.session import reframeoutput
from hpcnet.longwork.progress import phase
from hpcnet.session.reframeoutput import ANSI_COLOUR, COLORIZE_ENV, SkipGroups, pass_on
from hpcnet.stacks import lmod, modulecache
from hpcnet.variables import MODULEPATH_ENV

HPCNET = Path(sys.executable).with_name('hpcnet')
RECORDED = Path(__file__).parent / 'data' / 'reframe-output' / 'dry-run.local.colour.txt'
LOCAL_RUN = Path(__file__).parent / 'data' / 'reports' / 'local-run.json'
PAIRS_ON = 'the pair matrix needs at least 2 nodes; local:{} runs it on 1 (ranks of one node ' \
           'measure the node, not a link)'


def _passed_on(text: str) -> list:
    out = io.StringIO()
    pass_on(io.StringIO(text), out.write)
    return out.getvalue().splitlines()


def test_recorded_skips_are_one_line_per_reason_with_count_and_cases():
    '''The recorded dry run's 11 SKIP lines (5 + 5 + 1 cases, three
    reasons): each reason once, its count, its cases on one line per check
    and partition, before the line that ends the cases.'''
    recorded = RECORDED.read_text()
    assert sum('SKIP' in l for l in recorded.splitlines()) == 11
    lines = _passed_on(recorded)
    plain = [ANSI_COLOUR.sub('', l) for l in lines]
    skips = [l for l in plain if 'SKIP' in l]
    assert skips == [f'[     SKIP ] 5 cases: {PAIRS_ON.format("shm")}',
                     f'[     SKIP ] 5 cases: {PAIRS_ON.format("tcp")}',
                     '[     SKIP ] 1 case: shared memory has no link to check']
    first = plain.index(skips[0])
    envs = '{gcc12-openmpi4,gcc12-mpich4,gcc12-openmpi5,gcc12-mpich5,gcc12-impi2021}'
    assert plain[first + 1] == f'             hpcnet_pairs %scale=1_node /7dad7175 @local:shm+{envs}'
    assert plain[first + 3] == f'             hpcnet_pairs %scale=1_node /7dad7175 @local:tcp+{envs}'
    assert plain[first + 5] == '             hpcnet_preflight %scale=1_node /b3685687 @local:shm+builtin'
    assert plain[first + 6] == reframeoutput.CASES_FINISHED
    # Every other line passes unchanged, in its order.
    others = [l for l in recorded.splitlines() if 'SKIP' not in ANSI_COLOUR.sub('', l)]
    assert [l for l in lines if l not in skips and not l.startswith(reframeoutput.INDENT)] == others


def test_skips_without_the_closing_line_are_told_at_the_end():
    '''ReFrame stopped before its last case (an error, Ctrl-C): what was
    held back is still told.'''
    skipped = [l for l in RECORDED.read_text().splitlines() if 'SKIP' in l][-1]
    assert _passed_on(f'{skipped}\n[     FAIL ] (2/2) other\n') == [
        '[     FAIL ] (2/2) other', '[     SKIP ] 1 case: shared memory has no link to check',
        '             hpcnet_preflight %scale=1_node /b3685687 @local:shm+builtin']
    assert SkipGroups().close() == []


def test_colour_is_off_for_a_log_file_unless_the_user_set_it():
    assert reframeoutput.reframe_environment({}, to_terminal=False)[COLORIZE_ENV] == 'false'
    assert COLORIZE_ENV not in reframeoutput.reframe_environment({}, to_terminal=True)
    kept = reframeoutput.reframe_environment({COLORIZE_ENV: 'y'}, to_terminal=False)
    assert kept[COLORIZE_ENV] == 'y'


def test_hpcnet_run_to_a_pipe_has_no_colour_and_groups_skips(own_history, one_env_per_stack):
    '''A real `hpcnet run --dry-run` (ReFrame colours DRY, OK and SKIP on a
    terminal) with stdout to a pipe: no escape character, and the pair
    matrix skipped on one node once per partition, with every environment.'''
    env = {k: v for k, v in os.environ.items() if k != COLORIZE_ENV}
    res = subprocess.run([str(HPCNET), 'run', '--report-name', 'test-log-output', '--dry-run',
                          '--system', 'local', '-n', '^(hpcnet_pairs|hpcnet_preflight)',
                          '-p', env_regex(one_env_per_stack + ['builtin'])],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert '\x1b' not in res.stdout, [l for l in res.stdout.splitlines() if '\x1b' in l][:3]
    assert '[       OK ] ' in res.stdout            # ReFrame's statuses are there, plain
    count = len(one_env_per_stack)
    cases = f'{count} case' + ('s' if count > 1 else '')
    for partition in ('shm', 'tcp'):
        assert res.stdout.count(PAIRS_ON.format(partition)) == 1, res.stdout[-3000:]
        assert f'[     SKIP ] {cases}: {PAIRS_ON.format(partition)}' in res.stdout


@pytest.fixture
def said_at_once(monkeypatch):
    '''Every phase said from its start (SAY_AFTER_S 0), so that a test sees
    the lines without waiting.'''
    monkeypatch.setattr(progress, 'SAY_AFTER_S', 0)


def test_a_phase_is_two_lines_on_stderr(said_at_once, capsys):
    with phase('reading things') as done:
        done.outcome = '3 things'
    with pytest.raises(KeyError):
        with phase('reading more'):
            raise KeyError('x')
    out, err = capsys.readouterr()
    assert out == ''
    lines = err.splitlines()
    assert lines[0] == 'hpcnet: reading things ...'
    assert re.fullmatch(r'hpcnet: reading things: 3 things \(\d+ s\)', lines[1]), lines
    assert lines[2] == 'hpcnet: reading more ...'
    assert re.fullmatch(r'hpcnet: reading more: stopped \(\d+ s\)', lines[3]), lines


def test_a_phase_is_said_once_it_has_run_a_while_and_never_when_over_sooner(monkeypatch):
    said, started = [], threading.Event()
    monkeypatch.setattr(progress, 'progress_line', lambda m: said.append(m) or started.set())
    monkeypatch.setattr(progress, 'SAY_AFTER_S', 3600)
    with phase('quick') as done:
        done.outcome = 'done'
    assert said == []
    monkeypatch.setattr(progress, 'SAY_AFTER_S', 0.01)
    with phase('slow') as done:
        assert started.wait(60)        # the start line came while the phase ran
        done.outcome = 'done'
    assert said[0] == 'slow ...' and said[1].startswith('slow: done (') and len(said) == 2


@pytest.mark.skipif(lmod.lmod_command() is None, reason='Lmod is not installed')
@pytest.mark.skipif(CC is None, reason='no C compiler (cc/gcc) on PATH')
def test_the_module_survey_and_the_tree_check_are_said_on_stderr(tmp_path, monkeypatch, capsys,
                                                                said_at_once):
    '''Every configuration load walks the module tree, and a changed tree is
    surveyed again (each MPI module loaded): both said on stderr, nothing on
    stdout (it may be a listing that is parsed).'''
    prefix = make_fake_mpi(tmp_path / 'mpi', 'openmpi', 'openmpi')
    tree = tmp_path / 'modules'
    (tree / 'OpenMPI').mkdir(parents=True)
    (tree / 'OpenMPI' / '9.0.lua').write_text(f'prepend_path("PATH", "{prefix}/bin")\n')
    monkeypatch.delenv('MODULEPATH', raising=False)
    monkeypatch.setenv(MODULEPATH_ENV, str(tree))
    modulecache.module_candidates(tmp_path)
    out, err = capsys.readouterr()
    assert out == ''
    assert 'hpcnet: surveying the modules under 1 MODULEPATH director(ies), loading each MPI ' \
           'module ...' in err.splitlines()
    assert 'loading each MPI module: 1 MPI module(s) kept, 0 left out (' in err, err
    assert f'for the next configuration load: kept in {tmp_path / modulecache.CACHE_FILE} (' in err
    modulecache.module_candidates(tmp_path)
    out, err = capsys.readouterr()
    assert out == ''
    assert re.fullmatch(r'hpcnet: checking the modulefiles under 1 director\(ies\) against the '
                        r'last module survey \.\.\.\n'
                        r'hpcnet: checking the modulefiles under 1 director\(ies\) against the '
                        r'last module survey: unchanged \(\d+ s\)\n', err), err


def test_compare_says_its_loading_on_stderr_and_answers_on_stdout(tmp_path, said_at_once,
                                                                 capsys):
    '''`hpcnet compare` of two recorded reports: the loading on stderr, the
    comparison on stdout, no escape character in either.'''
    from hpcnet import cli
    before = tmp_path / 'before.json'
    data = json.loads(LOCAL_RUN.read_text())
    before.write_text(json.dumps(data))
    data['session_info']['uuid'] = 'another-session'
    after = tmp_path / 'after.json'
    after.write_text(json.dumps(data))
    code = cli.main(['compare', str(before), str(after)])
    out, err = capsys.readouterr()
    # The recorded run holds a repeat that failed its sanity: after, it fails its case.
    assert code == 1 and 'FAILED: repeat 1 of 1 of session another-session (after)' in out, \
        out[-2000:] + err[-2000:]
    assert f'hpcnet: loading the sessions of {before} and {after} ...' in err.splitlines()
    assert f'hpcnet: loading the sessions of {before} and {after}: 1 and 1 session(s) (' \
        in err, err
    assert 'loading the sessions' not in out
    assert out.startswith(f'before: {before} (sessions ')
    assert '\x1b' not in out + err
