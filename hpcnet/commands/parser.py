"""The argument parser of the hpcnet command line."""
from __future__ import annotations

import argparse

from hpcnet.exitcodes import Exit


class CommandParser(argparse.ArgumentParser):
    '''A usage error is one line naming the command, then exit 2 (argparse
    would print the whole usage first).'''

    def __init__(self, *args, **kwargs):
        # No abbreviations: `--system` must reach ReFrame, not match `--system-baseline`.
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def error(self, message):
        self.exit(Exit.USAGE, f'{self.prog}: error: {message} (see {self.prog} --help)\n')
