"""What a node says about its network: one job per partition runs
:data:`PROBE_SCRIPT` once on each node (``srun -l``: every line carries its
task number), and :func:`parse_probe` reads it back into a
:class:`NodeNetwork` per node.

The sections are the tools' own output: ``ip -j addr`` (interfaces, MTU,
state, addresses), each interface's speed from sysfs (what ethtool prints),
``rdma link show`` (RDMA ports and their net devices), and the GID table in
the format of Mellanox's ``show_gids`` (read from the same sysfs files it
reads), so recorded outputs of those tools are parsed as they are; and each
interface's root qdisc (``tc -j qdisc show``), as the calibration reads it
(hpcnet.parsers.qdiscs): a tbf there sends slower than the link.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from hpcnet.parsers import qdiscs

_MARK = '@@hpcnet-site-init'

#: POSIX shell run once on each node.
PROBE_SCRIPT = f'''
echo "{_MARK} host $(hostname)"
echo "{_MARK} boot_id $(cat /proc/sys/kernel/random/boot_id)"
echo "{_MARK} ip-addr"; ip -j addr show
echo "{_MARK} speed"
for d in /sys/class/net/*; do echo "${{d##*/}} $(cat "$d/speed" 2>/dev/null || echo -)"; done
echo "{_MARK} tc"
for d in /sys/class/net/*; do
  printf "hpcnet-shaper: %s %s %s\\n" "$(hostname)" "${{d##*/}}" "$(tc -j qdisc show dev "${{d##*/}}" 2>&1 | tr -d "\\n")"
done
echo "{_MARK} rdma-link"; rdma link show 2>&1 || true
echo "{_MARK} gids"
printf 'DEV\\tPORT\\tINDEX\\tGID\\t\\t\\t\\t\\tIPv4  \\t\\tVER\\tDEV\\n'
for p in /sys/class/infiniband/*/ports/*; do
  [ -d "$p/gids" ] || continue
  dev=${{p%/ports/*}}; dev=${{dev##*/}}; port=${{p##*/}}
  for g in "$p"/gids/*; do
    i=${{g##*/}}; gid=$(cat "$g" 2>/dev/null) || continue
    case $gid in 0000:0000:0000:0000:0000:0000:0000:0000|"") continue;; esac
    t=$(cat "$p/gid_attrs/types/$i" 2>/dev/null); v=v1; [ "$t" = "RoCE v2" ] && v=v2
    nd=$(cat "$p/gid_attrs/ndevs/$i" 2>/dev/null)
    ip4=""; case $gid in 0000:0000:0000:0000:0000:ffff:*)
      h=${{gid#0000:0000:0000:0000:0000:ffff:}}; h=$(echo "$h" | tr -d :)
      ip4=$(printf '%d.%d.%d.%d' 0x${{h%??????}} 0x$(echo $h | cut -c3-4) 0x$(echo $h | cut -c5-6) 0x${{h#??????}});;
    esac
    printf '%s\\t%s\\t%s\\t%s\\t%s  \\t%s\\t%s\\n' "$dev" "$port" "$i" "$gid" "$ip4" "$v" "$nd"
  done
done
echo "{_MARK} end"
'''


@dataclass(frozen=True)
class Interface:
    name: str
    mtu: int
    up: bool
    ipv4: tuple               #: addresses
    speed_mbps: int | None    #: sysfs speed; None where the device has none (-1, unreadable)
    kind: str = 'ether'       #: ip's link_type: ether, loopback, infiniband, ...
    shaped_bps: int | None = None   #: the rate of a root tbf qdisc (tc), if one shapes it


@dataclass(frozen=True)
class RdmaPort:
    device: str
    port: int
    state: str                #: ACTIVE, DOWN, ...
    netdev: str | None
    infiniband: bool          #: `rdma link` shows a LID: an InfiniBand port


@dataclass(frozen=True)
class Gid:
    device: str
    port: int
    index: int
    gid: str
    ipv4: str | None
    version: str              #: 'v1' (IB or RoCE v1), 'v2' (RoCE v2)
    netdev: str | None


@dataclass
class NodeNetwork:
    host: str
    boot_id: str = ''
    interfaces: dict = field(default_factory=dict)   #: name -> Interface
    rdma_ports: list = field(default_factory=list)
    gids: list = field(default_factory=list)
    #: what a tool printed instead of its output (`rdma link show` without RDMA)
    notes: list = field(default_factory=list)


def parse_shapers(text: str) -> dict:
    '''{interface: rate of its root tbf in bit/s, or None} of the
    ``hpcnet-shaper: <host> <interface> <tc -j qdisc show>`` lines.'''
    rates = {}
    for line in text.splitlines():
        words = line.split(' ', 3)
        if len(words) == 4 and words[0] == 'hpcnet-shaper:':
            try:
                (iface,) = qdiscs.interfaces(line).values()
            except qdiscs.ShapingError as err:
                raise ProbeError(str(err)) from None
            roots = [q for q in iface.qdiscs if q.get('root') and q.get('kind') == 'tbf']
            rates[words[2]] = int(roots[0]['options']['rate']) * 8 if roots else None
    return rates


def parse_ip_addr(text: str, speeds: dict, shapers: dict | None = None) -> dict:
    '''{name: Interface} of ``ip -j addr show``; ``speeds`` {name: Mb/s or None},
    ``shapers`` {name: tbf rate in bit/s or None}.'''
    shapers = shapers or {}
    out = {}
    for link in json.loads(text or '[]'):
        name = link['ifname']
        out[name] = Interface(
            name=name, mtu=int(link.get('mtu', 0)),
            up='UP' in link.get('flags', []) and link.get('operstate') in ('UP', 'UNKNOWN'),
            ipv4=tuple(a['local'] for a in link.get('addr_info', []) if a.get('family') == 'inet'),
            speed_mbps=speeds.get(name), kind=link.get('link_type', ''),
            shaped_bps=shapers.get(name))
    return out


def parse_speeds(text: str) -> dict:
    '''{interface: Mb/s or None} of the ``<name> <speed>`` lines (sysfs
    ``speed`` reads -1, or fails, where a device has no link speed).'''
    speeds = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            speeds[parts[0]] = int(parts[1]) if re.fullmatch(r'\d+', parts[1]) and int(parts[1]) > 0 else None
    return speeds


_RDMA_LINK = re.compile(r'^link (\S+)/(\d+) (.*)$')


def parse_rdma_link(text: str) -> tuple:
    '''([RdmaPort], notes) of ``rdma link show``: RoCE ports print
    ``link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev p1p1``, IB
    ports ``link mlx5_7/1 subnet_prefix ... lid 3403 ... state ACTIVE ...``;
    any other line (no RDMA in the kernel) is a note.'''
    ports, notes = [], []
    for line in text.splitlines():
        m = _RDMA_LINK.match(line.strip())
        if not m:
            if line.strip():
                notes.append(f'rdma link show: {line.strip()}')
            continue
        words = m.group(3).split()
        attrs = dict(zip(words[::2], words[1::2]))
        ports.append(RdmaPort(m.group(1), int(m.group(2)), attrs.get('state', ''),
                              attrs.get('netdev'), 'lid' in attrs))
    return ports, notes


_GID_LINE = re.compile(r'^(\S+)\s+(\d+)\s+(\d+)\s+([0-9a-fA-F:]{39})\s+'
                       r'(?:(\d+\.\d+\.\d+\.\d+)\s+)?(v\d)\s*(\S*)\s*$')


def parse_gids(text: str) -> list:
    '''[Gid] of ``show_gids`` output (header lines and n_gids_found are skipped).'''
    gids = []
    for line in text.splitlines():
        m = _GID_LINE.match(line)
        if m:
            gids.append(Gid(m.group(1), int(m.group(2)), int(m.group(3)), m.group(4).lower(),
                            m.group(5), m.group(6), m.group(7) or None))
    return gids


def _sections(lines: list) -> dict:
    out, name = {}, None
    for line in lines:
        if line.startswith(_MARK + ' '):
            words = line[len(_MARK) + 1:].split(' ', 1)
            name = words[0]
            out[name] = [words[1]] if len(words) > 1 else []
        elif name is not None:
            out[name].append(line)
    return {k: '\n'.join(v) for k, v in out.items()}


class ProbeError(ValueError):
    """A node's probe output is incomplete."""


def parse_probe(text: str) -> list:
    '''[NodeNetwork] of the output of ``srun -l ... sh -c PROBE_SCRIPT``
    (lines ``<task>: <text>``), one per task that printed the whole probe.'''
    by_task = {}
    for line in text.splitlines():
        m = re.match(r'^\s*(\d+): ?(.*)$', line)
        if m:
            by_task.setdefault(int(m.group(1)), []).append(m.group(2))
    nodes = []
    for task, lines in sorted(by_task.items()):
        sec = _sections(lines)
        if 'end' not in sec or 'host' not in sec:
            raise ProbeError(f'task {task} of the probe job stopped early: '
                             f'{" | ".join(lines[-3:]) or "(no output)"}')
        ports, notes = parse_rdma_link(sec.get('rdma-link', ''))
        nodes.append(NodeNetwork(
            host=sec['host'].strip(), boot_id=sec.get('boot_id', '').strip(),
            interfaces=parse_ip_addr(sec.get('ip-addr', ''), parse_speeds(sec.get('speed', '')),
                                     parse_shapers(sec.get('tc', ''))),
            rdma_ports=ports, gids=parse_gids(sec.get('gids', '')), notes=notes))
    return nodes
