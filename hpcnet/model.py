"""The typed model of what the checks consume: partitions and stacks, and
which stacks a site's system gets (:class:`StackChoice`, its file's ``stacks``).

A site's ReFrame configuration describes each partition with a few extras (the
fabric it tests, the interface, RDMA devices, link rate, node count) and hpcnet
describes each environment with its stack (compiler, MPI family, version,
profile, tools).  Both are read here, once, into frozen dataclasses that are
validated when the configuration loads: a wrong value is one error naming the
system file, the partition and the key, never a ``KeyError`` in a check.  The
extras keys are spelled only in this module (:class:`PartitionKey`,
:class:`StackKey`); system files build their extras with
:func:`partition_extras`.

What a fabric needs of a partition (an interface, RDMA devices) is its
entry's, in the fabric registry (hpcnet.fabrics); how each MPI is put on it is
the fabric table's (hpcnet.fabrictable), which reads a partition's values
(its interface, devices, GID index and PMI) from :class:`Partition`.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from hpcnet import fabrics, mpi, topology
from hpcnet.constants import PartitionFeature
from hpcnet.fabrics import ConfigError
from hpcnet.variables import TESTBED_WIRE_ENV


class PartitionKey:
    """Keys of a partition's ``extras`` (the config -> check contract)."""
    FABRIC = 'fabric'
    IFACE = 'iface'
    RDMA_DEVICE = 'rdma_device'
    RDMA_PORT = 'rdma_port'
    GID_INDEX = 'gid_index'
    LINK_RATE_BPS = 'link_rate_bps'
    MTU = 'mtu'
    LINK_SPEED_MBPS = 'link_speed_mbps'
    NUM_NODES = 'num_nodes'
    #: True where the partition's nodes share one host's cores (an emulated
    #: cluster): checks then keep concurrent measurements apart.
    NODES_SHARE_CORES = 'nodes_share_cores'
    #: The PMI ``srun --mpi=`` starts MPI ranks with: one name for every MPI,
    #: or {MPI family: name}; replaces the fabric table's ``launchers.srun``.
    PMI = 'pmi'
    #: The partition's switch tree (hpcnet.topology.from_site): leaves with
    #: their nodes, spines and uplink capacity.
    TOPOLOGY = 'topology'
    #: Where nodes share one host (an emulated cluster): the fraction of the
    #: wire's TCP payload rate a clean link measured, the proof that the host
    #: emulates the wire (hpcnet.testbed.wire); a link measured well below it
    #: on a quiet host is slow.  Unset: no proof, and no such judgement.
    WIRE_EFFICIENCY = 'wire_efficiency'
    ALL = (FABRIC, IFACE, RDMA_DEVICE, RDMA_PORT, GID_INDEX, LINK_RATE_BPS, MTU,
           LINK_SPEED_MBPS, NUM_NODES, NODES_SHARE_CORES, PMI, TOPOLOGY, WIRE_EFFICIENCY)


class StackKey:
    """Keys of an hpcnet environment's ``extras`` (written by hpcnet.stacks)."""
    MPI_FAMILY = 'mpi_family'
    MPI_PROFILE = 'mpi_profile'
    MPI_VERSION = 'mpi_version'
    MPI_SOURCE = 'mpi_source'
    MPI_PREFIX = 'mpi_prefix'
    MPI_SPEC = 'mpi_spec'
    MPI_KNOWN_ISSUE = 'mpi_known_issue'
    COMPILER_FAMILY = 'compiler_family'
    COMPILER_VERSION = 'compiler_version'
    TOOLS = 'tools'
    TOOL_PREFIXES = 'tool_prefixes'
    #: {fabric: what is missing for it and what provides it}: the fabrics
    #: the stack's probe could not use on this host (checks skip there).
    FABRIC_GAPS = 'fabric_gaps'
    ALL = (MPI_FAMILY, MPI_PROFILE, MPI_VERSION, MPI_SOURCE, MPI_PREFIX, MPI_SPEC,
           MPI_KNOWN_ISSUE, COMPILER_FAMILY, COMPILER_VERSION, TOOLS, TOOL_PREFIXES, FABRIC_GAPS)


