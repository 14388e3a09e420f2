"""Mistakes a site makes in the files and variables it edits: each is one
line on stderr naming the file (and line, or key) and what is valid, exit 2,
never a traceback, and found before anything runs. Run in this process
(hpcnet.cli.main), as the command line would."""
from __future__ import annotations

from pathlib import Path

import pytest

from helpers import hpcnet_in_process
from hpcnet.constants import SYSTEMS_DIR
from hpcnet.exitcodes import Exit
from hpcnet.variables import REFERENCE_DIR_ENV, REPORTS_DIR_ENV, STATE_DIR_ENV, SYSTEMS_DIRS_ENV

DATA = Path(__file__).resolve().parent / 'data'
#: A recorded run report (tests/data/reports/README.md says where it came from).
REPORT = DATA / 'reports' / 'local-run.json'
EXAMPLE_SITE = (SYSTEMS_DIR / 'example.py').read_text().replace("'example'", "'mysite'")


def _one_line_usage_error(code, err: str, *named: str) -> None:
    assert code == Exit.USAGE, err
    assert err.startswith('hpcnet: error: ') and err.count('\n') == 1, err
    assert 'Traceback' not in err
    for text in named:
        assert text in err, err


def _edited_site(old: str, new: str) -> str:
    assert old in EXAMPLE_SITE, old
    return EXAMPLE_SITE.replace(old, new, 1)


@pytest.mark.parametrize('old, new, named', [
    ("link_rate_bps=25 * 10**9,", 'link_rate_bps=25 * 10**9', [':25: invalid syntax']),
    ("iface='eno1'", "ifase='eno1'", [':25: partition_extras: unknown argument(s) ifase',
                                      'valid: fabric, gid_index, iface,']),
    ("from hpcnet.model import", 'from hpcnet.modell import',
     [":14: ModuleNotFoundError: No module named 'hpcnet.modell'"]),
    ("'hostnames'", "'hostname'", ['system mysite: `hostnames` is missing',
                                   'valid: a list of regular expressions']),
    ("[r'^example-login\\d+$']", "'^mysite-login'",
     ["system mysite: `hostnames` is '^mysite-login'"]),
    ("'scheduler': 'slurm'", "'scheduler': 'slurmm'",
     ["partition mysite:eth: scheduler: no such scheduler: 'slurmm'"]),
], ids=['syntax', 'extras-argument', 'import', 'no-hostnames', 'hostnames-string', 'scheduler'])
def test_a_site_file_mistake_names_the_file_and_line_or_key(tmp_path, monkeypatch, old, new,
                                                            named):
    site = tmp_path / 'mysite.py'
    site.write_text(_edited_site(old, new))
    monkeypatch.setenv(SYSTEMS_DIRS_ENV, str(tmp_path))
    code, _, err = hpcnet_in_process('fabrics', 'validate')
    _one_line_usage_error(code, err, f'{site}', *named)


def test_a_systems_directory_that_is_not_there_is_named(tmp_path, monkeypatch):
    missing = tmp_path / 'sytems'
    monkeypatch.setenv(SYSTEMS_DIRS_ENV, str(missing))
    code, _, err = hpcnet_in_process('fabrics', 'validate')
    _one_line_usage_error(code, err, f"{SYSTEMS_DIRS_ENV} names '{missing}', not a directory")
    code, _, err = hpcnet_in_process('site', 'check', '--system', 'mysite')
    _one_line_usage_error(code, err, '--system mysite: no site file defines it',
                          f"; {SYSTEMS_DIRS_ENV} names '{missing}', not a directory")


@pytest.mark.parametrize('content, named', [
    (b'\xff\xfe', ['not UTF-8 text (byte 0 is 0xff)']),
    (b'hpcnet_preflight:\n  testbed:eth:\n    mtu: [1500, 0, 0, bytes]\n'
     b'    mtu: [1400, 0, 0, bytes]\n', [":4:5: not valid YAML: key 'mtu' is given twice"]),
    (b'hpcnet_preflight:\n  testbed:eth:\n    mtu: [1500, 0, 0, bytes\n',
     [":4:1: not valid YAML: expected ',' or ']'"]),
    (b'hpcnet_preflight:\n\ttestbed:eth: {}\n', [":2:1: not valid YAML: found character '\\t'"]),
    (b'hpcnet_preflight:\n  testbed:eth:\n    mtu: [1500, 0, 0, bytes]\n'
     b'$unbounded:\n  hpcnet_preflight: [x]\n',
     ['$unbounded.hpcnet_preflight: expected a mapping of pattern: reason']),
], ids=['not-utf8', 'duplicate-key', 'unclosed', 'tab', 'unbounded-list'])
def test_a_reference_file_mistake_is_one_line_with_its_place(tmp_path, content, named):
    path = tmp_path / 'testbed.yaml'
    path.write_bytes(content)
    code, _, err = hpcnet_in_process('refs', 'validate', str(path))
    _one_line_usage_error(code, err, str(path), *named)


