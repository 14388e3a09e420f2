"""Reference files: schema validation with clear messages, and generation."""
from pathlib import Path

import pytest

from hpcnet import references
from hpcnet.constants import REFERENCE_DIR

DATA = Path(__file__).parent / 'data' / 'references'


def test_valid_example_passes():
    data = references.load(DATA / 'valid.yaml')
    assert data['hpcnet_p2p']['local:tcp']['openmpi']['pingpong']['latency_8B'][0] == 12.5


@pytest.mark.parametrize('path', sorted(REFERENCE_DIR.glob('*.yaml')), ids=lambda p: p.name)
def test_shipped_reference_files_are_valid(path):
    references.load(path)


def _write(tmp_path, text):
    p = tmp_path / 'sys.yaml'
    p.write_text(text)
    return p


@pytest.mark.parametrize('text,match', [
    ('hpcnet_p2p: [1, 2', 'not valid YAML'),
    ('- a\n- b\n', r'\(top level\): expected a mapping of test class name'),
    ('t:\n  local:shm:\n    latency_8B: 12\n',
     r"t\.local:shm\.latency_8B: 12 is not a reference: valid is \[value, lower, upper, unit\]"),
    ('t:\n  local:shm:\n    latency_8B: [fast, -0.1, 0.1, us]\n',
     r"t\.local:shm\.latency_8B: reference value 'fast' is not a finite number"),
    ('t:\n  local:shm:\n    latency_8B: [10, 0.1, 0.1, us]\n',
     r't\.local:shm\.latency_8B: lower threshold 0\.1 has the wrong sign \(valid: <= 0'),
    ('t:\n  local:shm:\n    latency_8B: [10, -0.1, -0.1, us]\n',
     r'upper threshold -0\.1 has the wrong sign \(valid: >= 0'),
    ('t:\n  local:shm:\n    latency_8B: [10, -1.5, 0.1, us]\n', r'below -1'),
    ('t:\n  local:shm:\n    latency_8B: [\'$xfail\', [10, -0.1, 0.1, us]]\n', r"\['\$xfail', 'reason'"),
    ('t:\n  $index: [mode]\n  pingpong: {latency_8B: [1, -0.1, 0.1, us]}\n  bw: 5\n',
     r't\.bw: expected a mapping of performance variable'),
    ('t:\n  $index: [$partition, mode]\n  local:shm:\n    latency_8B: [1, -0.1, 0.1, us]\n',
     r't\.local:shm\.latency_8B: expected a mapping of performance variable'),
    ('t:\n  $index: [$partition, 2mode]\n', r"t\.\$index: '2mode' is not a test attribute"),
    ('t:\n  $index: [$partition]\n  "local:(shm":\n    x: [1, -0.1, 0.1, us]\n',
     r'not a valid regular expression'),
    ('t:\n  local shm:\n    x: [1, -0.1, 0.1, us]\n', r"expected '<system>:<partition>'"),
])
def test_malformed_file_names_file_key_and_valid(tmp_path, text, match):
    p = _write(tmp_path, text)
    with pytest.raises(references.ReferenceFileError, match=match) as err:
        references.load(p)
    assert str(err.value).startswith(str(p))


def test_unknown_test_and_perfvar_when_known(tmp_path):
    p = _write(tmp_path, 't:\n  local:shm:\n    latency_9B: [1, -0.1, 0.1, us]\n')
    with pytest.raises(references.ReferenceFileError, match=r'unknown test \(valid: hpcnet_p2p\)'):
        references.load(p, {'hpcnet_p2p': {'latency_8B'}})
    with pytest.raises(references.ReferenceFileError,
                       match=r't\.local:shm\.latency_9B: unknown performance variable \(valid: latency_8B\)'):
        references.load(p, {'t': {'latency_8B'}})


def test_reference_for_test_only_when_the_system_has_a_file(tmp_path):
    assert references.reference_for_test('nosuchsystem', tmp_path) == {}
    (tmp_path / 'sys.yaml').write_text((DATA / 'valid.yaml').read_text())
    assert references.reference_for_test('sys', tmp_path) == {'$ref': str((tmp_path / 'sys.yaml').resolve())}
    (tmp_path / 'bad.yaml').write_text('t: 5\n')
    with pytest.raises(references.ReferenceFileError, match='bad.yaml: t: expected a mapping'):
        references.reference_for_test('bad', tmp_path)


def _report(values):
    tcs = [{'name': f'hpcnet_p2p %mode={mode} /abcd', 'unique_name': 'hpcnet_p2p_0',
            'system': 'local', 'partition': 'tcp', 'environ': env, 'result': 'pass',
            'mode': mode, 'mpi_family': fam,
            'perfvalues': {f'local:tcp:{var}': [v, 0, None, None, 'us', 'pass']}}
           for env, fam, mode, var, v in values]
    return {'runs': [{'testcases': tcs}]}


def test_generate_from_report_round_trips_through_validation(tmp_path):
    report = _report([('gcc12-openmpi4', 'openmpi', 'pingpong', 'latency_8B', 10.0),
                      ('clang14-openmpi4', 'openmpi', 'pingpong', 'latency_8B', 12.0),
                      ('gcc12-openmpi5', 'openmpi', 'pingpong', 'latency_8B', 30.0),
                      ('gcc12-mpich4', 'mpich', 'pingpong', 'latency_8B', 20.0)])
    data = references.generate(report, {'hpcnet_p2p': ('mpi_family', 'mode')}, (-0.2, 0.2))
    node = data['hpcnet_p2p']
    assert node['$index'] == ['$partition', 'mpi_family', 'mode']
    # Several runs of one key: the median is kept.
    assert node['local:tcp']['openmpi']['pingpong']['latency_8B'] == [12.0, -0.2, 0.2, 'us']
    assert node['local:tcp']['mpich']['pingpong']['latency_8B'] == [20.0, -0.2, 0.2, 'us']
    p = _write(tmp_path, references.dump(data))
    references.load(p)
    by_env = references.generate(report, {'hpcnet_p2p': ('mpi_family', 'mode')}, by_environ=True)
    assert by_env['hpcnet_p2p']['$index'] == ['$partition', '$environ', 'mpi_family', 'mode']
    assert 'gcc12-openmpi5' in by_env['hpcnet_p2p']['local:tcp']
