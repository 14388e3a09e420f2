"""The fabric registry (hpcnet.fabrics): each shipped fabric is one complete
entry, a new fabric is one registry entry plus its block in the fabric table,
and a fabric nobody registered is one line naming the file, the key and what
is valid.

The fake fabric "fakenet" (a netdev fabric, as TCP) is registered with
:func:`hpcnet.fabrics.register` and given a block in a temporary copy of
config/fabrics.yaml; nothing else is touched.  For a real ReFrame run, a
site file outside the package registers "loopnet" (its ``fabrics``), and
HPCNET_FABRICS_FILE names a copy of the table with its blocks.
"""
import dataclasses

import pytest
from conftest import env_regex, run_reframe
from helpers import registered_entry, run_hpcnet, shipped_fabric_table, write_fabric_table

from hpcnet import fabrictable, fabrics, metrics, mpi, stacks
from hpcnet.siteconfig import sites
from hpcnet.checklib import preflight
from hpcnet.constants import CHECKS_DIR, FABRICS_FILE
from hpcnet.variables import FABRICS_FILE_ENV, SYSTEMS_DIRS_ENV
from hpcnet.model import ConfigError, Partition, Stack

FAKE = 'fakenet'
FAKE_ENTRY = fabrics.FabricEntry(
    name=FAKE, description='a test fabric over an Ethernet interface',
    carrier=fabrics.Carrier.NETDEV, needs_iface=True, host_probed=False, host_probe_iface=None,
    link_layer=None, default_gid_index=None)


fakenet = registered_entry(fabrics, FAKE_ENTRY)


@pytest.fixture
def fabric_table(tmp_path):
    '''config/fabrics.yaml plus the fake fabric's block, for Open MPI.'''
    table = shipped_fabric_table()
    table['fabrics'][FAKE] = {'openmpi': {'env': {'OMPI_MCA_btl': 'tcp,self',
                                                  'OMPI_MCA_btl_tcp_if_include': '{iface}'},
                                          'expect': ['tcp']}}
    return write_fabric_table(tmp_path / 'fabrics.yaml', table)


# --------------------------------------------------------------------------
# The shipped entries
# --------------------------------------------------------------------------

def test_the_shipped_fabrics():
    assert fabrics.fabric_names() == ('shm', 'tcp', 'roce', 'ib')
    assert fabrics.host_probed() == ('shm', 'tcp')
    assert [e.name for e in fabrics.rdma_fabrics()] == ['roce', 'ib']


@pytest.mark.parametrize('name', ['shm', 'tcp', 'roce', 'ib'])
def test_each_entry_is_complete(name):
    entry = fabrics.fabric(name)
    # Every field is required: an entry states each fact, "not used" included.
    assert all(f.default is dataclasses.MISSING for f in dataclasses.fields(entry))
    assert entry.description and entry.carrier in fabrics.Carrier.ALL
    assert fabrics._incomplete(entry) is None
    # Its MPI settings are in the table, for every MPI profile the table knows.
    table = fabrictable.load_table()
    assert set(table['fabrics'][name]) == set(table['profiles'])


@pytest.mark.parametrize('change,match', [
    ({'description': ''}, "fabric 'fakenet': description is empty"),
    ({'carrier': 'pigeon'}, r"carrier is 'pigeon' \(valid: shared memory, netdev, rdma\)"),
    ({'carrier': fabrics.Carrier.RDMA, 'needs_iface': False},
     r'every RDMA fabric needs one \(valid: Ethernet, InfiniBand\)'),
    ({'needs_iface': False}, 'a netdev fabric needs extras iface'),
    ({'host_probed': True}, 'a host-probed fabric with a link needs host_probe_iface'),
    ({'default_gid_index': 3}, 'default_gid_index is for RDMA over Ethernet only'),
])
def test_an_incomplete_entry_is_refused(change, match):
    with pytest.raises(fabrics.RegistryError, match=match):
        fabrics.register(dataclasses.replace(FAKE_ENTRY, **change))
    assert FAKE not in fabrics.fabric_names()


def test_an_entry_lacking_a_field_cannot_be_made():
    with pytest.raises(TypeError, match='default_gid_index'):
        fabrics.FabricEntry(name=FAKE, description='d', carrier=fabrics.Carrier.NETDEV,
                            needs_iface=True, host_probed=False, host_probe_iface=None,
                            link_layer=None)


def test_a_name_is_registered_once(fakenet):
    with pytest.raises(fabrics.RegistryError, match="'fakenet' is already registered"):
        fabrics.register(FAKE_ENTRY)


