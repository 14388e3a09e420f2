"""The fabric table (config/fabrics.yaml): how each MPI profile is put on
each fabric of the registry (hpcnet.fabrics), read and interpreted here alone.

- Its structure: :func:`validate_table`, :func:`load_table` (one line naming
  the file and the key).
- What puts a stack's MPI on a partition's fabric (:func:`settings`, a
  :class:`FabricSettings`): the block's variables and launcher options with
  the placeholders filled from the partition, the profile's reporting
  variables, the launcher's options and the partition's PMI; and how the
  MPI's output proves it used the fabric (:meth:`FabricSettings.verify`).
- Whether an MPI may run more ranks than the cores the nodes share
  (:func:`oversubscription_refusal`, the profile's ``oversubscribed``).

What a fabric is lives in its registry entry (hpcnet.fabrics); the table
is data only.
"""
from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from hpcnet import fabrics, mpi
from hpcnet.constants import FABRICS_FILE
from hpcnet.fabrics import ConfigError
from hpcnet.model import PMI_LAUNCHER, Partition, PartitionKey, Stack
from hpcnet.yamlfile import YamlFileError, load_yaml

#: The table's placeholders and the partition key a site sets for each.
PLACEHOLDER_KEY = {'iface': PartitionKey.IFACE, 'rdma_dev': PartitionKey.RDMA_DEVICE,
                   'rdma_ports': PartitionKey.RDMA_DEVICE, 'rdma_port': PartitionKey.RDMA_PORT,
                   'gid_index': PartitionKey.GID_INDEX}
PLACEHOLDERS = tuple(PLACEHOLDER_KEY)


@dataclass(frozen=True)
class FabricSettings:
    fabric: str
    profile: str
    env: dict               #: forcing + reporting variables, placeholders filled
    launcher_options: tuple
    expect: frozenset       #: transport names that count as this fabric
    parser: str             #: a transport parser's name (hpcnet.mpi.transport_parsers)
    #: RDMA devices the partition names (roce/ib): where the MPI reports the
    #: devices it used (UCX), they must be among these, not just any port.
    devices: frozenset = frozenset()

    def verify(self, text: str) -> tuple:
        '''(ok, message) for the MPI output ``text``.'''
        parser = mpi.transport_parser(self.parser)
        used = parser.transports(text)
        if not used:
            return False, (f'{self.profile} printed no transport report for fabric '
                           f'{self.fabric!r} (reporting variables: '
                           f'{", ".join(sorted(self.report_vars))})')
        wrong = used - self.expect
        evidence = parser.evidence_of(text)
        if wrong:
            return False, (f'fabric {self.fabric!r} asked for, but {self.profile} used '
                           f'{", ".join(sorted(wrong))} (expected one of: '
                           f'{", ".join(sorted(self.expect))}; evidence: {evidence})')
        if self.devices and parser.rdma_devices:
            other = parser.rdma_devices(text) - self.devices
            if other:
                return False, (f'fabric {self.fabric!r} on {", ".join(sorted(self.devices))} '
                               f'asked for, but {self.profile} also used RDMA device(s) '
                               f'{", ".join(sorted(other))}')
        return True, (f'{self.profile} used {", ".join(sorted(used))} on fabric {self.fabric!r}'
                      + ('' if evidence == mpi.OWN_REPORT else f' (evidence: {evidence})'))

    @property
    def report_vars(self) -> frozenset:
        return frozenset(k for k in self.env if mpi.is_report_variable(k))


def _fail(path, key, msg):
    raise ConfigError(f'{path}: {key}: {msg}')


