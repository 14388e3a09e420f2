"""A Slurm virtual cluster on one host, for running the suite for real.

``hpcnet testbed up`` builds, as root, a head node (``hn0``) and N compute
nodes (``cn1`` ... ``cnN``). Every node is its own network namespace, UTS
namespace (its own hostname) and mount namespace (its own SlurmdSpoolDir,
TmpFS, sysfs and /etc/hosts); each node's ``eth0`` is one end of a veth pair
whose other end is a port of a bridge living in a namespace of its own
(``<name>-br``); with ``--leaves L`` the compute nodes spread over L leaf
bridges joined by a veth uplink each to a spine bridge, where the head node
hangs (hpcnet.testbed.tree). Addresses (10.77.0.0/24 by default) exist only inside those
namespaces; the root namespace gets none and no route. A private munged,
slurmctld (head node) and one ``slurmd -N cnX`` per compute node run with
configuration generated into the state directory, from the templates in
``ci/testbed/``. Every link can be shaped with a ``tbf`` qdisc, and one
pair's path with a ``tbf`` per peer under an ``htb`` (hpcnet.testbed.shaping).

Everything ``up`` creates is recorded, as it is created, in
``<state-dir>/state.json``; ``down`` (and a failed ``up``) undo exactly that,
in reverse: the recorded daemons (SIGTERM, bounded wait, SIGKILL), then any
process left inside the namespaces, then mounts, namespaces, veths, bridge,
files.

API for the ReFrame integration (see ``Testbed``)::

    tb = Testbed()                  # default state dir /run/hpcnet-testbed
    tb.head_prefix()                # ['nsenter', '--net=...', ..., '--']
    tb.slurm_conf                   # path to export as SLURM_CONF
    tb.env()                        # {'SLURM_CONF': ..., 'PATH': <bin>:...}
    tb.nodes(), tb.addresses()      # names and addresses
    tb.iface, tb.rate               # 'eth0', '1gbit' (or None)

CLI: ``hpcnet testbed up|down|exec|status|shape`` (hpcnet.commands.testbed).

The package is the lab beside the product, which never imports it: with the
cluster live the Rocks paper's tables (:mod:`.paper`, `hpcnet paper` and the
testbed site file's report section) and the EasyBuild module trees CI and
the tests load (:mod:`.moduletree`).
"""
from hpcnet.testbed.cluster import Testbed
from hpcnet.testbed.config import (DEFAULTS, StepError, TestbedError, TestbedUsageError,
                                   burst_bytes, rate_bps)
from hpcnet.testbed.leftovers import leftovers
from hpcnet.testbed.processes import unavailable_reason

__all__ = ['DEFAULTS', 'StepError', 'Testbed', 'TestbedError', 'TestbedUsageError', 'leftovers',
           'rate_bps', 'burst_bytes', 'unavailable_reason']
