"""The argument parser of the hpcnet command line, and ReFrame's options on
it: the commands that pass them through to ReFrame list them in their
--help, and an option of ReFrame's that one of ours replaces is refused
with one line naming ours (else `--repeat 5` for `--repeats 5` would
silently run something else).  And the files options name (-o/--output):
a path that cannot be written is the user's error, one line, found before
anything runs where the command runs sessions first.  And --db, the results
database of every command that reads or stores sessions.  And VOCABULARY,
the one option name of each idea across the commands, with the spellings it
replaced (still taken, as hidden aliases that say the new name)."""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from hpcnet import argtypes
from hpcnet.exitcodes import Exit
from hpcnet.session.runner import SelectionError


class CommandParser(argparse.ArgumentParser):
    '''A usage error is one line naming the command, then exit 2 (argparse
    would print the whole usage first).'''

    def __init__(self, *args, **kwargs):
        # No abbreviations: `--system` must reach ReFrame, not match `--baseline-system`.
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def error(self, message):
        self.exit(Exit.USAGE, f'{self.prog}: error: {message} (see {self.prog} --help)\n')


#: ReFrame's options the docs use, as a pass-through command's --help lists
#: them; every other option of `reframe --help` passes through as well.
PASSED_THROUGH = (
    ('--system NAME[:PARTITION]', 'the system (site file) and partition to run on'),
    ('-n/--name REGEX', 'only the checks whose name (with its parameters) this finds; '
                        'a name as -l prints it selects that case'),
    ('-x/--exclude REGEX', 'leave out the checks whose name this finds'),
    ('-p/--prgenv REGEX', 'only these compiler x MPI environments (`hpcnet stacks`)'),
    ('-t/--tag REGEX', 'only the checks with this tag'),
    ('-l, -L', 'list the selected checks (in detail), run nothing'),
    ('-S VAR=VALUE', 'set a check variable (-S sample_rounds=3)'),
    ('-J OPTION', 'a scheduler option for every job (-J reservation=R)'),
    ('--flex-alloc-nodes all|idle|N', 'the nodes the all_nodes checks take'),
    ('--report-junit FILE', "a JUnit file of the session, for a CI's test view"),
    ('--dry-run', 'write the job scripts, submit nothing'),
)

#: ReFrame's options that an option of ours replaces: what a user types,
#: and why ours is meant.
REPLACED = {
    '--repeat': "ReFrame's --repeat N copies every test in one session",
    '--reruns': 'hpcnet passes ReFrame --reruns K-1 itself',
}


def reframe_help(command: str) -> str:
    '''The epilog of a pass-through command's --help.'''
    width = max(len(option) for option, _ in PASSED_THROUGH)
    lines = [f'  {option:<{width}}  {what}' for option, what in PASSED_THROUGH]
    return '\n'.join([f'ReFrame options (options hpcnet {command} does not know go to ReFrame; '
                      '`reframe --help` has all):', *lines])


