"""Output fit for a log file (issue 33): ReFrame's console without colour
where hpcnet's standard output is no terminal, the cases skipped for one
reason on one line with their count, and the long phases said on stderr."""
import io
import os
import subprocess
import sys
from pathlib import Path

from conftest import env_regex

from hpcnet import reframeoutput
from hpcnet.reframeoutput import ANSI_COLOUR, COLORIZE_ENV, SkipGroups, pass_on

HPCNET = Path(sys.executable).with_name('hpcnet')
RECORDED = Path(__file__).parent / 'data' / 'reframe-output' / 'dry-run.local.colour.txt'
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
