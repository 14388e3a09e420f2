"""Every ``HPCNET_*`` environment variable hpcnet reads, in one table.

The code reads each variable by the name defined here; `hpcnet config`
prints the table with what is in force, and the table of
docs/site-guide.md is :func:`markdown` of it (tests/test_show_config.py
holds the two equal and finds every ``HPCNET_`` name the code reads).
A leaf: it imports nothing of hpcnet.
"""
from __future__ import annotations

from dataclasses import dataclass

HOME_ENV = 'HPCNET_HOME'
WORK_DIR_ENV = 'HPCNET_WORK_DIR'
STATE_DIR_ENV = 'HPCNET_STATE_DIR'
REPORTS_DIR_ENV = 'HPCNET_REPORTS_DIR'
REFERENCE_DIR_ENV = 'HPCNET_REFERENCE_DIR'
SYSTEMS_DIRS_ENV = 'HPCNET_SYSTEMS_DIRS'
FABRICS_FILE_ENV = 'HPCNET_FABRICS_FILE'
MPI_PREFIXES_ENV = 'HPCNET_MPI_PREFIXES'
SPACK_ENV_VAR = 'HPCNET_SPACK_ENV'
SPACK_LOCK_ENV_VAR = 'HPCNET_SPACK_LOCK'
SPACK_INSTALL_TREE_ENV_VAR = 'HPCNET_SPACK_INSTALL_TREE'
MODULEPATH_ENV = 'HPCNET_MODULEPATH'
FINALIZE_TIMEOUT_ENV = 'HPCNET_FINALIZE_TIMEOUT_S'
SYSFS_ROOT_ENV = 'HPCNET_SYSFS_ROOT'
TESTBED_NODES_ENV = 'HPCNET_TESTBED_NODES'
TESTBED_RATE_ENV = 'HPCNET_TESTBED_RATE_BPS'
TESTBED_RDMA_ENV = 'HPCNET_TESTBED_RDMA_DEVICE'
TESTBED_WIRE_ENV = 'HPCNET_TESTBED_WIRE_EFFICIENCY'
TESTBED_STATE_DIR_ENV = 'HPCNET_TESTBED_STATE_DIR'
TESTBED_TEMPLATES_ENV = 'HPCNET_TESTBED_TEMPLATES'
TESTBED_TOPOLOGY_ENV = 'HPCNET_TESTBED_TOPOLOGY'


@dataclass(frozen=True)
class Variable:
    """One environment variable: its name, what unset means, what it does,
    and the modules that read it."""
    name: str
    unset: str
    what: str
    read_by: str


