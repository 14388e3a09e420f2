"""The nightly pipeline templates (ci/pipelines/) as shipped: they run on a
site without Spack, one job at a time, within timeouts; they publish the
reports and the JUnit file whatever the verdict; they fail on 1 and 2 and
show 3 ("not decided") as a warning; a baseline becomes the baseline only
when a person accepts it.  Their judging steps run here under the weakest
shell their CI uses (`bash -e`, no pipefail of its own) with an `hpcnet`
that exits with each code of the contract; actionlint lints the GitHub one
and gitlab-ci-local runs the GitLab one, where those tools are installed."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hpcnet.paths import PROJECT_ROOT
from hpcnet.exitcodes import Exit

PIPELINES = PROJECT_ROOT / 'ci' / 'pipelines'
GITLAB = PIPELINES / 'gitlab-ci.yml'
GITHUB = PIPELINES / 'github-nightly.yml'
#: The commands whose verdict a nightly job must not hide.
JUDGES = ('hpcnet compare', 'hpcnet history')
#: The GitLab jobs of a scheduled night, and those of a baseline made by hand.
NIGHTLY_JOBS = ('preflight', 'suite', 'compare')
BASELINE_JOBS = ('baseline', 'accept-baseline')


def _gitlab() -> dict:
    return yaml.safe_load(GITLAB.read_text())


def _github() -> dict:
    return yaml.safe_load(GITHUB.read_text())


def _gitlab_job(name: str) -> dict:
    '''A GitLab job with what it extends merged in (one level of
    `extends` chains, as the template uses them).'''
    pipeline = _gitlab()
    job = dict(pipeline[name])
    while 'extends' in job:
        job = {**pipeline[job.pop('extends')], **job}
    return job


def _lines(job: dict) -> list:
    return [*job.get('before_script', []), *job.get('script', [])]


def _judging(text: str) -> bool:
    return any(j.replace('hpcnet', '$HPCNET') in text for j in JUDGES)


def _github_steps(job: str = 'nightly') -> list:
    return _github()['jobs'][job]['steps']


def _judging_github_steps() -> list:
    return [s for s in _github_steps() if 'run' in s and _judging(s['run'])]


def _scripts(template: str) -> list:
    if template == 'github':
        return [step['run'] for step in _judging_github_steps()]
    return ['\n'.join(_gitlab_job(name)['script']) for name in NIGHTLY_JOBS
            if any(_judging(line) for line in _gitlab_job(name)['script'])]


def _fake_hpcnet(directory: Path, exits: dict) -> Path:
    '''An hpcnet that prints its arguments and exits with
    ``exits[subcommand]`` (0 for any other).'''
    fake = directory / 'fake-hpcnet'
    cases = ''.join(f'  {command}) exit {int(code)};;\n' for command, code in exits.items())
    fake.write_text(f'#!/bin/sh\necho "hpcnet $*"\ncase "$1" in\n{cases}esac\nexit 0\n')
    fake.chmod(0o755)
    return fake


def _run_step(script: str, tmp_path: Path, exits: dict, **env) -> subprocess.CompletedProcess:
    (tmp_path / 'reports').mkdir(exist_ok=True)
    return subprocess.run(['bash', '-e', '-c', script], cwd=tmp_path, text=True,
                          env={'PATH': '/usr/bin:/bin', 'HPCNET_SYSTEM': 'example',
                               'HPCNET': str(_fake_hpcnet(tmp_path, exits)),
                               'GITHUB_OUTPUT': str(tmp_path / 'github-output'), **env},
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


@pytest.mark.parametrize('template', ['github', 'gitlab'])
@pytest.mark.parametrize('command', ['compare', 'history'])
def test_each_judging_step_exits_with_every_verdict_but_a_pass(template, command, tmp_path):
    scripts = [s for s in _scripts(template) if f'$HPCNET {command}' in s]
    assert scripts, f'no {command} step in the {template} template'
    for script in scripts:
        assert _run_step(script, tmp_path, {command: Exit.OK}).returncode == 0
        for code in (Exit.FAILED, Exit.USAGE, Exit.UNDECIDED):
            assert _run_step(script, tmp_path, {command: code}).returncode == code, \
                f'{template}: the step does not exit {int(code)} when hpcnet {command} does:\n{script}'


def test_gitlab_prints_the_history_verdict_beside_a_failed_comparison(tmp_path):
    (script,) = [s for s in _scripts('gitlab') if '$HPCNET history' in s]
    res = _run_step(script, tmp_path, {'compare': Exit.FAILED, 'history': Exit.UNDECIDED})
    assert res.returncode == Exit.FAILED, res.stdout   # the worse of the two
    assert 'hpcnet history --period' in res.stdout and '--output reports/trend.html' in res.stdout
    assert (tmp_path / 'reports' / 'history.txt').read_text().startswith('hpcnet history')


def test_the_steps_that_run_whatever_the_verdict():
    steps = _github_steps()
    first_judge = min(i for i, s in enumerate(steps) if s.get('id') in ('preflight', 'suite'))
    for step in steps[first_judge:]:
        name = step.get('name') or step.get('uses')
        if step.get('id') in ('preflight', 'suite'):
            assert step.get('continue-on-error') is True, name
        else:
            assert 'always()' in step.get('if', ''), f'github: {name} is skipped after a failure'
    for name in ('compare',):
        assert _gitlab()[name]['rules'][0]['when'] == 'always'
    for name in (*NIGHTLY_JOBS, 'baseline'):
        assert _gitlab_job(name)['artifacts']['when'] == 'always', name


def test_the_reports_the_trend_page_and_junit_are_published():
    (upload,) = [s for s in _github_steps() if s.get('uses', '').startswith('actions/upload-artifact')]
    assert {'reports/*.html', 'reports/*.xml', 'reports/history.txt'} <= set(upload['with']['path'].split())
    (junit,) = [s for s in _github_steps() if 'junit' in s.get('uses', '')]
    assert junit['with']['report_paths'] == 'reports/*-junit.xml'
    for step in _github_steps():
        if '$HPCNET run' in step.get('run', ''):
            assert '--report-junit "$HPCNET_REPORTS_DIR/' in step['run'], step['name']
    assert {'reports/trend.html', 'reports/history.txt'} <= set(_gitlab_job('compare')['artifacts']['paths'])
    for name in ('preflight', 'suite'):
        job = _gitlab_job(name)
        junit = job['artifacts']['reports']['junit']
        assert f'--report-junit $CI_PROJECT_DIR/{junit}' in job['script'][-1], name


def test_not_decided_is_a_warning_and_a_failure_fails():
    for name in NIGHTLY_JOBS:
        assert _gitlab_job(name)['allow_failure'] == {'exit_codes': [Exit.UNDECIDED]}, name
    for name in BASELINE_JOBS:
        assert 'allow_failure' not in _gitlab_job(name), name
    for step in _judging_github_steps():
        assert step['continue-on-error'] is True and step['id'], step['name']


@pytest.mark.parametrize('codes, verdict, annotation', [
    ({'preflight': 0, 'suite': 0, 'compare': 0, 'history': 0}, 0, None),
    ({'preflight': 0, 'suite': 0, 'compare': 3, 'history': 3}, 0, '::warning title=hpcnet compare::'),
    ({'preflight': 0, 'suite': 1, 'compare': 3, 'history': 0}, 1, '::error title=hpcnet suite::exit 1'),
    ({'preflight': 2, 'suite': '', 'compare': 2, 'history': 0}, 1, '::error title=hpcnet suite::did not run'),
])
def test_github_verdict_step(codes, verdict, annotation, tmp_path):
    (step,) = [s for s in _github_steps() if s.get('name', '').startswith('verdict')]
    assert 'always()' in step['if']
    listed = ' '.join(f'{k}=${{{{ steps.{k}.outputs.code }}}}' for k in codes)
    assert ' '.join(step['env']['CODES'].split()) == listed
    res = _run_step(step['run'], tmp_path, {}, CODES=' '.join(f'{k}={v}' for k, v in codes.items()))
    assert res.returncode == verdict, res.stdout
    if annotation:
        assert annotation in res.stdout


def test_jobs_run_one_at_a_time_within_a_timeout():
    groups = {_gitlab_job(name).get('resource_group') for name in (*NIGHTLY_JOBS, *BASELINE_JOBS)}
    assert groups == {'hpcnet-$HPCNET_SYSTEM'}
    for name in (*NIGHTLY_JOBS, *BASELINE_JOBS):
        assert _gitlab_job(name).get('timeout'), f'gitlab: {name} has no timeout'
    workflow = _github()
    assert workflow['concurrency']['cancel-in-progress'] is False and workflow['concurrency']['group']
    for name, job in workflow['jobs'].items():
        assert job.get('timeout-minutes'), f'github: {name} has no timeout-minutes'


def test_no_spack_is_needed_unless_named(tmp_path):
    assert 'HPCNET_SPACK_ENV' not in _gitlab()['variables']
    assert _github()['env']['HPCNET_SPACK_ENV'] == '${{ vars.HPCNET_SPACK_ENV }}'
    for job in ('nightly', 'baseline'):
        (spack,) = [s for s in _github_steps(job) if 'spack ' in s.get('run', '')]
        assert spack['if'] == "${{ vars.HPCNET_SPACK_ENV != '' }}", job
    before = '\n'.join(_gitlab_job('suite')['before_script'])
    res = _run_step(before, tmp_path, {}, HPCNET_SETUP='true')
    assert res.returncode == 0 and 'hpcnet stacks --refresh --system example' in res.stdout, res.stdout
    res = _run_step(before, tmp_path, {}, HPCNET_SETUP='true', HPCNET_SPACK_ENV='/site/spack-env')
    assert res.returncode == Exit.USAGE and 'spack is not on PATH' in res.stdout, res.stdout


def test_a_baseline_is_a_candidate_until_a_person_accepts_it(tmp_path):
    for name in BASELINE_JOBS:
        (rule,) = _gitlab()[name]['rules']
        assert '!= "schedule"' in rule['if'] and '$HPCNET_BASELINE == "yes"' in rule['if']
    accept = _gitlab()['accept-baseline']
    assert accept['rules'][0]['when'] == 'manual' and accept['needs'] == ['baseline']
    refdir = tmp_path / 'refs'
    refdir.mkdir()
    (refdir / 'example.yaml').write_text('accepted: 1\n')
    script = '\n'.join(_gitlab_job('baseline')['script'])
    res = _run_step(script, tmp_path, {}, HPCNET_REFERENCE_DIR=str(refdir))
    assert res.returncode == 0, res.stdout
    assert ('hpcnet baseline --sessions 5 --write -o reports/baseline/example.yaml --system example'
            in res.stdout)
    assert (tmp_path / 'reports' / 'baseline' / 'example.yaml').read_text() == 'accepted: 1\n'
    assert (refdir / 'example.yaml').read_text() == 'accepted: 1\n'
    jobs = _github()['jobs']
    assert jobs['baseline']['if'] == "${{ inputs.action == 'baseline' }}"
    assert jobs['accept']['if'] == "${{ inputs.action == 'accept' }}"
    (candidate,) = [s for s in _github_steps('baseline') if '$HPCNET baseline' in s.get('run', '')]
    res = _run_step(candidate['run'], tmp_path, {}, HPCNET_REFERENCE_DIR=str(refdir),
                    GITHUB_STEP_SUMMARY=str(tmp_path / 'summary'), GITHUB_RUN_ID='42')
    assert res.returncode == 0, res.stdout
    assert (refdir / 'example.yaml').read_text() == 'accepted: 1\n'
    assert 'action=accept and baseline_run=42' in (tmp_path / 'summary').read_text()


def _tool(name: str) -> str | None:
    '''``name`` from the venv running the tests, else from PATH.'''
    return shutil.which(name, path=os.pathsep.join([str(Path(sys.executable).parent),
                                                    os.environ.get('PATH', '')]))


def test_actionlint_finds_nothing():
    actionlint = _tool('actionlint')
    if actionlint is None:
        pytest.skip('actionlint is not installed (make ci-tools)')
    res = subprocess.run([actionlint, '-config-file', str(PIPELINES / 'actionlint.yaml'),
                          str(GITHUB)], text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert res.returncode == 0, res.stdout


def _gitlab_ci_local(repo: Path, **variables) -> str:
    args = [a for k, v in variables.items() for a in ('--variable', f'{k}={v}')]
    res = subprocess.run([_tool('gitlab-ci-local'), '--ignore-predefined-vars', 'CI_PIPELINE_SOURCE',
                          '--variable', 'CI_PIPELINE_SOURCE=schedule', *args], cwd=repo, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    return res.stdout


def job_results(output: str, jobs: tuple = NIGHTLY_JOBS) -> dict:
    '''job -> PASS, WARN or FAIL from gitlab-ci-local's closing lines.'''
    results = {}
    for line in output.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] in ('PASS', 'WARN', 'FAIL') and words[1] in jobs:
            results[words[1]] = words[0]
    return results


def job_failure_lines(output: str, job: str) -> str:
    '''The lines a job printed that say what failed (gitlab-ci-local
    prefixes each with the job's name), first in an assertion's message: the
    output's tail is another job's.'''
    said = [line for line in output.splitlines()
            if line.split(maxsplit=1)[:1] == [job] and re.search(r'error|FAIL|NOT DECIDED', line)]
    return '\n'.join(said[-40:])


def site_repo(tmp_path: Path) -> Path:
    '''A site's repository holding the GitLab template as its .gitlab-ci.yml.'''
    repo = tmp_path / 'site'
    repo.mkdir()
    shutil.copyfile(GITLAB, repo / '.gitlab-ci.yml')
    env = {**os.environ, 'GIT_AUTHOR_NAME': 't', 'GIT_AUTHOR_EMAIL': 't@example.org',
           'GIT_COMMITTER_NAME': 't', 'GIT_COMMITTER_EMAIL': 't@example.org'}
    for cmd in (['git', 'init', '-q'], ['git', 'remote', 'add', 'origin',
                                        'https://gitlab.example.org/site/hpcnet.git'],
                ['git', 'add', '-A'], ['git', 'commit', '-qm', 'site']):
        subprocess.run(cmd, cwd=repo, env=env, check=True)
    return repo


def test_gitlab_ci_local_runs_a_night(tmp_path):
    '''The template's scheduled pipeline under gitlab-ci-local (shell
    executor), with HPCNET a stand-in that exits as told: a night that
    passes, one not decided (a warning), one whose suite failed (the
    comparison still runs).'''
    missing = [t for t in ('gitlab-ci-local', 'rsync', 'git') if _tool(t) is None]
    if missing:
        pytest.skip(f'{", ".join(missing)} not installed (make ci-tools)')
    repo = site_repo(tmp_path)
    # Exits with $STUB_EXIT_<command>, for run $STUB_EXIT_run_<report name>.
    stub = repo / 'stub-hpcnet'
    stub.write_text('#!/bin/sh\necho "hpcnet $*"\nkey=$1; [ "$1" = run ] && key=run_$3\n'
                    'exit "$(eval echo "\\${STUB_EXIT_$key:-0}")"\n')
    stub.chmod(0o755)
    stubs = {'HPCNET': str(stub), 'HPCNET_SETUP': 'true'}
    assert job_results(_gitlab_ci_local(repo, **stubs)) == dict.fromkeys(NIGHTLY_JOBS, 'PASS')
    assert job_results(_gitlab_ci_local(repo, **stubs, STUB_EXIT_history=3)) == \
        {'preflight': 'PASS', 'suite': 'PASS', 'compare': 'WARN'}
    output = _gitlab_ci_local(repo, **stubs, STUB_EXIT_run_nightly=1)
    assert job_results(output) == {'preflight': 'PASS', 'suite': 'FAIL', 'compare': 'PASS'}, output
