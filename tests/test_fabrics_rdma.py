"""Transport proofs on RoCE/InfiniBand, on real reports recorded elsewhere.

Every file under tests/data/transport/rdma is an unmodified excerpt of output somebody
posted publicly; tests/data/transport/rdma/README.md gives MPI, fabric and source for each.
"""
from pathlib import Path

import pytest

from conftest import fabric_settings

from hpcnet import mpi

DATA = Path(__file__).parent / 'data' / 'transport' / 'rdma'
EXTRAS = {'iface': 'eth0', 'rdma_device': 'mlx5_0'}
FAMILY = {'openmpi': 'openmpi', 'mpich-ucx': 'mpich', 'mpich-ofi': 'mpich',
          'impi': 'impi', 'mvapich2': 'mvapich2'}

# file -> (parser, transports it must report).  The self endpoint never counts.
PARSED = {
    'ompi9080-ucx-ep_cfg-rc_mlx5.txt': ('openmpi', {'rc_mlx5'}),
    'ucx8511-ompi-ucx-ep_cfg-dc_mlx5.txt': ('openmpi', {'dc_mlx5'}),
    'ucx10996-ucx119-roce-rc_mlx5.txt': ('ucx', {'rc_mlx5'}),         # not cma (self ep)
    'ucx-pr3511-ep_cfg-rc_mlx5.txt': ('ucx', {'rc_mlx5'}),            # rma/amo-only lines ignored
    'parthenon1260-ucx115-gpu-node.txt': ('ucx', {'rc_mlx5', 'sysv', 'cuda_ipc'}),
    'parthenon1260-ucx-ctx-gpu-node.txt': ('ucx', {'rc_mlx5', 'sysv', 'cma', 'cuda_ipc'}),
    'pyxis140-ompi503-tcp-on-ib.txt': ('openmpi', {'tcp'}),
    'ucx6658-impi2021-mlx.txt': ('impi', {'mlx'}),
    'thelinuxcluster-impi2019-verbs.txt': ('impi', {'verbs'}),
    'mgpm7-mvapich2-234-params.txt': ('mvapich2', set()),             # names no transport
}

# (file, profile, fabric) that must pass.  Where the source does not state the link
# layer, both RDMA fabrics pass: UCX and libfabric name the same transports on both.
PROVEN = [
    ('ompi9080-ucx-ep_cfg-rc_mlx5.txt', 'openmpi', 'ib'),
    ('ompi9080-ucx-ep_cfg-rc_mlx5.txt', 'openmpi', 'roce'),
    ('ucx8511-ompi-ucx-ep_cfg-dc_mlx5.txt', 'openmpi', 'ib'),
    ('ucx10996-ucx119-roce-rc_mlx5.txt', 'openmpi', 'roce'),          # stated RoCE
    ('ucx10996-ucx119-roce-rc_mlx5.txt', 'mpich-ucx', 'roce'),        # MPI not stated
    ('ucx-pr3511-ep_cfg-rc_mlx5.txt', 'mpich-ucx', 'ib'),
    ('ucx6658-impi2021-mlx.txt', 'impi', 'ib'),
    ('thelinuxcluster-impi2019-verbs.txt', 'impi', 'ib'),
    ('thelinuxcluster-impi2019-verbs.txt', 'impi', 'roce'),
]

