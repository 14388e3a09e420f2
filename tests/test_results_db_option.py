"""--db FILE, one option of every command that reads or stores sessions:
the same name, help and default in each (hpcnet.commands.parser), and the
database the command reads and its ReFrame sessions store into, over
RFM_SQLITE_DB_FILE (which the tests' own conftest points elsewhere)."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from helpers import hpcnet_in_process, results_db

from test_history import nights

from hpcnet import cli
from hpcnet.session import runner
from hpcnet.commands.parser import RESULTS_DB_ENV, RESULTS_DB_HELP
from hpcnet.commands.testbed import parse_on_testbed
from hpcnet.exitcodes import Exit

DAY = 86400.0
#: The commands that read stored sessions or store them, as typed.
WITH_DB = (['run'], ['baseline'], ['accept'], ['compare'], ['report'], ['history'],
           ['index', 'build'], ['index', 'prune'], ['index', 'export'])
#: What else a command needs to parse.
REQUIRED = {'compare': ['BEFORE', 'AFTER'], 'prune': ['--older-than', '30']}


def _subparser(parser, *names):
    for name in names:
        parser = next(a for a in parser._actions if a.choices)._name_parser_map[name]
    return parser


@pytest.mark.parametrize('command', WITH_DB, ids=' '.join)
def test_every_command_takes_the_one_db_option(command):
    parser = _subparser(cli.build_parser(command[0]), *command)
    (db,) = [a for a in parser._actions if '--db' in a.option_strings]
    assert (db.option_strings, db.dest, db.default, db.help) == (['--db'], 'db', None,
                                                                 RESULTS_DB_HELP)
    args, _ = parser.parse_known_args(['--db', 'results.db', *REQUIRED.get(command[-1], [])])
    assert args.db == str(Path.cwd() / 'results.db')     # absolute: ReFrame runs elsewhere


@pytest.mark.parametrize('command', ['run', 'baseline', 'accept'])
def test_the_testbed_commands_take_it(command):
    assert parse_on_testbed(command, ['--db', '/tmp/results.db']).db == '/tmp/results.db'


def test_a_db_in_no_directory_is_one_line():
    code, out, err = hpcnet_in_process('compare', 'a', 'b', '--db', '/nonexistent/results.db')
    assert code == Exit.USAGE and out == '' and err.count('\n') == 1, err
    assert "--db: '/nonexistent/results.db': not a file in an existing directory" in err


def _db(tmp_path):
    """(database, its reports): five nights, the newest half a day old."""
    reports = nights([112.0, 113.0, 111.0, 112.5, 90.0], start=time.time() - 5.5 * DAY)
    return results_db(tmp_path / 'other.db', reports), reports


def test_compare_reads_the_db_named(tmp_path):
    db, reports = _db(tmp_path)
    before, after = (reports[i]['session_info']['uuid'] for i in (0, 4))
    assert os.environ[RESULTS_DB_ENV] != str(db)     # conftest's own database holds neither
    code, out, err = hpcnet_in_process('compare', before, after)
    assert code == Exit.USAGE and 'selects no stored session' in err, err
    code, out, err = hpcnet_in_process('compare', '--db', str(db), before, after)
    assert code in (Exit.OK, Exit.FAILED, Exit.UNDECIDED), err
    assert f'before: {before} (sessions {before})' in out and f'after:  {after}' in out
    assert os.environ[RESULTS_DB_ENV] != str(db)     # only while the command runs


def test_the_runs_of_accept_store_into_the_db_named(tmp_path, monkeypatch):
    '''accept reads its baseline from --db and its rounds store there.'''
    db, reports = _db(tmp_path)
    stored_into = []

    def run_suite(name, reframe_args, env=None, **kwargs):
        stored_into.append((env or os.environ)[RESULTS_DB_ENV])
        return runner.SuiteRun(Exit.OK)
    monkeypatch.setattr(runner, 'run_suite', run_suite)
    code, _, err = hpcnet_in_process('accept', '--db', str(db), '--system', 'local',
                           '--baseline', reports[0]['session_info']['uuid'])
    assert code == Exit.UNDECIDED, err          # the round ran nothing: no report
    assert stored_into == [str(db)]
    code, _, err = hpcnet_in_process('baseline', '--db', str(db), '--sessions', '1')
    assert code == Exit.UNDECIDED and stored_into[1:] == [str(db)], err
