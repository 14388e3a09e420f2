"""The nightly pipeline templates (ci/pipelines/) fail when a verdict is
not a pass: their compare and history steps run here, under the weakest
shell their CI uses (`bash -e`, no pipefail of its own), with an `hpcnet`
that exits with each code of the contract; and the history verdict is
printed beside the comparison even when the comparison failed."""
import subprocess
from pathlib import Path

import pytest
import yaml

from hpcnet.constants import PROJECT_ROOT
from hpcnet.exitcodes import Exit

PIPELINES = PROJECT_ROOT / 'ci' / 'pipelines'
#: The commands whose verdict a nightly job must not hide.
JUDGES = ('hpcnet compare', 'hpcnet history')


def _github_steps() -> list:
    workflow = yaml.safe_load((PIPELINES / 'github-nightly.yml').read_text())
    return [step for job in workflow['jobs'].values() for step in job['steps']
            if 'run' in step and any(j in step['run'] for j in JUDGES)]


def _gitlab_jobs() -> list:
    pipeline = yaml.safe_load((PIPELINES / 'gitlab-ci.yml').read_text())
    return [job for job in pipeline.values()
            if isinstance(job, dict) and any(j in line for line in job.get('script', [])
                                             for j in JUDGES)]


def _scripts(template: str) -> list:
    if template == 'github':
        return [step['run'] for step in _github_steps()]
    return ['\n'.join(job['script']) for job in _gitlab_jobs()]


def _run_step(script: str, tmp_path: Path, exits: dict) -> subprocess.CompletedProcess:
    '''``script`` with an hpcnet that prints its arguments and exits with
    ``exits[subcommand]`` (0 for any other).'''
    fake = tmp_path / '.venv' / 'bin' / 'hpcnet'
    fake.parent.mkdir(parents=True, exist_ok=True)
    cases = ''.join(f'  {command}) exit {int(code)};;\n' for command, code in exits.items())
    fake.write_text(f'#!/bin/sh\necho "hpcnet $*"\ncase "$1" in\n{cases}esac\nexit 0\n')
    fake.chmod(0o755)
    (tmp_path / 'reports').mkdir(exist_ok=True)
    return subprocess.run(['bash', '-e', '-c', script], cwd=tmp_path, text=True,
                          env={'PATH': '/usr/bin:/bin', 'HPCNET_SYSTEM': 'example'},
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


@pytest.mark.parametrize('template', ['github', 'gitlab'])
@pytest.mark.parametrize('command', ['compare', 'history'])
def test_each_judging_step_fails_on_every_verdict_but_a_pass(template, command, tmp_path):
    scripts = [s for s in _scripts(template) if f'hpcnet {command}' in s]
    assert scripts, f'no {command} step in the {template} template'
    for script in scripts:
        assert _run_step(script, tmp_path, {command: Exit.OK}).returncode == 0
        for code in (Exit.FAILED, Exit.USAGE, Exit.UNDECIDED):
            assert _run_step(script, tmp_path, {command: code}).returncode != 0, \
                f'{template}: the step passes when hpcnet {command} exits {int(code)}:\n{script}'


def test_github_judges_history_even_when_the_comparison_failed():
    (history,) = [s for s in _github_steps() if 'hpcnet history' in s['run']]
    assert 'always()' in history['if'], history
    assert '--html reports/trend.html' in history['run']


def test_gitlab_prints_the_history_verdict_beside_a_failed_comparison(tmp_path):
    (script,) = [s for s in _scripts('gitlab') if 'hpcnet history' in s]
    res = _run_step(script, tmp_path, {'compare': Exit.FAILED, 'history': Exit.OK})
    assert res.returncode != 0, res.stdout
    assert 'hpcnet history --period' in res.stdout and '--html reports/trend.html' in res.stdout
    assert (tmp_path / 'reports' / 'history.txt').read_text().startswith('hpcnet history')


def test_the_trend_page_and_the_history_verdict_are_published():
    workflow = yaml.safe_load((PIPELINES / 'github-nightly.yml').read_text())
    (upload,) = [step for job in workflow['jobs'].values() for step in job['steps']
                 if step.get('uses', '').startswith('actions/upload-artifact')]
    assert {'reports/*.html', 'reports/history.txt'} <= set(upload['with']['path'].split())
    (job,) = [j for j in _gitlab_jobs() if any('hpcnet history' in line for line in j['script'])]
    assert {'reports/trend.html', 'reports/history.txt'} <= set(job['artifacts']['paths'])
