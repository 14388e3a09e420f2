"""The registry of MPI families: one :class:`FamilyEntry` per family, and
every lookup the rest of hpcnet makes about a family.

A family is known to hpcnet by its entry alone (plus its profile in the
fabric table, config/fabrics.yaml ``profiles:``): discovery, the probe, the
library check, module and Spack sources, the start environment, transport
reports and known issues all read it from here.  The transport-report
parsers the entries name (an MPI's output -> the transports it used for
peers, never 'self') are at the end; the fabric table's
:meth:`hpcnet.fabrictable.FabricSettings.verify` runs them.  :func:`register` adds one,
:func:`unregister` removes it again (tests).

The registry class itself (:class:`Registry`) is here too: hpcnet.fabrics
keeps its fabrics in one.

This package is a leaf: it imports nothing of hpcnet outside itself, so that
discovery (hpcnet.stacks, .sources, .modules, .spacklock), the model and the
judging code (hpcnet.checklib.sanity) can all import it without a circle.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Callable

from hpcnet.mpi.known_issues import KnownIssue


class RegistryError(ValueError):
    '''An entry the registry does not hold, or one that is incomplete or
    contradicts the others; the message names what is valid.'''


class Registry:
    '''Entries by name, in registration order.  ``kind`` names an entry in
    messages ("fabric", "MPI family"); ``check(entry, held)`` returns what
    is wrong with a new entry against the tuple of those already held, or
    None.'''

    def __init__(self, kind: str, check: Callable[[object, tuple], str | None]):
        self.kind = kind
        self._check = check
        self._entries: dict = {}

    def register(self, entry):
        '''Add ``entry`` (it has a ``name``); raises RegistryError where the
        name is taken or the check finds it wrong.  Returns the entry.'''
        if entry.name in self._entries:
            raise RegistryError(f'{self.kind} {entry.name!r} is already registered')
        wrong = self._check(entry, self.entries())
        if wrong:
            raise RegistryError(f'{self.kind} {entry.name!r}: {wrong}')
        self._entries[entry.name] = entry
        return entry

    def unregister(self, name: str) -> None:
        '''Remove an entry (a test's own, after the test).'''
        self._entries.pop(name, None)

    def entries(self) -> tuple:
        '''Every entry, in registration order.'''
        return tuple(self._entries.values())

    def names(self) -> tuple:
        return tuple(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def get(self, name: str):
        '''The entry named ``name``; RegistryError naming the valid ones.'''
        try:
            return self._entries[name]
        except KeyError:
            raise RegistryError(f'{self.kind} {name!r} is not registered '
                                f'(valid: {", ".join(self._entries)})') from None


#: What a verdict says when the MPI's own transport report decided it.
OWN_REPORT = 'its own transport report'


@dataclass(frozen=True)
class TransportParser:
    '''Reads an MPI's report of the transports it used for peers.'''
    #: The name the fabric table's ``profiles.<profile>.report.parser`` gives.
    name: str
    #: MPI output -> set of transport names used for peers (never 'self').
    transports: Callable[[str], set]
    #: MPI output -> which output decided (for the verdict); None: always
    #: the MPI's own transport report.
    evidence: Callable[[str], str] | None = None
    #: MPI output -> the RDMA devices it names as used, where the report
    #: names them (UCX's does): they must be among the partition's devices,
    #: not just any port.  None: the report names no devices.
    rdma_devices: Callable[[str], set] | None = None

    def evidence_of(self, text: str) -> str:
        return self.evidence(text) if self.evidence else OWN_REPORT


@dataclass(frozen=True)
class FamilyEntry:
    '''Everything hpcnet knows about one MPI family.'''
    #: As in environment names and features: 'openmpi', 'mpich', ...
    name: str
    #: The variable the compiler wrapper reads to use another C compiler.
    wrapper_cc_variable: str
    #: Wrapper arguments that print the compiler command it runs.
    wrapper_show_args: tuple
    #: A macro only this family's mpi.h defines (the probe tests it).
    header_macro: str
    #: How the probe prints the header's version: a printf format and the
    #: macros that fill it (default: ``header_macro`` as a string).
    header_version_format: str = '%s'
    header_version_macros: tuple = ()
    #: Families whose header macros and library string this family's also
    #: carry (Intel MPI and MVAPICH2 are built on MPICH): it is tested first.
    builds_on: tuple = ()
    #: How MPI_Get_library_version names the family; group 1 is the version.
    library_pattern: re.Pattern | None = None
    #: Transport layers the family ships with several of ('ucx', 'ofi'):
    #: each is a profile of its own in the fabric table, '<name>-<layer>'.
    transport_layers: tuple = ()
    #: The parsers its fabric-table profiles name (:class:`TransportParser`).
    transport_parsers: tuple = ()
    #: Prefixes of variables that switch on its transport report (for the
    #: message naming them), beyond names holding VERBOSE, LOG or DEBUG.
    report_variable_prefixes: tuple = ()
    #: ((name, value), ...) the MPI needs to start at all when run as root.
    start_env_as_root: tuple = ()
    #: Programs in a prefix's bin/ that only this family installs.
    prefix_programs: tuple = ()
    #: The variable set to an installation prefix for the MPI to find itself.
    root_variable: str | None = None
    #: Debian's suffix of its side-by-side programs (mpicc.<suffix>), and
    #: the transport layer Debian builds it with.
    debian_suffix: str | None = None
    debian_transport_layer: str | None = None
    #: Exact pip requirements of its PyPI stack (one prefix named after the
    #: family), and whether pip must skip their declared dependencies.
    pypi_requirements: tuple = ()
    pypi_no_deps: bool = False
    #: Families whose PyPI stack lends its libfabric.so.1 to this family's
    #: PyPI stack, which ships none (the first installed one that has it).
    pypi_libfabric_from: tuple = ()
    #: Spack package names that provide it.
    spack_packages: tuple = ()
    #: EasyBuild's name of it (easyconfig and module name).
    easybuild_name: str = ''
    #: Module package names (lower case, the part before the first '/').
    module_packages: tuple = ()
    #: EasyBuild toolchains holding it: compiler + MPI ones, then those that
    #: add math libraries (a toolchain of the first kind becomes the
    #: environment where both load the same MPI module: gompi, not foss).
    mpi_toolchains: tuple = ()
    full_toolchains: tuple = ()
    #: Its known defects (:class:`hpcnet.mpi.known_issues.KnownIssue`).
    known_issues: tuple = ()

    def profile(self, layer: str | None) -> str:
        '''Its key in the fabric table under transport layer ``layer``.'''
        return f'{self.name}-{layer}' if self.transport_layers and layer else self.name

    def probe_branch(self) -> str:
        '''Its printf of the probe's ``header:`` line.'''
        macros = ', '.join(self.header_version_macros or (self.header_macro,))
        return f'    printf("header: {self.name} {self.header_version_format}\\n", {macros});\n'


def _contradiction(entry: FamilyEntry, held: tuple) -> str | None:
    '''What a new family contradicts in the entries ``held`` (a parser,
    module or Spack package claimed twice; a base not registered), or None.'''
    for issue in entry.known_issues:
        if issue.family != entry.name:
            return f'known issue {issue.name} is of family {issue.family!r}'
    names = [other.name for other in held]
    unknown = [base for base in entry.builds_on if base not in names]
    if unknown:
        return f'builds on {unknown[0]!r}, which is not registered (valid: {", ".join(names)})'
    for other in held:
        for what in ('spack_packages', 'module_packages', 'mpi_toolchains', 'full_toolchains'):
            shared = set(getattr(entry, what)) & set(getattr(other, what))
            if shared:
                return f'{what} {sorted(shared)[0]!r} is already {other.name}\'s'
        shared = ({p.name for p in entry.transport_parsers} &
                  {p.name for p in other.transport_parsers})
        if shared:
            return f'transport parser {sorted(shared)[0]!r} is already {other.name}\'s'
    return None


_REGISTRY = Registry('MPI family', _contradiction)
#: Add a family; RegistryError where it contradicts the entries already held.
register = _REGISTRY.register
#: Remove a family (a test's own, after the test).
unregister = _REGISTRY.unregister
#: Every entry, in registration order.
families = _REGISTRY.entries
family_names = _REGISTRY.names
#: The entry of a family; RegistryError naming the valid ones.
family = _REGISTRY.get


def _entry_or_none(family_name: str) -> FamilyEntry | None:
    return _REGISTRY.get(family_name) if family_name in _REGISTRY else None


def _depth(entry: FamilyEntry) -> int:
    return max((1 + _depth(_REGISTRY.get(base)) for base in entry.builds_on), default=0)


def in_probe_order() -> tuple:
    '''Entries as headers and library strings are tested: a family before
    those it builds on (Intel MPI's mpi.h also defines MPICH_VERSION).'''
    entries = families()
    return tuple(sorted(entries, key=lambda e: (-_depth(e), entries.index(e))))


def probe_header_chain() -> str:
    '''The probe's ``#if`` chain printing ``header: <family> <version>``.'''
    text = ''
    for i, entry in enumerate(in_probe_order()):
        text += f'#{"if" if i == 0 else "elif"} defined({entry.header_macro})\n'
        text += entry.probe_branch()
    return text + '#else\n    printf("header: unknown 0\\n");\n#endif\n'


def library_family(library_version: str) -> tuple | None:
    '''(family, version) named by an MPI_Get_library_version string.'''
    for entry in in_probe_order():
        m = entry.library_pattern.search(library_version) if entry.library_pattern else None
        if m:
            return entry.name, m.group(1)
    return None


def wrapper_show_args() -> tuple:
    '''The wrappers' ways to print their compiler command, each once.'''
    return tuple(dict.fromkeys(e.wrapper_show_args for e in _REGISTRY.entries()))


def mpi_profile(family_name: str, layer: str | None) -> str:
    '''Key of an MPI in the fabric table: its family, plus the transport layer
    where one family ships with several (MPICH over UCX or OFI).'''
    entry = _entry_or_none(family_name)
    return entry.profile(layer) if entry else family_name


def start_env(family_name: str) -> dict:
    '''Variables an MPI needs to start at all as this user (Open MPI refuses
    to run as root without OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)).'''
    entry = _entry_or_none(family_name)
    if entry is None or os.geteuid() != 0:
        return {}
    return dict(entry.start_env_as_root)


def transport_parsers() -> dict:
    '''{parser name: TransportParser} of every family.'''
    return {p.name: p for e in _REGISTRY.entries() for p in e.transport_parsers}


def transport_parser(name: str) -> TransportParser:
    parsers = transport_parsers()
    if name not in parsers:
        raise RegistryError(f'{name!r} is not a transport parser (valid: {", ".join(parsers)})')
    return parsers[name]


#: Parts of a variable's name that make it a reporting variable of any MPI.
_REPORT_NAME_PARTS = ('VERBOSE', 'LOG', 'DEBUG')


def is_report_variable(name: str) -> bool:
    '''Whether variable ``name`` switches on an MPI's transport report.'''
    return (any(part in name for part in _REPORT_NAME_PARTS) or
            any(name.startswith(prefix) for e in _REGISTRY.entries()
                for prefix in e.report_variable_prefixes))


def spack_family(package: str) -> str | None:
    '''The family a Spack package provides, or None.'''
    return next((e.name for e in _REGISTRY.entries() if package in e.spack_packages), None)


def spack_packages() -> tuple:
    return tuple(p for e in _REGISTRY.entries() for p in e.spack_packages)


def module_family(package: str) -> str | None:
    '''The family of an MPI module's package name (lower case), or None.'''
    return next((e.name for e in _REGISTRY.entries() if package in e.module_packages), None)


def toolchains() -> tuple:
    '''(toolchain, family) of every EasyBuild toolchain, compiler + MPI
    toolchains first.'''
    entries = _REGISTRY.entries()
    return (tuple((t, e.name) for e in entries for t in e.mpi_toolchains) +
            tuple((t, e.name) for e in entries for t in e.full_toolchains))


def known_issues() -> tuple:
    return tuple(issue for e in _REGISTRY.entries() for issue in e.known_issues)


def known_issue(family_name: str, version: str, layer: str | None) -> KnownIssue | None:
    '''The known defect of a stack of this family, version and transport
    layer, or None.'''
    entry = _entry_or_none(family_name)
    return next((issue for issue in (entry.known_issues if entry else ())
                 if issue.applies_to(family_name, version, layer)), None)


def known_issue_named(name: str) -> KnownIssue:
    '''The known issue an environment names (hpcnet.model.Stack.known_issue).'''
    for issue in known_issues():
        if issue.name == name:
            return issue
    raise RegistryError(f'known issue {name!r} is not in the MPI registry (hpcnet.mpi; valid: '
                        f'{", ".join(i.name for i in known_issues())}): the environments were '
                        'made by another version of hpcnet')


def environment_label(family_name: str, version: str) -> str:
    '''A family and version as environment names show them, by major version:
    gcc12, openmpi4, impi2021 (Intel MPI keeps its year as major), mvapich2
    (the family already says its major).'''
    major = version.split('.')[0]
    # mvapich2 2.3.7 -> mvapich2 (not mvapich22); a family ending in
    # another digit keeps the major apart: mvapich2 3.0 -> mvapich2-3.
    if family_name.endswith(major):
        return family_name
    if family_name[-1:].isdigit():
        return f'{family_name}-{major}'
    return f'{family_name}{major}'


# Transport-report parsers: an MPI's output -> the set of transport names it
# used for peers (never 'self').

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


def ucx_transports(text: str) -> set:
    return {tl for tl, _ in _ucx_peer_lanes(text)}


#: UCX transports that do not go through an RDMA device.
_UCX_NON_RDMA = {'tcp', 'sysv', 'posix', 'cma', 'knem', 'xpmem', 'cuda_ipc', 'cuda_copy',
                 'rocm_ipc', 'rocm_copy', 'gdr_copy', 'self'}


def ucx_rdma_devices(text: str) -> set:
    '''RDMA devices ('mlx5_0', without the port) UCX used for peers.'''
    return {dev.split(':')[0] for tl, dev in _ucx_peer_lanes(text)
            if tl not in _UCX_NON_RDMA and dev}


def openmpi_transports(text: str) -> set:
    btls = {b for b in _OMPI_BML.findall(text) if b != 'self'}
    return btls | ucx_transports(text)


def ofi_transports(text: str) -> set:
    # 'tcp;ofi_rxm' is the tcp provider under the RxM utility layer.
    return {p.split(';')[0] for p in _OFI_PROVIDER.findall(text)}


def impi_transports(text: str) -> set:
    found = ofi_transports(text)
    if not found and _IMPI_SHM_TUNING.search(text):
        found.add('shm')
    return found


#: MVAPICH2's library string names its device (MPI_Get_library_version:
#: "MVAPICH2 Device : ch3:sock"; real output in tests/data/samples).
_MV2_DEVICE = re.compile(r'MVAPICH2 Device\s*:\s*([\w:]+)')
#: Devices that carry every message one way, whatever the ranks' placement:
#: ch3:sock has no shared-memory path, so on one node too it is TCP.
_MV2_SINGLE_TRANSPORT_DEVICES = {'ch3:sock': 'tcp'}


def _mvapich2_report(text: str) -> bool:
    return bool(_MV2_HCA_AFFINITY.search(text) and _MV2_HCA_BINDING.search(text))


def mvapich2_transports(text: str) -> set:
    # Its own report first: 'mrail' is the OFA verbs channel bound to an HCA
    # (IB, RoCE or iWARP).  Else the device of its library string, where the
    # device leaves no choice.
    if _mvapich2_report(text):
        return {'mrail'}
    device = _MV2_DEVICE.search(text)
    if device and device.group(1) in _MV2_SINGLE_TRANSPORT_DEVICES:
        return {_MV2_SINGLE_TRANSPORT_DEVICES[device.group(1)]}
    return set()


def mvapich2_evidence(text: str) -> str:
    '''Which of MVAPICH2's outputs decided the transport, for the verdict.'''
    if not _mvapich2_report(text):
        device = _MV2_DEVICE.search(text)
        if device:
            return (f'its library string (MVAPICH2 Device : {device.group(1)}'
                    + (', every message over TCP sockets' if device.group(1) == 'ch3:sock' else '')
                    + ')')
    return OWN_REPORT
