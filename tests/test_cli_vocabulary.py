"""One language in the commands: every option and positional of every
parser (hpcnet.cli's, and those `hpcnet testbed` parses with) has a help
line, each idea has one option name (hpcnet.commands.parser.VOCABULARY)
and no command shows a spelling it replaced; a replaced spelling still
works, with one deprecation line naming the option."""
from __future__ import annotations

import argparse
import contextlib
import io

import pytest

from hpcnet import cli
from hpcnet.commands.parser import EVERYWHERE, VOCABULARY, DeprecatedAlias
from hpcnet.commands import testbed as testbed_command


def _walk(parser: argparse.ArgumentParser):
    '''(prog, parser) of ``parser`` and of every subcommand below it.'''
    yield parser.prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _walk(sub)


def _every_parser() -> list:
    found = [*_walk(cli.build_parser())]
    for parser in testbed_command.testbed_parsers():
        found += _walk(parser)
    return found


PARSERS = _every_parser()


def _visible(parser: argparse.ArgumentParser) -> list:
    '''The actions --help shows (not the subcommands' list, not hidden aliases).'''
    return [a for a in parser._actions
            if a.help != argparse.SUPPRESS and not isinstance(a, argparse._SubParsersAction)]


def _shown(parser: argparse.ArgumentParser) -> set:
    return {option for action in _visible(parser) for option in action.option_strings}


@pytest.mark.parametrize('prog, parser', PARSERS, ids=[prog for prog, _ in PARSERS])
def test_every_option_and_subcommand_has_a_help_line(prog, parser):
    for action in _visible(parser):
        name = '/'.join(action.option_strings) or action.dest
        assert action.help and action.help.strip(), f'{prog} {name}: no help line'
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                assert choice.help, f'{prog} {choice.dest}: no help line in {prog} --help'


@pytest.mark.parametrize('prog, parser', PARSERS, ids=[prog for prog, _ in PARSERS])
def test_no_command_shows_a_replaced_spelling(prog, parser):
    shown = _shown(parser)
    for idea, term in VOCABULARY.items():
        for old, where in term.earlier.items():
            if where == EVERYWHERE or prog in where:
                assert old not in shown, f'{prog} {old}: {idea} is {term.option}'


def test_every_idea_of_the_vocabulary_is_spoken():
    shown = set().union(*(_shown(parser) for _, parser in PARSERS))
    assert not {term.option for term in VOCABULARY.values()} - shown


def test_every_hidden_alias_is_a_spelling_the_vocabulary_replaced():
    '''An alias is there for the pipelines written before a rename, and the
    table names it: no command grows a second spelling unrecorded.'''
    replaced = {(old, term.option): where for term in VOCABULARY.values()
                for old, where in term.earlier.items()}
    for prog, parser in PARSERS:
        for action in parser._actions:
            if isinstance(action, DeprecatedAlias):
                (old,) = action.option_strings
                assert (old, action.option) in replaced, f'{prog} {old}: not in VOCABULARY'
                where = replaced[old, action.option]
                assert where == EVERYWHERE or prog in where, f'{prog} {old}'


def _parser_of(*command: str) -> argparse.ArgumentParser:
    return dict(PARSERS)[' '.join(['hpcnet', *command])]


def test_accept_compare_history_name_the_same_things_alike():
    '''An attribute the three commands share is filled by the same option in
    each (the converse is tests/test_cli_options.py).'''
    options = {}
    for command in ('accept', 'compare', 'history'):
        for action in _visible(_parser_of(command)):
            if action.option_strings:
                options.setdefault(action.dest, set()).add(tuple(action.option_strings))
    assert {dest: spellings for dest, spellings in options.items() if len(spellings) > 1} == {}
    for shared in ('--floor', '--alpha', '--db'):
        assert all(shared in _shown(_parser_of(c)) for c in ('accept', 'compare', 'history'))
    for shared in ('--baseline-system', '--pair'):
        assert all(shared in _shown(_parser_of(c)) for c in ('accept', 'compare'))


@pytest.mark.parametrize('argv, dest, value, option', [
    (['compare', 'B', 'A', '--threshold', '0.05'], 'floor', 0.05, '--floor'),
    (['compare', 'B', 'A', '--system', 'lumi'], 'baseline_system', 'lumi', '--baseline-system'),
    (['accept', '--threshold', '0.05'], 'floor', 0.05, '--floor'),
    (['accept', '--system-baseline', 'lumi'], 'baseline_system', 'lumi', '--baseline-system'),
    (['history', '--threshold', '0.05'], 'floor', 0.05, '--floor'),
    (['history', '--html', 'trend.html'], 'output', 'trend.html', '--output'),
    (['baseline', '--repeats', '3'], 'sessions', 3, '--sessions'),
], ids=lambda v: ' '.join(v) if isinstance(v, list) else None)
def test_a_replaced_spelling_works_and_names_the_option(argv, dest, value, option):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        args, _ = cli.build_parser(argv[0]).parse_known_args(argv)
    assert getattr(args, dest) == value
    (line,) = err.getvalue().splitlines()
    assert line == f'hpcnet {argv[0]}: {argv[-2]} is deprecated: use {option}'


def test_the_testbed_name_alias_works():
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        args = testbed_command.testbed_parsers()[0].parse_args(['down', '--name', 'hpcnetz'])
    assert args.name == 'hpcnetz'
    assert err.getvalue() == ('hpcnet testbed down: --name is deprecated: use --testbed-name\n')


def test_a_replaced_spelling_keeps_the_default_of_the_option():
    args, _ = cli.build_parser('compare').parse_known_args(['compare', 'B', 'A'])
    assert (args.floor, args.baseline_system) == (0.03, None)
