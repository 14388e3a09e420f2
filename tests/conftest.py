"""Fixtures shared by the tests that run ReFrame for real."""
import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hpcnet import fabrictable, stacks
from hpcnet.stacks import lmod
from hpcnet.testbed import moduletree
from hpcnet.paths import WORK_DIR
from hpcnet.variables import (MODULEPATH_ENV, REPORTS_DIR_ENV, STATE_DIR_ENV, SYSTEMS_DIRS_ENV,
                              TESTBED_NODES_ENV, TESTBED_RATE_ENV, TESTBED_RDMA_ENV,
                              TESTBED_TOPOLOGY_ENV)
from hpcnet.model import Partition, Stack
from hpcnet.constants import CONFIG_DIR

REFRAME = Path(sys.executable).with_name('reframe')


#: Skips this machine kind legitimately has; in CI (CI=true) any other skip
#: fails the session, so a missing dependency cannot pass as a skip.
ALLOWED_SKIPS = (
    # The kernel has no RDMA driver (no rdma_rxe): RoCE/IB cannot run here.
    r'.*/sys/class/infiniband.*',
    r'.*no RDMA device.*',
    # Not available from Debian or PyPI here (see README, "Stacks"): NVHPC,
    # MVAPICH2, the OSU Micro-Benchmarks; runs that need them say so.
    r'.*(NVHPC|nvc|MVAPICH2|mvapich2|osu_\w+|OSU Micro-Benchmarks).*',
    # Spack is not installed in CI (its recipes are checked with the lock files).
    r'.*spack.*',
)


_SKIPS = []


def pytest_runtest_logreport(report):
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _SKIPS.append((report.nodeid, reason))


def _unexpected_skips():
    return [(nodeid, reason) for nodeid, reason in _SKIPS
            if not any(re.fullmatch(p, reason, re.S) for p in ALLOWED_SKIPS)]


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    if os.environ.get('CI') and _unexpected_skips() and exitstatus == 0:
        session.exitstatus = 1


#: Rows (fault, verdict, reason) the fault-matrix tests record; printed at the
#: end of the session, whatever pytest captured.
FAULT_MATRIX = []


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if FAULT_MATRIX:
        terminalreporter.section('fault matrix: fault -> verdict -> reason')
        width = max(len(fault) for fault, _, _ in FAULT_MATRIX)
        for fault, verdict, reason in FAULT_MATRIX:
            # The stage directory says nothing about the cause: keep its file name.
            reason = re.sub(r'\S*/(rfm_\w+\.(?:out|err|sh))', r'\1', ' '.join(reason.split()))
            terminalreporter.write_line(f'{fault:{width}}  {verdict:8}  {reason[:200]}')
    unexpected = _unexpected_skips()
    if unexpected:
        terminalreporter.section('skips not on the allowed list (tests/conftest.py ALLOWED_SKIPS)'
                                 + (': they fail the session in CI' if os.environ.get('CI') else ''))
        for nodeid, reason in unexpected:
            terminalreporter.write_line(f'{nodeid}: {reason}')


@pytest.fixture(scope='session', autouse=True)
def own_history(tmp_path_factory):
    '''Test sessions (fake references, shaped links, injected faults) never
    land in the user's results database or perflogs, which
    `--performance-compare` and baselines read: ReFrame's own variables point
    every session the tests start elsewhere.'''
    history = tmp_path_factory.mktemp('history')
    saved = {k: os.environ.get(k) for k in ('RFM_SQLITE_DB_FILE', 'RFM_PERFLOG_DIR',
                                            'HPCNET_REPORTS_DIR')}
    os.environ['RFM_SQLITE_DB_FILE'] = str(history / 'results.db')
    os.environ['RFM_PERFLOG_DIR'] = str(history / 'perflogs')
    os.environ['HPCNET_REPORTS_DIR'] = str(history / 'reports')
    yield history
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


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


def fabric_settings(fabric, profile, family, launcher, extras):
    '''The fabric table's settings for MPI ``profile`` (of ``family``) on a
    partition with ``extras`` (its fabric set to ``fabric``).'''
    partition = Partition.from_extras('test:part', {**extras, 'fabric': fabric})
    stack = Stack(environ='test-env', mpi_family=family, mpi_profile=profile, mpi_version='0')
    return fabrictable.settings(partition, stack, launcher)


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


def values(case):
    '''Every value a case recorded: asserted and not asserted.'''
    from hpcnet.acceptance.references.casevalues import recorded_values
    return {var: value for var, value, _, _ in recorded_values(case)}


