"""Fixtures shared by the tests that run ReFrame for real."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpcnet import stacks
from hpcnet.constants import CONFIG_DIR

REFRAME = Path(sys.executable).with_name('reframe')


@pytest.fixture(scope='session')
def one_env_per_stack():
    '''One environment per MPI found (its first compiler, gcc first), e.g.
    gcc12-openmpi4, gcc12-mpich5, gcc12-impi2021.'''
    found = stacks.discover()
    chosen = {}
    for env in found.environments:
        chosen.setdefault(env.mpi.label, env.name)
    if not chosen:
        pytest.skip('no working MPI found (install openmpi-bin/mpich, or run `make stacks`); '
                    f'left out: {found.rejected}')
    return sorted(chosen.values())


def env_regex(names):
    return '^(' + '|'.join(names) + ')$'


def run_reframe(tmp_path, *args, env=None, prefix=(), timeout=900, system='local'):
    '''Run ReFrame for real; return (completed process, test cases of the report).'''
    report = tmp_path / 'report.json'
    cmd = [*prefix, str(REFRAME), '-C', str(CONFIG_DIR / 'settings.py'), '-r',
           '--exec-policy', 'serial', '--prefix', str(tmp_path / 'out'),
           '--report-file', str(report), '--system', system, *args]
    proc = subprocess.run(cmd, env={**os.environ, **(env or {})}, text=True, timeout=timeout,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    cases = []
    if report.exists():
        cases = [tc for run in json.loads(report.read_text())['runs'] for tc in run['testcases']]
    return proc, cases


def perf(case):
    '''{perf variable: value} of a report test case.'''
    return {k.split(':')[-1]: v[0] for k, v in case['perfvalues'].items()}
