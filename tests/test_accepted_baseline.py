"""Issue 32 item 2: "baseline" is the baseline the site accepted, the
sessions the provenance of the reference file its runs read names; a later
`hpcnet baseline` that was not written is a candidate and never changes
what `compare baseline`, `accept` and the nightly templates compare with.

Built from the twelve recorded testbed sessions (tests/data/history): the
link at 1 Gbit/s in sessions 1-3 and 5-7, at 900 Mbit/s from session 8 on,
stored in a scratch ReFrame results database by ReFrame's own storage."""
import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import last_line, record_fault, run_hpcnet
from hpcnet.acceptance.comparison import sides
from hpcnet.acceptance.references import accepted, baseline, references, refmerge
from hpcnet.constants import CONFIG_DIR
from hpcnet.paths import PROJECT_ROOT
from hpcnet.exitcodes import Exit

RECORDED = json.loads((PROJECT_ROOT / 'tests' / 'data' / 'history' /
                       'testbed-12-sessions.json').read_text())
#: Stores run reports (arguments 2...) in the results database at argument
#: 1, as a ReFrame session stores its own.
STORE = f'''
import json, sys
import reframe.core.config as config
import reframe.core.runtime as runtime
site = config.load_config({str(CONFIG_DIR / 'settings.py')!r})
site.add_sticky_option('storage/sqlite_db_file', sys.argv[1])
site.select_subconfig('generic')
runtime.init_runtime(site)
from reframe.frontend.reporting.storage import StorageBackend
for path in sys.argv[2:]:
    StorageBackend.default().store(json.load(open(path)), path)
'''


def _uuid(n: int) -> str:
    return f'{n:08x}-0000-4000-8000-{n:012x}'


def _session(n: int, recorded: list, tag: str | None = None) -> dict:
    '''Session ``n``: the runs of the recorded sessions numbered ``recorded``
    (1-based), at the time of the first, tagged as `hpcnet baseline` tags.'''
    first = RECORDED[recorded[0] - 1]
    uuid = _uuid(n)
    info = {**first['session_info'], 'uuid': uuid,
            **({baseline.BASELINE_TAG: tag} if tag else {})}
    runs = []
    for index, number in enumerate(recorded):
        run = copy.deepcopy(RECORDED[number - 1]['runs'][0])
        ended = RECORDED[number - 1]['session_info']['time_end_unix']
        for tc_index, tc in enumerate(run['testcases']):
            tc.update(run_index=index, uuid=f'{uuid}:{index}:{tc_index}',
                      job_completion_time_unix=ended)
        runs.append({**run, 'run_index': index})
    return {'session_info': info, 'runs': runs}


