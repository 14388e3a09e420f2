"""The p2p check's sizing (window, bytes in flight, iterations, time per
size): each scale's own where a run leaves it, and a value set with ``-S``
kept on every scale, as ReFrame's -S promises. Read from what `reframe
--describe` prints of the instantiated tests."""
import json
import subprocess

import pytest

from hpcnet.constants import CONFIG_DIR, Scale

from conftest import REFRAME

#: The variables of the sizing (checks/p2p.py, SIZING_OF_SCALE).
SIZING = ('time_per_size_ms', 'min_iters', 'warmup', 'window', 'window_bytes')


def _described_sizing(tmp_path, *options) -> dict:
    '''{scale: {sizing variable: value}} of the bw cases of hpcnet_p2p: on the
    local system (one node) and the testbed (multi-node partitions).'''
    sizing = {}
    for system in ('local', 'testbed'):
        proc = subprocess.run([str(REFRAME), '-C', str(CONFIG_DIR / 'settings.py'),
                               '--system', system, '--prefix', str(tmp_path / system),
                               '-c', str(CONFIG_DIR.parent / 'checks' / 'p2p.py'),
                               '-n', r'^hpcnet_p2p.*mode=bw$', '--describe', *options],
                              text=True, capture_output=True, timeout=120, check=True)
        sizing.update({test['scale']: {name: test[name] for name in SIZING}
                       for test in json.loads(proc.stdout)})
    return sizing


@pytest.fixture(scope='module')
def scale_sizing(tmp_path_factory):
    return _described_sizing(tmp_path_factory.mktemp('describe'))


def test_each_scale_gets_its_own_sizing(scale_sizing):
    assert set(scale_sizing) == set(Scale.POINT_TO_POINT)
    one_node, two_nodes = scale_sizing[Scale.ONE_NODE], scale_sizing[Scale.TWO_NODES]
    for name in SIZING:
        assert isinstance(one_node[name], int) and isinstance(two_nodes[name], int), name
        assert one_node[name] != two_nodes[name], name


@pytest.mark.parametrize('option', ['window=32', 'hpcnet_p2p.warmup=0',
                                    'window_bytes=0', 'time_per_size_ms=5'])
def test_a_value_set_with_s_is_kept_on_every_scale(tmp_path, scale_sizing, option):
    name, value = option.rsplit('.', 1)[-1].split('=')
    described = _described_sizing(tmp_path, '-S', option)
    for scale, sizing in described.items():
        assert sizing[name] == int(value), scale
        others = {k: v for k, v in sizing.items() if k != name}
        assert others == {k: v for k, v in scale_sizing[scale].items() if k != name}, scale
