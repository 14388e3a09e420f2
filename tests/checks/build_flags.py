"""A build fixture like hpcnet's, over a source whose only fault is a
warning: warnings-as-errors must reach the compiler and fail the build."""
import os

import reframe as rfm

from hpcnet.constants import BUILTIN_ENV
from hpcnet.checklib.builds import MakeBuild


@rfm.simple_test
class build_warns(MakeBuild):
    valid_prog_environs = [BUILTIN_ENV]
    sourcesdir = os.path.join(os.path.dirname(__file__), 'warning_src')
    make_targets = ['bin/warns']
    programs = ['warns']

    def compiler_vars(self) -> dict:
        return {'CC': 'cc'}
