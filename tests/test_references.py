"""Reference files: schema validation with clear messages, and generation."""
from pathlib import Path

import pytest

from hpcnet import baseline, references
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


def test_references_only_when_the_system_has_a_file(tmp_path):
    none = references.for_test('nosuchsystem', 'hpcnet_p2p', ['$partition'], tmp_path)
    assert none.reference == {} and not none.strict
    (tmp_path / 'sys.yaml').write_text((DATA / 'valid.yaml').read_text())
    refs = references.for_test('sys', 'hpcnet_p2p', ['$partition', 'mpi_family', 'mode'], tmp_path)
    assert refs.reference == {'$ref': str((tmp_path / 'sys.yaml').resolve())} and refs.strict
    (tmp_path / 'bad.yaml').write_text('t: 5\n')
    with pytest.raises(references.ReferenceFileError, match='bad.yaml: t: expected a mapping'):
        references.for_test('bad', 't', ['$partition'], tmp_path)


def test_index_typo_fails_naming_what_the_check_declares(tmp_path):
    (tmp_path / 'sys.yaml').write_text(
        'hpcnet_p2p:\n  $index: [$partition, mpi_famly, mode]\n  local:tcp:\n    .*:\n'
        '      bw:\n        bandwidth_4MiB: [1, -0.1, 0.1, MB/s]\n')
    with pytest.raises(references.ReferenceFileError,
                       match=r"hpcnet_p2p.\$index is \['\$partition', 'mpi_famly', 'mode'\] but the "
                             r"check is indexed by \['\$partition', 'mpi_family', 'mode'\]"):
        references.for_test('sys', 'hpcnet_p2p', ['$partition', 'mpi_family', 'mode'], tmp_path)


def test_not_asserted_entries_need_a_reason(tmp_path):
    (tmp_path / 'sys.yaml').write_text(
        "$not_asserted:\n  hpcnet_p2p:\n    'sys:eth/.*/latency_.*': latency is the host's\n")
    refs = references.for_test('sys', 'hpcnet_p2p', ['$partition', 'mpi_family', 'mode'], tmp_path)
    assert refs.not_asserted_reason('sys:eth/openmpi/pingpong/latency_8B') == "latency is the host's"
    assert refs.not_asserted_reason('sys:eth/openmpi/bw/bandwidth_4MiB') is None
    (tmp_path / 'sys.yaml').write_text("$not_asserted:\n  hpcnet_p2p:\n    '.*': ''\n")
    with pytest.raises(references.ReferenceFileError, match='the reason must be a non-empty string'):
        references.for_test('sys', 'hpcnet_p2p', ['$partition'], tmp_path)


def _report(values):
    tcs = [{'name': f'hpcnet_p2p %mode={mode} /abcd', 'unique_name': 'hpcnet_p2p_0',
            'system': 'local', 'partition': 'tcp', 'environ': env, 'result': 'pass',
            'mode': mode, 'mpi_family': fam,
            'reference_index': ['$partition', 'mpi_family', 'mode'],
            'perfvalues': {f'local:tcp:{var}': [v, 0, None, None, 'us', 'pass']}}
           for env, fam, mode, var, v in values]
    return {'runs': [{'testcases': tcs}]}


def test_baseline_from_report_round_trips_through_validation(tmp_path):
    report = _report([('gcc12-openmpi4', 'openmpi', 'pingpong', 'latency_8B', 10.0),
                      ('clang14-openmpi4', 'openmpi', 'pingpong', 'latency_8B', 12.0),
                      ('gcc12-openmpi5', 'openmpi', 'pingpong', 'latency_8B', 30.0),
                      ('gcc12-mpich4', 'mpich', 'pingpong', 'latency_8B', 20.0)])
    data = baseline.document([report])
    node = data['hpcnet_p2p']
    # Measured per environment: Open MPI 4 and 5 (or one MPI by two
    # compilers) are never merged into one wide reference.
    assert node['$index'] == ['$partition', '$environ', 'mode']
    # One sample per key: the floor.
    assert node['local:tcp']['gcc12-openmpi4']['pingpong']['latency_8B'] == [10.0, -0.03, 0.03, 'us']
    assert node['local:tcp']['gcc12-openmpi5']['pingpong']['latency_8B'] == [30.0, -0.03, 0.03, 'us']
    assert node['local:tcp']['gcc12-mpich4']['pingpong']['latency_8B'] == [20.0, -0.03, 0.03, 'us']
    # Several samples of one key (10, 11, 13): the median, and a tolerance from
    # their spread, here 3 x robust CV = 3 x 1.4826 x MAD 1 / 11.
    more = [_report([('gcc12-openmpi4', 'openmpi', 'pingpong', 'latency_8B', v)]) for v in (11, 13)]
    thrice = baseline.document([report, *more])['hpcnet_p2p']
    assert thrice['local:tcp']['gcc12-openmpi4']['pingpong']['latency_8B'] == [11.0, -0.4043,
                                                                              0.4043, 'us']
    prov = data[references.PROVENANCE]
    assert prov['passed_cases'] == 4 and prov['repeats'] == 1 and prov['reframe'].startswith('4.')
    assert set(prov['environments']) == {'gcc12-openmpi4', 'clang14-openmpi4', 'gcc12-openmpi5',
                                         'gcc12-mpich4'}
    p = _write(tmp_path, references.dump(data))
    references.load(p)
    # Failed and xfail cases never become references; nor do xfail variables.
    report['runs'][0]['testcases'][0]['result'] = 'xfail'
    report['runs'][0]['testcases'][1]['result'] = 'fail'
    report['runs'][0]['testcases'][3]['perfvalues']['local:tcp:latency_8B'][5] = 'xfail'
    node = baseline.document([report])['hpcnet_p2p']
    assert set(node['local:tcp']) == {'gcc12-openmpi5'}


def test_baseline_tolerance_comes_from_the_spread_never_below_the_floor():
    steady = [100.0, 100.2, 99.9, 100.1, 100.0]
    assert baseline.tolerance(steady) == 0.03
    noisy = [100.0, 90.0, 110.0, 95.0, 105.0]
    assert baseline.tolerance(noisy) == pytest.approx(max(3 * 1.4826 * 5 / 100, 1.2 * 0.1))


def test_baseline_diff_ignores_the_provenance():
    old = references.dump({references.PROVENANCE: {'date': 'a'}, 'x': {'p:q': {'v': [1.0, -0.1, 0.1, 'us']}}})
    same = references.dump({references.PROVENANCE: {'date': 'b'}, 'x': {'p:q': {'v': [1.0, -0.1, 0.1, 'us']}}})
    moved = references.dump({references.PROVENANCE: {'date': 'b'}, 'x': {'p:q': {'v': [2.0, -0.1, 0.1, 'us']}}})
    assert baseline.diff(old, same, 'f.yaml') == ''
    assert '-    v: [1.0, -0.1, 0.1, us]' in baseline.diff(old, moved, 'f.yaml')