def _store(db: Path, reports: list, tmp_path: Path) -> None:
    paths = []
    for report in reports:
        path = tmp_path / f'session-{report["session_info"]["uuid"][:8]}.json'
        path.write_text(json.dumps(report))
        paths.append(str(path))
    res = subprocess.run([sys.executable, '-c', STORE, str(db), *paths], text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert res.returncode == 0 and db.is_file(), res.stdout[-3000:]


def _write_reference(refdir: Path, reports: list) -> Path:
    '''What `hpcnet baseline --write` writes for ``reports``.'''
    refdir.mkdir(exist_ok=True)
    path = refdir / 'testbed.yaml'
    path.write_text(references.dump(baseline.document(reports)))
    return path


@pytest.mark.integration
def test_a_later_unwritten_baseline_of_degraded_data_is_not_the_baseline(tmp_path):
    '''Baseline A (1 Gbit/s) written; then baseline B of the degraded link
    (900 Mbit/s), run "to see the diff" and not written, newer and tagged
    the same way: `compare baseline` of a degraded night still compares
    with A and fails; B is still there to compare with by its tag.'''
    accepted_a = [_session(1, [1, 2], 'A'), _session(2, [3, 5], 'A'), _session(3, [6, 7], 'A')]
    candidate_b = [_session(10 + n, [n], 'B') for n in (8, 9, 10, 11, 12)]
    db = tmp_path / 'results.db'
    _store(db, accepted_a + candidate_b, tmp_path)
    refdir = tmp_path / 'refs'
    written = _write_reference(refdir, accepted_a)
    assert yaml.safe_load(written.read_text())['$provenance']['sessions'] == \
        [_uuid(n) for n in (1, 2, 3)]
    night = tmp_path / 'nightly-latest.json'
    night.write_text(json.dumps(_session(99, [8, 9, 10, 11, 12])))
    env = {'RFM_SQLITE_DB_FILE': str(db), 'HPCNET_REFERENCE_DIR': str(refdir)}
    res = run_hpcnet('compare', 'baseline', str(night), '--baseline-system', 'testbed', env=env)
    assert f'before: baseline (sessions {_uuid(1)}, {_uuid(2)}, {_uuid(3)})' in res.stdout, \
        res.stdout[-3000:] + res.stderr
    assert res.returncode == Exit.FAILED, res.stdout[-3000:] + res.stderr
    regressed = [line for line in res.stdout.splitlines()
                 if line.startswith('REGRESSED') and 'bandwidth_4MiB [MB/s]' in line]
    assert regressed, res.stdout[-3000:]
    record_fault('verdict #2: a later unwritten baseline of a degraded link', res.returncode,
                 f'{last_line(res)}; against the written A: {regressed[0]}')
    # The candidate is kept: compared by its tag, it is the degraded link.
    res = run_hpcnet('compare', 'baseline', f'?{baseline.BASELINE_TAG}=="B"', '--include-baselines',
                     '--system', 'testbed', env=env)
    assert f'after:  ?{baseline.BASELINE_TAG}=="B" (sessions {_uuid(18)}' in res.stdout, \
        res.stdout[-3000:] + res.stderr
    assert res.returncode == Exit.FAILED, res.stdout[-3000:]


@pytest.mark.integration
def test_sessions_the_database_no_longer_has_are_named(tmp_path):
    refdir = tmp_path / 'refs'
    _write_reference(refdir, [_session(1, [1, 2]), _session(2, [3])])
    night = tmp_path / 'nightly-latest.json'
    night.write_text(json.dumps(_session(99, [8, 9])))
    env = {'RFM_SQLITE_DB_FILE': str(tmp_path / 'empty.db'), 'HPCNET_REFERENCE_DIR': str(refdir)}
    res = run_hpcnet('compare', 'baseline', str(night), '--baseline-system', 'testbed', env=env)
    assert res.returncode == Exit.USAGE, res.stdout + res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert f'{refdir / "testbed.yaml"} names session(s) {_uuid(1)}, {_uuid(2)} that the results ' \
           'database no longer holds' in line and 'hpcnet baseline --write' in line, line
    record_fault('verdict #2: the baseline\'s sessions gone from the database', res.returncode,
                 line)


@pytest.mark.parametrize('written, says', [
    (None, 'does not exist, so no baseline was accepted'),
    ((PROJECT_ROOT / 'reference' / 'testbed.yaml').read_text(),
     'names no sessions in its $provenance'),
    ('$provenance: {sessions: [report 1]}\n', "'report 1' is not a stored session UUID"),
])
def test_a_reference_file_without_sessions_is_no_baseline(tmp_path, monkeypatch, written, says):
    '''A hand-written reference file, or none: `baseline` is a usage error
    naming the file and how to make a baseline, before any database is read.'''
    monkeypatch.setenv('HPCNET_REFERENCE_DIR', str(tmp_path))
    if written is not None:
        (tmp_path / 'testbed.yaml').write_text(written)
    monkeypatch.setattr(sides, 'stored_sessions', lambda query: pytest.fail(query))
    with pytest.raises(sides.CompareError) as err:
        sides.load_side(sides.BASELINE, system='testbed')
    assert str(tmp_path / 'testbed.yaml') in str(err.value) and says in str(err.value)
    assert accepted.HOW_TO_MAKE in str(err.value) and '\n' not in str(err.value)


def test_a_merged_file_takes_each_case_from_its_newest_block(tmp_path, monkeypatch):
    '''A baseline of one partition written into a file made by an earlier
    one: that partition's cases come from the newer sessions alone, the
    other's from the earlier sessions; each session is fetched by its UUID.'''
    def on(report, partition):
        for run in report['runs']:
            for tc in run['testcases']:
                tc['partition'] = partition
                tc['perfvalues'] = {f'testbed:{partition}:{key.split(":")[-1]}': value
                                    for key, value in tc['perfvalues'].items()}
        return report
    old = [on(_session(n, [n, n + 1]), partition) for n, partition in
           ((1, 'eth'), (2, 'eth'), (3, 'eth2'))]
    new = [on(_session(n, [n]), 'eth') for n in (8, 9)]
    monkeypatch.setenv('HPCNET_REFERENCE_DIR', str(tmp_path))
    path = _write_reference(tmp_path, old)
    path.write_text(references.dump(refmerge.merge(references.load(path), baseline.document(new))))
    prov = yaml.safe_load(path.read_text())['$provenance']
    assert prov['sessions'] == [_uuid(8), _uuid(9)] and prov['earlier'][0]['sessions'] == \
        [_uuid(n) for n in (1, 2, 3)]
    stored = {r['session_info']['uuid']: r for r in old + new}
    asked = []
    monkeypatch.setattr(sides, 'stored_sessions',
                        lambda query: asked.append(query) or [stored[query]])
    side = sides.load_side(sides.BASELINE, system='testbed')
    assert sorted(asked) == sorted(stored)
    by_partition = {}
    for report in side.reports:
        for run in report['runs']:
            for tc in run['testcases']:
                by_partition.setdefault(tc['partition'], set()).add(report['session_info']['uuid'])
    assert by_partition == {'eth': {_uuid(8), _uuid(9)}, 'eth2': {_uuid(3)}}


def test_the_nightly_templates_name_the_system_of_the_written_baseline():
    '''The nightly templates compare with the baseline of their system's
    reference file, which only their `baseline --write` job replaces.'''
    texts = [(PROJECT_ROOT / 'ci' / 'pipelines' / name).read_text()
             for name in ('gitlab-ci.yml', 'github-nightly.yml')]
    for text in texts:
        compares = [line for line in text.splitlines() if '$HPCNET compare baseline' in line]
        assert compares and all('--baseline-system' in line for line in compares), compares
        makes = [line for line in text.splitlines() if '$HPCNET baseline' in line]
        assert makes and all('--write' in line for line in makes), makes