#: In the order a site meets them: where hpcnet reads and writes, where the
#: MPIs come from, then what the kernels, tests and testbed use.
VARIABLES = (
    Variable(HOME_ENV, 'a checkout: its own files; an installed copy: stops with one error '
             'naming the variable',
             "an installed copy's data directory (`<prefix>/share/hpcnet`: checks, config, "
             'references, kernel sources); its module sets it. A checkout ignores it',
             'hpcnet/paths.py'),
    Variable(WORK_DIR_ENV, 'the checkout; an installed copy: the current directory',
             'where runs write `.state/`, `reports/`, `output/`, `perflogs/`; absolute, '
             'writable, outside the installation', 'hpcnet/paths.py'),
    Variable(STATE_DIR_ENV, '`<work dir>/.state`',
             'moves `.state/` alone (stack and module caches, PyPI MPIs)',
             'hpcnet/stacks/candidate.py'),
    Variable(REPORTS_DIR_ENV, '`<work dir>/reports`',
             "moves `reports/` alone (JSON and HTML reports; the tests keep theirs apart); "
             "the configuration's debug log and results database stay in `<work dir>/reports`",
             'hpcnet/session/runner.py'),
    Variable(REFERENCE_DIR_ENV, '`reference/` of the suite',
             'reference files are read from, and `hpcnet baseline` writes into, this directory '
             "(a site's own reference repository)",
             'hpcnet/acceptance/references/references.py, '
             'hpcnet/acceptance/references/baseline.py, hpcnet/session/runner.py'),
    Variable(SYSTEMS_DIRS_ENV, 'only `config/systems/`',
             'more directories of site files (colon separated), loaded after `config/systems/`',
             'hpcnet/siteconfig/sites.py'),
    Variable(FABRICS_FILE_ENV, '`config/fabrics.yaml` of the suite',
             "the fabric table: a site's own copy, holding the blocks of the fabrics its site "
             'files add (`fabrics`)', 'hpcnet/constants.py'),
    Variable(MPI_PREFIXES_ENV, "the site file's `stacks` `mpi_prefixes`, else none",
             'MPI installation prefixes to probe (colon separated; each must have `bin/mpicc`): '
             'EasyBuild installs, a Spack view', 'hpcnet/stacks/sources.py'),
    Variable(SPACK_ENV_VAR, "the site file's `stacks` `spack_env`, else none",
             'a Spack environment installed where Spack runs; its MPIs are read with `spack find`',
             'hpcnet/stacks/sources.py'),
    Variable(SPACK_LOCK_ENV_VAR, 'none',
             "a Spack environment's `spack.lock`, read without Spack; every MPI build is a "
             'candidate', 'hpcnet/stacks/sources.py'),
    Variable(SPACK_INSTALL_TREE_ENV_VAR, "the lock's externals give the prefixes",
             "the install tree of that lock's builds", 'hpcnet/stacks/sources.py'),
    Variable(MODULEPATH_ENV, "the site file's `stacks` `module_paths`, else only `MODULEPATH`",
             'module directories searched after `MODULEPATH` (colon separated); an entry that '
             'is no directory is an error', 'hpcnet/stacks/lmod.py'),
    Variable(FINALIZE_TIMEOUT_ENV, '20 in the kernels; the checks set 5, and 20 for '
             'oversubscribed jobs',
             'seconds a kernel waits for `MPI_Finalize` after printing its results, then exits 3 '
             'naming the hang; an integer 1-3600',
             'src/hpcnet_kernel.h, set by hpcnet/checklib/testlib.py'),
    Variable(SYSFS_ROOT_ENV, '`/sys`',
             'the root under which the preflight probe reads sysfs (tests point it at a fake tree)',
             'hpcnet/checklib/preflight.py'),
    Variable(TESTBED_NODES_ENV, '4',
             "set by `hpcnet testbed run`: the running testbed's compute node count",
             'config/systems/testbed.py'),
    Variable(TESTBED_RATE_ENV, 'unshaped',
             'set by `hpcnet testbed run`: the shaped link rate in bit/s',
             'config/systems/testbed.py'),
    Variable(TESTBED_WIRE_ENV, 'the links not proven wire-true: a slow link is not told from a slow host',
             'set by `hpcnet testbed run`: the fraction of the wire\'s TCP payload rate a clean '
             'link measured when the testbed came up, as the checks\' calibration measures it '
             '(hpcnet.testbed.wire); a partition whose nodes share the host takes it as its '
             '`wire_efficiency` unless its site file names one',
             'hpcnet/model.py'),
    Variable(TESTBED_TOPOLOGY_ENV, 'one bridge: the testbed partitions have no switch tree',
             "set by `hpcnet testbed run` on a testbed up with `--leaves` > 1: its Slurm "
             "`topology.conf`, the partitions' `extras.topology`",
             'config/systems/testbed.py'),
    Variable(TESTBED_RDMA_ENV, 'no `testbed:roce` partition',
             "set by `hpcnet testbed run`: the RDMA device on the nodes' `eth0`",
             'config/systems/testbed.py'),
    Variable(TESTBED_STATE_DIR_ENV, '`/run/<name>-testbed`',
             "the testbed's state directory (`--state-dir` overrides)",
             'hpcnet/testbed/config.py'),
    Variable(TESTBED_TEMPLATES_ENV, '`ci/testbed` of the checkout',
             "where the testbed's templates are", 'hpcnet/testbed/config.py'),
)


def markdown() -> str:
    """The table of docs/site-guide.md, "`HPCNET_*` environment variables"."""
    rows = ['| variable | unset | what it does | read by |', '|---|---|---|---|']
    rows += [f'| `{v.name}` | {v.unset} | {v.what} | {v.read_by} |' for v in VARIABLES]
    return '\n'.join(rows)
