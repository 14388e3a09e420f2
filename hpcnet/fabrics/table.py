"""The fabric table (config/fabrics.yaml): how each MPI profile is put on each
fabric of the registry (:mod:`hpcnet.fabrics.registry`) and how the MPI
proves it used it.  Data only: what a fabric is lives in its entry.

:func:`load_table` reads and validates the file once; :class:`FabricSettings`
are the variables, launcher options and expected transports of one
(fabric, MPI profile), which :meth:`FabricSettings.verify` holds the MPI's own
transport report against (with its family's parser, hpcnet.mpi).  The
partition model (hpcnet.model) fills the table's placeholders from a
partition's extras.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from hpcnet import mpi
from hpcnet.constants import FABRICS_FILE
from hpcnet.fabrics import registry


class ConfigError(ValueError):
    """A site's configuration (system file, fabric table) is invalid."""


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
                      + ('' if evidence == mpi.transports.OWN_REPORT else f' (evidence: {evidence})'))

    @property
    def report_vars(self) -> frozenset:
        return frozenset(k for k in self.env if mpi.is_report_variable(k))


def _fail(path, key, msg):
    raise ConfigError(f'{path}: {key}: {msg}')


def _validate_fabric_blocks(blocks, profiles, path) -> None:
    '''Check the table's ``fabrics:``: one block per registered fabric it
    names, each a mapping of MPI profile: settings.'''
    for fabric, entries in blocks.items():
        if fabric not in registry.fabric_names():
            _fail(path, f'fabrics.{fabric}', f'not a fabric of hpcnet.fabrics (valid: '
                  f'{", ".join(registry.fabric_names())})')
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
        with open(path) as fp:
            data = yaml.safe_load(fp)
    except OSError as err:
        raise ConfigError(f'{path}: cannot read the fabric table: {err.strerror}') from None
    except yaml.YAMLError as err:
        raise ConfigError(f'{path}: not valid YAML: {err}') from None
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