@pytest.mark.parametrize('argv', [
    ['compare', str(REPORT), '{other}'], ['compare', '{other}', str(REPORT)],
    ['report', '{other}', '-o', '{tmp}/page.html'], ['refs', 'generate', '{other}'],
    ['paper', '--report', '{other}'], ['report', '--compare', str(REPORT), '{other}'],
], ids=['compare-after', 'compare-before', 'report', 'refs-generate', 'paper', 'report-compare'])
@pytest.mark.parametrize('other', ['{"name": "my-app", "version": "1.0", "dependencies": {}}',
                                   '[1, 2, 3]', '{"session_info": {}, "runs": "oops"}'],
                         ids=['package.json', 'list', 'runs-not-a-list'])
def test_a_json_file_of_another_program_is_not_a_report(tmp_path, argv, other):
    path = tmp_path / 'other.json'
    path.write_text(other)
    code, _, err = hpcnet_in_process(*(a.format(other=path, tmp=tmp_path) for a in argv))
    _one_line_usage_error(code, err, f'{path}: not a ReFrame JSON run report')


def test_an_output_in_a_missing_directory_is_refused_before_anything_runs(tmp_path, monkeypatch):
    out = tmp_path / 'missing' / 'testbed.yaml'
    code, _, err = hpcnet_in_process('refs', 'generate', str(REPORT), '-o', str(out))
    _one_line_usage_error(code, err, f'-o {out}: no directory {out.parent}')
    # A baseline's sessions take minutes: the path is checked before the first.
    monkeypatch.setenv(REFERENCE_DIR_ENV, str(tmp_path / 'refs'))
    code, _, err = hpcnet_in_process('baseline', '-o', str(out), '-n', 'hpcnet_p2p')
    _one_line_usage_error(code, err, f'-o {out}: no directory')
    code, _, err = hpcnet_in_process('baseline', '--system', 'testbed', '-n', 'hpcnet_p2p')
    _one_line_usage_error(code, err, f"{REFERENCE_DIR_ENV} {tmp_path / 'refs' / 'testbed.yaml'}")


def test_a_state_directory_that_cannot_be_made_is_named(tmp_path, monkeypatch):
    occupied = tmp_path / 'a-file'
    occupied.write_text('')
    monkeypatch.setenv(STATE_DIR_ENV, str(occupied / 'state'))
    code, _, err = hpcnet_in_process('stacks')
    _one_line_usage_error(code, err, f'state directory {occupied / "state"} ({STATE_DIR_ENV}')


@pytest.mark.parametrize('where', ['relative/reports', '{tmp}/a-file', '{tmp}/a-file/reports'])
def test_a_reports_directory_that_cannot_take_reports_is_named(tmp_path, monkeypatch, where):
    (tmp_path / 'a-file').write_text('')
    named = where.format(tmp=tmp_path)
    monkeypatch.setenv(REPORTS_DIR_ENV, named)
    code, _, err = hpcnet_in_process('report', str(REPORT))
    _one_line_usage_error(code, err, f'{REPORTS_DIR_ENV}={named}: ')


@pytest.mark.parametrize('command', [['history', '--period', '{}'],
                                     ['compare', '{}', 'now-1d:now']])
@pytest.mark.parametrize('period', ['now:now-1d', '20300101:now'])
def test_a_period_that_ends_before_it_starts_is_refused(tmp_path, monkeypatch, command, period):
    monkeypatch.setenv('RFM_SQLITE_DB_FILE', str(tmp_path / 'results.db'))
    code, _, err = hpcnet_in_process(*(a.format(period) for a in command))
    _one_line_usage_error(code, err, f'{period}: ends before it starts')


@pytest.mark.parametrize('argv', [['testbed', 'foo'], ['testbed', 'up', '--nodes', 'x'],
                                  ['testbed', 'status', '--bogus']])
def test_a_testbed_command_line_mistake_is_one_line(argv):
    code, _, err = hpcnet_in_process(*argv)
    assert code == Exit.USAGE and err.count('\n') == 1, err
    assert err.startswith('hpcnet testbed') and 'error: ' in err and '--help' in err, err


def test_an_unreadable_stack_cache_is_named_not_taken_for_none(tmp_path, monkeypatch):
    (tmp_path / 'stacks.json').write_text('{truncated')
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path))
    code, _, err = hpcnet_in_process('config')
    _one_line_usage_error(code, err, f"{tmp_path / 'stacks.json'}: unreadable (JSONDecodeError",
                          '`hpcnet stacks --refresh` probes again')


def test_a_reference_file_named_yml_is_not_silently_unread(tmp_path, monkeypatch):
    (tmp_path / 'testbed.yml').write_text('{}\n')
    monkeypatch.setenv(REFERENCE_DIR_ENV, str(tmp_path))
    code, _, err = hpcnet_in_process('refs', 'validate')
    _one_line_usage_error(code, err, f"{tmp_path / 'testbed.yml'}: not read",
                          'rename it to testbed.yaml')


def test_an_empty_reference_dir_variable_is_unset_not_the_current_directory(monkeypatch):
    from hpcnet.acceptance.references.references import reference_dir
    from hpcnet.constants import REFERENCE_DIR
    monkeypatch.setenv(REFERENCE_DIR_ENV, '')
    assert reference_dir() == Path(REFERENCE_DIR)


def test_an_option_no_command_knows_names_the_command():
    code, _, err = hpcnet_in_process('compare', '--alpah', '0.1', 'a.json', 'b.json')
    assert code == Exit.USAGE and err == ('hpcnet compare: error: unrecognized arguments: '
                                          '--alpah b.json (see hpcnet compare --help)\n'), err