# --------------------------------------------------------------------------
# A new fabric is one entry plus its table block
# --------------------------------------------------------------------------

def test_a_new_fabric_is_one_entry_and_one_table_block(fakenet, fabric_table):
    partition = Partition.from_extras('test:fake', {'fabric': FAKE, 'iface': 'eth0'})
    assert partition.features() == [FAKE] and not partition.is_rdma
    stack = Stack(environ='e', mpi_family='openmpi', mpi_profile='openmpi', mpi_version='4.1.4')
    settings = fabrictable.settings(partition, stack, 'mpirun', fabric_table)
    assert settings.env['OMPI_MCA_btl_tcp_if_include'] == 'eth0'
    assert settings.expect == frozenset({'tcp'})
    assert metrics.PartitionKind.of(FAKE) == metrics.PartitionKind.NETWORK
    with pytest.raises(ConfigError, match=f"fabric '{FAKE}' needs extras.iface"):
        Partition.from_extras('test:fake', {'fabric': FAKE})


def test_the_table_without_the_new_fabrics_block_names_it(fakenet):
    partition = Partition.from_extras('test:fake', {'fabric': FAKE, 'iface': 'eth0'})
    stack = Stack(environ='e', mpi_family='openmpi', mpi_profile='openmpi', mpi_version='4.1.4')
    with pytest.raises(ConfigError, match=rf'{FABRICS_FILE}: fabrics.{FAKE}: missing '):
        fabrictable.settings(partition, stack, 'mpirun')


def test_the_new_fabric_leaves_no_trace(fakenet):
    fabrics.unregister(FAKE)
    assert FAKE not in fabrics.fabric_names()
    with pytest.raises(ConfigError, match=r"extras.fabric is 'fakenet' \(valid: shm, tcp, roce, ib"):
        Partition.from_extras('test:fake', {'fabric': FAKE, 'iface': 'eth0'})


def test_discovery_refuses_a_fabric_one_host_cannot_carry(fakenet, tmp_path):
    with pytest.raises(stacks.StackError, match=r"fabric 'fakenet' cannot be probed on one "
                                                  r'host \(valid: shm, tcp;'):
        stacks.discover(state=tmp_path, sources=[], compilers=[], fabrics=[FAKE])


#: A site file that adds a fabric of its own: TCP over loopback under
#: another name, on one partition of this host.
LOOPNET_SITE = """
from hpcnet.constants import DEFAULT_JOB_TIME_LIMIT
from hpcnet.fabrics import Carrier, FabricEntry
from hpcnet.model import partition_extras

fabrics = [FabricEntry(
    name='loopnet', description='TCP over loopback, under a name of its own',
    carrier=Carrier.NETDEV, needs_iface=True, host_probed=False, host_probe_iface=None,
    link_layer=None, default_gid_index=None)]

system = {
    'name': 'loopsite', 'descr': 'this host, its loopback declared as fabric loopnet',
    'hostnames': ['.*'],
    'partitions': [{'name': 'loopnet', 'scheduler': 'local', 'launcher': 'mpirun',
                    'max_jobs': 1, 'time_limit': DEFAULT_JOB_TIME_LIMIT,
                    'extras': partition_extras(fabric='loopnet', iface='lo', mtu=65536)}],
}
"""


@pytest.mark.parametrize('fabrics_value,match', [
    ("['cxi']", r"fabrics is \['cxi'\] \(valid: a list of hpcnet.fabrics.FabricEntry\)"),
    ("[dataclasses.replace(fabric('tcp'), description='mine')]",
     r"fabrics: fabric 'tcp' is already registered"),
])
def test_a_wrong_site_fabric_names_file_and_key(tmp_path, fabrics_value, match):
    site = tmp_path / 'mysite.py'
    site.write_text('import dataclasses\nfrom hpcnet.fabrics import fabric\n'
                    f'fabrics = {fabrics_value}\n' + "system = {'name': 'mysite'}\n")
    with pytest.raises(ConfigError, match=rf'^{site}: {match}$'):
        sites.load_site_files(tmp_path)


def test_a_site_file_loaded_twice_registers_its_fabric_once(tmp_path):
    (tmp_path / 'loopsite.py').write_text(LOOPNET_SITE)
    try:
        sites.load_site_files(tmp_path)
        (site,) = sites.load_site_files(tmp_path)
        assert fabrics.fabric_names()[-1] == 'loopnet'
        assert site.system['partitions'][0]['extras']['fabric'] == 'loopnet'
    finally:
        fabrics.unregister('loopnet')


