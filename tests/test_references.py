"""Reference files: schema validation with clear messages, and generation."""
import re
from pathlib import Path

import pytest

from hpcnet.acceptance.references import references, refmerge
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
    ('t:\n  local:shm:\n    latency_8B: [10, -1.5, 0.1, us]\n',
     r'lower threshold -1\.5 accepts -50% of the value, a broken system \(valid: -0\.5 < lower <= 0'),
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
        references.load(p, perfvars_by_test=None)       # the schema alone: test 't'
    assert str(err.value).startswith(str(p))


P2P = 'hpcnet_p2p:\n  $index: [$partition, mpi_family, mode]\n  testbed:eth:\n    .*:\n      bw:\n'


@pytest.mark.parametrize('entry,match', [
    # Accepts a value of 0: a broken system passes.
    ('bandwidth_4MiB: [117.0, -1.0, 0.05, MB/s]',
     r"hpcnet_p2p\.testbed:eth\.\.\*\.bw\.bandwidth_4MiB: lower threshold -1\.0 accepts 0% of the "
     r"value, a broken system \(valid: -0\.5 < lower <= 0; a metric that varies more belongs in "
     r"\$not_asserted with its reason\)"),
    ('bandwidth_4MiB: [117.0, -0.5, 0.05, MB/s]', r'lower threshold -0\.5 accepts 50% of the value'),
    ('bandwidth_4MiB: [117.0, -0.9949, 0.9949, MB/s]', r'lower threshold -0\.9949 accepts 1%'),
    ('bandwidth_4MiB: [117.0, 0.05, -0.05, MB/s]',
     r'bw\.bandwidth_4MiB: the bounds are reversed: lower threshold 0\.05 is above upper threshold '
     r'-0\.05 \(wrong sign; valid: -0\.5 < lower <= 0 <= upper'),
    ('bandwidth_4MiB: [0, 2, 1, count]', r'the bounds are reversed: lower threshold 2 is above'),
    ('bandwidth_4MiB: [117.0, null, 0.05, MB/s]',
     r'bw\.bandwidth_4MiB: lower threshold is null, but bandwidth_4MiB is better higher: its lower '
     r'threshold is the worse side and must bound it \(valid: a bound, -0\.5 < lower <= 0 <= '
     r'upper < 1; a metric that cannot be bounded belongs in \$not_asserted with its reason\)'),
    # Accepts a time a thousand times the value.
    ('latency_8B: [5.0, -0.1, 1000, us]',
     r'bw\.latency_8B: upper threshold 1000 accepts 100100% of the value, no bound at all '
     r'\(valid: 0 <= upper < 1;'),
    ('latency_8B: [5.0, -0.1, 1.0, us]', r'upper threshold 1 accepts 200% of the value'),
    # A reference in another unit than the check reports: ReFrame compares the numbers.
    ('bandwidth_4MiB: [0.94, -0.1, 0.1, Gbit/s]',
     r"bw\.bandwidth_4MiB: unit 'Gbit/s' is not the unit of bandwidth_4MiB \(valid: MB/s, as the "
     r"check reports it"),
    ('bandwidth_4MiB_over_iperf3: [1.0, -0.1, 0.1, MB/s]', r"unit 'MB/s' is not the unit of "
     r"bandwidth_4MiB_over_iperf3 \(valid: ratio"),
    ('bandwidth_4MiB: [117.0, -0.1, null, MB/s]', r'upper threshold is null \(unbounded\) without a reason'),
    ('bandwidth_4MiB: [117.0, -0.1, .nan, MB/s]', r'upper threshold nan is not a finite number'),
    ('bandwith_4MiB: [117.0, -0.1, 0.1, MB/s]',
     r"bw\.bandwith_4MiB: unknown performance variable 'bandwith_4MiB': no check defines it "
     r"\(valid: bandwidth_\(64KiB\|1MiB\|4MiB\), .*efficiency_\(64KiB"),
    ('bandwidth_4MB: [117.0, -0.1, 0.1, MB/s]', r"unknown performance variable 'bandwidth_4MB'"),
])
def test_a_reference_that_cannot_fail_a_broken_system_is_refused(tmp_path, entry, match):
    p = _write(tmp_path, P2P + '        ' + entry + '\n')
    with pytest.raises(references.ReferenceFileError, match=match) as err:
        references.load(p)
    assert str(err.value).startswith(f'{p}: hpcnet_p2p.testbed:eth')


