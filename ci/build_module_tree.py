"""Make an Lmod module tree of this machine's compilers and MPIs with
EasyBuild (hpcnet.testbed.moduletree.build_tree: easybuild/site-modules/ for Debian's
Open MPI and MPICH and their gompi/gmpich toolchains, plus one module per
PyPI MPI prefix of `hpcnet install-stacks`), then list the environments
hpcnet makes of it.

    .venv/bin/python ci/build_module_tree.py [--hierarchical] DIR
    export HPCNET_MODULEPATH=DIR/modules/all     # what it prints (.../Core if hierarchical)
    .venv/bin/hpcnet run -p 'gompi-system' -n hpcnet_p2p

Needs Lmod (Debian package lmod) and EasyBuild in this venv (the test extra).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from hpcnet import stacks
from hpcnet.stacks import modules
from hpcnet.testbed import moduletree
from hpcnet.variables import MODULEPATH_ENV


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('directory', help='where EasyBuild installs (modules/all, software/, ...)')
    parser.add_argument('--no-prefixes', action='store_true',
                        help='only the Debian MPIs, no modules of the PyPI prefixes')
    parser.add_argument('--hierarchical', action='store_true',
                        help="EasyBuild's HierarchicalMNS: GCC/system in Core, the MPIs under "
                             'it, no toolchains')
    args = parser.parse_args()
    try:
        tree = moduletree.build_tree(Path(args.directory), prefixes=not args.no_prefixes,
                                     hierarchical=args.hierarchical)
    except stacks.StackError as err:
        print(f'build_module_tree: {err}', file=sys.stderr)
        return 1
    print(f'EasyBuild made modules of {len(tree.easyconfigs)} easyconfigs in {tree.seconds:.1f} s')
    os.environ[MODULEPATH_ENV] = str(tree.modulepath)
    found = modules.survey()
    print(found.summary())
    for module, why in found.skipped:
        print(f'  left out: {module}: {why}')
    print(f'export {MODULEPATH_ENV}={tree.modulepath}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