class _Replaced(argparse.Action):
    '''An option of ReFrame's that ours replaces: a usage error naming ours.'''

    def __init__(self, option_strings, dest, ours: str, why: str, **kwargs):
        self.ours, self.why = ours, why
        super().__init__(option_strings, dest, nargs='?', help=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(f'{option_string} is not an hpcnet option ({self.why}): use {self.ours}')


def pass_through(parser: argparse.ArgumentParser, command: str,
                 repeats: str = '--repeats K (K samples of every metric)') -> None:
    '''``parser`` passes what it does not know to ReFrame: its --help lists
    ReFrame's options, and ReFrame's --repeat and --reruns are refused in
    favour of ``repeats``.'''
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = reframe_help(command)
    for option, why in REPLACED.items():
        parser.add_argument(option, action=_Replaced, ours=repeats, why=why,
                            dest=f'refused{option[1:]}')
    parser.set_defaults(takes_reframe_args=True)


#: The variable ReFrame reads its results database from (its `storage` setting's file).
RESULTS_DB_ENV = 'RFM_SQLITE_DB_FILE'
#: The help of --db, one for every command that reads or stores sessions.
RESULTS_DB_HELP = ("ReFrame's results database: the stored sessions read, and those the "
                   f'command runs store (default: {RESULTS_DB_ENV}, else reports/results.db)')


def add_results_db_option(parser: argparse.ArgumentParser) -> None:
    '''--db FILE, the same in every command that reads or stores sessions.'''
    parser.add_argument('--db', metavar='FILE', type=argtypes.results_db_file, default=None,
                        help=RESULTS_DB_HELP)


@contextlib.contextmanager
def results_db_in_force(args: argparse.Namespace):
    '''The command of ``args`` with its --db as ReFrame's RFM_SQLITE_DB_FILE
    while it runs: the ReFrame sessions it runs store there, and every reader
    of stored sessions (hpcnet.acceptance.comparison.storedsessions, metricindex, a
    `reframe --describe-stored-sessions`) reads it, so a command never reads
    one database and stores into another.'''
    db = getattr(args, 'db', None)
    if db is None:
        yield
        return
    saved = os.environ.get(RESULTS_DB_ENV)
    os.environ[RESULTS_DB_ENV] = db
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(RESULTS_DB_ENV, None)
        else:
            os.environ[RESULTS_DB_ENV] = saved


def renamed(parser: argparse.ArgumentParser, old: str, new: str) -> None:
    '''``old``, an earlier spelling of ``new``, is refused with one line
    naming ``new`` (one spelling per meaning across the commands).'''
    parser.add_argument(old, action=_Replaced, ours=new, dest=f'refused{old[1:]}',
                        why=f'{new} is the name of ReFrame and of every hpcnet command')


def check_writable(output: Path, option: str) -> None:
    '''Raise SelectionError unless ``output`` can be written: its directory
    exists and is writable, and so is the file where it exists.'''
    directory = output.parent if str(output.parent) else Path('.')
    if not directory.is_dir():
        raise SelectionError(f'{option} {output}: no directory {directory} (valid: a file in '
                             'an existing directory)')
    if output.is_dir() or not os.access(output if output.exists() else directory, os.W_OK):
        raise SelectionError(f'{option} {output}: cannot be written (valid: a writable file in '
                             'a writable directory)')


def write_output(text: str, output: Path, option: str, what: str) -> None:
    '''Write ``text`` to ``output``, given by ``option``.'''
    try:
        output.write_text(text)
    except OSError as err:
        raise SelectionError(f'{option} {output}: cannot write the {what}: '
                             f'{err.strerror}') from None


#: Where an earlier spelling is retired: in every command.
EVERYWHERE = ()


@dataclass(frozen=True)
class Term:
    """The one option of an idea, and the spellings it replaced: each
    earlier spelling -> the commands (progs) no longer showing it, or
    EVERYWHERE; a spelling retired in a few commands only is the option
    of another idea elsewhere (`--system`, `--repeats`, `--name`)."""
    option: str
    earlier: dict = field(default_factory=dict)


#: One option name per idea across the commands; tests/test_cli_vocabulary.py
#: holds every parser to it, so a site engineer reading --help learns a word once.
VOCABULARY = {
    'the results database': Term('--db'),
    'the system (site file) a command is about': Term('--system'),
    "the system whose accepted baseline the word 'baseline' names": Term(
        '--baseline-system', {'--system-baseline': EVERYWHERE, '--system': ('hpcnet compare',)}),
    'the tightest tolerance (smallest relative change that counts)': Term(
        '--floor', {'--threshold': EVERYWHERE}),
    'the stored sessions read (START:END as ReFrame takes it)': Term('--period'),
    # An age, not a period: a START:END typed wrong would delete recent sessions.
    'the age of the sessions `index prune` deletes (days)': Term('--older-than'),
    'the file the command writes': Term('--output', {'--html': EVERYWHERE}),
    'samples of every metric (ReFrame --reruns K-1)': Term('--repeats'),
    'the sessions a baseline runs': Term(
        '--sessions', {'--repeats': ('hpcnet baseline', 'hpcnet testbed baseline')}),
    'the testbed (prefix of its network namespaces)': Term(
        '--testbed-name', {'--name': ('hpcnet testbed up', 'hpcnet testbed down',
                                      'hpcnet testbed exec', 'hpcnet testbed status',
                                      'hpcnet testbed shape')}),
}


class DeprecatedAlias(argparse._StoreAction):
    '''An earlier spelling of an option: stores as the option does, after
    one line on stderr naming the option (pipelines written with it keep working).'''

    def __init__(self, option_strings, dest, option: str, **kwargs):
        self.option = option
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f'{parser.prog}: {option_string} is deprecated: use {self.option}', file=sys.stderr)
        super().__call__(parser, namespace, values, option_string)


def add_option(parser: argparse.ArgumentParser, *flags: str, formerly: tuple = (),
               **kwargs) -> argparse.Action:
    '''``parser.add_argument(*flags, **kwargs)`` (a value-taking option),
    and each spelling of ``formerly`` as its hidden alias (DeprecatedAlias).'''
    action = parser.add_argument(*flags, **kwargs)
    option = next(flag for flag in flags if flag.startswith('--'))
    for old in formerly:
        # SUPPRESS: no default of the alias's own overwrites the option's.
        parser.add_argument(old, action=DeprecatedAlias, option=option, dest=action.dest,
                            type=action.type, nargs=action.nargs, choices=action.choices,
                            metavar=action.metavar,
                            default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return action
