"""Named constants shared by the checks, the configuration and the tools.

Loose strings in checks drift apart; everything that names a family, a mode
or a feature lives here once (metrics, their units and sizes: hpcnet.metrics).
"""
from __future__ import annotations

import os
from pathlib import Path

# The two roots (where the suite reads, where runs write) live in
# hpcnet.paths, every HPCNET_* variable in hpcnet.variables: import them from
# there.  The directories below are named from the roots.
from hpcnet.paths import DATA_DIR, WORK_DIR
from hpcnet.variables import FABRICS_FILE_ENV

#: Where runs keep what they create and nobody commits (git-ignored).
DEFAULT_STATE_DIR = WORK_DIR / '.state'
#: ReFrame's --prefix (stage/, output/) per session, and its performance logs.
OUTPUT_DIR = WORK_DIR / 'output'
#: ReFrame's prefix of a session hpcnet did not start (plain `reframe -r`);
#: `hpcnet run` gives each of its sessions OUTPUT_DIR/<report name>.
REFRAME_PREFIX = OUTPUT_DIR / 'reframe'
PERFLOG_DIR = WORK_DIR / 'perflogs'
DEFAULT_REPORTS_DIR = WORK_DIR / 'reports'

CHECKS_DIR = DATA_DIR / 'checks'
CONFIG_DIR = DATA_DIR / 'config'
REFERENCE_DIR = DATA_DIR / 'reference'
SRC_DIR = DATA_DIR / 'src'
#: The fabric table (MPI settings per fabric); a site that adds fabrics of
#: its own (site file ``fabrics``) names its copy with HPCNET_FABRICS_FILE.
FABRICS_FILE = Path(os.environ.get(FABRICS_FILE_ENV) or CONFIG_DIR / 'fabrics.yaml')
#: One file per system (a site is a file), and more directories of them.
SYSTEMS_DIR = CONFIG_DIR / 'systems'


class CompilerFamily:
    GCC = 'gcc'
    CLANG = 'clang'
    NVHPC = 'nvhpc'
    ALL = (GCC, CLANG, NVHPC)


class Feature:
    '''ReFrame environment features (used as ``+name`` in valid_prog_environs).'''
    MPI = 'mpi'
    IMB = 'imb'
    IMB_NBC = 'imb-nbc'
    OSU = 'osu'
    #: The first working compiler of each MPI: where compiler-independent
    #: checks (prebuilt IMB/OSU, collectives, pair matrix) run.
    PRIMARY = 'primary'


class Fabric:
    '''Names of the fabrics hpcnet ships, for system files and checks; what a
    fabric is, and which are valid, is the fabric registry's (hpcnet.fabrics).'''
    SHM = 'shm'
    TCP = 'tcp'
    ROCE = 'roce'
    IB = 'ib'


class P2PMode:
    '''Modes of the point-to-point kernel (src/p2p.c ``--mode``).'''
    PINGPONG = 'pingpong'
    PINGPING = 'pingping'
    BW = 'bw'
    BIBW = 'bibw'
    ALL = (PINGPONG, PINGPING, BW, BIBW)
    #: Modes whose figure of merit is latency; the others are bandwidth.
    LATENCY = (PINGPONG, PINGPING)
    #: Modes with one direction of the link busy at a time, as iperf3's one
    #: flow: their bandwidth can be judged over iperf3's on the same link.
    ONE_WAY = (PINGPONG, BW)


#: Link directions each p2p mode loads at once (bidirectional bandwidth is
#: the aggregate of both directions of a full-duplex link).
P2P_DIRECTIONS = {P2PMode.PINGPONG: 1, P2PMode.PINGPING: 1, P2PMode.BW: 1, P2PMode.BIBW: 2}


class PartitionFeature:
    '''ReFrame partition features (``+name`` in valid_systems).'''
    MULTINODE = 'multinode'


