"""The fabric x MPI table and the transport proofs, on real recorded reports."""
from pathlib import Path

import pytest
import yaml

from conftest import fabric_settings

from hpcnet import fabrictable, model
from hpcnet.constants import FABRICS_FILE

DATA = Path(__file__).parent / 'data' / 'transport'
# recording prefix -> (profile, family)
RECORDED = {'openmpi4': ('openmpi', 'openmpi'), 'openmpi5': ('openmpi', 'openmpi'),
            'mpich4': ('mpich-ucx', 'mpich'), 'mpich5': ('mpich-ofi', 'mpich'),
            'impi2021': ('impi', 'impi')}
LOCAL_TCP = {'fabric': 'tcp', 'iface': 'lo'}


def settings(fabric, label, launcher='mpirun', extras=None):
    profile, family = RECORDED[label]
    return fabric_settings(fabric, profile, family, launcher, extras or LOCAL_TCP)


@pytest.mark.parametrize('label', RECORDED)
@pytest.mark.parametrize('fabric', ['shm', 'tcp'])
def test_recorded_run_proves_its_own_fabric(label, fabric):
    text = (DATA / f'{label}-{fabric}.txt').read_text()
    ok, message = settings(fabric, label).verify(text)
    assert ok, message


@pytest.mark.parametrize('label', RECORDED)
@pytest.mark.parametrize('asked,used', [('tcp', 'shm'), ('shm', 'tcp')])
def test_mismatch_fails_for_every_family(label, asked, used):
    '''tcp asked for but shared memory used (and the reverse) must fail.'''
    text = (DATA / f'{label}-{used}.txt').read_text()
    ok, message = settings(asked, label).verify(text)
    assert not ok
    assert f"fabric '{asked}' asked for" in message


@pytest.mark.parametrize('label', RECORDED)
def test_no_report_fails(label):
    ok, message = settings('tcp', label).verify('done\n')
    assert not ok and 'printed no transport report' in message


def test_tcp_settings_use_the_partition_interface():
    s = settings('tcp', 'openmpi4', extras={'fabric': 'tcp', 'iface': 'eth7'})
    assert s.env['OMPI_MCA_btl_tcp_if_include'] == 'eth7'
    assert s.env['OMPI_MCA_btl_base_verbose'] == '1'
    assert s.launcher_options == ('--bind-to', 'core')
    assert settings('tcp', 'mpich4', launcher='srun').launcher_options == ('--mpi=pmi2',)
    assert settings('tcp', 'openmpi4', launcher='srun').launcher_options == ('--mpi=pmix',)


def test_yield_variables_only_for_more_ranks_than_shared_cores(monkeypatch):
    monkeypatch.setattr(model.os, 'cpu_count', lambda: 2)
    shared = model.Partition.from_extras('testbed:eth', {'fabric': 'tcp', 'iface': 'eth0', 'num_nodes': 4,
                                                         'nodes_share_cores': True})
    real = model.Partition.from_extras('site:eth', {'fabric': 'tcp', 'iface': 'eth0', 'num_nodes': 4})
    assert shared.oversubscribed(4) and not shared.oversubscribed(2) and not real.oversubscribed(4)
    stack = model.Stack(environ='e', mpi_family='openmpi', mpi_profile='openmpi', mpi_version='5')
    assert fabrictable.settings(shared, stack, 'srun', oversubscribed=True).env['OMPI_MCA_mpi_yield_when_idle'] == '1'
    assert 'OMPI_MCA_mpi_yield_when_idle' not in fabrictable.settings(shared, stack, 'srun').env
    impi = model.Stack(environ='e', mpi_family='impi', mpi_profile='impi', mpi_version='2021')
    assert fabrictable.settings(shared, impi, 'srun', oversubscribed=True).env['I_MPI_WAIT_MODE'] == '1'
    # MPICH yields by itself (>= 4.2) or cannot (4.0.2): nothing added, nothing broken
    mpich = model.Stack(environ='e', mpi_family='mpich', mpi_profile='mpich-ofi', mpi_version='5')
    assert fabrictable.settings(shared, mpich, 'srun', oversubscribed=True).env \
        == fabrictable.settings(shared, mpich, 'srun').env


