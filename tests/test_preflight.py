"""Preflight probes run for real (sh) against fake sysfs trees."""
import subprocess

import pytest

from hpcnet.checklib import preflight

GID_V2 = '0000:0000:0000:0000:0000:ffff:0a4d:000b'


def make_sysfs(root, iface='eth0', operstate='up', mtu=1500, rdma=None, port_state='4: ACTIVE',
               link_layer='Ethernet', gid=GID_V2, gid_type='RoCE v2', errors=0):
    net = root / 'class' / 'net' / iface
    (net / 'statistics').mkdir(parents=True)
    (net / 'operstate').write_text(f'{operstate}\n')
    (net / 'flags').write_text('0x1003\n' if operstate == 'up' else '0x1002\n')
    (net / 'mtu').write_text(f'{mtu}\n')
    (net / 'speed').write_text('25000\n')
    for c in ('rx_errors', 'tx_errors', 'rx_dropped', 'tx_dropped', 'rx_crc_errors'):
        (net / 'statistics' / c).write_text(f'{errors}\n')
    if rdma:
        port = root / 'class' / 'infiniband' / rdma / 'ports' / '1'
        for d in ('gids', 'gid_attrs/types', 'gid_attrs/ndevs'):
            (port / d).mkdir(parents=True)
        (port / 'state').write_text(f'{port_state}\n')
        (port / 'phys_state').write_text('5: LinkUp\n')
        (port / 'link_layer').write_text(f'{link_layer}\n')
        (port / 'rate').write_text('100 Gb/sec (4X EDR)\n')
        (port / 'gids' / '3').write_text(f'{gid}\n')
        (port / 'gid_attrs' / 'types' / '3').write_text(f'{gid_type}\n')
        (port / 'gid_attrs' / 'ndevs' / '3').write_text(f'{iface}\n')
    return root


def probe(root, iface='eth0', rdma=None):
    script = preflight.probe_script(iface, rdma, 1, 3 if rdma else None)
    out = subprocess.run(['sh', '-c', script], env={preflight.SYSFS_ROOT_ENV: str(root),
                                                   'PATH': '/usr/bin:/bin'},
                         capture_output=True, text=True, check=True).stdout
    (node,) = preflight.parse(out).values()
    if rdma:
        (rdma_node,) = preflight.parse_device(out, rdma).values()
        node.values.update(rdma_node.values)
    return node


def test_healthy_ethernet_and_roce(tmp_path):
    node = probe(make_sysfs(tmp_path, rdma='mlx5_0'), rdma='mlx5_0')
    assert preflight.ethernet_problems(node, 'eth0', 1500, 25000) == []
    assert preflight.rdma_problems(node, 'roce', 'mlx5_0', 3) == []
    assert node.values['rate'].startswith('100 Gb/sec')


@pytest.mark.parametrize('kwargs,expected,match', [
    ({'operstate': 'down'}, {}, 'eth0 is not up'),
    ({'mtu': 1500}, {'mtu': 9000}, 'MTU is 1500, the partition says 9000'),
    ({}, {'link_speed_mbps': 100000}, 'speed is 25000 Mb/s, the partition says 100000'),
])
def test_ethernet_problems_are_named(tmp_path, kwargs, expected, match):
    node = probe(make_sysfs(tmp_path, **kwargs))
    (problem,) = preflight.ethernet_problems(node, 'eth0', expected.get('mtu'),
                                                expected.get('link_speed_mbps'))
    assert match in problem


def test_missing_interface(tmp_path):
    node = probe(make_sysfs(tmp_path), iface='ens1f0')
    assert 'interface ens1f0 does not exist' in preflight.ethernet_problems(node, 'ens1f0')[0]


@pytest.mark.parametrize('kwargs,match', [
    ({'port_state': '1: DOWN'}, "port state is '1: DOWN'"),
    ({'link_layer': 'InfiniBand'}, 'link layer is InfiniBand, fabric roce needs Ethernet'),
    ({'gid_type': 'IB/RoCE v1'}, "GID 3 is 'IB/RoCE v1', not RoCE v2"),
    ({'gid': '0000:0000:0000:0000:0000:0000:0000:0000'}, 'no GID at index 3'),
])
def test_roce_problems_are_named(tmp_path, kwargs, match):
    node = probe(make_sysfs(tmp_path, rdma='mlx5_0', **kwargs), rdma='mlx5_0')
    problems = preflight.rdma_problems(node, 'roce', 'mlx5_0', 3)
    assert len(problems) == 1 and match in problems[0]


def test_missing_rdma_device_lists_what_is_there(tmp_path):
    node = probe(make_sysfs(tmp_path, rdma='mlx5_1'), rdma='mlx5_0')
    (problem,) = preflight.rdma_problems(node, 'roce', 'mlx5_0', 3)
    assert 'RDMA device mlx5_0 does not exist (devices: mlx5_1)' in problem


def test_error_counters_are_read(tmp_path):
    node = probe(make_sysfs(tmp_path, errors=7))
    assert node.int('rx_errors') == 7 and node.int('rx_crc_errors') == 7


def test_bad_device_name_is_refused():
    with pytest.raises(ValueError, match="iface 'eth0; rm' is not a valid device name"):
        preflight.probe_script('eth0; rm', None)
