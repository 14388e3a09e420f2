"""Transport-report parsers: an MPI's output -> the set of transport names it
used for peers (never 'self').

Each family's registry entry (:mod:`hpcnet.mpi.entries`) names the parsers
its fabric-table profiles use; :meth:`hpcnet.fabrics.FabricSettings.verify`
runs them.
"""
from __future__ import annotations

import re

#: What a verdict says when the MPI's own transport report decided it.
OWN_REPORT = 'its own transport report'


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
