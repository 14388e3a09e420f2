"""Per-system reference files: validation and generation.

The files are ReFrame 4.10 external references (``reference = {'$ref': ...}``):
``reference/<system>.yaml`` maps a test class name to either
``{'<system>:<partition>': {perfvar: [value, lower, upper, unit]}}`` or, with
``$index``, to nested levels keyed by the listed test attributes, e.g.::

    hpcnet_p2p:
      $index: [$partition, mpi_family, mode]
      testbed:eth:
        .*:                 # keys are anchored regexes: any MPI family
          bw:
            bandwidth_4MiB: [117.3, -0.05, 0.05, MB/s]

ReFrame itself reads the file; this module checks it first so that a mistake
gives one message naming the file, the key and what is valid (ReFrame's own
error is a type dump), and it writes new files from a good run's report.
"""
from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import yaml

from hpcnet.constants import REFERENCE_DIR, REFERENCE_DIR_ENV

#: Special keys ReFrame accepts in an $index, besides test attribute names.
INDEX_SPECIALS = ('$system', '$partition', '$environ')
_INDEX_SPECIAL_PREFIX = ('$processor.', '$dev.')
_ATTR = re.compile(r'[A-Za-z_]\w*')


class ReferenceFileError(ValueError):
    '''A reference file is malformed.'''


def reference_file(system: str, refdir: Path = REFERENCE_DIR) -> Path:
    return Path(refdir) / f'{system}.yaml'


def _fail(path, key, msg):
    raise ReferenceFileError(f'{path}: {key}: {msg}')


def _check_reftuple(path, key, val, perfvars=None):
    if isinstance(val, list) and val and val[0] == '$xfail':
        if len(val) != 3 or not isinstance(val[1], str):
            _fail(path, key, "an expected failure is ['$xfail', 'reason', [value, lower, upper, unit]]")
        val = val[2]
    if not isinstance(val, list) or len(val) not in (3, 4):
        _fail(path, key, f'{val!r} is not a reference: valid is [value, lower, upper, unit] '
                         '(lower/upper are fractions such as -0.1, 0.1, or null)')
    value, lower, upper = val[:3]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        _fail(path, key, f'reference value {value!r} is not a finite number')
    for name, thr, sign in (('lower', lower, -1), ('upper', upper, 1)):
        if thr is None:
            continue
        if isinstance(thr, bool) or not isinstance(thr, (int, float)):
            _fail(path, key, f'{name} threshold {thr!r} is not a number or null')
        if value != 0 and thr * sign < 0:
            _fail(path, key, f'{name} threshold {thr} has the wrong sign '
                             f'(valid: {"<= 0" if sign < 0 else ">= 0"}, a fraction of the value)')
        if value != 0 and name == 'lower' and thr < -1:
            _fail(path, key, f'lower threshold {thr} is below -1 (valid: -1 <= lower <= 0)')
    if len(val) == 4 and val[3] is not None and not isinstance(val[3], str):
        _fail(path, key, f'unit {val[3]!r} is not a string')


def _check_perfvars(path, key, node, perfvars):
    if not isinstance(node, dict) or not node:
        _fail(path, key, 'expected a mapping of performance variable: reference')
    for var, ref in node.items():
        if perfvars is not None and var not in perfvars:
            _fail(path, f'{key}.{var}', f'unknown performance variable '
                                        f'(valid: {", ".join(sorted(perfvars))})')
        _check_reftuple(path, f'{key}.{var}', ref, perfvars)


def _check_levels(path, key, node, depth, perfvars):
    if depth == 0:
        _check_perfvars(path, key, node, perfvars)
        return
    if not isinstance(node, dict) or not node:
        _fail(path, key, f'expected a mapping with {depth} more index level(s)')
    for k, sub in node.items():
        if isinstance(k, str):
            try:
                re.compile(k)
            except re.error as err:
                _fail(path, f'{key}.{k}', f'key is not a valid regular expression ({err}); '
                                          "keys are anchored regexes, use '.*' for any value")
        _check_levels(path, f'{key}.{k}', sub, depth - 1, perfvars)


