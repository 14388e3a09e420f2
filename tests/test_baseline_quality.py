"""A baseline that knows its own quality (issue 47, item 1): an outlying
baseline session is named and left out, a metric too noisy to bound is a
finding `hpcnet baseline`, `hpcnet run` and `hpcnet compare baseline` show
and exit 3 on, and every verdict row prints the tolerance it was judged
against.  Five sessions of five repeats of a p2p bandwidth and latency, as
run reports; ReFrame replaced by a fake that writes each session's report
where `--report-file` says, so `hpcnet baseline` runs its own entry; the
sessions stored in a results database as ReFrame stores them for
`hpcnet compare baseline`."""
import json
import subprocess
from pathlib import Path

import pytest
import yaml

from helpers import (fault_row, record_fault, report_case, results_db, run_hpcnet, run_report,
                     wobble)
from hpcnet import cli
from hpcnet.session import runner
from hpcnet.acceptance.references import references
from hpcnet.exitcodes import Exit
from hpcnet.variables import REPORTS_DIR_ENV

BANDWIDTH, LATENCY = 'bandwidth_4MiB', 'latency_8B'
TOO_NOISY = 'too noisy to judge: retake or widen by hand'


def _uuid(n: int) -> str:
    return f'{n:08x}-0000-4000-8000-{n:012x}'


def _session(n: int, bandwidth: float = 1000.0, latency: float = 30.0, repeats: int = 5) -> dict:
    '''Session ``n``: ``repeats`` passes of the case on local:tcp, each
    metric wobbling 1 % around the level given.'''
    bw, lat = wobble(bandwidth, repeats, 10 * n), wobble(latency, repeats, 10 * n + 1)
    start = 1_700_000_000 + 3600 * n
    return run_report([report_case({BANDWIDTH: b, LATENCY: t}, system='local', partition='tcp')
                       for b, t in zip(bw, lat)], _uuid(n),
                      {'time_start_unix': start, 'time_end_unix': start + 60})


@pytest.fixture
def site(tmp_path, monkeypatch):
    '''(queue of the reports the fake ReFrame writes, reference directory):
    each ReFrame session writes the next report queued.'''
    monkeypatch.setenv(REPORTS_DIR_ENV, str(tmp_path / 'reports'))
    monkeypatch.setattr(runner, '_check_before_running', lambda args, env: None)
    monkeypatch.setattr(runner, 'session_prefix', lambda name, args: tmp_path / 'sessions' / name)
    queued = []
    real_run = subprocess.run

    def run(cmd, *args, **kwargs):
        if '--report-file' not in cmd:     # not ReFrame (git, say)
            return real_run(cmd, *args, **kwargs)
        Path(cmd[cmd.index('--report-file') + 1]).write_text(json.dumps(queued.pop(0)))
        return subprocess.CompletedProcess(cmd, 0)
    monkeypatch.setattr(runner.subprocess, 'run', run)
    refdir = tmp_path / 'refs'
    refdir.mkdir()
    return queued, refdir


def _baseline(site, capsys, sessions: list) -> tuple:
    '''(exit code, stdout, the reference file written) of `hpcnet baseline
    --sessions 5 --write` of ``sessions``.'''
    queued, refdir = site
    queued += sessions
    path = refdir / 'local.yaml'
    code = cli.main(['baseline', '--sessions', str(len(sessions)), '-o', str(path), '--write',
                     '--system', 'local:tcp'])
    return code, capsys.readouterr().out, yaml.safe_load(path.read_text())


def _compare_baseline(tmp_path, refdir: Path, sessions: list, night: dict):
    '''`hpcnet compare baseline NIGHT.json` with ``sessions`` stored.'''
    db = tmp_path / 'results.db'
    if not db.exists():
        results_db(db, sessions)
    path = tmp_path / f'night-{night["session_info"]["uuid"][:8]}.json'
    path.write_text(json.dumps(night))
    return run_hpcnet('compare', 'baseline', str(path), '--baseline-system', 'local',
                      env={'RFM_SQLITE_DB_FILE': str(db), 'HPCNET_REFERENCE_DIR': str(refdir)})


def _row(res, metric: str) -> str:
    (line,) = [line for line in res.stdout.splitlines() if f' {metric} [' in line]
    return line