def test_a_null_bound_with_its_reason_is_valid(tmp_path):
    p = _write(tmp_path, P2P + '        bandwidth_4MiB: [117.0, -0.1, null, MB/s]\n'
               "$unbounded:\n  hpcnet_p2p:\n    'testbed:eth/.*/bw/bandwidth_.*': faster is no fault\n")
    assert references.load(p)['hpcnet_p2p']['testbed:eth']['.*']['bw']['bandwidth_4MiB'][2] is None
    # The reason must name the entry: another test's does not count.
    p = _write(tmp_path, P2P + '        bandwidth_4MiB: [117.0, -0.1, null, MB/s]\n'
               "$unbounded:\n  hpcnet_pairs:\n    '.*': faster is no fault\n")
    with pytest.raises(references.ReferenceFileError, match='upper threshold is null'):
        references.load(p)
    # The worse side is never null, with a reason or without: a time's upper.
    p = _write(tmp_path, P2P + '        latency_8B: [5.0, -0.1, null, us]\n'
               "$unbounded:\n  hpcnet_p2p:\n    '.*': slower is no fault\n")
    with pytest.raises(references.ReferenceFileError,
                       match=r'latency_8B: upper threshold is null, but latency_8B is better lower'):
        references.load(p)
    p = _write(tmp_path, "$unbounded:\n  hpcnet_p2p:\n    '.*': ''\n")
    with pytest.raises(references.ReferenceFileError,
                       match=r'\$unbounded\.hpcnet_p2p\.\.\*: the reason must be a non-empty string'):
        references.load(p)


@pytest.mark.parametrize('text,match', [
    ('hpcnet_p2pp:\n  testbed:eth:\n    latency_8B: [5, -0.1, 0.1, us]\n',
     r"sys\.yaml: hpcnet_p2pp: unknown test class 'hpcnet_p2pp': no check defines it \(valid: "
     r"hpcnet_collectives, hpcnet_imb, .*hpcnet_p2p, "),
    ("$not_asserted:\n  hpcnet_p2pp:\n    '.*': typo\n",
     r"\$not_asserted\.hpcnet_p2pp: unknown test class 'hpcnet_p2pp'"),
])
def test_typo_in_a_test_name_is_refused(tmp_path, text, match):
    with pytest.raises(references.ReferenceFileError, match=match):
        references.load(_write(tmp_path, text))


CHECKS = Path(__file__).parent.parent / 'checks'
#: Calls whose first argument names a quantity of the metric catalogue in the checks.
_METRIC_CALLS = ('add_metric', 'metric', '_perf')


def _check_modules() -> dict:
    """{check file: (its test classes, the quantities its metric calls name
    literally, whether it names a unit itself)}."""
    import ast
    found = {}
    for f in sorted(CHECKS.glob('*.py')):
        tree = ast.parse(f.read_text())
        classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef) and any(
            'simple_test' in ast.unparse(d) for d in node.decorator_list)}
        quantities = {call.args[0].value for call in ast.walk(tree) if isinstance(call, ast.Call)
                      and ast.unparse(call.func).split('.')[-1] in _METRIC_CALLS and call.args
                      and isinstance(call.args[0], ast.Constant)}
        units = any(isinstance(node, ast.Name) and node.id == 'Unit' for node in ast.walk(tree)) \
            or any(ast.unparse(call.func).split('.')[-1] in ('make_performance_function',
                                                               'performance_function')
                   for call in ast.walk(tree) if isinstance(call, ast.Call))
        if classes:
            found[f.name] = (classes, quantities, units)
    return found


