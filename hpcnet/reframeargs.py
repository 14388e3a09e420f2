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