#: What a value that reaches a job script may look like (it is also quoted).
#: Linux interface names: at most 15 characters (IFNAMSIZ - 1), no '/', no blanks.
IFACE_PATTERN = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.:@-]{0,14}')
RDMA_DEVICE_PATTERN = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.-]{0,63}')
#: Extras ReFrame itself adds to every partition.
REFRAME_IMPLICIT_EXTRAS = ('scheduler', 'launcher')
#: The launcher whose PMI a partition may choose, and the PMIs Slurm's
#: ``srun --mpi=`` knows (``srun --mpi=list``).
PMI_LAUNCHER = 'srun'
PMI_NAMES = ('pmix', 'pmix_v2', 'pmix_v3', 'pmix_v4', 'pmix_v5', 'pmi2', 'cray_shasta', 'none')


def partition_extras(*, fabric: str, iface: str | None = None, rdma_device=None,
                     rdma_port: int | None = None, gid_index: int | None = None,
                     link_rate_bps: int | None = None, mtu: int | None = None,
                     link_speed_mbps: int | None = None, num_nodes: int = 1,
                     nodes_share_cores: bool | None = None, pmi=None, topology=None,
                     wire_efficiency: float | None = None, **unknown) -> dict:
    """A partition's ``extras`` for a system file (keys from PartitionKey;
    values are validated when the configuration loads)."""
    if unknown:
        raise ConfigError(f'partition_extras: unknown argument(s) {", ".join(sorted(unknown))} '
                          f'(valid: {", ".join(sorted(PartitionKey.ALL))})')
    given = {PartitionKey.FABRIC: fabric, PartitionKey.IFACE: iface,
             PartitionKey.RDMA_DEVICE: rdma_device, PartitionKey.RDMA_PORT: rdma_port,
             PartitionKey.GID_INDEX: gid_index, PartitionKey.LINK_RATE_BPS: link_rate_bps,
             PartitionKey.MTU: mtu, PartitionKey.LINK_SPEED_MBPS: link_speed_mbps,
             PartitionKey.NUM_NODES: num_nodes, PartitionKey.NODES_SHARE_CORES: nodes_share_cores,
             PartitionKey.PMI: pmi, PartitionKey.TOPOLOGY: topology,
             PartitionKey.WIRE_EFFICIENCY: wire_efficiency}
    return {k: v for k, v in given.items() if v is not None}


# --------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------


def _positive_int(value, where: str, key: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f'{where}: extras.{key} is {value!r} (valid: a positive integer)')
    return value


def _proven_wire(extras: dict, shared: bool):
    '''The partition's own wire_efficiency; where its nodes share one host
    and it names none, the proof `hpcnet testbed up` made on that host
    (TESTBED_WIRE_ENV), which a site file written for the emulated cluster
    (`hpcnet site init` on it) cannot know.'''
    own = extras.get(PartitionKey.WIRE_EFFICIENCY)
    if own is None and shared and os.environ.get(TESTBED_WIRE_ENV):
        try:
            return float(os.environ[TESTBED_WIRE_ENV])
        except ValueError:
            raise ConfigError(f'{TESTBED_WIRE_ENV}={os.environ[TESTBED_WIRE_ENV]!r}: valid: the '
                              "fraction of the wire's payload rate `hpcnet testbed up` measured, "
                              'e.g. 1.0') from None
    return own