#: Marker the checks put on a failure caused by a stack's known defect
#: (its family's known_issues in hpcnet.mpi), e.g. Debian MPICH 4.0.2 hanging in MPI_Finalize.
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
def running_testbed(name: str):
    '''A testbed named ``name`` (never a developer's 'hpcnet' one) as
    `hpcnet testbed up` makes it by default, torn down whatever happens.'''
    from hpcnet import testbed as tbm
    t = tbm.Testbed(name=name)
    t.down()         # leftovers of an interrupted earlier run, if any
    t.up()
    try:
        yield t
    finally:
        t.down()


def hpcnet_on_head_node(tb, scratch: Path, modulepath: Path):
    '''``hpcnet(*args, systems_dir=None, timeout=600)``: hpcnet run on the
    testbed ``tb``'s head node as on a site's own cluster: site files in
    ``scratch``/systems (``systems_dir`` instead), state and reports in
    ``scratch``, the MPIs from the module tree at ``modulepath``, and none of
    what config/systems/testbed.py reads.  ``hpcnet.env`` is its environment.'''
    variables = {SYSTEMS_DIRS_ENV: str(scratch / 'systems'), MODULEPATH_ENV: str(modulepath),
                 'MODULEPATH': '', STATE_DIR_ENV: str(scratch / 'state'),
                 REPORTS_DIR_ENV: str(scratch / 'reports')}
    env = tb.env({**os.environ, **variables})
    for testbed_only in (TESTBED_NODES_ENV, TESTBED_RATE_ENV, TESTBED_RDMA_ENV,
                         TESTBED_TOPOLOGY_ENV):
        env.pop(testbed_only, None)

    def hpcnet(*args, systems_dir=None, timeout=600):
        run_env = {**env, SYSTEMS_DIRS_ENV: str(systems_dir)} if systems_dir else env
        return subprocess.run([*tb.head_prefix(cwd=str(WORK_DIR)), sys.executable, '-m',
                               'hpcnet.cli', *args], env=run_env, text=True, timeout=timeout,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    hpcnet.env = env
    return hpcnet


# --------------------------------------------------------------------------
# An EasyBuild-made Lmod tree of this machine's MPIs (tests/test_modules.py,
# and the testbed's run through modules in tests/test_testbed_suite.py)
# --------------------------------------------------------------------------

@pytest.fixture(scope='session')
def easybuild_tree(tmp_path_factory):
    if lmod.lmod_command() is None:
        pytest.skip('Lmod is not installed (Debian package lmod; LMOD_CMD unset)')
    tree = moduletree.build_tree(tmp_path_factory.mktemp('easybuild'))
    print(f'EasyBuild made {len(tree.easyconfigs)} modules in {tree.seconds:.1f} s: '
          f'{tree.modulepath}')
    return tree


@pytest.fixture(scope='session')
def hierarchical_tree(tmp_path_factory):
    if lmod.lmod_command() is None:
        pytest.skip('Lmod is not installed (Debian package lmod; LMOD_CMD unset)')
    if not os.path.exists('/usr/bin/mpicc.openmpi'):
        pytest.fail('Debian Open MPI is not installed (openmpi-bin libopenmpi-dev: make deps)')
    # GCC/system (SystemCompilerGCC) in Core; Debian's Open MPI (SystemMPI)
    # and MPICH under Compiler/GCC/system: offline, nothing is downloaded.
    return moduletree.build_tree(tmp_path_factory.mktemp('easybuild-hmns'), prefixes=False,
                                 hierarchical=True)


@pytest.fixture(scope='session')
def module_discovery(easybuild_tree, tmp_path_factory):
    '''(variables a ReFrame run needs, the discovery it makes): the tree on
    HPCNET_MODULEPATH (not on MODULEPATH), a state directory of its own that
    the run shares (its cache: the configuration loads without probing).'''
    return discovery_of_tree(easybuild_tree, tmp_path_factory.mktemp('module-state'))


def discovery_of_tree(tree, state):
    '''(variables a ReFrame run needs, the discovery it makes) of a module
    tree (moduletree.ModuleTree): on HPCNET_MODULEPATH, not on MODULEPATH,
    with state directory ``state``, which the run shares (its cache).'''
    variables = {MODULEPATH_ENV: str(tree.modulepath), 'MODULEPATH': '',
                 'HPCNET_STATE_DIR': str(state)}
    saved = {k: os.environ.get(k) for k in variables}
    os.environ.update(variables)
    try:
        found = stacks.discover()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key)
            else:
                os.environ[key] = value
    return variables, found


def case_verdicts(report) -> dict:
    '''(name, partition, environ) -> (result, failing phase) of each case of
    a ReFrame run report (fixtures left out): what two ways of running the
    same selection must agree on.'''
    data = json.loads(Path(report).read_text())
    return {(tc['name'], tc['partition'], tc['environ']): (tc['result'], tc['fail_phase'])
            for run in data['runs'] for tc in run['testcases'] if not tc.get('fixture')}
