"""The acceptance fault matrix: each way a verdict could pass by accident,
fed to the command a site runs, must give its exit code (hpcnet.exitcodes)
and a one-line reason; none exits 0 unless nothing is worse and everything
was decided. The rows join the session's fault matrix table (conftest)."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from helpers import HPCNET, fault_row, record_fault, report_case, run_hpcnet, wobble, write_report
from hpcnet.session import verdict
from hpcnet.checklib import sanity
from hpcnet.paths import PROJECT_ROOT
from hpcnet.exitcodes import Exit



def _clean(path, uuid, n, seed, env='gcc12-openmpi4', bw=117.0, lat=30.0, extra=None):
    bws, lats = wobble(bw, n, seed), wobble(lat, n, seed + 100)
    cases = [report_case({'bandwidth_4MiB': b, 'latency_8B': l, **(extra or {})}, environ=env)
             for b, l in zip(bws, lats)]
    return write_report(path, cases, uuid)


def test_compare_scenarios(tmp_path):
    base = _clean(tmp_path / 'base.json', 'base', 5, 1)
    fault_row('acceptance: clean vs clean, 5 + 5 samples',
              run_hpcnet('compare', base, _clean(tmp_path / 'aa.json', 'aa', 5, 2)), Exit.OK)
    fault_row('acceptance: 1 sample after',
              run_hpcnet('compare', base, _clean(tmp_path / 'one.json', 'one', 1, 3)),
              Exit.UNDECIDED)
    fault_row('acceptance: overlapping sides (a session on both)',
              run_hpcnet('compare', base, base), Exit.USAGE)
    halved = _clean(tmp_path / 'half.json', 'half', 5, 4, bw=117.0 / 2, lat=60.0)
    res = run_hpcnet('compare', base, halved)
    fault_row('acceptance: bandwidth halved, latency doubled, 5 + 5', res, Exit.FAILED)
    assert res.stdout.count('REGRESSED') == 2
    renamed = _clean(tmp_path / 'renamed.json', 'renamed', 5, 5, env='gcc13-openmpi5')
    res = run_hpcnet('compare', base, renamed)
    fault_row('acceptance: environment renamed by an upgrade (paired by MPI and compiler family)',
              res, Exit.OK)
    assert 'paired: testbed:eth gcc12-openmpi4 -> gcc13-openmpi5' in res.stdout
    other = _clean(tmp_path / 'other.json', 'other', 5, 6, env='clang14-mpich4')
    fault_row('acceptance: environment replaced by an unrelated one (nothing pairs)',
              run_hpcnet('compare', base, other), Exit.FAILED)
    fault_row('acceptance: ... paired by hand (--pair OLD=NEW)',
              run_hpcnet('compare', base, other, '--pair', 'gcc12-openmpi4=clang14-mpich4'),
              Exit.OK)
    fault_row('acceptance: --pair naming an environment no side has',
              run_hpcnet('compare', base, other, '--pair', 'gcc12-openmpi4=nosuch'), Exit.USAGE)
    missing = write_report(tmp_path / 'missing.json',
                           [report_case({'latency_8B': v}) for v in wobble(30.0, 5, 7)],
                           'missing')
    fault_row('acceptance: a metric missing after (its case crashed)',
              run_hpcnet('compare', base, missing), Exit.FAILED)
    new = _clean(tmp_path / 'new.json', 'new', 5, 8, extra={'bandwidth_1MiB': 110.0})
    fault_row('acceptance: a metric only after (new)', run_hpcnet('compare', base, new),
              Exit.UNDECIDED)
    nan = write_report(tmp_path / 'nan.json',
                       [report_case({'bandwidth_4MiB': float('nan'), 'latency_8B': 30.0})] * 5,
                       'nan')
    res = run_hpcnet('compare', base, nan)
    fault_row('acceptance: a NaN sample', res, Exit.USAGE)
    assert 'session nan' in res.stderr and 'bandwidth_4MiB is nan' in res.stderr
    fault_row('acceptance: a floor that is not a fraction',
              run_hpcnet('compare', base, base, '--floor', '3'), Exit.USAGE)


def test_a_baseline_of_the_testbed_is_never_tighter_than_its_site_floor(tmp_path):
    '''The testbed's site file sets baseline_floor 0.10: references made
    from its sessions say so in their provenance, unless --floor overrides
    it; a floor at the tolerance cap or above is a usage error.'''
    report = _clean(tmp_path / 'base.json', 'base', 5, 1)
    res = run_hpcnet('refs', 'generate', report)
    assert res.returncode == Exit.OK, res.stderr
    assert 'max(0.1, ' in res.stdout and not res.stdout.startswith('hpcnet:'), \
        res.stdout[:2000]
    res = run_hpcnet('refs', 'generate', report, '--floor', '0.05')
    assert 'max(0.05, ' in res.stdout, res.stdout[:2000]
    res = run_hpcnet('baseline', '--floor', '0.4')
    fault_row('acceptance: a baseline floor at the tolerance cap', res, Exit.USAGE)
    assert "argument --floor: '0.4' is not a fraction above 0 and below the tolerance cap 0.4" \
        in res.stderr


@pytest.mark.parametrize('fault, entry, message', [
    ('reversed bounds', [117.0, 0.05, -0.05, 'MB/s'], 'wrong sign'),
    ('a lower bound that accepts anything', [117.0, -1.0, 0.05, 'MB/s'], '-0.5'),
    ('a typo in a metric name', None, 'bandwith_4MiB'),
])
def test_reference_file_scenarios(tmp_path, fault, entry, message):
    metric = 'bandwith_4MiB' if entry is None else 'bandwidth_4MiB'
    path = tmp_path / 'testbed.yaml'
    path.write_text(json.dumps({'hpcnet_p2p': {'$index': ['$partition', 'mpi_family', 'mode'],
                                               'testbed:eth': {'.*': {'bw': {
                                                   metric: entry or [117.0, -0.05, 0.05, 'MB/s']}}}}}))
    res = run_hpcnet('refs', 'validate', str(path))
    fault_row(f'acceptance: reference file: {fault}', res, Exit.USAGE)
    assert message in res.stderr and str(path) in res.stderr


def test_every_case_skipped_is_not_decided():
    skipped = {('hpcnet_p2p', 'local', 'tcp', env): {
        'name': 'hpcnet_p2p', 'system': 'local', 'partition': 'tcp', 'environ': env,
        'result': 'skip', 'skip_reason': f'{env} cannot use fabric tcp: libfabric.so.1 not found'}
        for env in ('gcc12-impi2021', 'gcc11-impi2021')}
    lines, code = verdict.summary(skipped, [])
    assert code == Exit.UNDECIDED
    assert 'NOTHING RAN: every selected case was skipped' in lines
    assert any(l.startswith('SKIPPED (1): gcc12-impi2021') for l in lines)
    record_fault('acceptance: every case skipped', code, lines[-1])


@pytest.mark.parametrize('near_miss, stdout, stderr', [
    ('ob1 receive frame in a crash after results', 'row: 8 1.0\n',
     '[cn1:1] [ 3] mca_pml_ob1_recv_frag_callback_match+0x1\n[cn1:1] [ 4] opal_progress+0x2\n'),
    ('MPI_Finalize returned MPI_ERR_OTHER', 'done: ok\n',
     'MPI_Finalize returned MPI_ERR_OTHER: connection reset by peer\n'),
])
def test_known_issue_near_misses_are_not_named(near_miss, stdout, stderr):
    from test_known_issues import MPICH4_UCX, OPENMPI5
    for stack in (OPENMPI5, MPICH4_UCX):
        note = sanity.known_issue_note(sanity.failure_evidence(stdout, stderr), stack)
        assert note == '', f'{near_miss} named as {note}'
    record_fault(f'acceptance: known-issue near miss: {near_miss}', 'not named',
                 'a real failure, not retried')


def test_a_login_host_that_matches_no_site_is_an_error(tmp_path):
    sites = tmp_path / 'systems'
    sites.mkdir()
    (sites / 'mysite.py').write_text(
        'from hpcnet.model import partition_extras\n'
        "system = {'name': 'mysite', 'hostnames': [r'^login\\d+$'], 'partitions': [\n"
        "  {'name': 'eth', 'scheduler': 'local', 'launcher': 'mpirun', 'max_jobs': 1,\n"
        "   'extras': partition_extras(fabric='tcp', iface='lo')}]}\n")
    env = {'HPCNET_SYSTEMS_DIRS': str(sites)}
    res = run_hpcnet('run', '-n', 'hpcnet_preflight', env=env)
    fault_row('acceptance: a login host that matches no site file', res, Exit.USAGE)
    assert 'matches no site file: mysite' in res.stderr
    # Plain ReFrame stops too (it would otherwise fall back to its `generic`).
    res = subprocess.run([str(HPCNET.with_name('reframe')), '-C', 'config/settings.py', '-c',
                          'checks/preflight.py', '-l'], text=True, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env={**os.environ, **env}, cwd=PROJECT_ROOT)
    assert res.returncode == 2 and 'matches no site file: mysite' in res.stderr, res.stderr


def test_baseline_scenarios(tmp_path):
    from hpcnet.acceptance.references import baseline, refmerge
    sessions = ['s1', 's2', 's3', 's4', 's5']
    # A slow repeat is a mode the next run may visit: left out, named, and
    # the metric is recorded, not bounded (never a bound that accepts 20).
    got = baseline.estimate([117.0, 116.0, 118.0, 117.0, 20.0], sessions, higher_is_better=True)
    assert not got.asserted and got.median == 117.0 and got.excursions == 1, got
    assert [v for v, *_ in got.left_out] == [20.0]
    record_fault('acceptance: one bad baseline repeat (20 among 117 MB/s)', 'not asserted',
                 f'left out: {got.left_out}; {got.reason}')
    # A fast repeat is left out and the reference stays tight.
    fast = baseline.estimate([117.0, 116.0, 118.0, 117.0, 200.0], sessions, higher_is_better=True)
    assert fast.asserted and fast.median == 117.0 and fast.tolerance < 0.1, fast
    record_fault('acceptance: one fast baseline repeat (200 among 117 MB/s)', 'left out',
                 f'tolerance {fast.tolerance:.3f}; left out: {fast.left_out}')
    existing = {'hpcnet_iperf3': {'testbed:eth': {'throughput': [117.7, -0.05, 0.02, 'MB/s']}}}
    reports = [json.loads(Path(_clean(Path(tmp_path) / f'b{i}.json', f'b{i}', 1, i)).read_text())
               for i in range(5)]
    for report in reports:
        for run in report['runs']:
            for tc in run['testcases']:
                tc['reference_index'] = ['$partition', 'mpi_family', 'mode']
                tc['mode'] = 'bw'
    merged = refmerge.merge(existing, baseline.document(reports))
    assert merged['hpcnet_iperf3'] == existing['hpcnet_iperf3'], merged
    assert 'hpcnet_p2p' in merged, merged
    record_fault('acceptance: a baseline of one check', 'merged',
                 'the references of the other checks are kept')


def test_a_typo_in_a_test_name_is_refused(tmp_path):
    path = tmp_path / 'testbed.yaml'
    path.write_text(json.dumps({'hpcnet_p2pp': {'testbed:eth': {'bandwidth_4MiB':
                                                                [117.0, -0.05, 0.05, 'MB/s']}}}))
    res = run_hpcnet('refs', 'validate', str(path))
    fault_row('acceptance: reference file: a typo in a test name', res, Exit.USAGE)
    assert 'hpcnet_p2pp' in res.stderr


def test_a_broken_reference_file_stops_the_run_before_it_starts(tmp_path):
    (tmp_path / 'local.yaml').write_text('hpcnet_p2p:\n  local:shm:\n    bandwith_4MiB: [1, -0.1, 0.1, MB/s]\n')
    res = run_hpcnet('run', '--system', 'local:shm', '-n', 'hpcnet_p2p',
                     env={'HPCNET_REFERENCE_DIR': str(tmp_path)})
    fault_row('acceptance: a broken reference file where the run reads', res, Exit.USAGE)
    assert 'bandwith_4MiB' in res.stderr and 'running:' not in res.stdout