def validate(data, path='<references>', perfvars_by_test: dict | None = None) -> dict:
    '''Check a loaded reference file.  ``perfvars_by_test`` (test class name
    -> set of performance variable names), when given, also rejects unknown
    tests and variables.'''
    if data is None:
        return {}
    if not isinstance(data, dict):
        _fail(path, '(top level)', 'expected a mapping of test class name: references')
    for test, refs in data.items():
        perfvars = None
        if perfvars_by_test is not None:
            if test not in perfvars_by_test:
                _fail(path, test, f'unknown test (valid: {", ".join(sorted(perfvars_by_test))})')
            perfvars = perfvars_by_test[test]
        if not isinstance(refs, dict):
            _fail(path, test, 'expected a mapping')
        index = refs.get('$index')
        if index is None:
            for part, node in refs.items():
                if not isinstance(part, str) or not re.fullmatch(r'[^:\s]+(:[^:\s]+)?|\*', part):
                    _fail(path, f'{test}.{part}', "expected '<system>:<partition>' (or add an $index)")
                _check_perfvars(path, f'{test}.{part}', node, perfvars)
            continue
        if not isinstance(index, list) or not index:
            _fail(path, f'{test}.$index', 'must be a non-empty list of test attributes or '
                                          f'special keys ({", ".join(INDEX_SPECIALS)})')
        for entry in index:
            if not isinstance(entry, str) or not (
                    entry in INDEX_SPECIALS or entry.startswith(_INDEX_SPECIAL_PREFIX)
                    or _ATTR.fullmatch(entry)):
                _fail(path, f'{test}.$index', f'{entry!r} is not a test attribute or special key '
                                              f'(valid specials: {", ".join(INDEX_SPECIALS)}, '
                                              '$processor.<attr>, $dev.<type>.<attr>)')
        _check_levels(path, test, {k: v for k, v in refs.items() if k != '$index'},
                      len(index), perfvars)
    return data


def load(path: Path, perfvars_by_test: dict | None = None) -> dict:
    '''Read and validate a reference file; every problem is a ReferenceFileError.'''
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise ReferenceFileError(f'{path}: cannot read: {err.strerror}') from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ReferenceFileError(f'{path}: not valid YAML: {err}') from None
    return validate(data, path, perfvars_by_test)


def reference_dir() -> Path:
    return Path(os.environ.get(REFERENCE_DIR_ENV, REFERENCE_DIR))


def reference_for_test(system: str, refdir: Path | None = None) -> dict:
    '''The ``reference`` value for a test on ``system``: an external reference
    when ``<reference dir>/<system>.yaml`` exists (validated first), else none.'''
    path = reference_file(system, refdir or reference_dir())
    if not path.exists():
        return {}
    load(path)
    # Absolute: ReFrame joins it to its reference prefix, which then has no
    # effect (4.10.4's config schema lacks general/reference_prefix).
    return {'$ref': str(path.resolve())}


# --------------------------------------------------------------------------
# Generation from a good run
# --------------------------------------------------------------------------

def generate(report: dict, index_attrs: dict, tolerance: tuple = (-0.1, 0.1),
             tests: set | None = None, by_environ: bool = False) -> dict:
    '''Reference data from a ReFrame JSON run report.

    ``index_attrs`` maps test class name -> the test attributes (after
    ``$partition``) its references are indexed by; their values are read from
    each test case's entry in the report.  Several runs of the same key keep
    the median.  Review the output before committing it.
    '''
    values: dict = {}
    for run in report.get('runs', []):
        for tc in run.get('testcases', []):
            if tc.get('result') not in ('pass', 'xfail') or not tc.get('perfvalues'):
                continue
            # 'hpcnet_p2p %mode=pingpong /1a2b3c4d' -> 'hpcnet_p2p'
            cls = tc.get('name', '').split()[0]
            if tests is not None and cls not in tests:
                continue
            attrs = index_attrs.get(cls, ())
            part = f'{tc["system"]}:{tc["partition"]}'
            keys = [part] + ([tc['environ']] if by_environ else []) + [str(tc.get(a)) for a in attrs]
            for key, val in tc['perfvalues'].items():
                var = key.split(':')[-1]
                value, unit = val[0], val[4]
                if value is None:
                    continue
                values.setdefault(cls, {}).setdefault(tuple(keys), {}).setdefault(
                    var, ([], unit))[0].append(value)

    out = {}
    for cls, by_key in values.items():
        index = ['$partition'] + (['$environ'] if by_environ else []) + list(index_attrs.get(cls, ()))
        node = out.setdefault(cls, {'$index': index})
        for keys, perfvars in by_key.items():
            leaf = node
            for k in keys:
                leaf = leaf.setdefault(k, {})
            for var, (vals, unit) in sorted(perfvars.items()):
                vals = sorted(vals)
                median = vals[len(vals) // 2]
                leaf[var] = [float(f'{median:.6g}'), tolerance[0], tolerance[1], unit]
    return out


def dump(data: dict) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)


def load_report(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise ReferenceFileError(f'{path}: not a readable ReFrame JSON report: {err}') from None
