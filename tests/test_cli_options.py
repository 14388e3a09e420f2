"""One spelling per option across the hpcnet commands: the commands that
pass options through to ReFrame list ReFrame's in their --help, and refuse
ReFrame's --repeat and --reruns (ours is --repeats) with one line, before
anything runs; `site check` spells ReFrame's -p as ReFrame does."""
import argparse
import subprocess
import sys

import pytest
from helpers import hpcnet_in_process

from hpcnet import cli
from hpcnet.session import runner
from hpcnet.commands.parser import PASSED_THROUGH
from hpcnet.commands.testbed import parse_on_testbed
from hpcnet.exitcodes import Exit

#: The commands that pass what they do not know to ReFrame.
PASS_THROUGH = (['run'], ['baseline'], ['accept'], ['crosscheck'],
                ['testbed', 'run'], ['testbed', 'baseline'], ['testbed', 'accept'])


def _ours(command: list) -> str:
    '''The option of ours that replaces ReFrame's --repeat in ``command``: a
    baseline's sessions, every other command's samples.'''
    return '--sessions' if command[-1] == 'baseline' else '--repeats'


@pytest.mark.parametrize('command', PASS_THROUGH, ids=' '.join)
def test_help_lists_reframe_options(command):
    code, out, _ = hpcnet_in_process(*command, '--help')
    assert code == 0
    assert _ours(command) in out
    for option, _ in PASSED_THROUGH:
        assert option in out, f'hpcnet {" ".join(command)} --help does not list {option}'
    assert '--repeat ' not in out.replace('--repeats', '') and '--reruns' not in out.split(
        'ReFrame options')[1]


@pytest.mark.parametrize('command', PASS_THROUGH, ids=' '.join)
@pytest.mark.parametrize('typed', [['--repeat', '5'], ['--repeat=5'], ['--reruns', '4']])
def test_reframe_repeat_is_refused_naming_ours(command, typed):
    code, out, err = hpcnet_in_process(*command, *typed)
    assert code == Exit.USAGE
    assert out == ''
    (line,) = err.splitlines()
    assert line.startswith(f'hpcnet {" ".join(command)}: error: {typed[0].split("=")[0]} is not '
                           'an hpcnet option')
    assert f'use {_ours(command)} K' in line


def test_site_check_spells_prgenv_as_reframe():
    code, out, _ = hpcnet_in_process('site', 'check', '--help')
    assert code == 0 and '-p PRGENV, --prgenv PRGENV' in out and '--environ' not in out
    code, _, err = hpcnet_in_process('site', 'check', '--environ', 'gcc')
    assert code == Exit.USAGE
    (line,) = err.splitlines()
    assert '--environ is not an hpcnet option' in line and 'use -p/--prgenv' in line


def test_testbed_help_names_the_commands_it_runs():
    code, out, _ = hpcnet_in_process('testbed', '--help')
    assert code == 0 and 'hpcnet testbed run|baseline|accept' in out


def test_testbed_run_takes_the_options_of_run():
    args = parse_on_testbed('run', ['--repeats', '3', '-n', 'hpcnet_p2p'])
    assert (args.repeats, args.report_name) == (3, 'testbed')
    assert args.reframe_args == ['--system', 'testbed', '-n', 'hpcnet_p2p']
    args = parse_on_testbed('baseline', ['--nodes', '2', '--sessions', '2'], up_options=True)
    assert (args.nodes, args.sessions) == (2, 2) and args.reframe_args == ['--system', 'testbed']


def test_shared_options_mean_one_thing():
    '''An option several commands define fills the same attribute in each.'''
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.choices)
    seen = {}
    for name, command in sub.choices.items():
        for action in command._actions:
            if action.help == argparse.SUPPRESS:
                continue    # a hidden alias fills the option it names, or refuses
            for option in action.option_strings:
                seen.setdefault(option, set()).add((name, action.dest))
    # The same option string always fills the same attribute.
    for option, uses in seen.items():
        if option in ('-h', '--help'):
            continue
        assert len({dest for _, dest in uses}) == 1, f'{option}: {sorted(uses)}'


@pytest.mark.parametrize('typed, passed', [
    (['-n', 'hpcnet_p2p %scale=2_nodes %mode=bw'], ['-n', 'hpcnet_p2p%scale=2_nodes%mode=bw']),
    (['--name=hpcnet_p2p %mode=bw'], ['--name=hpcnet_p2p%mode=bw']),
    (['-x', 'hpcnet_p2p %mode=bibw'], ['-x', 'hpcnet_p2p%mode=bibw']),
    (['--exclude', 'a  %b', '-xc %d'], ['--exclude', 'a%b', '-xc%d']),
    (['-n', '^hpcnet_p2p'], ['-n', '^hpcnet_p2p']),
    # Only the values of -n and -x: a -p is an environment's name.
    (['-p', 'gcc12 %x', '-n', '-n'], ['-p', 'gcc12 %x', '-n', '-n']),
], ids=['name', 'name=', 'exclude', 'joined', 'regex', 'others'])
def test_a_display_name_selects_its_case(typed, passed):
    '''ReFrame searches -n/-x in the display name without its spaces.'''
    cmd, _ = runner.reframe_cmd('run', typed)
    assert cmd[cmd.index('--report-file') + 2:][:len(passed)] == passed


def test_listing_by_display_name_finds_the_case():
    '''As `hpcnet run -l` prints a case, -n selects it (a real listing).'''
    name = 'hpcnet_p2p %scale=1_node %mode=bw'
    res = subprocess.run([sys.executable, '-m', 'hpcnet.cli', 'run', '-l', '-n', name],
                         text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    assert res.returncode == 0, res.stdout
    assert f'- {name} /' in res.stdout and 'Found 1 check(s)' in res.stdout, res.stdout
