"""`hpcnet config [--system S]`: every setting and HPCNET_* variable in force,
and its source (hpcnet.siteconfig.showconfig)."""
from __future__ import annotations

import os
import socket
import sys

from hpcnet.siteconfig import showconfig
from hpcnet.exitcodes import Exit


def run(args) -> int:
    groups, problem = showconfig.setting_groups(args.system, socket.gethostname(), os.environ)
    print(showconfig.render(groups))
    if problem:
        print(f'hpcnet: error: {problem}', file=sys.stderr)
        return Exit.USAGE
    return Exit.OK


def add_parser(sub) -> None:
    p = sub.add_parser('config', help='every setting and variable in force, and where it came from')
    p.add_argument('--system', metavar='NAME',
                   help='the system to show (default: the one this host matches)')
    p.set_defaults(func=run, needs_work_dir=False)
