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
from dataclasses import dataclass
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


#: Top-level section of a reference file (ReFrame ignores it: it reads only
#: the test's own entry) with the metrics a site deliberately does not judge:
#: ``{test class: {regex over '<index values>/<perf variable>': reason}}``.
NOT_ASSERTED = '$not_asserted'
#: Top-level section with what produced the references (hpcnet.baseline).
PROVENANCE = '$provenance'
#: How a case on a system without a reference file is marked.
NOT_JUDGED = 'not judged'


def _check_not_asserted(path, node) -> None:
    if not isinstance(node, dict):
        _fail(path, NOT_ASSERTED, 'expected a mapping of test class: {pattern: reason}')
    for test, patterns in node.items():
        if not isinstance(patterns, dict) or not patterns:
            _fail(path, f'{NOT_ASSERTED}.{test}', "expected a mapping of pattern: reason, e.g. "
                  "'testbed:eth/.*/latency_.*': 'latency is the host's, not the link's'")
        for pattern, reason in patterns.items():
            try:
                re.compile(str(pattern))
            except re.error as err:
                _fail(path, f'{NOT_ASSERTED}.{test}.{pattern}', f'not a regular expression ({err})')
            if not isinstance(reason, str) or not reason.strip():
                _fail(path, f'{NOT_ASSERTED}.{test}.{pattern}', 'the reason must be a non-empty string')


def validate(data, path='<references>', perfvars_by_test: dict | None = None) -> dict:
    '''Check a loaded reference file.  ``perfvars_by_test`` (test class name
    -> set of performance variable names), when given, also rejects unknown
    tests and variables.'''
    if data is None:
        return {}
    if not isinstance(data, dict):
        _fail(path, '(top level)', 'expected a mapping of test class name: references')
    for test, refs in data.items():
        if test == NOT_ASSERTED:
            _check_not_asserted(path, refs)
            continue
        if test == PROVENANCE:
            if not isinstance(refs, dict):
                _fail(path, PROVENANCE, 'expected a mapping (what produced the references)')
            continue
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


@dataclass(frozen=True)
class TestReferences:
    """What a test on a system is judged against."""
    path: Path                #: reference/<system>.yaml (it may not exist)
    reference: dict           #: the test's ``reference`` ({'$ref': ...} or {})
    #: True where the system has a file: every performance variable must then
    #: resolve to a reference, an $xfail or a not-asserted entry.
    strict: bool
    not_asserted: tuple = ()  #: ((pattern, reason), ...) of this test class
    #: The attributes the file indexes this test's references by (its $index).
    index: tuple = ()

    def not_asserted_reason(self, index_path: str) -> str | None:
        for pattern, reason in self.not_asserted:
            if re.fullmatch(pattern, index_path):
                return reason
        return None


def per_environment(reference_index) -> list:
    """The index of a measured baseline: where a check indexes by MPI family
    (one value for every build and compiler of it, as the wire-derived testbed
    references are), measured values are kept per environment instead (Open
    MPI 4 and 5, or two builds of one MPI, are different stacks)."""
    return ['$environ' if attr == 'mpi_family' else attr for attr in reference_index]


def for_test(system: str, test_class: str, reference_index, refdir: Path | None = None) \
        -> TestReferences:
    """The references of ``test_class`` on ``system``: an external reference
    when ``<reference dir>/<system>.yaml`` exists (validated first, and its
    ``$index`` for the class must be the one the check declares, or that one
    per environment, as ``hpcnet baseline`` writes it)."""
    path = reference_file(system, refdir or reference_dir())
    if not path.exists():
        return TestReferences(path, {}, strict=False, index=tuple(reference_index))
    data = load(path)
    index = (data.get(test_class) or {}).get('$index')
    valid = [list(reference_index), per_environment(reference_index)]
    if index is not None and list(index) not in valid:
        raise ReferenceFileError(f'{path}: {test_class}.$index is {index} but the check is '
                                 f'indexed by {valid[0]} (valid: that list'
                                 + (f' or {valid[1]})' if valid[1] != valid[0] else ')'))
    patterns = tuple((str(k), v) for k, v in
                     (data.get(NOT_ASSERTED) or {}).get(test_class, {}).items())
    # Absolute: ReFrame joins it to its reference prefix, which then has no
    # effect (4.10.4's config schema lacks general/reference_prefix).
    return TestReferences(path, {'$ref': str(path.resolve())}, strict=True,
                          not_asserted=patterns, index=tuple(index or reference_index))


def dump(data: dict) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)


def load_report(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise ReferenceFileError(f'{path}: not a readable ReFrame JSON report: {err}') from None