@pytest.mark.integration
def test_a_site_fabric_runs_the_p2p_check(tmp_path, one_env_per_stack):
    systems = tmp_path / 'systems'
    systems.mkdir()
    (systems / 'loopsite.py').write_text(LOOPNET_SITE)
    table = shipped_fabric_table()
    # Its MPI settings: TCP's, with the TCP stack's only interface, loopback.
    table['fabrics']['loopnet'] = table['fabrics']['tcp']
    write_fabric_table(tmp_path / 'fabrics.yaml', table)
    env = next((e for e in one_env_per_stack if 'openmpi' in e), one_env_per_stack[0])
    proc, cases = run_reframe(
        tmp_path, '-c', str(CHECKS_DIR / 'p2p.py'), '-n', '^hpcnet_p2p.*mode=pingpong',
        '-p', env_regex([env]), '-S', 'time_per_size_ms=5', retries=0, system='loopsite:loopnet',
        env={SYSTEMS_DIRS_ENV: str(systems), FABRICS_FILE_ENV: str(tmp_path / 'fabrics.yaml')})
    (case,) = [c for c in cases if c['name'].startswith('hpcnet_p2p')] or [proc.stdout[-3000:]]
    assert case['result'] == 'pass', case.get('fail_reason') or proc.stdout[-3000:]
    assert case['partition'] == 'loopnet'
    # The MPI's own report, held against loopnet's block of the table.
    assert case['transport'].endswith("used tcp on fabric 'loopnet'"), case['transport']


# --------------------------------------------------------------------------
# Callers ask the entry
# --------------------------------------------------------------------------

def test_preflight_reads_the_link_layer_and_gid_from_the_entry():
    node = preflight.NodeReport('cn1', {'rdma_present': 'yes', 'port_state': preflight.PORT_ACTIVE,
                                        'link_layer': 'InfiniBand'})
    assert preflight.rdma_problems(node, 'ib', 'mlx5_0', None) == []
    # RoCE wants Ethernet, and checks the GID where the partition names one.
    assert preflight.rdma_problems(node, 'roce', 'mlx5_0', 3) == [
        'cn1: mlx5_0 link layer is InfiniBand, fabric roce needs Ethernet',
        'cn1: mlx5_0 has no GID at index 3']


def test_shared_memory_has_no_link():
    assert not fabrics.fabric('shm').has_link
    assert metrics.PartitionKind.of('shm') == metrics.PartitionKind.SHARED_MEMORY
    assert all(fabrics.fabric(f).has_link for f in ('tcp', 'roce', 'ib'))


# --------------------------------------------------------------------------
# A fabric nobody registered: one line, file, key, valid values
# --------------------------------------------------------------------------

def test_an_unknown_fabric_in_a_site_file_names_file_key_and_valid(tmp_path):
    site = tmp_path / 'mysite.py'
    site.write_text("system = {'name': 'mysite', 'partitions': [{'name': 'p', "
                    "'extras': {'fabric': 'myrinet', 'iface': 'eth0'}}]}\n")
    result = run_hpcnet('fabrics', 'validate', env={SYSTEMS_DIRS_ENV: str(tmp_path)}, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [
        f"hpcnet: error: {site}: partition mysite:p: extras.fabric is 'myrinet' (valid: shm, "
        'tcp, roce, ib: the fabrics of hpcnet.fabrics)']


def test_an_unknown_fabric_in_the_table_names_file_key_and_valid(tmp_path):
    table = shipped_fabric_table()
    table['fabrics']['myrinet'] = table['fabrics']['tcp']
    path = write_fabric_table(tmp_path / 'fabrics.yaml', table)
    with pytest.raises(ConfigError, match=rf'^{path}: fabrics.myrinet: not a fabric of '
                                          r'hpcnet.fabrics \(valid: shm, tcp, roce, ib\)$'):
        fabrictable.load_table(path)


def test_fabrics_and_mpi_families_keep_one_kind_of_registry():
    '''One registry class: a lookup of a name it lacks names the valid ones,
    in either.'''
    assert fabrics.RegistryError is mpi.RegistryError
    with pytest.raises(fabrics.RegistryError, match=r"fabric 'nonet' is not registered "
                                                    r"\(valid: shm, tcp, .*roce"):
        fabrics.fabric('nonet')
    with pytest.raises(mpi.RegistryError, match=r"MPI family 'nompi' is not registered "
                                                r"\(valid: .*openmpi"):
        mpi.family('nompi')
