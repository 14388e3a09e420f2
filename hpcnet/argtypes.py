"""argparse types of hpcnet's commands: a bad value is one line naming the
option and what is valid (argparse adds the option's name)."""
from __future__ import annotations

import argparse
from pathlib import Path

from hpcnet.constants import TOLERANCE_CAP


def fraction(text: str) -> float:
    '''A number strictly between 0 and 1.'''
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f'{text!r} is not a fraction between 0 and 1 '
                                         '(e.g. 0.05 for 5 %)')
    return value


def positive_int(text: str) -> int:
    '''An integer >= 1.'''
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f'{text!r} is not an integer >= 1')
    return value


def tolerance_floor(text: str) -> float:
    '''A baseline's tightest tolerance: a fraction above 0 and below the cap
    (a wider one would leave every metric unasserted).'''
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < TOLERANCE_CAP:
        raise argparse.ArgumentTypeError(f'{text!r} is not a fraction above 0 and below the '
                                         f'tolerance cap {TOLERANCE_CAP:g} (e.g. 0.1 for 10 %)')
    return value


def comma_list(valid: tuple):
    '''The type of an option that takes some of ``valid``, comma-separated.'''
    def chosen(text: str) -> list:
        names = [n for n in text.split(',') if n]
        unknown = sorted(set(names) - set(valid))
        if unknown or not names:
            raise argparse.ArgumentTypeError(f'unknown {", ".join(unknown) or "(none given)"} '
                                             f'(valid: {", ".join(valid)})')
        return names
    return chosen


def results_db_file(text: str) -> str:
    '''ReFrame's results database, absolute (ReFrame runs in the work
    directory, not where the user is): a file in an existing directory.'''
    path = Path(text).absolute()
    if not path.parent.is_dir() or path.is_dir():
        raise argparse.ArgumentTypeError(f'{text!r}: not a file in an existing directory (valid: '
                                         "ReFrame's results database, e.g. reports/results.db)")
    return str(path)
