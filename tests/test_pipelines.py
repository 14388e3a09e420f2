"""The nightly pipeline templates (ci/pipelines/) fail when the verdict is
not a pass: their compare steps run here, under the weakest shell their CI
uses (`bash -e`, no pipefail of its own), with an `hpcnet` that exits with
each code of the contract."""
import subprocess
from pathlib import Path

import pytest
import yaml

from hpcnet.constants import PROJECT_ROOT
from hpcnet.exitcodes import Exit

PIPELINES = PROJECT_ROOT / 'ci' / 'pipelines'


def _github_steps() -> list:
    workflow = yaml.safe_load((PIPELINES / 'github-nightly.yml').read_text())
    return [step['run'] for job in workflow['jobs'].values() for step in job['steps']
            if 'run' in step and 'hpcnet compare' in step['run']]


def _gitlab_steps() -> list:
    pipeline = yaml.safe_load((PIPELINES / 'gitlab-ci.yml').read_text())
    return ['\n'.join(job['script']) for job in pipeline.values()
            if isinstance(job, dict) and any('hpcnet compare' in line for line in job.get('script', []))]


def _run_step(script: str, tmp_path: Path, hpcnet_exit: int) -> int:
    fake = tmp_path / '.venv' / 'bin' / 'hpcnet'
    fake.parent.mkdir(parents=True, exist_ok=True)
    fake.write_text(f'#!/bin/sh\necho "hpcnet $*"\nexit {hpcnet_exit}\n')
    fake.chmod(0o755)
    (tmp_path / 'reports').mkdir(exist_ok=True)
    return subprocess.run(['bash', '-e', '-c', script], cwd=tmp_path, text=True,
                          env={'PATH': '/usr/bin:/bin', 'HPCNET_SYSTEM': 'example'},
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT).returncode


@pytest.mark.parametrize('template', ['github', 'gitlab'])
def test_the_compare_step_fails_on_every_verdict_but_a_pass(template, tmp_path):
    steps = _github_steps() if template == 'github' else _gitlab_steps()
    assert steps, f'no compare step in the {template} template'
    for script in steps:
        assert _run_step(script, tmp_path, Exit.OK) == 0
        for code in (Exit.FAILED, Exit.USAGE, Exit.UNDECIDED):
            assert _run_step(script, tmp_path, code) != 0, \
                f'{template}: the step passes when hpcnet compare exits {int(code)}:\n{script}'
