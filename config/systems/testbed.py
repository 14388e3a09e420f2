"""`testbed`: the Slurm virtual cluster of ci/testbed (nodes in network
namespaces on one host; `hpcnet testbed run`).

The node count, the shaped link rate and the RDMA device are the running
testbed's: `hpcnet testbed run` passes them in HPCNET_TESTBED_NODES,
HPCNET_TESTBED_RATE_BPS and HPCNET_TESTBED_RDMA_DEVICE.  The roce partition
exists only where the nodes have an RDMA device on eth0 (Soft-RoCE, rdma_rxe);
`hpcnet testbed run` says so when it does not.  A testbed up with
`--leaves` > 1 passes its Slurm topology.conf in HPCNET_TESTBED_TOPOLOGY:
every partition then carries that switch tree (extras `topology`), so the pair
matrix schedules its rounds by leaf and blames a slow uplink by the paths.
"""
import os

from hpcnet import topology
from hpcnet.constants import DEFAULT_JOB_TIME_LIMIT, Fabric
from hpcnet.fabrics import ConfigError
from hpcnet.variables import (TESTBED_NODES_ENV, TESTBED_RATE_ENV, TESTBED_RDMA_ENV,
                              TESTBED_TOPOLOGY_ENV)
from hpcnet.model import partition_extras
from hpcnet.testbed import paper

#: What `hpcnet testbed up` makes by default: 4 compute nodes, 1 Gbit/s links.
_nodes = int(os.environ.get(TESTBED_NODES_ENV, '4'))
_rate_bps = int(os.environ[TESTBED_RATE_ENV]) if os.environ.get(TESTBED_RATE_ENV) else None
_rdma_device = os.environ.get(TESTBED_RDMA_ENV) or None


def _tree():
    """The site file's tree of the testbed's topology.conf (None: one bridge).
    Its uplinks carry every pair of their leaf at once (no oversubscription)."""
    path = os.environ.get(TESTBED_TOPOLOGY_ENV)
    if not path:
        return None
    try:
        with open(path) as f:
            text = f.read()
    except OSError as err:
        raise ConfigError(f'{TESTBED_TOPOLOGY_ENV}={path}: {err.strerror} (valid: the '
                          'topology.conf of a testbed up with --leaves)') from None
    return topology.parse_topology(text, path).as_site()


_topology = _tree()

_common = {
    'scheduler': 'slurm',
    'launcher': 'srun',
    'access': ['--partition=eth', '--exclusive'],
    'max_jobs': 1,
    'time_limit': DEFAULT_JOB_TIME_LIMIT,
}

system = {
    'name': 'testbed',
    'descr': 'Slurm virtual cluster in network namespaces (ci/testbed)',
    'hostnames': [r'^hn0$'],
    'partitions': [
        {**_common, 'name': 'eth',
         'descr': 'veth links to a bridge, shaped like Gigabit Ethernet',
         'extras': partition_extras(fabric=Fabric.TCP, iface='eth0', mtu=1500,
                                    link_rate_bps=_rate_bps, num_nodes=_nodes,
                                    nodes_share_cores=True, topology=_topology)},
    ],
}

#: ReFrame settings of this system alone (hpcnet.siteconfig.sites.GENERAL): how often
#: ReFrame asks Slurm whether a job ended.  Its default decays from 10 Hz to
#: 0.1 Hz, so a case ends up to 10 s late; an sacct call per poll allows
#: 10 Hz down to 4 Hz (docs/measurements.md, "Where the time goes").
general = {'poll_rate_max': 10, 'poll_rate_min': 4, 'poll_rate_decay': 0.1}

#: The tightest tolerance `hpcnet baseline` gives this system (hpcnet.siteconfig.sites):
#: the nodes share the host's cores, so a stall moves a clean run's
#: calibrated figures by more than the baseline's sessions show
#: (docs/measurements.md, "A clean run right after a baseline (testbed)").
baseline_floor = 0.10

#: `hpcnet report` sets the Rocks cluster paper's tables beside this system's
#: sessions (hpcnet.siteconfig.sites): the paper measured this kind of link, not a site's.
report_sections = [('The Rocks cluster paper, Tables I-IV', 'paper', paper.report_section)]

if _rdma_device:
    system['partitions'].append(
        {**_common, 'name': 'roce',
         'descr': 'Soft-RoCE (rdma_rxe) on the veth links',
         'extras': partition_extras(fabric=Fabric.ROCE, iface='eth0', rdma_device=_rdma_device,
                                    rdma_port=1, gid_index=1, link_rate_bps=_rate_bps,
                                    num_nodes=_nodes, nodes_share_cores=True,
                                    topology=_topology)})