def test_an_mpi_that_cannot_yield_is_not_run_oversubscribed(monkeypatch):
    monkeypatch.setattr(model.os, 'cpu_count', lambda: 2)
    shared = model.Partition.from_extras('testbed:eth', {'fabric': 'tcp', 'iface': 'eth0', 'num_nodes': 4,
                                                         'nodes_share_cores': True})
    real = model.Partition.from_extras('site:eth', {'fabric': 'tcp', 'iface': 'eth0', 'num_nodes': 4})
    debian = model.Stack(environ='gcc12-mpich4', mpi_family='mpich', mpi_profile='mpich-ucx',
                         mpi_version='4.0.2')
    why = fabrictable.oversubscription_refusal(shared, debian, 4)
    assert why.startswith('gcc12-mpich4: mpich 4.0.2 cannot give up a core while it waits')
    assert 'profiles.mpich-ucx.oversubscribed.yields_from' in why and '4 ranks on the 2 cores' in why
    # Two ranks fit the cores; a site's own nodes never share them; 4.2 on yields.
    assert fabrictable.oversubscription_refusal(shared, debian, 2) is None
    assert fabrictable.oversubscription_refusal(real, debian, 4) is None
    for version in ('4.2', '4.2.1', '5.0.2', '10.0'):
        newer = model.Stack(environ='e', mpi_family='mpich', mpi_profile='mpich-ofi',
                            mpi_version=version)
        assert fabrictable.oversubscription_refusal(shared, newer, 4) is None, version
    # No yields_from: nothing is held back (Open MPI yields when told to).
    ompi = model.Stack(environ='e', mpi_family='openmpi', mpi_profile='openmpi', mpi_version='4.1.4')
    assert fabrictable.oversubscription_refusal(shared, ompi, 4) is None


def test_roce_needs_the_rdma_device_from_the_partition():
    with pytest.raises(model.ConfigError, match="fabric 'roce' needs extras.rdma_device"):
        fabric_settings('roce', 'openmpi', 'openmpi', 'srun', {'iface': 'eth0'})
    s = fabric_settings('roce', 'openmpi', 'openmpi', 'srun',
                             {'iface': 'eth0', 'rdma_device': 'mlx5_0', 'gid_index': 3})
    assert s.env['UCX_NET_DEVICES'] == 'mlx5_0:1'
    assert s.env['UCX_IB_GID_INDEX'] == '3'


@pytest.mark.parametrize('profile', ['openmpi', 'mpich-ucx', 'mpich-ofi', 'impi', 'mvapich2'])
@pytest.mark.parametrize('fabric', ['tcp', 'roce'])
def test_table_covers_every_mpi_on_ethernet_and_roce(profile, fabric):
    assert profile in fabrictable.load_table()['fabrics'][fabric]


def test_unknown_fabric_and_profile_name_what_is_valid():
    with pytest.raises(model.ConfigError, match=r"extras.fabric is 'myrinet' \(valid: shm, tcp, roce, ib"):
        fabric_settings('myrinet', 'openmpi', 'openmpi', 'mpirun', LOCAL_TCP)
    with pytest.raises(model.ConfigError, match="no entry for MPI profile 'lam'"):
        fabric_settings('tcp', 'lam', 'lam', 'mpirun', LOCAL_TCP)


def _broken(mutate):
    data = yaml.safe_load(FABRICS_FILE.read_text())
    mutate(data)
    return data


@pytest.mark.parametrize('mutate,match', [
    (lambda d: d.update(schema=2), r'schema: unsupported schema 2 \(valid: 1\)'),
    (lambda d: d['fabrics']['tcp']['impi'].pop('expect'), r'fabrics\.tcp\.impi\.expect: must be a non-empty list'),
    (lambda d: d['fabrics']['tcp']['impi'].update(envs={}), r'fabrics\.tcp\.impi\.envs: unknown key \(valid: env, launcher_options, expect\)'),
    (lambda d: d['fabrics']['tcp'].update(lam={'expect': ['tcp']}), r'fabrics\.tcp\.lam: unknown MPI profile'),
    (lambda d: d['profiles']['impi']['report'].update(parser='grep'), r'profiles\.impi\.report\.parser: \'grep\' is not a transport parser'),
    (lambda d: d['profiles']['impi'].update(oversubscribe={}), r'profiles\.impi\.oversubscribe: unknown key \(valid: report, oversubscribed\)'),
    (lambda d: d['profiles']['impi'].update(oversubscribed={'env': ['I_MPI_WAIT_MODE=1']}),
     r'profiles\.impi\.oversubscribed: must be a mapping with keys env \(a mapping of variable: value\) and yields_from'),
    (lambda d: d['profiles']['impi'].update(oversubscribed={'yields_from': 4.2}),
     r"profiles\.impi\.oversubscribed\.yields_from: 4\.2 is not a version \(valid: numbers joined by dots, quoted: '4\.2'\)"),
])
def test_malformed_table_names_file_key_and_valid(mutate, match):
    with pytest.raises(model.ConfigError, match=match):
        fabrictable.validate_table(_broken(mutate), 'model.yaml')


def test_unreadable_table(tmp_path):
    bad = tmp_path / 'model.yaml'
    bad.write_text('fabrics: [unclosed\n')
    with pytest.raises(model.ConfigError, match=f"{bad}:2:1: not valid YAML: expected ',' or"):
        fabrictable.load_table(bad)