# (file, profile, fabric asked for, transports the failure must name)
MISMATCHED = [
    # The silent TCP case: an IB cluster whose container hook forced UCX_TLS=tcp,...
    ('pyxis140-ompi503-tcp-on-ib.txt', 'openmpi', 'ib', 'tcp'),
    ('pyxis140-ompi503-tcp-on-ib.txt', 'openmpi', 'roce', 'tcp'),
    # RDMA reports checked against Ethernet/TCP or shared memory.
    ('ucx10996-ucx119-roce-rc_mlx5.txt', 'openmpi', 'tcp', 'rc_mlx5'),
    ('ucx10996-ucx119-roce-rc_mlx5.txt', 'mpich-ucx', 'shm', 'rc_mlx5'),
    ('ompi9080-ucx-ep_cfg-rc_mlx5.txt', 'openmpi', 'tcp', 'rc_mlx5'),
    ('ucx6658-impi2021-mlx.txt', 'impi', 'tcp', 'mlx'),
    ('thelinuxcluster-impi2019-verbs.txt', 'impi', 'tcp', 'verbs'),
    # On-node peers over shared memory / CUDA IPC (sm was in UCX_TLS): not "all on IB".
    ('parthenon1260-ucx115-gpu-node.txt', 'openmpi', 'ib', 'cuda_ipc, sysv'),
    ('parthenon1260-ucx-ctx-gpu-node.txt', 'mpich-ucx', 'ib', 'cma, cuda_ipc, sysv'),
]


#: The HCAs each multi-rail recording really used: its partition declares them.
RAILS = {'ompi9080-ucx-ep_cfg-rc_mlx5.txt': 'mlx5_0,mlx5_1',
         'ucx-pr3511-ep_cfg-rc_mlx5.txt': 'mlx5_0,mlx5_2,mlx5_4'}


def settings(fabric, profile, name=None):
    extras = {**EXTRAS, 'rdma_device': RAILS.get(name, EXTRAS['rdma_device'])}
    return fabric_settings(fabric, profile, FAMILY[profile], 'srun', extras)


def recorded(name):
    return (DATA / name).read_text()


def test_every_recording_is_documented_and_tested():
    readme = (DATA / 'README.md').read_text()
    files = {p.name for p in DATA.glob('*.txt')}
    assert files == set(PARSED)
    for name in files:
        assert f'`{name}`' in readme, f'{name} has no provenance row in README.md'


@pytest.mark.parametrize('name', PARSED)
def test_parser_reads_the_recorded_report(name):
    parser, expected = PARSED[name]
    assert mpi.transport_parser(parser).transports(recorded(name)) == expected


def test_impi_mlx_provider_runs_on_ucx():
    # The same Intel MPI run shows UCX endpoint lines under "libfabric provider: mlx".
    assert mpi.transport_parser('ucx').transports(recorded('ucx6658-impi2021-mlx.txt')) == {'dc_mlx5'}


@pytest.mark.parametrize('name,profile,fabric', PROVEN)
def test_rdma_report_proves_the_rdma_fabric(name, profile, fabric):
    ok, message = settings(fabric, profile, name).verify(recorded(name))
    assert ok, message


@pytest.mark.parametrize('name,profile,fabric,wrong', MISMATCHED)
def test_wrong_transport_fails(name, profile, fabric, wrong):
    ok, message = settings(fabric, profile).verify(recorded(name))
    assert not ok
    assert f"fabric '{fabric}' asked for, but {profile} used {wrong} " in message


@pytest.mark.parametrize('fabric', ['roce', 'ib', 'shm', 'tcp'])
def test_mvapich2_fails_closed_without_a_transport_report(fabric):
    '''The only real MVAPICH2 output found (a parameter listing) proves nothing.'''
    ok, message = settings(fabric, 'mvapich2').verify(recorded('mgpm7-mvapich2-234-params.txt'))
    assert not ok and 'mvapich2 printed no transport report' in message
    assert 'MV2_SHOW_HCA_BINDING' in message


# MVAPICH2 2.3 user guide, "MVAPICH2 General Parameters" and "MVAPICH2 Parameters
# (CH3-Based Interfaces)": the run-time parameters the table may use.
MV2_DOCUMENTED = {'MV2_SHOW_ENV_INFO', 'MV2_SHOW_HCA_BINDING', 'MV2_USE_RoCE', 'MV2_IBA_HCA',
                  'MV2_DEFAULT_PORT', 'MV2_DEFAULT_GID_INDEX', 'MV2_USE_SHARED_MEM',
                  'MV2_SMP_USE_CMA'}


