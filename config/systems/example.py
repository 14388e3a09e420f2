"""`example`: the template of a real site.  Copy this file to
`config/systems/<your system>.py`, set `name`, `hostnames`, each partition's
`access` and the devices of your nodes; nothing else needs to change.

Each partition tests one fabric and says so in its extras (see
hpcnet.model.partition_extras for every setting, and docs/site-guide.md,
"A site file"); `environs` is filled in by config/settings.py with every
compiler x MPI environment hpcnet finds, unless a partition lists its own;
a `stacks` mapping here would choose among them, extras `pmi` the PMI
of srun, and `baseline_floor` the tightest tolerance of a baseline
(docs/site-guide.md, "A site file").
"""
from hpcnet.constants import DEFAULT_JOB_TIME_LIMIT, Fabric
from hpcnet.model import partition_extras

_common = {'scheduler': 'slurm', 'launcher': 'srun', 'time_limit': DEFAULT_JOB_TIME_LIMIT}

system = {
    'name': 'example',
    'descr': 'Example site: 25 GbE and 100 GbE RoCE v2 partitions',
    'hostnames': [r'^example-login\d+$'],
    'partitions': [
        {**_common, 'name': 'eth', 'access': ['--partition=eth', '--exclusive'],
         'descr': '25 Gigabit Ethernet, TCP',
         'extras': partition_extras(fabric=Fabric.TCP, iface='eno1', link_rate_bps=25 * 10**9,
                                    mtu=9000, link_speed_mbps=25000, num_nodes=16)},
        {**_common, 'name': 'roce', 'access': ['--partition=roce', '--exclusive'],
         'descr': '100 GbE RoCE v2 (ConnectX)',
         'extras': partition_extras(fabric=Fabric.ROCE, iface='ens1f0np0', rdma_device='mlx5_0',
                                    rdma_port=1, gid_index=3, link_rate_bps=100 * 10**9,
                                    num_nodes=16)},
    ],
}
