"""The testbed's switch tree (``hpcnet testbed up --leaves L``): the compute
nodes spread over L leaf bridges, each in its own network namespace
(``<name>-leaf1`` ...), every leaf joined to one spine bridge
(``<name>-spine``, where the head node hangs) by one veth pair, its uplink.

Functions only: who hangs off which leaf, Slurm's ``topology.conf`` of it,
and the devices of an uplink; ``Testbed`` builds and shapes with them.  One leaf is the single bridge ``<name>-br`` of before, and no tree.
"""
from __future__ import annotations

from hpcnet.testbed.config import TestbedUsageError

#: Slurm's switch names, and how the leaves are named by number.
SPINE, LEAF = 'spine', 'leaf'
#: The uplink veth's end in a leaf's namespace; its spine end is port_of(leaf).
UPLINK_DEV = 'uplink'


def leaf_names(count: int) -> list[str]:
    return [f'{LEAF}{i}' for i in range(1, count + 1)]


def check_leaves(leaves: int, nodes: int) -> None:
    """A leaf without a node is no switch Slurm accepts: 1..nodes leaves."""
    if not 1 <= leaves <= nodes:
        raise TestbedUsageError(f'--leaves {leaves}: valid: 1..{nodes} (every leaf needs a '
                                f'compute node of the {nodes} of --nodes)')


def spread(nodes: list[str], leaves: int) -> dict[str, list[str]]:
    """{leaf: its nodes}: ``nodes`` in order, evenly, the first leaves one
    more where they do not divide (cn1..cnk on leaf1, ...)."""
    check_leaves(leaves, len(nodes))
    per, extra = divmod(len(nodes), leaves)
    out, start = {}, 0
    for i, leaf in enumerate(leaf_names(leaves)):
        size = per + (i < extra)
        out[leaf] = list(nodes[start:start + size])
        start += size
    return out


def port_of(name: str) -> str:
    """The bridge port a node's (or a leaf's uplink) veth has on its switch."""
    return f'v-{name}'


def topology_conf(leaves: dict[str, list[str]]) -> str:
    """Slurm's topology.conf (topology/tree plugin) of the tree: a line per
    leaf with its nodes, then the spine with every leaf.  The head node is
    no Slurm node, so it is in no line."""
    lines = ['# Switch tree of the hpcnet testbed (hpcnet testbed up --leaves): generated.']
    lines += [f'SwitchName={leaf} Nodes={",".join(nodes)}' for leaf, nodes in leaves.items()]
    lines.append(f'SwitchName={SPINE} Switches={",".join(leaves)}')
    return '\n'.join(lines) + '\n'


def uplink_ends(spine_netns: str, leaf_netns: str, leaf: str) -> tuple:
    """((namespace, device) of each end of ``leaf``'s uplink): the spine's
    port, which sends toward the leaf, and the leaf's end, which sends
    toward the spine; shaping each end's egress shapes both directions."""
    return ((spine_netns, port_of(leaf)), (leaf_netns, UPLINK_DEV))