def test_one_session_30_percent_low_is_left_out_and_the_losses_regress(site, capsys, tmp_path):
    sessions = [_session(n, **({'bandwidth': 700.0, 'latency': 39.0} if n == 3 else {}))
                for n in range(1, 6)]
    code, out, written = _baseline(site, capsys, sessions)
    said = [line for line in out.splitlines() if 'left out an outlying session of' in line]
    assert code == Exit.OK and len(said) == 2, out
    assert f'bandwidth_4MiB: session {_uuid(3)} (median ' in said[0] and \
        "0.70 of the other sessions'" in said[0], said
    record_fault('baseline: 5 sessions x 5 repeats, one session 30 % low (a noisy night)', code,
                 said[0])
    bound = written['hpcnet_p2p']['local:tcp'][BANDWIDTH]
    assert bound[0] == pytest.approx(1000, rel=0.02) and -0.1 < bound[1] < 0, bound
    assert [s['session'] for s in written[references.PROVENANCE]['left_out_sessions']] == \
        [_uuid(3)] * 2
    assert references.NOT_ASSERTED not in written
    for loss in (0.22, 0.35):
        res = _compare_baseline(tmp_path, site[1], sessions,
                                _session(10 + int(loss * 100), bandwidth=1000 * (1 - loss)))
        fault_row(f'compare baseline: a night {loss:.0%} lower, against the baseline with the '
                  'noisy session left out', res, Exit.FAILED, shown=f' {BANDWIDTH} [')
        row = _row(res, BANDWIDTH)
        assert row.startswith('REGRESSED') and ' 3.0% ' in row, res.stdout
        assert f'outlying before: session {_uuid(3)}' in res.stdout, res.stdout
    res = _compare_baseline(tmp_path, site[1], sessions, _session(40, latency=39.0))
    fault_row('compare baseline: a night with a 30 % slower latency, the noisy session left out',
              res, Exit.FAILED, shown=f' {LATENCY} [')
    assert _row(res, LATENCY).startswith('REGRESSED'), res.stdout


def test_a_baseline_noisy_everywhere_is_too_noisy_to_judge(site, capsys, tmp_path):
    levels = [1.0, 1.25, 0.8, 1.15, 0.85]
    sessions = [_session(n, bandwidth=1000 * level) for n, level in enumerate(levels, 1)]
    code, out, written = _baseline(site, capsys, sessions)
    (said,) = [line for line in out.splitlines() if line.startswith(TOO_NOISY)]
    assert code == Exit.UNDECIDED and BANDWIDTH in said and 'above the 40% cap' in said, out
    record_fault('baseline: sessions 20-25 % apart everywhere (no one outlying)', code, said)
    assert written['hpcnet_p2p']['local:tcp'][LATENCY], written
    res = _compare_baseline(tmp_path, site[1], sessions, _session(50, bandwidth=780.0))
    fault_row('compare baseline: a night 22 % lower against a baseline too noisy to judge', res,
              Exit.UNDECIDED, shown=f' {BANDWIDTH} [')
    assert _row(res, BANDWIDTH).startswith('INCONCLUSIVE'), res.stdout
    assert f'the before side is {TOO_NOISY}' in res.stdout, res.stdout
    # hpcnet run against the file: the case's not-asserted metric is a finding.
    reason = next(r for p, r in written[references.NOT_ASSERTED]['hpcnet_p2p'].items()
                  if p.endswith(BANDWIDTH))
    night = _session(51)
    for repeat in night['runs']:
        repeat['testcases'][0]['not_asserted'] = {BANDWIDTH: {'reason': reason}}
    site[0].append(night)
    run = runner.run_suite('run', ['--system', 'local:tcp'])
    (line,) = [line for line in capsys.readouterr().out.splitlines() if TOO_NOISY in line]
    assert run.code == Exit.UNDECIDED and 'NOT DECIDED: hpcnet_p2p' in line, line
    record_fault('hpcnet run against a baseline too noisy to judge a metric', run.code, line)


def test_two_outlying_sessions_refuse_the_metric(site, capsys):
    sessions = [_session(n, bandwidth=1000 * level)
                for n, level in enumerate([1.0, 1.0, 1.005, 0.7, 0.65], 1)]
    code, out, written = _baseline(site, capsys, sessions)
    (said,) = [line for line in out.splitlines() if line.startswith(TOO_NOISY)]
    assert code == Exit.UNDECIDED and '2 of 5 sessions outlying' in said, out
    assert BANDWIDTH not in written['hpcnet_p2p']['local:tcp']
    record_fault('baseline: two of five sessions 30-35 % low', code, said)


def test_a_clean_baseline_is_asserted_and_a_clean_night_unchanged(site, capsys, tmp_path):
    sessions = [_session(n) for n in range(1, 6)]
    code, out, written = _baseline(site, capsys, sessions)
    assert code == Exit.OK and 'outlying' not in out and TOO_NOISY not in out, out
    assert set(written['hpcnet_p2p']['local:tcp']) == {BANDWIDTH, LATENCY}
    assert not written[references.PROVENANCE]['left_out_sessions']
    (wrote,) = [line for line in out.splitlines() if line.startswith('hpcnet: wrote ')]
    record_fault('baseline: 5 clean sessions with a 1 % wobble (healthy)', code, wrote)
    res = _compare_baseline(tmp_path, site[1], sessions, _session(60))
    fault_row('compare baseline: a clean night against a clean baseline (healthy)', res, Exit.OK)
    assert _row(res, BANDWIDTH).startswith('UNCHANGED') and ' 3.0% ' in _row(res, BANDWIDTH)