@pytest.mark.parametrize('fabric', ['shm', 'tcp', 'roce', 'ib'])
def test_mvapich2_table_uses_documented_variables(fabric):
    env = settings(fabric, 'mvapich2').env
    assert set(env) <= MV2_DOCUMENTED
    assert env['MV2_SHOW_HCA_BINDING'] == '2'     # 2: all nodes, 1: rank 0's node only


def test_rdma_settings_pin_the_partition_device():
    roce = settings('roce', 'mvapich2').env
    assert (roce['MV2_USE_RoCE'], roce['MV2_IBA_HCA'], roce['MV2_DEFAULT_PORT'],
            roce['MV2_DEFAULT_GID_INDEX']) == ('1', 'mlx5_0', '1', '3')
    assert 'MV2_USE_RoCE' not in settings('ib', 'mvapich2').env
    assert settings('ib', 'impi').env['UCX_NET_DEVICES'] == 'mlx5_0:1'
    for profile in ('openmpi', 'mpich-ucx'):
        for fabric in ('roce', 'ib'):
            assert settings(fabric, profile).env['UCX_NET_DEVICES'] == 'mlx5_0:1'


@pytest.mark.parametrize('name,profile', [('ompi9080-ucx-ep_cfg-rc_mlx5.txt', 'openmpi'),
                                          ('ucx-pr3511-ep_cfg-rc_mlx5.txt', 'mpich-ucx')])
def test_rdma_device_outside_the_partition_fails(name, profile):
    '''Multi-rail runs: every HCA UCX used must be one the partition declares.'''
    ok, message = settings('ib', profile).verify(recorded(name))      # declares mlx5_0 only
    assert not ok
    assert "fabric 'ib' on mlx5_0 asked for, but" in message and 'also used RDMA device' in message


def test_multi_rail_devices_reach_ucx_with_their_port():
    s = fabric_settings('roce', 'openmpi', 'openmpi', 'srun',
                             {'iface': 'eth0', 'rdma_device': ['mlx5_0', 'mlx5_1']})
    assert s.env['UCX_NET_DEVICES'] == 'mlx5_0:1,mlx5_1:1'
    assert s.devices == {'mlx5_0', 'mlx5_1'}


MV2_CH3_SOCK = Path(__file__).parent / 'data' / 'samples' / \
    'hpcnet-p2p-pingpong.local-tcp.mvapich2-2.3.7-ch3sock.txt'


def test_mvapich2_ch3_sock_is_proved_by_its_library_string():
    '''A real MVAPICH2 2.3.7 ch3:sock run (our p2p kernel on local:tcp) prints
    no MV2_SHOW_* report, but its library string names the device, which
    carries every message over TCP sockets: it passes on tcp, fails on shm
    naming TCP and the evidence.'''
    text = MV2_CH3_SOCK.read_text()
    ok, message = settings('tcp', 'mvapich2').verify(text)
    assert ok, message
    assert message == ("mvapich2 used tcp on fabric 'tcp' (evidence: its library string "
                       "(MVAPICH2 Device : ch3:sock, every message over TCP sockets))")
    ok, message = settings('shm', 'mvapich2').verify(text)
    assert not ok
    assert "fabric 'shm' asked for, but mvapich2 used tcp (expected one of: shm; evidence: " \
           "its library string (MVAPICH2 Device : ch3:sock" in message


def test_environment_names_stay_readable():
    from hpcnet.stacks import Compiler, Labelled
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Mpi(Labelled):
        family: str
        version: str
    assert Mpi('mvapich2', '2.3.7').label == 'mvapich2'
    assert Mpi('mvapich2', '3.0').label == 'mvapich2-3'
    assert Mpi('openmpi', '4.1.4').label == 'openmpi4'
    assert Compiler('gcc', '12.2.0', '/usr/bin/gcc').label == 'gcc12'