def _validate_fabric_blocks(blocks, profiles, path) -> None:
    '''Check the table's ``fabrics:``: one block per registered fabric it
    names, each a mapping of MPI profile: settings.'''
    for fabric, entries in blocks.items():
        if fabric not in fabrics.fabric_names():
            _fail(path, f'fabrics.{fabric}', f'not a fabric of hpcnet.fabrics (valid: '
                  f'{", ".join(fabrics.fabric_names())})')
        if not isinstance(entries, dict):
            _fail(path, f'fabrics.{fabric}', 'must be a mapping of MPI profile: settings')
        for prof, entry in entries.items():
            key = f'fabrics.{fabric}.{prof}'
            if prof not in profiles:
                _fail(path, key, f'unknown MPI profile (valid: {", ".join(profiles)})')
            if not isinstance(entry, dict):
                _fail(path, key, 'must be a mapping with env, expect')
            unknown = set(entry) - {'env', 'launcher_options', 'expect'}
            if unknown:
                _fail(path, f'{key}.{sorted(unknown)[0]}', 'unknown key (valid: env, launcher_options, expect)')
            if not isinstance(entry.get('env', {}), dict):
                _fail(path, f'{key}.env', 'must be a mapping of variable: value')
            options = entry.get('launcher_options', [])
            if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
                _fail(path, f'{key}.launcher_options',
                      f'{options!r} is not a list of strings (one launcher argument each)')
            exp = entry.get('expect')
            if not isinstance(exp, list) or not exp or not all(isinstance(x, str) for x in exp):
                _fail(path, f'{key}.expect', 'must be a non-empty list of transport names')


def validate_table(data, path='<table>') -> dict:
    '''Check the structure of a fabric table; return it unchanged.'''
    if not isinstance(data, dict):
        _fail(path, '(top level)', 'expected a mapping with keys schema, profiles, fabrics, launchers')
    if data.get('schema') != 1:
        _fail(path, 'schema', f'unsupported schema {data.get("schema")!r} (valid: 1)')
    for top in ('profiles', 'fabrics', 'launchers'):
        if not isinstance(data.get(top), dict):
            _fail(path, top, 'missing or not a mapping')
    profiles = data['profiles']
    for name, prof in profiles.items():
        parser = (prof or {}).get('report', {}).get('parser')
        parsers = mpi.transport_parsers()
        if parser not in parsers:
            _fail(path, f'profiles.{name}.report.parser',
                  f'{parser!r} is not a transport parser (valid: {", ".join(parsers)})')
        if not isinstance(prof['report'].get('env', {}), dict):
            _fail(path, f'profiles.{name}.report.env', 'must be a mapping of variable: value')
        unknown = set(prof) - {'report', 'oversubscribed'}
        if unknown:
            _fail(path, f'profiles.{name}.{sorted(unknown)[0]}',
                  'unknown key (valid: report, oversubscribed)')
        over = prof.get('oversubscribed', {})
        if not isinstance(over, dict) or set(over) - {'env', 'yields_from'} \
                or not isinstance(over.get('env', {}), dict):
            _fail(path, f'profiles.{name}.oversubscribed',
                  'must be a mapping with keys env (a mapping of variable: value) '
                  'and yields_from (a version)')
        # A string: YAML reads 4.10 unquoted as the number 4.1.
        first = over.get('yields_from')
        if first is not None and not (isinstance(first, str)
                                      and re.fullmatch(r'\d+(\.\d+)*', first)):
            _fail(path, f'profiles.{name}.oversubscribed.yields_from',
                  f'{first!r} is not a version (valid: numbers joined by dots, '
                  "quoted: '4.2')")
    _validate_fabric_blocks(data['fabrics'], profiles, path)
    for launcher, fams in data['launchers'].items():
        if not isinstance(fams, dict) or not all(isinstance(v, list) for v in fams.values()):
            _fail(path, f'launchers.{launcher}', 'must map MPI family to a list of options')
    return data


@functools.lru_cache(maxsize=None)
def load_table(path: str | Path = FABRICS_FILE) -> dict:
    path = Path(path)
    try:
        data = load_yaml(path)
    except YamlFileError as err:
        raise ConfigError(f'the fabric table {err}') from None
    return validate_table(data, path)


def fabric_block(table: dict, fabric: str, profile: str, path) -> dict:
    '''The table's settings of MPI ``profile`` on ``fabric``; one line naming
    the file and the key where the table has none.'''
    blocks = table['fabrics']
    if fabric not in blocks:
        raise ConfigError(f'{path}: fabrics.{fabric}: missing (every fabric a partition declares '
                          f'needs a block of MPI settings; the table has: {", ".join(blocks)})')
    entry = blocks[fabric].get(profile)
    if entry is None:
        raise ConfigError(f'{path}: fabrics.{fabric}: no entry for MPI profile {profile!r} '
                          f'(valid: {", ".join(blocks[fabric])})')
    return entry


