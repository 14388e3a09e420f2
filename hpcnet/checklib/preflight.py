"""Preflight of a partition's fabric, read from sysfs on every node.

Ethernet: the interface exists and is up, its MTU (and speed, where the
partition states one) are as configured, and its error/drop counters.
RDMA (RoCE/IB): the device exists, the port is ACTIVE, its link layer matches
the fabric, RoCE has a RoCE v2 GID at the configured index, and the active MTU.

The job runs :func:`probe_script` on each node; it prints ``key=value`` lines
that :func:`parse` reads.  Everything is read from sysfs (what `ip link`,
`rdma link` and `ibv_devinfo` report comes from the same kernel attributes),
under a root that tests point at a fake tree.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from hpcnet import fabrics
from hpcnet.variables import SYSFS_ROOT_ENV

#: How sysfs (and ibv_devinfo) name an active port (include/rdma/ib_verbs.h).
PORT_ACTIVE = '4: ACTIVE'

_LINE = re.compile(r'^hpcnet-preflight: (\S+) (\S+)=(.*)$', re.M)


def probe_script(iface: str | None, rdma_dev: str | None, rdma_port: int = 1,
                 gid_index: int | None = None) -> str:
    '''POSIX shell printing ``hpcnet-preflight: <host> key=value`` lines.'''
    for name, value in (('iface', iface), ('rdma_device', rdma_dev)):
        if value is not None and not re.fullmatch(r'[\w.:-]+', str(value)):
            raise ValueError(f'{name} {value!r} is not a valid device name')
    lines = [f'R="${{{SYSFS_ROOT_ENV}:-/sys}}"', 'H=$(hostname)',
             'p() { echo "hpcnet-preflight: $H $1=$2"; }',
             'rd() { if [ -r "$1" ]; then cat "$1"; else echo missing; fi; }']
    if iface:
        n = f'$R/class/net/{iface}'
        lines += [f'if [ -d {n} ]; then',
                  f'  p iface_present yes; p operstate "$(rd {n}/operstate)"',
                  f'  p flags "$(rd {n}/flags)"; p mtu "$(rd {n}/mtu)"',
                  f'  p speed_mbps "$(rd {n}/speed 2>/dev/null)"',
                  '  for c in rx_errors tx_errors rx_dropped tx_dropped rx_crc_errors carrier_changes; do',
                  f'    if [ -r {n}/statistics/$c ]; then p $c "$(cat {n}/statistics/$c)"; fi; done',
                  f'  if [ -r {n}/carrier_changes ]; then p carrier_changes "$(cat {n}/carrier_changes)"; fi',
                  'else p iface_present no; fi']
    if rdma_dev:
        # RDMA keys carry the device: 'rdma_present@mlx5_0=yes' (several per node).
        lines.append(f'p() {{ echo "hpcnet-preflight: $H $1@{rdma_dev}=$2"; }}')
        d = f'$R/class/infiniband/{rdma_dev}'
        port = f'{d}/ports/{rdma_port}'
        lines += [f'if [ -d {d} ]; then',
                  f'  p rdma_present yes; p port_state "$(rd {port}/state)"',
                  f'  p link_layer "$(rd {port}/link_layer)"; p phys_state "$(rd {port}/phys_state)"',
                  f'  p rate "$(rd {port}/rate)"']
        if gid_index is not None:
            lines += [f'  p gid "$(rd {port}/gids/{gid_index})"',
                      f'  p gid_type "$(rd {port}/gid_attrs/types/{gid_index} 2>/dev/null)"',
                      f'  p gid_ndev "$(rd {port}/gid_attrs/ndevs/{gid_index} 2>/dev/null)"']
        lines += ['else p rdma_present no; p rdma_devices "$(ls $R/class/infiniband 2>/dev/null | tr "\\n" " ")"; fi']
    return '\n'.join(lines)


@dataclass
class NodeReport:
    host: str
    values: dict = field(default_factory=dict)

    def int(self, key: str) -> int | None:
        v = self.values.get(key, '')
        return int(v) if re.fullmatch(r'-?\d+', v) else None


def parse(text: str) -> dict:
    '''host -> NodeReport.'''
    nodes = {}
    for host, key, value in _LINE.findall(text):
        nodes.setdefault(host, NodeReport(host)).values[key] = value.strip()
    return nodes


def parse_device(text: str, dev: str) -> dict:
    '''host -> NodeReport of the RDMA keys of device ``dev``.'''
    nodes = {}
    for host, key, value in _LINE.findall(text):
        if key.endswith(f'@{dev}'):
            nodes.setdefault(host, NodeReport(host)).values[key[:-len(dev) - 1]] = value.strip()
    return nodes


def _iface_up(node: NodeReport, iface: str) -> bool:
    # Loopback reports operstate 'unknown'; IFF_UP (bit 0 of flags) is the truth.
    flags = node.values.get('flags', '0x0')
    try:
        is_up = bool(int(flags, 16) & 0x1)
    except ValueError:
        is_up = False
    return node.values.get('operstate') == 'up' or (is_up and node.values.get('operstate') == 'unknown')


def ethernet_problems(node: NodeReport, iface: str, mtu: int | None = None,
                      speed_mbps: int | None = None) -> list:
    '''What is wrong with ``iface`` on one node (empty: nothing), against the
    partition's ``mtu`` and ``speed_mbps`` where it states them.'''
    if node.values.get('iface_present') != 'yes':
        return [f'{node.host}: interface {iface} does not exist']
    problems = []
    if not _iface_up(node, iface):
        problems.append(f'{node.host}: {iface} is not up (operstate '
                        f'{node.values.get("operstate")}, flags {node.values.get("flags")})')
    if mtu and node.int('mtu') != mtu:
        problems.append(f'{node.host}: {iface} MTU is {node.values.get("mtu")}, '
                        f'the partition says {mtu}')
    if speed_mbps and node.int('speed_mbps') != speed_mbps:
        problems.append(f'{node.host}: {iface} speed is {node.values.get("speed_mbps")} Mb/s, '
                        f'the partition says {speed_mbps}')
    return problems


def rdma_problems(node: NodeReport, fabric: str, dev: str, gid_index) -> list:
    if node.values.get('rdma_present') != 'yes':
        present = node.values.get('rdma_devices', '').strip() or 'none'
        return [f'{node.host}: RDMA device {dev} does not exist (devices: {present})']
    problems = []
    if node.values.get('port_state') != PORT_ACTIVE:
        problems.append(f'{node.host}: {dev} port state is {node.values.get("port_state")!r}, '
                        f'not {PORT_ACTIVE!r}')
    entry = fabrics.fabric(fabric)
    want_layer = entry.link_layer
    if node.values.get('link_layer') != want_layer:
        problems.append(f'{node.host}: {dev} link layer is {node.values.get("link_layer")}, '
                        f'fabric {fabric} needs {want_layer}')
    if entry.default_gid_index is not None and gid_index is not None:
        gid = node.values.get('gid', 'missing')
        if gid in ('missing', '') or set(gid.replace(':', '')) == {'0'}:
            problems.append(f'{node.host}: {dev} has no GID at index {gid_index}')
        elif node.values.get('gid_type') != 'RoCE v2':
            problems.append(f'{node.host}: {dev} GID {gid_index} is '
                            f'{node.values.get("gid_type")!r}, not RoCE v2')
    return problems


# --------------------------------------------------------------------------
# RDMA readiness inside an MPI job: on every node it uses, before the MPI runs
# --------------------------------------------------------------------------

_RDMA_MISSING = re.compile(r'^hpcnet-rdma-missing: (\S+) (\S+) ?(.*)$', re.M)


def rdma_probe_command(devices) -> str:
    '''A POSIX shell command printing one ``hpcnet-rdma-missing:`` line per
    device of ``devices`` this node lacks (with the devices it has).'''
    for dev in devices:
        if not re.fullmatch(r'[\w.-]+', dev):
            raise ValueError(f'RDMA device {dev!r} is not a valid device name')
    script = (f'R="${{{SYSFS_ROOT_ENV}:-/sys}}/class/infiniband"; for d in {" ".join(devices)}; do '
              '[ -d "$R/$d" ] || echo "hpcnet-rdma-missing: $(hostname) $d '
              '$(ls "$R" 2>/dev/null | tr "\n" " ")"; done')
    return f"sh -c '{script}'"


def rdma_missing(text: str) -> str | None:
    '''Why the job's nodes cannot run the RDMA fabric, or None.'''
    lines = _RDMA_MISSING.findall(text)
    if not lines:
        return None
    return '; '.join(f'{host} has no RDMA device {dev} (devices there: '
                     f'{present.strip() or "none; no RDMA device or driver"})'
                     for host, dev, present in lines)
