"""References that cannot fail a broken system are refused: `hpcnet refs
validate` names the file, the key and what is valid, one line a file, exit 2
(and the run's own validation stops on the same file); the shipped files,
and references that can fail, pass.  Each row is a reference a site could
write by hand, in the file layout `hpcnet baseline` writes."""
import pytest

from helpers import fault_row, run_hpcnet
from hpcnet.acceptance.references import references
from hpcnet.constants import REFERENCE_DIR
from hpcnet.exitcodes import Exit

_P2P = 'hpcnet_p2p:\n  $index: [$partition, mpi_family, mode]\n  sys:eth:\n    .*:\n      {mode}:\n        {entry}\n'
_PREFLIGHT = 'hpcnet_preflight:\n  sys:eth:\n    {entry}\n'


def _p2p(mode: str, entry: str) -> str:
    return _P2P.format(mode=mode, entry=entry)


#: (what the site wrote, the file, the key, what the refusal says)
REFUSED = [
    ('a bandwidth of 0 with bounds +-1000 (accepts any bandwidth)',
     _p2p('bw', 'bandwidth_4MiB: [0, -1000, 1000, MB/s]'), 'bw.bandwidth_4MiB',
     'a reference of 0 for bandwidth_4MiB, which is not 0 on a working system'),
    ('a lower bound of -1 on a bandwidth (accepts 0 MB/s)',
     _p2p('bw', 'bandwidth_4MiB: [117.0, -1.0, null, MB/s]'), 'bw.bandwidth_4MiB',
     'lower threshold -1.0 accepts 0% of the value, a broken system'),
    ('a negative latency',
     _p2p('pingpong', 'latency_8B: [-30.0, -0.1, 0.1, us]'), 'pingpong.latency_8B',
     'reference value -30 is negative, and latency_8B cannot be'),
    ('a latency of 10^6 us (a second for 8 bytes)',
     _p2p('pingpong', 'latency_8B: [1000000, -0.1, 0.1, us]'), 'pingpong.latency_8B',
     'reference value 1e+06 us is no measurement of latency_8B'),
    ('a bandwidth of 20 TB/s',
     _p2p('bw', 'bandwidth_4MiB: [2.0e+7, -0.1, 0.5, MB/s]'), 'bw.bandwidth_4MiB',
     'no link or memory a pair of ranks shares moves 10 TB/s'),
    ('a link error count of 0 with bounds +-1000 (accepts 1000 errors)',
     _PREFLIGHT.format(entry='link_errors: [0, -1000, 1000, count]'), 'link_errors',
     'upper threshold 1000 of a reference of 0 accepts up to 1000 count'),
    ('a reference with no unit',
     _p2p('bw', 'bandwidth_4MiB: [117.0, -0.1, 0.5]'), 'bw.bandwidth_4MiB',
     'has no unit (valid: [value, lower, upper, unit], the unit MB/s'),
    ('an upper bound of +0.1 % on a bandwidth (fails every improvement)',
     _p2p('bw', 'bandwidth_4MiB: [117.0, -0.1, 0.001, MB/s]'), 'bw.bandwidth_4MiB',
     'upper threshold 0.001 fails an improvement of more than 0.1%'),
]


@pytest.mark.parametrize('fault,text,key,says', REFUSED, ids=[r[0] for r in REFUSED])
def test_a_reference_that_accepts_anything_is_refused(tmp_path, fault, text, key, says):
    path = tmp_path / 'sys.yaml'
    path.write_text(text)
    res = run_hpcnet('refs', 'validate', str(path))
    line = fault_row(f'references: {fault} (refs validate)', res, Exit.USAGE)
    test = text.split(':', 1)[0]
    assert res.stderr.splitlines() == [line], res.stderr
    assert line.startswith(f'hpcnet: error: {path}: {test}.sys:eth') and f'.{key}: ' in line, line
    assert says in line and '(valid: ' in line, line
    # The run reads the same directory and stops on it, with the same line.
    with pytest.raises(references.ReferenceFileError) as err:
        references.validate_directory(tmp_path)
    assert f'hpcnet: error: {err.value}' == line


def test_every_refused_file_is_named_and_a_good_one_passes(tmp_path):
    '''One line a file: the good one ok, each bad one with its reason, then
    how many were refused.'''
    for name, (_, text, _, _) in zip('ab', REFUSED[:2]):
        (tmp_path / f'{name}.yaml').write_text(text)
    good = tmp_path / 'c.yaml'
    good.write_text(_PREFLIGHT.format(entry='link_errors: [0, 0, 0, count]'))
    res = run_hpcnet('refs', 'validate', *(str(tmp_path / f'{n}.yaml') for n in 'abc'))
    assert res.returncode == Exit.USAGE, res.stdout + res.stderr
    assert res.stdout.splitlines() == [f'ok: {good}']
    errors = res.stderr.splitlines()
    assert [e.startswith(f'hpcnet: error: {tmp_path / n}.yaml: ')
            for e, n in zip(errors, 'ab')] == [True, True], errors
    assert errors[2:] == ['hpcnet: 2 of 3 reference files refused: a run stops on them'], errors


HEALTHY = [
    ('a count of 0 held to 0', _PREFLIGHT.format(entry='link_errors: [0, 0, 0, count]')),
    ('a count of 0 with a slack of 10', _PREFLIGHT.format(entry='link_drops: [0, 0, 10, count]')),
    ('a bandwidth unbounded above with its reason',
     _p2p('bw', 'bandwidth_4MiB: [117.0, -0.1, null, MB/s]')
     + "$unbounded:\n  hpcnet_p2p:\n    'sys:eth/.*/bw/bandwidth_.*': faster is no fault\n"),
    ('a bandwidth with room to improve', _p2p('bw', 'bandwidth_4MiB: [117.0, -0.1, 0.5, MB/s]')),
    ('a latency of 30 us +-10 %', _p2p('pingpong', 'latency_8B: [30.0, -0.1, 0.1, us]')),
    ('an IMB 0.00 us latency within 1 us',
     'hpcnet_imb:\n  sys:eth:\n    latency_0B: [0, 0, 1, us]\n'),
]


@pytest.mark.parametrize('what,text', HEALTHY, ids=[h[0] for h in HEALTHY])
def test_a_reference_that_can_fail_a_broken_system_passes(tmp_path, what, text):
    path = tmp_path / 'sys.yaml'
    path.write_text(text)
    assert references.load(path) is not None


def test_the_shipped_references_validate():
    res = run_hpcnet('refs', 'validate', env={'HPCNET_REFERENCE_DIR': str(REFERENCE_DIR)})
    fault_row('references: the shipped reference files (refs validate, healthy)', res, Exit.OK)
    assert res.stdout.splitlines() == [f'ok: {p}' for p in sorted(REFERENCE_DIR.glob('*.yaml'))]
