"""The hpcnet command.

    hpcnet install-stacks        install the PyPI MPI stacks, one prefix each
    hpcnet stacks                list the compiler x MPI environments (and why others are out)
    hpcnet run [reframe args]    run the suite with ReFrame, keep the report
    hpcnet crosscheck            our kernel against IMB and OSU, ratios of medians
    hpcnet fabrics validate      check the fabric table and every system file
    hpcnet config [--system S]   every setting and HPCNET_* variable in force, and its source
    hpcnet paper [--report R]    the Rocks cluster paper's tables beside a testbed session
    hpcnet refs validate [FILE]  check reference files
    hpcnet refs generate REPORT  references (with provenance) from a good run's JSON report
    hpcnet baseline [--sessions K] K sessions -> reference/<system>.yaml with provenance
    hpcnet compare BEFORE AFTER  did anything get worse than its tolerance: one-sided bounds, modes
    hpcnet accept [--repeats K]  K repeats compared with the baseline, more until decided
    hpcnet history [--period P]  every metric's trend over the stored sessions, and when it changed
    hpcnet index build|prune|export  the metrics index beside the results database
    hpcnet report [SESSIONS]     one self-contained HTML page (also written by every run)
    hpcnet testbed ...           the Slurm virtual cluster, and run|baseline|accept on it
                                 (see docs/testbed.md)
    hpcnet site init|check       a site file from Slurm; what a site holds before its first run
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from importlib import metadata

from hpcnet.acceptance.references.references import ReferenceFileError
from hpcnet.commands.parser import CommandParser, results_db_in_force
from hpcnet.paths import PROJECT_ROOT
from hpcnet.exitcodes import WORDS, Exit
from hpcnet.model import ConfigError
from hpcnet.paths import InstallationError, installation_problem, work_dir_problem
from hpcnet.session.runner import SelectionError
from hpcnet.stacks import StackError

#: The module of each command (hpcnet.commands states what each holds), in the order of --help.
COMMANDS = {'install-stacks': 'install_stacks', 'stacks': 'stacks', 'run': 'run',
            'crosscheck': 'crosscheck', 'baseline': 'baseline', 'compare': 'compare',
            'accept': 'accept', 'history': 'history', 'index': 'index', 'report': 'report',
            'config': 'config', 'refs': 'refs', 'paper': 'paper', 'fabrics': 'fabrics',
            'testbed': 'testbed', 'site': 'site'}


def _every_command() -> list:
    """Every command module, in the order of COMMANDS (--help)."""
    from hpcnet.commands import (accept, baseline, compare, config, crosscheck, fabrics, history,
                                 index, install_stacks, paper, refs, report, run, site, stacks,
                                 testbed)
    return [install_stacks, stacks, run, crosscheck, baseline, compare, accept, history, index,
            report, config, refs, paper, fabrics, testbed, site]


def build_parser(command: str | None = None) -> CommandParser:
    """The parser of every command; of ``command`` alone when it names one:
    a command imports its own module only (`hpcnet compare` starts without
    the modules of running a session or drawing a page)."""
    parser = CommandParser(prog='hpcnet', description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--version', action='version',
                        version=f'hpcnet {metadata.version("hpcnet")}')
    sub = parser.add_subparsers(dest='cmd', required=True)
    modules = ([importlib.import_module(f'hpcnet.commands.{COMMANDS[command]}')]
               if command in COMMANDS else _every_command())
    for module in modules:
        module.add_parser(sub)
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv[0] if argv else None)

    # Options hpcnet does not know go to reframe (hpcnet run -n hpcnet_p2p ...).
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, 'takes_reframe_args', False):
        command = f'hpcnet {args.cmd}'
        print(f'{command}: error: unrecognized arguments: {" ".join(extra)} (see {command} '
              '--help)', file=sys.stderr)
        return Exit.USAGE
    args.reframe_args = extra
    problem = installation_problem() or (work_dir_problem()
                                         if getattr(args, 'needs_work_dir', True) else None)
    if problem:
        print(f'hpcnet: error: {problem}', file=sys.stderr)
        return 2
    if PROJECT_ROOT is None:
        # An installed copy writes nothing into its installation, even as root: no
        # bytecode of the system files and checks it imports, here or in ReFrame.
        sys.dont_write_bytecode = True
        os.environ['PYTHONDONTWRITEBYTECODE'] = '1'
    try:
        with results_db_in_force(args):
            return args.func(args)
    except (ConfigError, ReferenceFileError, StackError, SelectionError,
            InstallationError) as err:
        # Errors a user causes: one message, no traceback.
        print(f'hpcnet: error: {err}', file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # What was running is already stopped (a testbed is brought down by
        # the finally of its command): one line, no traceback.
        print(f'hpcnet: {WORDS[Exit.INTERRUPTED].lower()}: nothing decided', file=sys.stderr)
        return Exit.INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`hpcnet index export | head`): what it read
        # is what it asked for.  Python's exit flush must not write again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return Exit.OK


if __name__ == '__main__':
    sys.exit(main())
