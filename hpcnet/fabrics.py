"""The fabric x MPI table (config/fabrics.yaml) and the transport proofs.

One mechanism for every check: :func:`settings_for` gives the environment
variables and launcher options that put an MPI on a fabric, and
:func:`used_transports` reads the MPI's own report of what it used, so that a
run which silently took another path fails instead of passing.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from hpcnet.constants import FABRICS_FILE


class FabricTableError(ValueError):
    '''The fabric table or a partition's fabric configuration is invalid.'''


#: Partition extras that fill the table's placeholders, with their defaults.
PLACEHOLDER_DEFAULTS = {'iface': None, 'rdma_dev': None, 'rdma_port': '1', 'gid_index': '3',
                        'rdma_ports': None}
#: Partition extras key for each placeholder (the name a site writes).
#: rdma_device may list several devices (multi-rail nodes): 'mlx5_0,mlx5_1'.
PLACEHOLDER_EXTRAS = {'iface': 'iface', 'rdma_dev': 'rdma_device',
                      'rdma_port': 'rdma_port', 'gid_index': 'gid_index',
                      'rdma_ports': 'rdma_device'}


def rdma_devices(partition_extras: dict) -> list:
    '''The partition's RDMA devices: extras.rdma_device, a name, a
    comma-separated string or a list.'''
    dev = partition_extras.get('rdma_device')
    if dev is None:
        return []
    names = dev if isinstance(dev, (list, tuple)) else str(dev).split(',')
    return [n.strip() for n in names if n.strip()]


# --------------------------------------------------------------------------
# Transport report parsers: MPI output -> set of transport names used for
# peers (never 'self').
# --------------------------------------------------------------------------

_OMPI_BML = re.compile(r'mca: bml: Using (\S+) btl for send to \[\[\d+,\d+\],\d+\] on node')
# UCX_LOG_LEVEL=info prints one line per endpoint configuration (ucp_worker.c,
# ucp_worker_print_used_tls), in one of these forms (real output, with the UCX
# version it came from, in tests/data/transport and tests/data/transport/rdma):
#   ep_cfg[1]: tag(rc_mlx5/mlx5_0:1 rc_mlx5/mlx5_1:1);        older UCX ('; ' terminated)
#   ep_cfg[1]: tag(tcp/lo) rma_am(tcp/lo) am(tcp/lo)          UCX 1.13.1
#   0x309e3070 inter-node cfg#6 tag(rc_mlx5/mlx5_0:1)          UCX 1.15.0
#   ucp_context_0 self cfg#0 tag(self/memory rc_mlx5/mlx5_0:1 cma/memory)   UCX 1.19.0
# The tag() group lists every lane a tagged message can use (tag/am lane and the
# rendezvous bandwidth lanes), so it covers MPI point-to-point traffic.  The self
# endpoint ("self cfg#", or in the old format any config with a self/ lane) is the
# rank talking to itself: its other lanes are not used for peers.
_UCX_EP_CFG = re.compile(r'(?:\bep_cfg\[\d+\]:|\b(self|intra-node|inter-node) cfg#\d+)'
                         r'\s+((?:\w+\([^)]*\)[;\s]*)+)')
_UCX_LANE_GROUP = re.compile(r'(\w+)\(([^)]*)\)')
_OFI_PROVIDER = re.compile(r'libfabric provider: (\S+)')
_IMPI_SHM_TUNING = re.compile(r'Load tuning file: "[^"]*tuning_\w*?_shm\.dat"')
# MVAPICH2 2.3.x, MV2_SHOW_HCA_BINDING=1|2 (src/mpid/ch3/src/mpid_init.c,
# MPID_InitCompleted -> mv2_show_hca_affinity in
# src/mpid/ch3/channels/common/src/affinity/hwloc_bind.c; MVAPICH 3.x's ch4 code has
# this call under '#if 0', so prints nothing): rank 0 prints, only for the OFA
# verbs channel (ch3:mrail) and only when ranks talk through an HCA (not SMP-only):
#   -------------HCA AFFINITY-------------
#   Process: 0 HCAs: mlx5_0
# Taken from the source's fprintf formats: no real recording of it was found, see
# tests/data/transport/rdma/README.md.  It names the HCA, not IB vs RoCE.  Nothing
# else MVAPICH2 prints (MV2_SHOW_ENV_INFO's parameter table, mpiname's
# "ch3:mrail") says which transport carried the messages, so it is not read.
_MV2_HCA_AFFINITY = re.compile(r'^-+HCA AFFINITY-+[ \t]*$', re.M)
_MV2_HCA_BINDING = re.compile(r'^Process: \d+ HCAs: \S', re.M)


def _ucx_peer_lanes(text: str) -> set:
    '''(transport, device) of every tag lane of the endpoints to peers.'''
    found = set()
    for line in text.splitlines():
        m = _UCX_EP_CFG.search(line)
        if not m or m.group(1) == 'self':
            continue
        for group, lanes in _UCX_LANE_GROUP.findall(m.group(2)):
            if group != 'tag':
                continue
            pairs = {tuple((token.split('/', 1) + [''])[:2]) for token in lanes.split()}
            if 'self' not in {tl for tl, _ in pairs}:     # old format: the self endpoint
                found |= pairs
    return found


def _ucx_transports(text: str) -> set:
    return {tl for tl, _ in _ucx_peer_lanes(text)}


#: UCX transports that do not go through an RDMA device.
_UCX_NON_RDMA = {'tcp', 'sysv', 'posix', 'cma', 'knem', 'xpmem', 'cuda_ipc', 'cuda_copy',
                 'rocm_ipc', 'rocm_copy', 'gdr_copy', 'self'}


def ucx_rdma_devices(text: str) -> set:
    '''RDMA devices ('mlx5_0', without the port) UCX used for peers.'''
    return {dev.split(':')[0] for tl, dev in _ucx_peer_lanes(text)
            if tl not in _UCX_NON_RDMA and dev}


def _openmpi_transports(text: str) -> set:
    btls = {b for b in _OMPI_BML.findall(text) if b != 'self'}
    return btls | _ucx_transports(text)


def _ofi_transports(text: str) -> set:
    # 'tcp;ofi_rxm' is the tcp provider under the RxM utility layer.
    return {p.split(';')[0] for p in _OFI_PROVIDER.findall(text)}


def _impi_transports(text: str) -> set:
    found = _ofi_transports(text)
    if not found and _IMPI_SHM_TUNING.search(text):
        found.add('shm')
    return found


def _mvapich2_transports(text: str) -> set:
    # 'mrail': MVAPICH2's OFA verbs channel bound to an HCA (IB, RoCE or iWARP).
    if _MV2_HCA_AFFINITY.search(text) and _MV2_HCA_BINDING.search(text):
        return {'mrail'}
    return set()


TRANSPORT_PARSERS = {
    'openmpi': _openmpi_transports,
    'ucx': _ucx_transports,
    'mpich-ofi': _ofi_transports,
    'impi': _impi_transports,
    'mvapich2': _mvapich2_transports,
}


# --------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class FabricSettings:
    fabric: str
    profile: str
    env: dict               #: forcing + reporting variables, placeholders filled
    launcher_options: tuple
    expect: frozenset       #: transport names that count as this fabric
    parser: str             #: key of TRANSPORT_PARSERS
    #: RDMA devices the partition names (roce/ib): where the MPI reports the
    #: devices it used (UCX), they must be among these, not just any port.
    devices: frozenset = frozenset()

    def verify(self, text: str) -> tuple:
        '''(ok, message) for the MPI output ``text``.'''
        used = TRANSPORT_PARSERS[self.parser](text)
        if not used:
            return False, (f'{self.profile} printed no transport report for fabric '
                           f'{self.fabric!r} (reporting variables: '
                           f'{", ".join(sorted(self.report_vars))})')
        wrong = used - self.expect
        if wrong:
            return False, (f'fabric {self.fabric!r} asked for, but {self.profile} used '
                           f'{", ".join(sorted(wrong))} (expected one of: '
                           f'{", ".join(sorted(self.expect))})')
        if self.devices and self.parser in ('ucx', 'openmpi'):
            other = ucx_rdma_devices(text) - self.devices
            if other:
                return False, (f'fabric {self.fabric!r} on {", ".join(sorted(self.devices))} '
                               f'asked for, but {self.profile} also used RDMA device(s) '
                               f'{", ".join(sorted(other))}')
        return True, f'{self.profile} used {", ".join(sorted(used))} on fabric {self.fabric!r}'

    @property
    def report_vars(self) -> frozenset:
        return frozenset(k for k in self.env if 'VERBOSE' in k or 'LOG' in k or 'DEBUG' in k
                         or k.startswith('MV2_SHOW'))


def _fail(path, key, msg):
    raise FabricTableError(f'{path}: {key}: {msg}')


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
        if parser not in TRANSPORT_PARSERS:
            _fail(path, f'profiles.{name}.report.parser',
                  f'{parser!r} is not a transport parser (valid: {", ".join(TRANSPORT_PARSERS)})')
        if not isinstance(prof['report'].get('env', {}), dict):
            _fail(path, f'profiles.{name}.report.env', 'must be a mapping of variable: value')
    for fabric, entries in data['fabrics'].items():
        if not isinstance(entries, dict):
            _fail(path, f'fabrics.{fabric}', 'must be a mapping of MPI profile: settings')
        for prof, entry in entries.items():
            if prof == 'description':
                continue
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
            exp = entry.get('expect')
            if not isinstance(exp, list) or not exp or not all(isinstance(x, str) for x in exp):
                _fail(path, f'{key}.expect', 'must be a non-empty list of transport names')
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
        raise FabricTableError(f'{path}: cannot read the fabric table: {err.strerror}') from None
    except yaml.YAMLError as err:
        raise FabricTableError(f'{path}: not valid YAML: {err}') from None
    return validate_table(data, path)


def fabrics(path: str | Path = FABRICS_FILE) -> tuple:
    return tuple(load_table(path)['fabrics'])


def _fill(value: str, values: dict, where: str) -> str:
    def repl(m):
        name = m.group(1)
        if name not in PLACEHOLDER_DEFAULTS:
            raise FabricTableError(f'{where}: unknown placeholder {{{name}}} '
                                   f'(valid: {", ".join(PLACEHOLDER_DEFAULTS)})')
        if values.get(name) is None:
            raise FabricTableError(f'{where}: needs the partition extra '
                                   f'{PLACEHOLDER_EXTRAS[name]!r}, which the partition does not set')
        return str(values[name])
    return re.sub(r'\{(\w+)\}', repl, str(value))


def settings_for(fabric: str, profile: str, family: str, launcher: str,
                 partition_extras: dict, path: str | Path = FABRICS_FILE) -> FabricSettings:
    '''What puts MPI ``profile`` on ``fabric`` under ``launcher``.'''
    table = load_table(path)
    if fabric not in table['fabrics']:
        raise FabricTableError(f'{path}: fabrics: no fabric {fabric!r} '
                               f'(valid: {", ".join(table["fabrics"])})')
    entry = table['fabrics'][fabric].get(profile)
    if entry is None:
        known = [p for p in table['fabrics'][fabric] if p != 'description']
        raise FabricTableError(f'{path}: fabrics.{fabric}: no entry for MPI profile {profile!r} '
                               f'(valid: {", ".join(known)})')
    values = {k: partition_extras.get(PLACEHOLDER_EXTRAS[k], d)
              for k, d in PLACEHOLDER_DEFAULTS.items()}
    devices = rdma_devices(partition_extras)
    # {rdma_dev}: the first device (MPIs that take one); {rdma_ports}: every
    # device with its port, as UCX_NET_DEVICES wants them (mlx5_0:1,mlx5_1:1).
    values['rdma_dev'] = devices[0] if devices else None
    values['rdma_ports'] = (','.join(f'{d}:{values["rdma_port"]}' for d in devices)
                            if devices else None)
    where = f'{path}: fabrics.{fabric}.{profile}'
    env = {k: _fill(v, values, f'{where}.env.{k}') for k, v in entry.get('env', {}).items()}
    report = table['profiles'][profile]['report']
    env.update({k: str(v) for k, v in report.get('env', {}).items()})
    options = list(table['launchers'].get(launcher, {}).get(family, []))
    options += [_fill(o, values, f'{where}.launcher_options') for o in entry.get('launcher_options', [])]
    return FabricSettings(fabric, profile, env, tuple(options), frozenset(entry['expect']),
                          report['parser'],
                          frozenset(devices) if fabric in ('roce', 'ib') else frozenset())
