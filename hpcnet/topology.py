"""A partition's switch tree: nodes hang off leaf switches, each leaf joined
by its uplinks to one or more spines.  It comes from Slurm (``scontrol show
topology``, or the ``topology/tree`` plugin's ``topology.conf``: one
``SwitchName=... Nodes=...|Switches=...`` line per switch) or from the site
file (the partition's ``extras`` key ``topology``, :func:`from_site`).

A leaf is a switch with nodes and no switches below it; its uplinks lead to
the switches that list it in their ``Switches=`` (its spines).  Each leaf
carries ``capacity`` concurrent cross-leaf pairs on its uplinks at the
nodes' own rate: its node count over its oversubscription (2:1 halves it),
or as the site states.  The pair matrix's schedule keeps each leaf's
cross-leaf pairs of a round within it (hpcnet.checklib.pairschedule), and
its culprits are put on the links a pair crosses (:meth:`Tree.links`).

Every mistake is one ConfigError naming where the tree came from (a file,
or the Slurm command), the switch or key, and what is valid.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from itertools import product

from hpcnet.fabrics import ConfigError

#: How the tree's sources are named in errors and in the site file.
SHOW_TOPOLOGY = ('scontrol', 'show', 'topology')
#: The kinds of link a pair's traffic crosses: a node's cable to its leaf,
#: and a leaf's uplinks to its spines (one bundle: which uplink of a leaf a
#: pair takes is the switches' hashing, not known here).
CABLE, UPLINK = 'cable', 'uplink'
#: The site file's keys (``extras.topology``) and a leaf's keys.
SITE_KEYS = ('leaves', 'spines', 'oversubscription')
LEAF_KEYS = ('nodes', 'spines', 'oversubscription', 'capacity')
#: A Slurm hostlist's bracketed ranges: "tux[0-3,12]".
_BRACKET = re.compile(r'\[([^\]]*)\]')


@dataclass(frozen=True)
class Leaf:
    name: str
    nodes: tuple
    spines: tuple          #: the switches its uplinks lead to
    capacity: int          #: concurrent cross-leaf pairs its uplinks carry


@dataclass(frozen=True)
class Tree:
    leaves: tuple
    source: str            #: where it came from (a file, a Slurm command, a site file)

    @cached_property
    def leaf_of(self) -> dict:
        return {node: leaf.name for leaf in self.leaves for node in leaf.nodes}

    @cached_property
    def capacity_of(self) -> dict:
        return {leaf.name: leaf.capacity for leaf in self.leaves}

    @property
    def nodes(self) -> tuple:
        return tuple(node for leaf in self.leaves for node in leaf.nodes)

    def links(self, a: str, b: str) -> tuple:
        '''The links the traffic of pair (a, b) crosses: both nodes' cables,
        and both leaves' uplinks when the pair crosses leaves.'''
        la, lb = self.leaf_of[a], self.leaf_of[b]
        cables = ((CABLE, a), (CABLE, b))
        return cables if la == lb else cables + ((UPLINK, la), (UPLINK, lb))

    def check_covers(self, nodes, where: str) -> None:
        '''Every node of ``nodes`` (a partition's, a job's) hangs off a leaf.'''
        missing = sorted(set(nodes) - set(self.leaf_of))
        if missing:
            raise ConfigError(f'{self.source}: node {missing[0]} of {where} is in no leaf switch '
                              f'(valid: every node of {where} under one leaf; leaves: '
                              f'{", ".join(leaf.name for leaf in self.leaves)})')

    def as_site(self) -> dict:
        '''The site file's ``extras.topology`` of this tree (from_site reads it).'''
        spines = sorted({s for leaf in self.leaves for s in leaf.spines})
        return {'spines': spines,
                'leaves': {leaf.name: {'nodes': list(leaf.nodes), 'spines': list(leaf.spines),
                                       'capacity': leaf.capacity} for leaf in self.leaves}}

    def site_entry(self, nodes, where: str) -> dict:
        '''The site file's ``extras.topology`` of the leaves of ``nodes`` (a
        partition's, every one under a leaf), with their nodes of ``nodes``
        only; Slurm states no uplink rate: oversubscription 1, for the site
        to correct.'''
        self.check_covers(nodes, where)
        mine = set(nodes)
        leaves = {leaf.name: {'nodes': [n for n in leaf.nodes if n in mine],
                              'spines': list(leaf.spines)}
                  for leaf in self.leaves if mine & set(leaf.nodes)}
        return {'spines': sorted({s for leaf in leaves.values() for s in leaf['spines']}),
                'oversubscription': 1, 'leaves': leaves}

    def describe(self) -> str:
        caps = sorted({leaf.capacity for leaf in self.leaves})
        return (f'{len(self.leaves)} leaves, {len(self.nodes)} nodes, uplink capacity '
                f'{"/".join(map(str, caps))} concurrent pairs per leaf ({self.source})')


def expand_hostlist(expression: str, where: str) -> list:
    '''The names of a Slurm hostlist ("tux[0-3,12],dev[00-05]"), zero
    padding kept; a malformed one is a ConfigError naming ``where``.'''
    names, depth, start = [], 0, 0
    for i, ch in enumerate(expression + ','):
        depth += {'[': 1, ']': -1}.get(ch, 0)
        if depth not in (0, 1):
            break
        if ch == ',' and depth == 0:
            names += _expand_one(expression[start:i].strip(), expression, where)
            start = i + 1
    if depth != 0:
        raise ConfigError(f'{where}: hostlist {expression!r} has unbalanced brackets (valid: '
                          "Slurm hostlists such as 'tux[0-3,12]')")
    return [n for n in names if n]


def _expand_one(name: str, expression: str, where: str) -> list:
    parts = _BRACKET.split(name)          # text, ranges, text, ranges, ..., text
    choices = []
    for i, part in enumerate(parts):
        if i % 2 == 0:
            if '[' in part or ']' in part:
                raise ConfigError(f'{where}: hostlist {expression!r} has a nested or unbalanced '
                                  "bracket (valid: Slurm hostlists such as 'tux[0-3,12]')")
            choices.append([part])
            continue
        values = []
        for item in part.split(','):
            m = re.fullmatch(r'\s*(\d+)\s*(?:-\s*(\d+)\s*)?', item)
            if not m or (m.group(2) and int(m.group(2)) < int(m.group(1))):
                raise ConfigError(f'{where}: hostlist {expression!r}: [{part}] is not a list of '
                                  'numbers and ranges (valid: e.g. [0-3,12])')
            lo, hi = m.group(1), m.group(2) or m.group(1)
            values += [str(v).zfill(len(lo)) for v in range(int(lo), int(hi) + 1)]
        choices.append(values)
    return [''.join(combo) for combo in product(*choices)]


def parse_switches(text: str, source: str) -> list:
    '''{SwitchName, Nodes, Switches} of each switch line of ``topology.conf``
    or of ``scontrol show topology`` (their format is one: Key=value pairs,
    keys case-insensitive, "#" starting a comment).'''
    switches = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split('#', 1)[0].strip()
        if not line:
            continue
        fields = {}
        for word in line.split():
            key, eq, value = word.partition('=')
            if not eq:
                raise ConfigError(f'{source}:{number}: {word!r} is not Key=value (valid: '
                                  'SwitchName=NAME Nodes=HOSTLIST or Switches=HOSTLIST)')
            fields[key.lower()] = value
        if 'switchname' not in fields:
            raise ConfigError(f'{source}:{number}: a line without SwitchName= (valid: '
                              'SwitchName=NAME Nodes=HOSTLIST or Switches=HOSTLIST)')
        where = f'{source}: switch {fields["switchname"]}'
        switches.append({'name': fields['switchname'],
                         'nodes': expand_hostlist(fields.get('nodes', ''), where),
                         'switches': expand_hostlist(fields.get('switches', ''), where)})
    return switches


def tree_from_switches(switches: list, source: str, oversubscription: float = 1) -> Tree:
    '''The tree of Slurm's switches: a leaf per switch without switches
    below it, its spines the switches that list it.  Slurm does not know the
    uplinks' rate: each leaf's capacity is its nodes over ``oversubscription``.'''
    names = [s['name'] for s in switches]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise ConfigError(f'{source}: switch {twice} is defined twice (valid: one '
                          'SwitchName= line per switch)')
    parents = {name: [] for name in names}
    for switch in switches:
        for child in switch['switches']:
            if child not in parents:
                raise ConfigError(f'{source}: switch {switch["name"]} lists switch {child}, '
                                  f'which is not defined (valid: {", ".join(names)})')
            parents[child].append(switch['name'])
    leaves = {s['name']: s['nodes'] for s in switches if s['nodes'] and not s['switches']}
    return build_tree({name: {'nodes': nodes, 'spines': parents[name]}
                       for name, nodes in leaves.items()}, source, oversubscription)


def build_tree(leaves: dict, source: str, oversubscription: float = 1) -> Tree:
    '''A Tree of {leaf: {'nodes': [...], 'spines': [...], 'capacity' or
    'oversubscription'}}: a node in one leaf only, and every leaf with an
    uplink where there is more than one leaf.'''
    if not leaves:
        raise ConfigError(f'{source}: no leaf switch (valid: at least one switch with Nodes=)')
    seen, built = {}, []
    for name, leaf in leaves.items():
        for node in leaf['nodes']:
            if node in seen:
                raise ConfigError(f'{source}: node {node} is in leaf {seen[node]} and in leaf '
                                  f'{name} (valid: each node under one leaf switch)')
            seen[node] = name
        if len(leaves) > 1 and not leaf['spines']:
            raise ConfigError(f'{source}: leaf {name} has no uplink (valid: every leaf listed '
                              'under a spine switch, whose Switches= names it)')
        ratio = leaf.get('oversubscription', oversubscription)
        capacity = leaf.get('capacity') or max(1, int(len(leaf['nodes']) // ratio))
        built.append(Leaf(name, tuple(leaf['nodes']), tuple(leaf['spines']), capacity))
    return Tree(tuple(built), source)


def parse_topology(text: str, source: str, oversubscription: float = 1) -> Tree:
    '''The tree of a ``topology.conf`` or of ``scontrol show topology``'s output.'''
    return tree_from_switches(parse_switches(text, source), source, oversubscription)


def _number(value, where: str, key: str, integer: bool = False):
    valid = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not valid or value < 1:
        raise ConfigError(f'{where}.{key} is {value!r} (valid: '
                          f'{"an integer" if integer else "a number"} >= 1)')
    return value


def _site_leaf(name, leaf, where: str, spines: list) -> dict:
    at = f'{where}.leaves.{name}'
    if not isinstance(leaf, dict) or 'nodes' not in leaf:
        raise ConfigError(f'{at} is {leaf!r} (valid: a mapping with nodes, spines and '
                          'optionally oversubscription or capacity)')
    unknown = sorted(set(leaf) - set(LEAF_KEYS))
    if unknown:
        raise ConfigError(f'{at}.{unknown[0]} is not a leaf setting (valid: {", ".join(LEAF_KEYS)})')
    nodes = leaf['nodes']
    nodes = expand_hostlist(nodes, f'{at}.nodes') if isinstance(nodes, str) else nodes
    if not isinstance(nodes, (list, tuple)) or not nodes or \
            not all(isinstance(n, str) and n for n in nodes):
        raise ConfigError(f'{at}.nodes is {leaf["nodes"]!r} (valid: a Slurm hostlist or a list '
                          'of node names)')
    mine = list(leaf.get('spines', []))
    for spine in mine:
        if spine not in spines:
            raise ConfigError(f'{at}.spines names switch {spine!r}, which is not defined '
                              f'(valid: one of {where}.spines: {", ".join(map(str, spines))})')
    out = {'nodes': list(nodes), 'spines': mine}
    for key, integer in (('oversubscription', False), ('capacity', True)):
        if key in leaf:
            out[key] = _number(leaf[key], at, key, integer)
    return out


def from_site(value, where: str) -> Tree | None:
    '''The tree a site file states (a partition's ``extras.topology``), None
    where it states none: {'spines': [names], 'oversubscription': 2,
    'leaves': {leaf: {'nodes': hostlist or [names], 'spines': [names],
    'oversubscription' or 'capacity'}}}.'''
    if value is None:
        return None
    where = f'{where}: extras.topology'
    if not isinstance(value, dict) or not isinstance(value.get('leaves'), dict):
        raise ConfigError(f'{where} is {value!r} (valid: a mapping with leaves, spines and '
                          'optionally oversubscription)')
    unknown = sorted(set(value) - set(SITE_KEYS))
    if unknown:
        raise ConfigError(f'{where}.{unknown[0]} is not a topology setting (valid: '
                          f'{", ".join(SITE_KEYS)})')
    spines = list(value.get('spines', []))
    ratio = _number(value.get('oversubscription', 1), where, 'oversubscription')
    leaves = {name: _site_leaf(name, leaf, where, spines) for name, leaf in value['leaves'].items()}
    return build_tree(leaves, where, ratio)
