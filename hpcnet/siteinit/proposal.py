"""From what Slurm and the nodes said to a site file: one hpcnet partition
per (Slurm partition x fabric found on all its probed nodes), each value
with the place it came from, rendered as ``config/systems/<name>.py``."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from hpcnet import fabrics
from hpcnet.constants import Fabric
from hpcnet.model import ConfigError, PartitionKey
from hpcnet.stacks.modulenames import ENVIRONMENT_NAME
from hpcnet.siteinit.slurm import SlurmPartition

@dataclass
class Proposal:
    """One hpcnet partition: ReFrame keys and extras, each (value, source)."""
    name: str
    slurm: str
    fabric: str
    descr: str
    extras: dict = field(default_factory=dict)   #: PartitionKey -> (value, source)


def _hosts(nodes: list) -> str:
    names = [n.host for n in nodes]
    return ', '.join(names) if len(names) <= 4 else f'{names[0]} .. {names[-1]} ({len(names)} nodes)'


def _same(values: dict) -> object:
    '''The one value all nodes gave, or None where they differ.'''
    distinct = set(values.values())
    return distinct.pop() if len(distinct) == 1 else None


def _differ(what: str, values: dict) -> str:
    return (f'not set: {what} differs between nodes ('
            + ', '.join(f'{h} {v}' for h, v in sorted(values.items())) + ')')


def _link_values(extras: dict, nodes: list, iface: str) -> None:
    '''mtu, link_speed_mbps and link_rate_bps of ``iface`` where every node agrees.'''
    where = _hosts(nodes)
    mtus = {n.host: n.interfaces[iface].mtu for n in nodes}
    if _same(mtus) is not None:
        extras[PartitionKey.MTU] = (_same(mtus), f'ip -j addr: mtu of {iface} on {where}')
    else:
        extras[PartitionKey.MTU] = (None, _differ(f'the MTU of {iface}', mtus))
    speeds = {n.host: n.interfaces[iface].speed_mbps for n in nodes}
    speed = _same(speeds)
    shaped = {n.host: n.interfaces[iface].shaped_bps for n in nodes}
    if speed:
        extras[PartitionKey.LINK_SPEED_MBPS] = (
            speed, f'/sys/class/net/{iface}/speed on {where} (what ethtool prints)')
    elif None in speeds.values():
        extras[PartitionKey.LINK_SPEED_MBPS] = (None, f'not set: {iface} reports no link speed '
                                                      'in sysfs on ' + ', '.join(
                                                          h for h, s in speeds.items() if s is None))
    else:
        extras[PartitionKey.LINK_SPEED_MBPS] = (None, _differ(f'the speed of {iface}', speeds))
    if any(shaped.values()):
        # A tbf qdisc sends slower than the link: that rate is the wire's.
        rate = _same(shaped)
        extras[PartitionKey.LINK_RATE_BPS] = (
            (rate, f'tc -j qdisc show dev {iface}: a root tbf sends at {rate / 1e6:g} Mbit/s '
                   f'on {where}') if rate else
            (None, _differ(f'the tbf rate (tc) of {iface}', shaped)))
    elif speed:
        extras[PartitionKey.LINK_RATE_BPS] = (speed * 10**6, f'{PartitionKey.LINK_SPEED_MBPS} x '
                                              '10^6 (no tc shaper on it)')


def _common(part: SlurmPartition, nodes: list) -> dict:
    extras = {PartitionKey.NUM_NODES: (
        part.total_nodes, f'scontrol show partition {part.name}: TotalNodes={part.total_nodes}')}
    boot_ids = {n.boot_id for n in nodes}
    if len(nodes) > 1 and len(boot_ids) == 1:
        extras[PartitionKey.NODES_SHARE_CORES] = (
            True, f'{_hosts(nodes)} report one boot_id ({boot_ids.pop()}): one kernel, so one '
                  "host's cores (an emulated cluster)")
    return extras


def tcp_proposal(part: SlurmPartition, nodes: list) -> tuple:
    '''(Proposal or None, why none): the fastest Ethernet interface that is up
    with an IPv4 address on every probed node.'''
    names = set.intersection(*(
        {i.name for i in n.interfaces.values() if i.kind == 'ether' and i.up and i.ipv4}
        for n in nodes))
    if not names:
        return None, (f'{part.name}: no Ethernet interface is up with an IPv4 address on every '
                      f'probed node ({_hosts(nodes)})')
    fastest = max(sorted(names), key=lambda name: min(n.interfaces[name].speed_mbps or 0
                                                      for n in nodes))
    others = sorted(names - {fastest})
    why = (f'up with an IPv4 address on {_hosts(nodes)}'
           + (f'; the fastest of {", ".join([fastest, *others])}' if others else ''))
    extras = {PartitionKey.FABRIC: (Fabric.TCP, f'TCP over {fastest}'),
              PartitionKey.IFACE: (fastest, why)}
    _link_values(extras, nodes, fastest)
    extras.update(_common(part, nodes))
    return Proposal(f'{part.name}-tcp', part.name, Fabric.TCP,
                    f'Slurm partition {part.name}: TCP over {fastest}', extras), None


def rdma_proposals(part: SlurmPartition, nodes: list) -> tuple:
    '''([Proposal], [why none]): one per RDMA fabric of the registry whose
    ports are ACTIVE on every probed node with the fabric's link layer; one
    that uses a GID (RoCE) needs a RoCE v2 GID with an IPv4 address, at one
    index on every node.'''
    active = [{(p.device, p.port): p for p in n.rdma_ports if p.state == 'ACTIVE'}
              for n in nodes]
    common = sorted(set.intersection(*(set(a) for a in active))) if active else []
    if not common:
        notes = sorted({note for n in nodes for note in n.notes})
        return [], [f'{part.name}: no RDMA port is ACTIVE on every probed node'
                    + (f' ({"; ".join(notes)})' if notes else '')]
    proposals, reasons = [], []
    for entry in fabrics.rdma_fabrics():
        fabric = entry.name
        infiniband = entry.link_layer == fabrics.LinkLayer.INFINIBAND
        chosen = []
        for dev, port in common:
            ports = [a[(dev, port)] for a in active]
            if any(p.infiniband != infiniband for p in ports):
                continue
            if entry.default_gid_index is None:
                chosen.append((dev, port, None, ports[0].netdev))
            else:
                index = {n.host: next((g.index for g in n.gids if (g.device, g.port) == (dev, port)
                                       and g.version == 'v2' and g.ipv4), None) for n in nodes}
                if _same(index) is None:
                    reasons.append(f'{part.name}: {dev}/{port} has no RoCE v2 GID with an IPv4 '
                                   'address at one index on every node ('
                                   + ', '.join(f'{h} {i}' for h, i in sorted(index.items())) + ')')
                    continue
                chosen.append((dev, port, _same(index), ports[0].netdev))
        if not chosen:
            continue
        devices = [c[0] for c in chosen]
        netdev = chosen[0][3]
        source = f'rdma link show: ACTIVE on {_hosts(nodes)}'
        extras = {PartitionKey.FABRIC: (fabric, source),
                  PartitionKey.RDMA_DEVICE: (devices[0] if len(devices) == 1 else devices, source),
                  PartitionKey.RDMA_PORT: (chosen[0][1], source)}
        if entry.default_gid_index is not None:
            extras[PartitionKey.GID_INDEX] = (chosen[0][2], 'show_gids (sysfs gid_attrs): the RoCE '
                                              'v2 GID with an IPv4 address, on every node')
        if netdev and all(netdev in n.interfaces for n in nodes):
            extras[PartitionKey.IFACE] = (netdev, f'rdma link show: netdev of {devices[0]}/'
                                                  f'{chosen[0][1]}')
            _link_values(extras, nodes, netdev)
        extras.update(_common(part, nodes))
        proposals.append(Proposal(f'{part.name}-{fabric}', part.name, fabric,
                                  f'Slurm partition {part.name}: {fabric} on {", ".join(devices)}',
                                  extras))
    return proposals, reasons


def propose(part: SlurmPartition, nodes: list) -> tuple:
    '''([Proposal], [why a fabric was not proposed]) for one Slurm partition
    whose probed nodes said ``nodes`` (NodeNetwork).'''
    if not nodes:
        return [], [f'{part.name}: no node answered the probe job']
    tcp, why = tcp_proposal(part, nodes)
    rdma, reasons = rdma_proposals(part, nodes)
    return ([tcp] if tcp else []) + rdma, ([why] if why else []) + reasons


def check_name(name: str) -> None:
    if not ENVIRONMENT_NAME.fullmatch(name):
        raise ConfigError(f'system name {name!r} is not valid (valid: letters, digits, _ and -, '
                          'not starting with a digit or -: a ReFrame system name)')


#: What ``--hostnames`` takes, as its error says.
HOSTNAMES_VALID = ("a Python regex ReFrame matches from the start of a login node's name, "
                   "one of them matching the host site init reads Slurm on, e.g. '^login[0-9]+$'")


def hostnames(given: list | None, host: str) -> tuple:
    '''(the site file's ``hostnames``, where they came from): ``given``
    (``--hostnames``, one per login node name or pattern), else ``host``
    alone.  A pattern that does not compile, or matches every name, is
    refused, and so are patterns none of which matches ``host`` (ReFrame on
    the host site init ran on would not pick the system).'''
    if not given:
        return [f'^{re.escape(host)}$'], 'this host (hostname): ReFrame picks the system by it'
    for pattern in given:
        try:
            matches_all = re.match(pattern, '') is not None
        except re.error as err:
            raise ConfigError(f'--hostnames {pattern!r}: not a regular expression ({err}) '
                              f'(valid: {HOSTNAMES_VALID})') from None
        if matches_all:
            raise ConfigError(f'--hostnames {pattern!r}: matches every host name (valid: '
                              f'{HOSTNAMES_VALID})')
    if not any(re.match(pattern, host) for pattern in given):
        raise ConfigError(f'--hostnames {" ".join(map(repr, given))}: none matches {host!r}, '
                          f'the host site init reads Slurm on (valid: {HOSTNAMES_VALID})')
    return list(given), f'--hostnames (site init ran on {host}): ReFrame picks the system by them'


def _line(key: str, value, source: str, indent: str, argument: bool = False) -> str:
    '''One value with its source: a dictionary entry, or (``argument``) a
    keyword argument; a value not found is a comment saying why.'''
    if value is None:
        return f'{indent}# {key}: {source}'
    text = f'{indent}{key}={value!r},' if argument else f'{indent}{key!r}: {value!r},'
    return f'{text}  # {source}'


def render(name: str, host: str, proposals: list, skipped: list, partitions: list,
           slurm_nodes: tuple = (), pmis: tuple = (), left_out: tuple = (),
           access: tuple = (), login_hosts: tuple | None = None) -> str:
    '''The site file's text: every value with a comment saying where it came from
    (``slurm_nodes``: SlurmNode, whose features and GRES each partition lists;
    ``pmis``: what ``srun --mpi=list`` offers; ``left_out``: which nodes the
    probe did not run on, and why; ``access``: the job options given to
    site init, --reservation, --account, --qos; ``login_hosts``: hostnames()
    of --hostnames, default ``host`` alone).'''
    patterns, patterns_source = login_hosts or hostnames(None, host)
    check_name(name)
    out = [f'"""`{name}`: written by `hpcnet site init {name}` on {host} from what Slurm',
           '(scontrol) and one probe job per partition (ip, sysfs, rdma link, GIDs) said.',
           'Every value says where it came from; change what the cluster does not say',
           f'(docs/site-guide.md, "A site file"), then `hpcnet site check --system {name}`.']
    if skipped:
        out += ['', 'Not proposed:'] + [f'- {s}' for s in skipped]
    if left_out:
        out += ['', 'Not probed (the checks run on the nodes idle when they start, at least '
                'two):'] + [f'- {s}' for s in left_out]
    out += ['"""', 'from hpcnet.constants import DEFAULT_JOB_TIME_LIMIT',
            'from hpcnet.model import partition_extras', '', 'system = {',
            f'    {"name"!r}: {name!r},  # the NAME given to hpcnet site init',
            f'    {"descr"!r}: {f"Written by hpcnet site init on {host}"!r},  # where and how',
            f'    {"hostnames"!r}: {patterns!r},  # {patterns_source}',
            f'    {"partitions"!r}: [  # one per Slurm partition x fabric found on all its nodes']
    by_name = {p.name: p for p in partitions}
    for prop in proposals:
        slurm_part = by_name[prop.slurm]
        ind = ' ' * 12
        mine = [n for n in slurm_nodes if n.name in slurm_part.nodes]
        features = sorted({f for n in mine for f in n.features}) or ['none']
        gres = sorted({n.gres for n in mine if n.gres}) or ['none']
        out += ['        {',
                f'            # scontrol show node: features {", ".join(features)}; GRES '
                f'{", ".join(gres)}',
                _line('name', prop.name, f'Slurm partition {prop.slurm} x fabric {prop.fabric}', ind),
                _line('descr', prop.descr, 'what was found', ind),
                _line('scheduler', 'slurm', 'scontrol answered on this host', ind),
                _line('launcher', 'srun', "Slurm's own launcher; the PMI per MPI family is the "
                      'fabric table\'s (config/fabrics.yaml, launchers.srun) unless extras pmi '
                      'says' + (f' (srun --mpi=list: {", ".join(pmis)})' if pmis else ''), ind),
                _line('access', [f'--partition={prop.slurm}', '--exclusive', *access],
                      f'Slurm partition {prop.slurm}; --exclusive: timed runs never share a node'
                      + (' (the partition is OverSubscribe=EXCLUSIVE too)' if slurm_part.exclusive
                         else '') + (f'; {" ".join(access)}: given to site init' if access else ''),
                      ind),
                f"{ind}'time_limit': DEFAULT_JOB_TIME_LIMIT,  # hpcnet's limit per job",
                f'{ind}{"extras"!r}: partition_extras(  # what the checks read (PartitionKey)']
        for key in PartitionKey.ALL:
            if key in prop.extras:
                value, source = prop.extras[key]
                out.append(_line(key, value, source, ' ' * 16, argument=True))
        out += [f'{ind}),', '        },']
    out += ['    ],', '}', '',
            '# Which environments this system gets (docs/site-guide.md): all that hpcnet finds',
            '# unless `stacks` says, e.g.',
            "# stacks = {'environments': {'include': [r'^GCC-'], 'exclude': []}, 'pypi_stacks': False}",
            '']
    return '\n'.join(out)