def test_the_catalogue_holds_every_check_and_the_checks_name_no_unit():
    from hpcnet import metrics
    modules = _check_modules()
    assert set(references.known_metrics()) == set(metrics.classes()) == \
        {c for classes, _, _ in modules.values() for c in classes}
    for name, (classes, quantities, units) in modules.items():
        # A check's units and names come from its entries (hpcnet.metrics).
        assert not units, name
        catalogued = {m.quantity for c in classes for m in metrics.of_test(c)}
        assert quantities <= catalogued, (name, quantities - catalogued)
    assert metrics.Unit.RATIO in {m.unit for m in metrics.of_test('hpcnet_p2p')}
    for m in metrics.CATALOGUE:
        assert m.better in metrics.Better.ALL and m.kinds and m.kinds <= set(metrics.PartitionKind.ALL)
        assert m.kind in metrics.Kind.ALL
        assert not m.ratio or m.name_for(*([m.sizes[0]] if m.sizes else [])).endswith(
            metrics.CALIBRATED_SUFFIX)


def _recorded(path: Path) -> set:
    """(test class, partition, variable, unit) of every value a recorded
    report holds, asserted or kept but not asserted."""
    import json
    data = json.loads(path.read_text())
    out = set()
    for report in data if isinstance(data, list) else [data]:
        for run in report['runs']:
            for tc in run['testcases']:
                partition = f'{tc["system"]}:{tc["partition"]}'
                for key, val in (tc.get('perfvalues') or {}).items():
                    out.add((tc['name'].split()[0], partition, key.split(':')[-1], val[4]))
                for var, kept in (tc.get('not_asserted') or {}).items():
                    out.add((tc['name'].split()[0], partition, var, kept['unit']))
    return out


def test_the_catalogue_holds_the_recorded_reports():
    from hpcnet import metrics
    from hpcnet.constants import SYSTEMS_DIR
    from hpcnet.siteconfig.sites import load_system_files
    kinds = {f'{system["name"]}:{p["name"]}': metrics.PartitionKind.of(p['extras']['fabric'])
             for system in load_system_files(SYSTEMS_DIR) for p in system['partitions']}
    data = Path(__file__).parent / 'data'
    recorded = _recorded(data / 'reports' / 'local-run.json')
    # Since the recording: the pairs check counts outliers per quantity, and
    # runs on two nodes or more (ranks of one node measure the node); UDP
    # streams are paced: loss per paced rate, and the unpaced figure is the
    # receiver's capacity (hpcnet.checklib.sockets).
    recorded = {r for r in recorded if r[0] != 'hpcnet_pairs' and not (
        r[0] == 'hpcnet_sockets' and re.fullmatch(r'(loss|throughput)_(1KiB|32KiB)', r[2]))}
    recorded |= _recorded(data / 'history' / 'testbed-12-sessions.json')
    assert {r[0] for r in recorded} >= {'hpcnet_p2p', 'hpcnet_collectives', 'hpcnet_sockets',
                                        'hpcnet_preflight'}
    for test, partition, var, unit in sorted(recorded):
        entry = metrics.lookup(test, var)
        assert entry is not None, (test, var)
        assert entry.unit == unit, (test, var, unit, entry.unit)
        assert entry.judgeable(kinds[partition]), (test, partition, var)
    assert metrics.is_known('hpcnet_sockets', 'udp_loss_100Mbit_1KiB')
    assert metrics.is_known('hpcnet_sockets', 'udp_receiver_capacity_32KiB')
    assert metrics.lookup('hpcnet_pairs %scale=all_nodes', 'latency_worst_over_median').better \
        == metrics.Better.LOWER
    assert metrics.lookup('hpcnet_pairs', 'bandwidth_worst_over_median').better == metrics.Better.HIGHER