def _wire_efficiency(value, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.5 <= value <= 1.1:
        raise ConfigError(f'{where}: extras.{PartitionKey.WIRE_EFFICIENCY} is {value!r} (valid: '
                          "the fraction of the wire's TCP payload rate a clean link measured, "
                          '0.5 to 1.1)')
    return float(value)


def _pmi_choice(value, where: str) -> tuple:
    '''((MPI family or '*', PMI), ...) of extras.pmi: one PMI for every MPI
    ('pmix'), or one per family ({'openmpi': 'pmix', 'mpich': 'pmi2'}).'''
    if value is None:
        return ()
    given = {'*': value} if isinstance(value, str) else value
    if not isinstance(given, dict):
        raise ConfigError(f'{where}: extras.{PartitionKey.PMI} is {value!r} (valid: one of '
                          f'{", ".join(PMI_NAMES)}, or a mapping of MPI family to one)')
    for family, name in given.items():
        if family != '*' and family not in mpi.family_names():
            raise ConfigError(f'{where}: extras.{PartitionKey.PMI} names MPI family {family!r} '
                              f'(valid: {", ".join(mpi.family_names())})')
        if name not in PMI_NAMES:
            key = PartitionKey.PMI if family == '*' else f'{PartitionKey.PMI}.{family}'
            raise ConfigError(f'{where}: extras.{key} is {name!r} (valid: {", ".join(PMI_NAMES)}: '
                              f'what `srun --mpi=` takes)')
    return tuple(sorted(given.items()))


def _device_list(value, where: str) -> tuple:
    if value is None:
        return ()
    names = value if isinstance(value, (list, tuple)) else str(value).split(',')
    names = tuple(str(n).strip() for n in names if str(n).strip())
    for name in names:
        if not RDMA_DEVICE_PATTERN.fullmatch(name):
            raise ConfigError(f'{where}: extras.{PartitionKey.RDMA_DEVICE} names {name!r} '
                              f'(valid: device names matching {RDMA_DEVICE_PATTERN.pattern}, '
                              "as a name, a list or 'mlx5_0,mlx5_1')")
    return names


@dataclass(frozen=True)
class Partition:
    """A partition as the checks see it: the one fabric it tests and where."""
    fullname: str                 #: 'system:partition'
    fabric: str                   #: a key of the fabric table
    iface: str | None = None      #: the fabric's network interface on the nodes
    rdma_devices: tuple = ()      #: RDMA devices the MPI must use (roce/ib)
    rdma_port: int = fabrics.DEFAULT_RDMA_PORT
    gid_index: int | None = None
    link_rate_bps: int | None = None   #: wire rate, for efficiencies
    mtu: int | None = None             #: what the preflight requires
    link_speed_mbps: int | None = None
    num_nodes: int = 1                 #: nodes a check may span
    nodes_share_cores: bool = False    #: an emulated cluster on one host's cores
    #: ((MPI family or '*', PMI), ...): what srun --mpi= uses, over the table's
    pmi: tuple = ()
    #: The switch tree (hpcnet.topology.Tree), or None where none is known.
    topology: topology.Tree | None = None
    #: What a clean link measured of the wire's payload rate (WIRE_EFFICIENCY).
    wire_efficiency: float | None = None

    @property
    def multinode(self) -> bool:
        return self.num_nodes > 1

    @property
    def is_rdma(self) -> bool:
        return fabrics.fabric(self.fabric).is_rdma

    @classmethod
    def from_extras(cls, fullname: str, extras: dict, where: str = '') -> 'Partition':
        """Validate a partition's extras; ``where`` names the file."""
        where = f'{where}: partition {fullname}' if where else f'partition {fullname}'
        extras = extras or {}
        unknown = sorted(set(extras) - set(PartitionKey.ALL) - set(REFRAME_IMPLICIT_EXTRAS))
        if unknown:
            raise ConfigError(f'{where}: extras.{unknown[0]} is not a partition setting '
                              f'(valid: {", ".join(PartitionKey.ALL)})')
        fabric = extras.get(PartitionKey.FABRIC)
        if fabric not in fabrics.fabric_names():
            raise ConfigError(f'{where}: extras.{PartitionKey.FABRIC} is {fabric!r} (valid: '
                              f'{", ".join(fabrics.fabric_names())}: the fabrics of hpcnet.fabrics)')
        entry = fabrics.fabric(fabric)
        iface = extras.get(PartitionKey.IFACE)
        if iface is not None and not (isinstance(iface, str) and IFACE_PATTERN.fullmatch(iface)):
            raise ConfigError(f'{where}: extras.{PartitionKey.IFACE} is {iface!r} (valid: an '
                              f'interface name matching {IFACE_PATTERN.pattern})')
        if entry.needs_iface and iface is None:
            raise ConfigError(f'{where}: fabric {fabric!r} needs extras.{PartitionKey.IFACE}, '
                              'the interface whose counters prove the traffic')
        devices = _device_list(extras.get(PartitionKey.RDMA_DEVICE), where)
        if entry.is_rdma and not devices:
            raise ConfigError(f'{where}: fabric {fabric!r} needs extras.'
                              f'{PartitionKey.RDMA_DEVICE} (e.g. mlx5_0)')
        num_nodes = _positive_int(extras.get(PartitionKey.NUM_NODES, 1), where,
                                  PartitionKey.NUM_NODES)
        rdma_port = _positive_int(extras.get(PartitionKey.RDMA_PORT, fabrics.DEFAULT_RDMA_PORT),
                                  where, PartitionKey.RDMA_PORT)
        gid_index = extras.get(PartitionKey.GID_INDEX)
        if gid_index is not None and (isinstance(gid_index, bool) or not isinstance(gid_index, int)
                                      or gid_index < 0):
            raise ConfigError(f'{where}: extras.{PartitionKey.GID_INDEX} is {gid_index!r} '
                              '(valid: an integer >= 0)')
        shared = extras.get(PartitionKey.NODES_SHARE_CORES, False)
        if not isinstance(shared, bool):
            raise ConfigError(f'{where}: extras.{PartitionKey.NODES_SHARE_CORES} is {shared!r} '
                              '(valid: true or false)')
        return cls(fullname=fullname, fabric=fabric, iface=iface, rdma_devices=devices,
                   rdma_port=rdma_port, gid_index=gid_index,
                   link_rate_bps=_positive_int(extras.get(PartitionKey.LINK_RATE_BPS), where,
                                               PartitionKey.LINK_RATE_BPS),
                   mtu=_positive_int(extras.get(PartitionKey.MTU), where, PartitionKey.MTU),
                   link_speed_mbps=_positive_int(extras.get(PartitionKey.LINK_SPEED_MBPS), where,
                                                 PartitionKey.LINK_SPEED_MBPS),
                   num_nodes=num_nodes, nodes_share_cores=shared,
                   pmi=_pmi_choice(extras.get(PartitionKey.PMI), where),
                   topology=topology.from_site(extras.get(PartitionKey.TOPOLOGY), where),
                   wire_efficiency=_wire_efficiency(_proven_wire(extras, shared), where))

    @classmethod
    def of(cls, rfm_partition) -> 'Partition':
        """The model of a ReFrame partition (``self.current_partition``)."""
        return cls.from_extras(rfm_partition.fullname, rfm_partition.extras)

    def features(self) -> list:
        """The partition features the checks select on: its fabric, and
        ``multinode`` where a check may span several nodes."""
        return [self.fabric] + ([PartitionFeature.MULTINODE] if self.multinode else [])

    def oversubscribed(self, ranks: int) -> bool:
        '''Whether ``ranks`` ranks on this partition's nodes outnumber the cores
        they share (nodes emulated on this host, which is then their host).'''
        return self.nodes_share_cores and ranks > (os.cpu_count() or 1)

    @property
    def used_gid_index(self) -> int | None:
        '''The GID index its MPI uses: its own (extras gid_index), else its
        fabric's default (None: the fabric uses no GID).'''
        return (fabrics.fabric(self.fabric).default_gid_index if self.gid_index is None
                else self.gid_index)

    def pmi_of(self, mpi_family: str) -> str | None:
        '''The PMI ``srun --mpi=`` starts ``mpi_family``'s ranks with here
        (extras pmi), or None: the fabric table's.'''
        chosen = dict(self.pmi)
        return chosen.get(mpi_family, chosen.get('*'))


@dataclass(frozen=True)
class Stack:
    """An hpcnet environment's compiler x MPI stack, as the checks see it."""
    environ: str                  #: the ReFrame environment's name
    mpi_family: str
    mpi_profile: str              #: key of the fabric table's profiles
    mpi_version: str
    mpi_source: str = ''          #: 'debian', 'pypi', 'spack', ...
    mpi_prefix: str = ''
    #: The package manager's name of the MPI build (a Spack spec), or ''.
    mpi_spec: str = ''
    #: The name of the stack's known defect (its family's known_issues in
    #: hpcnet.mpi), or '' (the signature stays there: the environment only names it).
    known_issue: str = ''
    compiler_family: str = ''
    compiler_version: str = ''
    tools: tuple = ()             #: ((program, absolute path), ...)
    tool_prefixes: tuple = ()     #: prefixes of benchmarks built against this MPI
    fabric_gaps: tuple = ()       #: ((fabric, what is missing), ...)

    @property
    def mpi_major(self) -> str:
        return self.mpi_version.split('.')[0]

    def tool(self, name: str) -> str | None:
        return dict(self.tools).get(name)

    def fabric_gap(self, fabric: str) -> str | None:
        '''What this stack lacks to use ``fabric`` here, or None.'''
        return dict(self.fabric_gaps).get(fabric)

    def compiler_mismatch(self, reported: str | None) -> str | None:
        '''Why ``reported`` (a kernel's ``compiler:`` line, ``family
        version``) is not this stack's compiler to the minor version, or None
        (also where either is unknown: a kernel from before the line, a stack
        naming no compiler).  An MPI wrapper may call the compiler it was
        built with in place of the environment's.'''
        if not reported or not self.compiler_family:
            return None
        family, _, version = reported.partition(' ')
        if (family, version.split('.')[:2]) == (self.compiler_family,
                                                 self.compiler_version.split('.')[:2]):
            return None
        return (f'the kernel was built by {family} {version} but environment {self.environ} is '
                f'{self.compiler_family} {self.compiler_version}: the MPI wrapper did not call '
                "the environment's compiler")

    def to_extras(self) -> dict:
        return {StackKey.MPI_FAMILY: self.mpi_family, StackKey.MPI_PROFILE: self.mpi_profile,
                StackKey.MPI_VERSION: self.mpi_version, StackKey.MPI_SOURCE: self.mpi_source,
                StackKey.MPI_PREFIX: self.mpi_prefix, StackKey.MPI_SPEC: self.mpi_spec,
                StackKey.MPI_KNOWN_ISSUE: self.known_issue,
                StackKey.COMPILER_FAMILY: self.compiler_family,
                StackKey.COMPILER_VERSION: self.compiler_version,
                StackKey.TOOLS: dict(self.tools), StackKey.TOOL_PREFIXES: list(self.tool_prefixes),
                StackKey.FABRIC_GAPS: dict(self.fabric_gaps)}

    @classmethod
    def from_extras(cls, environ: str, extras: dict) -> 'Stack':
        missing = [k for k in StackKey.ALL if k not in (extras or {})]
        if missing:
            raise ConfigError(f'environment {environ} was not made by hpcnet.stacks: its extras '
                              f'lack {", ".join(missing)} (MPI checks select +mpi environments)')
        return cls(environ=environ, mpi_family=extras[StackKey.MPI_FAMILY],
                   mpi_profile=extras[StackKey.MPI_PROFILE],
                   mpi_version=extras[StackKey.MPI_VERSION],
                   mpi_source=extras[StackKey.MPI_SOURCE], mpi_prefix=extras[StackKey.MPI_PREFIX],
                   mpi_spec=extras[StackKey.MPI_SPEC],
                   known_issue=extras[StackKey.MPI_KNOWN_ISSUE],
                   compiler_family=extras[StackKey.COMPILER_FAMILY],
                   compiler_version=extras[StackKey.COMPILER_VERSION],
                   tools=tuple(sorted(extras[StackKey.TOOLS].items())),
                   tool_prefixes=tuple(extras[StackKey.TOOL_PREFIXES]),
                   fabric_gaps=tuple(sorted(extras[StackKey.FABRIC_GAPS].items())))

    @classmethod
    def of(cls, rfm_environ) -> 'Stack':
        """The model of a ReFrame environment (``self.current_environ``)."""
        return cls.from_extras(rfm_environ.name, rfm_environ.extras)


class SiteKey:
    """Keys of a site file's ``stacks`` (which environments its system gets)."""
    #: {'include': [regex, ...], 'exclude': [regex, ...]} over environment names
    ENVIRONMENTS = 'environments'
    #: False: no environment of the PyPI MPIs (`hpcnet install-stacks`)
    PYPI_STACKS = 'pypi_stacks'
    #: the stack variables a site sets once (hpcnet.stackvalues)
    SPACK_ENV = 'spack_env'
    MPI_PREFIXES = 'mpi_prefixes'
    MODULE_PATHS = 'module_paths'
    ALL = (ENVIRONMENTS, PYPI_STACKS, SPACK_ENV, MPI_PREFIXES, MODULE_PATHS)
    INCLUDE = 'include'
    EXCLUDE = 'exclude'
    FILTERS = (INCLUDE, EXCLUDE)


def _check_mapping(value, keys: tuple, at: str, what: str, where: str) -> None:
    '''``value`` (at key ``at`` of file ``where``) is a mapping of ``keys``
    only, each ``what`` says; else one ConfigError naming the first wrong key.'''
    if not isinstance(value, dict):
        raise ConfigError(f'{where}: {at} is {value!r} (valid: a mapping with keys '
                          f'{", ".join(keys)})')
    unknown = sorted(set(value) - set(keys), key=str)
    if unknown:
        raise ConfigError(f'{where}: {at}.{unknown[0]} is not {what} (valid: {", ".join(keys)})')


@dataclass(frozen=True)
class StackChoice:
    """Which environments a site's system gets (its file's ``stacks``,
    SiteKey): regular expressions over environment names, searched as
    ReFrame's ``-p`` does (none included: all), and whether the PyPI MPIs count."""
    include: tuple = ()          #: compiled patterns
    exclude: tuple = ()
    pypi_stacks: bool = True

    def refusal(self, environ: str, mpi_source: str) -> str | None:
        '''Why the system does not get environment ``environ`` (of MPI source
        ``mpi_source``), or None.'''
        if mpi_source == 'pypi' and not self.pypi_stacks:
            return f'{SiteKey.PYPI_STACKS} is False'
        if self.include and not any(p.search(environ) for p in self.include):
            return (f'{SiteKey.ENVIRONMENTS}.{SiteKey.INCLUDE} matches it not '
                    f'({", ".join(p.pattern for p in self.include)})')
        hit = next((p for p in self.exclude if p.search(environ)), None)
        if hit:
            return f'{SiteKey.ENVIRONMENTS}.{SiteKey.EXCLUDE} {hit.pattern!r} matches it'
        return None

    @classmethod
    def from_site(cls, value, where: str) -> 'StackChoice':
        """Validate a site file's ``stacks`` (from ``where``)."""
        if value is None:
            return cls()
        _check_mapping(value, SiteKey.ALL, 'stacks', 'a stacks setting', where)
        pypi = value.get(SiteKey.PYPI_STACKS, True)
        if not isinstance(pypi, bool):
            raise ConfigError(f'{where}: stacks.{SiteKey.PYPI_STACKS} is {pypi!r} '
                              '(valid: True or False)')
        filters = value.get(SiteKey.ENVIRONMENTS, {})
        _check_mapping(filters, SiteKey.FILTERS, f'stacks.{SiteKey.ENVIRONMENTS}', 'a filter',
                       where)
        compiled = {}
        for key in SiteKey.FILTERS:
            patterns = filters.get(key, [])
            at = f'stacks.{SiteKey.ENVIRONMENTS}.{key}'
            if not isinstance(patterns, (list, tuple)):
                raise ConfigError(f'{where}: {at} is {patterns!r} (valid: a list of regular '
                                  'expressions over environment names)')
            compiled[key] = []
            for i, pattern in enumerate(patterns):
                try:
                    compiled[key].append(re.compile(pattern))
                except (re.error, TypeError) as err:
                    raise ConfigError(f'{where}: {at}[{i}] is {pattern!r}: {err} (valid: a '
                                      'regular expression over environment names, as for '
                                      "ReFrame's -p)") from None
        return cls(tuple(compiled[SiteKey.INCLUDE]), tuple(compiled[SiteKey.EXCLUDE]), pypi)


def check_system(system: dict, where: str) -> dict:
    """Validate every partition of a system dictionary (from ``where``) and add
    the features its model implies; return the system."""
    name = system.get('name') if isinstance(system, dict) else None
    if not isinstance(name, str) or not isinstance(system.get('partitions'), list):
        raise ConfigError(f'{where}: `system` must be a ReFrame system dictionary with a name '
                          'and a list of partitions')
    for part in system['partitions']:
        model = Partition.from_extras(f'{name}:{part.get("name")}', part.get('extras'), where)
        if model.pmi and part.get('launcher') != PMI_LAUNCHER:
            raise ConfigError(f'{where}: partition {model.fullname}: extras.{PartitionKey.PMI} '
                              f'is for launcher {PMI_LAUNCHER!r}, but the partition\'s launcher '
                              f'is {part.get("launcher")!r} (valid: launcher {PMI_LAUNCHER!r}, '
                              f'or no extras.{PartitionKey.PMI})')
        part['features'] = sorted(set(part.get('features', [])) | set(model.features()))
    return system
