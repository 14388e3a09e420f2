"""Fixtures shared by the tests that run ReFrame for real."""
import contextlib
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
    chosen = [env.name for env in found.environments if env.primary]
    if not chosen:
        pytest.skip('no working MPI found (install openmpi-bin/mpich, or run `make stacks`); '
                    f'left out: {found.rejected}')
    return sorted(chosen)


def env_regex(names):
    return '^(' + '|'.join(names) + ')$'


def run_reframe(tmp_path, *args, env=None, prefix=(), timeout=900, system='local', retries=1):
    '''Run ReFrame for real; return (completed process, final result of each
    test case).  One retry by default, as `make run` does: Debian MPICH 4.0.2
    intermittently hangs in MPI_Finalize (reported as such by the kernels).'''
    report = tmp_path / 'report.json'
    cmd = [*prefix, str(REFRAME), '-C', str(CONFIG_DIR / 'settings.py'), '-r',
           '--exec-policy', 'serial', '--max-retries', str(retries),
           '--prefix', str(tmp_path / 'out'),
           '--report-file', str(report), '--system', system, *args]
    proc = subprocess.run(cmd, env={**os.environ, **(env or {})}, text=True, timeout=timeout,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    final = {}
    if report.exists():
        # With --max-retries, later runs hold the retried cases: keep the last
        # result of each case (every attempt stays in the report).
        for run in json.loads(report.read_text())['runs']:
            for tc in run['testcases']:
                final[(tc['name'], tc['system'], tc['partition'], tc['environ'])] = tc
    return proc, list(final.values())


def perf(case):
    '''{perf variable: value} of a report test case.'''
    return {k.split(':')[-1]: v[0] for k, v in case['perfvalues'].items()}


#: Marker the checks put on a failure caused by a stack's known defect
#: (hpcnet.stacks.KNOWN_ISSUES), e.g. Debian MPICH 4.0.2 hanging in MPI_Finalize.
KNOWN_ISSUE = '[known issue: '
#: How many cases of one session a known defect may fail, even after the retry.
KNOWN_ISSUE_BUDGET = 2


def unexplained_failures(cases, ok=('pass', 'xfail', 'skip')):
    '''Failed cases, except those a stack's known defect explains (at most
    KNOWN_ISSUE_BUDGET of them; more is a failure of its own).'''
    failed = [(c['name'], c['partition'], c['environ'], c.get('fail_reason') or '')
              for c in cases if c['result'] not in ok and not c.get('fixture')]
    known = [f for f in failed if KNOWN_ISSUE in f[3]]
    if len(known) > KNOWN_ISSUE_BUDGET:
        return failed
    return [f for f in failed if KNOWN_ISSUE not in f[3]]


@contextlib.contextmanager
def running_testbed(name: str, rate: str = '1gbit'):
    '''A 2-node testbed named ``name`` (never a developer's 'hpcnet' one),
    torn down whatever happens.'''
    from hpcnet import testbed as tbm
    t = tbm.Testbed(name=name)
    t.down()         # leftovers of an interrupted earlier run, if any
    t.up(nodes=2, rate=rate, burst='128kb')
    try:
        yield t
    finally:
        t.down()