def test_validate_directory_checks_the_directory_the_run_reads(tmp_path, monkeypatch):
    (tmp_path / 'a.yaml').write_text((DATA / 'valid.yaml').read_text())
    (tmp_path / 'b.yaml').write_text('hpcnet_iperf3:\n  x:y:\n    throughput: [100, -0.1, 0.5, MB/s]\n')
    monkeypatch.setenv('HPCNET_REFERENCE_DIR', str(tmp_path))
    assert references.validate_directory() == [tmp_path / 'a.yaml', tmp_path / 'b.yaml']
    assert references.validate_directory(REFERENCE_DIR) == sorted(REFERENCE_DIR.glob('*.yaml'))
    (tmp_path / 'c.yaml').write_text('hpcnet_iperf3:\n  x:y:\n    thruput: [100, -0.1, 0.5, MB/s]\n')
    with pytest.raises(references.ReferenceFileError, match=r"c\.yaml: hpcnet_iperf3\.x:y\.thruput: "
                                                         r"unknown performance variable"):
        references.validate_directory()
    with pytest.raises(references.ReferenceFileError, match=r'nope: not a directory \(valid: a '
                                                         r'directory of <system>\.yaml'):
        references.validate_directory(tmp_path / 'nope')


def test_the_run_path_validates_names(tmp_path):
    (tmp_path / 'sys.yaml').write_text('hpcnet_p2pp:\n  sys:eth:\n    latency_8B: [5, -0.1, 0.1, us]\n')
    with pytest.raises(references.ReferenceFileError, match="unknown test class 'hpcnet_p2pp'"):
        references.for_test('sys', 'hpcnet_p2p', ['$partition'], tmp_path)




def test_unknown_test_and_perfvar_when_known(tmp_path):
    p = _write(tmp_path, 't:\n  local:shm:\n    latency_9B: [1, -0.1, 0.1, us]\n')
    with pytest.raises(references.ReferenceFileError,
                       match=r"unknown test class 't': no check defines it \(valid: hpcnet_p2p\)"):
        references.load(p, {'hpcnet_p2p': {'latency_8B'}})
    with pytest.raises(references.ReferenceFileError,
                       match=r"t\.local:shm\.latency_9B: unknown performance variable 'latency_9B': "
                             r"no check defines it \(valid: latency_8B\)"):
        references.load(p, {'t': {'latency_8B'}})


def test_references_only_when_the_system_has_a_file(tmp_path):
    none = references.for_test('nosuchsystem', 'hpcnet_p2p', ['$partition'], tmp_path)
    assert none.reference == {} and not none.strict
    (tmp_path / 'sys.yaml').write_text((DATA / 'valid.yaml').read_text())
    refs = references.for_test('sys', 'hpcnet_p2p', ['$partition', 'mpi_family', 'mode'], tmp_path)
    assert refs.reference == {'$ref': str((tmp_path / 'sys.yaml').resolve())} and refs.strict
    (tmp_path / 'bad.yaml').write_text('hpcnet_p2p: 5\n')
    with pytest.raises(references.ReferenceFileError, match='bad.yaml: hpcnet_p2p: expected a mapping'):
        references.for_test('bad', 'hpcnet_p2p', ['$partition'], tmp_path)


def test_index_typo_fails_naming_what_the_check_declares(tmp_path):
    (tmp_path / 'sys.yaml').write_text(
        'hpcnet_p2p:\n  $index: [$partition, mpi_famly, mode]\n  local:tcp:\n    .*:\n'
        '      bw:\n        bandwidth_4MiB: [1, -0.1, 0.5, MB/s]\n')
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


def test_baseline_diff_ignores_the_provenance():
    old = references.dump({references.PROVENANCE: {'date': 'a'}, 'x': {'p:q': {'v': [1.0, -0.1, 0.1, 'us']}}})
    same = references.dump({references.PROVENANCE: {'date': 'b'}, 'x': {'p:q': {'v': [1.0, -0.1, 0.1, 'us']}}})
    moved = references.dump({references.PROVENANCE: {'date': 'b'}, 'x': {'p:q': {'v': [2.0, -0.1, 0.1, 'us']}}})
    assert refmerge.diff(old, same, 'f.yaml') == ''
    assert '-    v: [1.0, -0.1, 0.1, us]' in refmerge.diff(old, moved, 'f.yaml')