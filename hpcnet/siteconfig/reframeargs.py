"""ReFrame's command-line options as hpcnet reads them: `hpcnet run`
before it starts ReFrame, config/settings.py inside ReFrame (from sys.argv)."""
from __future__ import annotations

import re

#: The variable ReFrame reads the system from when no --system is given.
RFM_SYSTEM_ENV = 'RFM_SYSTEM'


def is_option(arg: str, options) -> bool:
    '''``arg`` is one of ``options`` (``--name=value`` counts).'''
    return arg.split('=', 1)[0] in options


def option_values(args: list, *names) -> list:
    '''Values of ``-p X``/``--prgenv=X``-style options among ReFrame's args.'''
    values = []
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                values.append(args[i + 1])
            elif arg.startswith(name + '=') and name.startswith('--'):
                values.append(arg.split('=', 1)[1])
    return values


def named_system(args: list, environ: dict) -> str:
    '''The system ReFrame runs on as ``args`` and ``environ`` name it: the
    last ``--system`` (ReFrame keeps the last), else RFM_SYSTEM, else ''
    (the host's match).'''
    return (option_values(args, '--system') or [environ.get(RFM_SYSTEM_ENV, '')])[-1]


#: ReFrame's options that select test cases by name: -n/--name and -x/--exclude.
NAME_OPTIONS = ('-n', '--name', '-x', '--exclude')
#: The spaces a display name (`-l`'s ``hpcnet_p2p %scale=2_nodes %mode=bw``) has before each
#: parameter.
_SPACES_BEFORE_PARAMETER = re.compile(r'\s+%')


def display_name_as_pattern(pattern: str) -> str:
    '''``pattern`` as ReFrame 4.10 matches it: ReFrame searches -n/-x in a
    case's display name with its spaces taken out (``NAME%param=value``,
    reframe/frontend/filters.py), so the spaces before each ``%`` of a
    display name copied from `-l` go, or it would select nothing.'''
    return _SPACES_BEFORE_PARAMETER.sub('%', pattern)


def display_names_as_patterns(args: list) -> list:
    '''``args`` with the value of every -n/--name and -x/--exclude (``-n V``,
    ``--name=V``, ``-nV``) made display_name_as_pattern().'''
    translated, value_next = [], False
    for arg in args:
        option, equals, value = arg.partition('=')
        if value_next:
            translated.append(display_name_as_pattern(arg))
        elif option in NAME_OPTIONS[1::2] and equals:
            translated.append(f'{option}={display_name_as_pattern(value)}')
        elif arg[:2] in NAME_OPTIONS[::2] and len(arg) > 2:
            translated.append(arg[:2] + display_name_as_pattern(arg[2:]))
        else:
            translated.append(arg)
        value_next = not value_next and arg in NAME_OPTIONS
    return translated


def option_values_removed(args: list, names) -> list:
    '''``args`` without the options ``names`` and their values.'''
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in names:
            skip = True
        elif not any(arg.startswith(n + '=') for n in names if n.startswith('--')):
            kept.append(arg)
    return kept


def unmatched_prgenv(args: list, environments: list) -> str | None:
    """Why a ``-p`` among ``args`` selects nothing (it matches none of
    ``environments``, searched as ReFrame does), or None: ReFrame would run
    no case and pass."""
    for pattern in option_values(args, '-p', '--prgenv'):
        if not any(re.search(pattern, name) for name in environments):
            return (f'-p {pattern}: matches no environment (valid: {", ".join(environments)}; '
                    '`hpcnet stacks` says why others are out)')
    return None