def _version_key(version: str) -> tuple:
    """'4.0.2' -> (4, 0, 2), for ordering versions (non-numeric parts end it)."""
    m = re.match(r'\d+(?:\.\d+)*', str(version))
    return tuple(int(p) for p in m.group(0).split('.')) if m else ()


def _fill(value: str, values: dict, where: str) -> str:
    def repl(m):
        name = m.group(1)
        if name not in PLACEHOLDERS:
            raise ConfigError(f'{where}: unknown placeholder {{{name}}} '
                              f'(valid: {", ".join(PLACEHOLDERS)})')
        if values.get(name) is None:
            raise ConfigError(f'{where}: needs the partition extra {PLACEHOLDER_KEY[name]!r}, '
                              'which the partition does not set')
        return str(values[name])
    return re.sub(r'\{(\w+)\}', repl, str(value))


def _placeholder_values(partition: Partition) -> dict:
    '''{placeholder: the partition's value, or None where it sets none}.'''
    devices = partition.rdma_devices
    return {'iface': partition.iface, 'rdma_port': partition.rdma_port,
            'gid_index': partition.used_gid_index,
            # {rdma_dev}: the first device (MPIs that take one); {rdma_ports}: every
            # device with its port, as UCX_NET_DEVICES wants them (mlx5_0:1,mlx5_1:1).
            'rdma_dev': devices[0] if devices else None,
            'rdma_ports': ','.join(f'{d}:{partition.rdma_port}' for d in devices) or None}


def settings(partition: Partition, stack: Stack, launcher: str, path: str | Path = FABRICS_FILE,
             *, oversubscribed: bool = False) -> FabricSettings:
    """What puts ``stack``'s MPI on ``partition``'s fabric under ``launcher``;
    ``oversubscribed``: also the profile's variables for more ranks than cores."""
    table = load_table(path)
    entry = fabric_block(table, partition.fabric, stack.mpi_profile, path)
    values = _placeholder_values(partition)
    where = f'{path}: fabrics.{partition.fabric}.{stack.mpi_profile}'
    env = {k: _fill(v, values, f'{where}.env.{k}') for k, v in entry.get('env', {}).items()}
    profile = table['profiles'][stack.mpi_profile]
    env.update({k: str(v) for k, v in profile['report'].get('env', {}).items()})
    if oversubscribed:
        env.update({k: str(v) for k, v in profile.get('oversubscribed', {}).get('env', {}).items()})
    options = list(table['launchers'].get(launcher, {}).get(stack.mpi_family, []))
    pmi = partition.pmi_of(stack.mpi_family)
    if pmi and launcher == PMI_LAUNCHER:
        # The partition's PMI replaces the table's, not joins it (srun takes one).
        options = [o for o in options if not o.startswith('--mpi=')] + [f'--mpi={pmi}']
    options += [_fill(o, values, f'{where}.launcher_options')
                for o in entry.get('launcher_options', [])]
    return FabricSettings(partition.fabric, stack.mpi_profile, env, tuple(options),
                          frozenset(entry['expect']), profile['report']['parser'],
                          frozenset(partition.rdma_devices) if partition.is_rdma else frozenset())


def oversubscription_refusal(partition: Partition, stack: Stack, ranks: int,
                             path: str | Path = FABRICS_FILE) -> str | None:
    '''Why ``stack`` cannot run ``ranks`` ranks on ``partition`` (an MPI too
    old to give up its core while it waits, where the ranks outnumber the
    cores the nodes share), or None.'''
    if not partition.oversubscribed(ranks):
        return None
    over = load_table(path)['profiles'][stack.mpi_profile].get('oversubscribed', {})
    first = over.get('yields_from')
    if first is None or _version_key(stack.mpi_version) >= _version_key(first):
        return None
    return (f'{stack.environ}: {stack.mpi_family} {stack.mpi_version} cannot give up a core '
            f'while it waits (the first that does is {first}: {path}: profiles.'
            f'{stack.mpi_profile}.oversubscribed.yields_from); {ranks} ranks on the '
            f'{os.cpu_count()} cores the nodes of {partition.fullname} share would time the '
            "scheduler's slices, not the network")