class Collective:
    '''Operations of the collectives kernel (src/collectives.c --op).'''
    BARRIER = 'barrier'
    BCAST = 'bcast'
    REDUCE = 'reduce'
    ALLREDUCE = 'allreduce'
    GATHER = 'gather'
    ALLGATHER = 'allgather'
    ALLTOALL = 'alltoall'
    REDUCE_SCATTER = 'reduce_scatter'
    ALL = (BARRIER, BCAST, REDUCE, ALLREDUCE, GATHER, ALLGATHER, ALLTOALL, REDUCE_SCATTER)
    #: Reductions work on MPI_FLOAT: sizes below one float are skipped.
    REDUCTIONS = (REDUCE, ALLREDUCE, REDUCE_SCATTER)


#: The environment on every partition even where no MPI is found, so that
#: ReFrame always loads; MPI checks select ``+mpi`` and skip it.
BUILTIN_ENV = 'builtin'
#: How a case's not-judged reason starts when its measurement was withheld
#: (a testbed host too busy to emulate the wire: hpcnet.checklib.calibration),
#: followed by the reason in parentheses: the run is then not decided (exit 3),
#: not passed, and its values are shown apart by every reader.
MEASUREMENT_WITHHELD = 'measurement withheld'
#: What the skip reason of a case says where its stack cannot use the fabric
#: its partition declares: the run is then not decided (exit 3), not passed.
FABRIC_UNUSABLE = 'cannot use fabric'
#: Marker on a failure a stack's known defect explains (the known issues of hpcnet.mpi);
#: hpcnet run retries the failures that carry it.
KNOWN_ISSUE_MARKER = '[known issue: '

#: Time limit for any single benchmark job: a hung MPI_Finalize must not stall
#: a session (docs/known-issues.md).
DEFAULT_JOB_TIME_LIMIT = '3m'

#: How long our kernels wait for MPI_Finalize once the results are printed
#: before they exit 3 naming the hang (src/hpcnet_kernel.h).  Ranks that each
#: have a core finalize in well under a second; oversubscribed ranks (more
#: than the cores the testbed's nodes share) finalize slowly without hanging,
#: so they get longer (docs/known-issues.md).
FINALIZE_TIMEOUT_S = 5
FINALIZE_TIMEOUT_OVERSUBSCRIBED_S = 20
#: How many times `hpcnet run` runs again a case whose failure names a known
#: issue of its stack (every other failure is final); each retry is listed.
#: Two, because with one an intermittent issue still failed some case twice
#: in a full run, a verdict on chance rather than on the stack
#: (docs/known-issues.md, "Retries").
KNOWN_ISSUE_RETRIES = 2
#: How many times `hpcnet run` measures again a case whose measurement was
#: withheld (a testbed host too busy to emulate the wire): a busy moment
#: passes, so a later attempt decides it; each attempt is listed.
WITHHELD_RETRIES = 2
#: A baseline's tolerance is never tighter than this (fraction of the median)
#: unless the system's site file sets its own ``baseline_floor``
#: (hpcnet.siteconfig.sites; hpcnet.acceptance.references.spread states the tolerance's rule).
TOLERANCE_FLOOR = 0.03
#: A tolerance is never wider than this: the metric is not asserted instead.
TOLERANCE_CAP = 0.4


class Scale:
    '''Where a check's ranks run: one parameter instead of twin single-node and
    multi-node classes (the EESSI test suite's ``scale``).  A single-node run
    on a multi-node partition measures the node, not the link, so ONE_NODE runs
    only on partitions without the MULTINODE feature, the others only on
    partitions with it.'''
    ONE_NODE = '1_node'
    TWO_NODES = '2_nodes'
    #: One rank per node on every node of the partition (its ``num_nodes``).
    ALL_NODES = 'all_nodes'
    POINT_TO_POINT = (ONE_NODE, TWO_NODES)
    WHOLE_PARTITION = (ONE_NODE, ALL_NODES)
