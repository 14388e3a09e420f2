"""What tc shapes on a path: each node's interface's qdiscs, classes and
filters, followed toward the path's other end, and the lowest rate on the way.

A node prints, in the job, one tagged line per tc view of its interface::

    hpcnet-shaper: cn1 eth0 <tc -j qdisc show dev eth0>
    hpcnet-classes: cn1 eth0 <tc class show dev eth0, lines joined by ';'>
    hpcnet-filters: cn1 eth0 <tc -j filter show dev eth0>
    hpcnet-address: cn1 eth0 <ip -j -4 addr show dev eth0>

Classes are read as text: iproute2 6.1 prints htb classes as text even
under ``-j``.  The tree is followed as the kernel sorts a frame to a peer:
a tbf shapes all it is given and passes it to its child; an htb sends it to
the class of the first u32 filter matching the peer's address (an IPv4
destination, offset 16), else to its default class, capped by the ceil of
that class and of each class above it.  Anything else (another classful
qdisc, a filter not on the destination address, a peer address unknown)
is not followed: then every rate on the interface counts, so no shaping
goes unseen.
"""
from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass, field

_LINE = re.compile(r'^hpcnet-(shaper|classes|filters|address): (\S+) (\S+) ?(.*)$', re.M)
_CLASS = re.compile(r'^class (\S+) (\S+) (?:root|parent (\S+))')
_CEIL = re.compile(r' ceil (\d+(?:\.\d+)?)([KMGT]?)(i?)bit\b')
_UNIT = {'': 0, 'K': 1, 'M': 2, 'G': 3, 'T': 4}
#: Where a u32 match on an IPv4 header reads the destination address.
IPV4_DST_OFFSET = 16
#: qdiscs that shape nothing and have no children: the end of a path.
LEAVES = ('noqueue', 'pfifo_fast', 'pfifo', 'bfifo', 'fq_codel', 'codel', 'sfq', 'mq')


class ShapingError(ValueError):
    '''A node's tc views could not be read (says which and what they said).'''


def tc_rate_bps(number: str, prefix: str, binary: str) -> int:
    '''A rate as tc prints it (``700Mbit``, ``100Gbit``, ``1Gibit``) in bit/s.'''
    return int(float(number) * (1024 if binary else 1000) ** _UNIT[prefix])


@dataclass
class Interface:
    '''One node's interface as tc shows it.'''
    host: str
    name: str
    qdiscs: list = field(default_factory=list)
    classes: dict = field(default_factory=dict)     #: classid -> (parent classid or None, ceil bit/s or None)
    filters: list = field(default_factory=list)
    addresses: list = field(default_factory=list)

    def qdisc_under(self, parent: str) -> dict | None:
        return next((q for q in self.qdiscs if q.get('parent') == parent), None)

    def every_rate(self) -> list:
        '''(bit/s, what) of every tbf and every htb class ceil on the interface.'''
        rates = [(int(q['options']['rate']) * 8, f'tbf {q["handle"]}')
                 for q in self.qdiscs if q.get('kind') == 'tbf']
        rates += [(ceil, f'htb class {classid}') for classid, (_, ceil) in self.classes.items()
                  if ceil is not None]
        return rates

    def htb_class_of(self, htb: dict, peers: list) -> str | None:
        '''The class an htb sends frames to ``peers`` to ('' when it sends
        them unshaped), or None where its filters cannot be followed.'''
        handle = htb['handle']
        own = [f for f in self.filters if f.get('parent') == handle]
        for entry in own:
            options = entry.get('options') or {}
            if 'flowid' not in options:
                continue        # a u32 hash table's own entry, no match of its own
            match = options.get('match')
            if entry.get('kind') != 'u32' or not match or not peers \
                    or int(match.get('off', -1)) != IPV4_DST_OFFSET:
                return None
            value, mask = int(match['value'], 16), int(match['mask'], 16)
            hits = [(int(ipaddress.IPv4Address(p)) & mask) == (value & mask) for p in peers]
            if all(hits):
                return options['flowid']
            if any(hits):
                return None     # the peers' frames take different classes
        default = int(str(htb.get('options', {}).get('default', '0')), 16)
        return f'{handle.rstrip(":")}:{default:x}' if default else ''

    def path(self, peers: list) -> list:
        '''(bit/s, what) of each shaper a frame to ``peers`` passes.'''
        limits, qdisc = [], next((q for q in self.qdiscs if q.get('root')), None)
        while qdisc is not None:
            kind, handle = qdisc.get('kind'), qdisc.get('handle', '')
            if kind == 'tbf':
                limits.append((int(qdisc['options']['rate']) * 8, f'tbf {handle}'))
                qdisc = self.qdisc_under(f'{handle.rstrip(":")}:1')
            elif kind == 'htb':
                classid = self.htb_class_of(qdisc, peers)
                if classid is None:
                    return self.every_rate()
                ancestor = classid
                while ancestor in self.classes:
                    parent, ceil = self.classes[ancestor]
                    if ceil is not None:
                        limits.append((ceil, f'htb class {ancestor}'))
                    ancestor = parent
                qdisc = self.qdisc_under(classid) if classid else None
            elif kind in LEAVES:
                qdisc = None
            else:
                return self.every_rate()
        return limits


def _json(host: str, command: str, said: str):
    try:
        return json.loads(said)
    except ValueError:
        raise ShapingError(f'{host}: `{command}` said: {said.strip() or "(nothing)"}') from None


def _classes(text: str) -> dict:
    classes = {}
    for line in text.split(';'):
        found = _CLASS.match(line.strip())
        if found and found.group(1) == 'htb':
            ceil = _CEIL.search(line)
            classes[found.group(2)] = (found.group(3), tc_rate_bps(*ceil.groups()) if ceil else None)
    return classes


def interfaces(text: str) -> dict:
    '''host -> Interface, from a probe's tagged lines.'''
    found = {}
    for view, host, iface, said in _LINE.findall(text):
        each = found.setdefault(host, Interface(host, iface))
        if view == 'shaper':
            each.qdiscs = [q for q in _json(host, f'tc -j qdisc show dev {iface}', said)
                           if isinstance(q, dict)]
        elif view == 'classes':
            each.classes = _classes(said)
        elif view == 'filters':
            each.filters = [f for f in _json(host, f'tc -j filter show dev {iface}', said)
                            if isinstance(f, dict)]
        else:
            each.addresses = [a['local'] for link in _json(host, f'ip -j -4 addr show dev {iface}',
                                                           said)
                              for a in link.get('addr_info', []) if a.get('family') == 'inet']
    return found


def path_rates(text: str) -> dict:
    '''host -> (the lowest rate in bit/s its interface sends toward the
    path's other nodes at, or None where nothing shapes it; what sets it).'''
    nodes = interfaces(text)
    rates = {}
    for host, iface in nodes.items():
        peers = [a for other in nodes.values() if other is not iface for a in other.addresses]
        limits = iface.path(peers)
        if not limits:
            rates[host] = (None, 'not shaped')
            continue
        slowest = min(rate for rate, _ in limits)
        rates[host] = (slowest, ', '.join(what for rate, what in limits if rate == slowest))
    return rates
