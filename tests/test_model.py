"""The typed model: partitions and stacks from the configuration, validated
when it loads, and sites as files."""
import pytest

from hpcnet.siteconfig import sites
from hpcnet.constants import CONFIG_DIR, Fabric, PartitionFeature
from hpcnet.model import ConfigError, Partition, Stack, partition_extras


def test_partition_from_extras_is_typed():
    part = Partition.from_extras('site:eth', partition_extras(
        fabric=Fabric.ROCE, iface='ens1f0np0', rdma_device='mlx5_0,mlx5_1', gid_index=3,
        link_rate_bps=100 * 10**9, num_nodes=16))
    assert part.rdma_devices == ('mlx5_0', 'mlx5_1')
    assert part.rdma_port == 1 and part.gid_index == 3 and part.num_nodes == 16
    assert part.multinode and part.is_rdma
    assert part.features() == [Fabric.ROCE, PartitionFeature.MULTINODE]


@pytest.mark.parametrize('extras,match', [
    ({}, r"partition s:p: extras.fabric is None \(valid: shm, tcp, roce, ib"),
    ({'fabric': 'myrinet'}, r"extras.fabric is 'myrinet' \(valid: shm, tcp"),
    # A value that would reach a job script: refused, never run.
    ({'fabric': 'tcp', 'iface': 'lo; touch x'}, r"extras.iface is 'lo; touch x' \(valid: an interface"),
    ({'fabric': 'tcp', 'iface': 'a-very-long-interface-name'}, r'extras.iface'),
    ({'fabric': 'tcp'}, r"fabric 'tcp' needs extras.iface"),
    ({'fabric': 'roce', 'iface': 'eth0'}, r"fabric 'roce' needs extras.rdma_device"),
    ({'fabric': 'roce', 'rdma_device': 'mlx5_0 $(reboot)'}, r'extras.rdma_device names'),
    ({'fabric': 'shm', 'num_nodes': 0}, r'extras.num_nodes is 0 \(valid: a positive integer\)'),
    ({'fabric': 'tcp', 'iface': 'lo', 'link_rate_bps': '1G'}, r"extras.link_rate_bps is '1G'"),
    ({'fabric': 'tcp', 'iface': 'lo', 'ifcae': 'eth0'}, r'extras.ifcae is not a partition setting \(valid: fabric, iface'),
    ({'fabric': 'shm', 'gid_index': -1}, r'extras.gid_index is -1 \(valid: an integer >= 0\)'),
])
def test_bad_partition_is_one_error_naming_file_partition_key(extras, match):
    with pytest.raises(ConfigError, match=match) as err:
        Partition.from_extras('s:p', extras, where='config/systems/s.py')
    assert str(err.value).startswith('config/systems/s.py: partition s:p: ')


def test_stack_round_trips_through_extras():
    stack = Stack(environ='gcc12-openmpi4', mpi_family='openmpi', mpi_profile='openmpi',
                  mpi_version='4.1.4', tools=(('IMB-MPI1', '/x/IMB-MPI1'),),
                  known_issue=('MPI_Finalize', 'why'))
    again = Stack.from_extras('gcc12-openmpi4', stack.to_extras())
    assert again == stack and again.tool('IMB-MPI1') == '/x/IMB-MPI1' and again.mpi_major == '4'


def test_environment_not_made_by_hpcnet_is_named():
    with pytest.raises(ConfigError, match='environment builtin was not made by hpcnet.stacks'):
        Stack.from_extras('builtin', {})


def test_sites_are_files_and_local_comes_last():
    systems = sites.load_system_files(CONFIG_DIR / 'systems')
    names = [s['name'] for s in systems]
    assert names[-1] == 'local' and {'example', 'testbed'} <= set(names)
    testbed = next(s for s in systems if s['name'] == 'testbed')
    # The model adds the features the checks select on.
    assert all(PartitionFeature.MULTINODE in p['features'] for p in testbed['partitions'])


def test_testbed_declares_roce_only_where_its_nodes_have_rdma(monkeypatch):
    def partitions():
        (tb,) = [s for s in sites.load_system_files(CONFIG_DIR / 'systems') if s['name'] == 'testbed']
        return {p['name']: Partition.from_extras(p['name'], p['extras']) for p in tb['partitions']}
    monkeypatch.delenv('HPCNET_TESTBED_RDMA_DEVICE', raising=False)
    assert list(partitions()) == ['eth']
    monkeypatch.setenv('HPCNET_TESTBED_RDMA_DEVICE', 'rxe0')
    found = partitions()
    assert found['roce'].rdma_devices == ('rxe0',) and found['roce'].fabric == 'roce'
    # Nodes in namespaces share the host's cores: the pair matrix takes turns.
    assert found['eth'].nodes_share_cores and found['roce'].nodes_share_cores


def test_nodes_share_cores_is_a_boolean():
    with pytest.raises(ConfigError, match=r"extras.nodes_share_cores is 'yes' \(valid: true or false\)"):
        Partition.from_extras('s:p', {'fabric': 'shm', 'nodes_share_cores': 'yes'})
    assert not Partition.from_extras('s:p', {'fabric': 'shm'}).nodes_share_cores


def test_a_new_site_is_one_file(tmp_path):
    (tmp_path / 'mysite.py').write_text(
        'from hpcnet.model import partition_extras\n'
        "system = {'name': 'mysite', 'hostnames': ['^login'], 'partitions': [\n"
        "  {'name': 'eth', 'scheduler': 'slurm', 'launcher': 'srun',\n"
        "   'extras': partition_extras(fabric='tcp', iface='eno1', num_nodes=8)}]}\n")
    (system,) = sites.load_system_files(tmp_path)
    assert system['partitions'][0]['features'] == ['multinode', 'tcp']


def test_a_bad_site_file_names_itself(tmp_path):
    bad = tmp_path / 'bad.py'
    bad.write_text("system = {'name': 'bad', 'partitions': [{'name': 'p', 'extras': {'fabric': 'tcp', 'iface': 'eth0;id'}}]}\n")
    with pytest.raises(ConfigError, match=f"{bad}: partition bad:p: extras.iface is 'eth0;id'"):
        sites.load_system_files(tmp_path)
    (tmp_path / 'bad.py').write_text('x = 1\n')
    with pytest.raises(ConfigError, match=r'bad.py: defines no `system`'):
        sites.load_system_files(tmp_path)
