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

Besides the schema, a reference must be able to fail a broken system:

- a lower threshold is above -0.5 (MIN_LOWER): one that accepts half the
  value accepts a link at half its rate, or a stack fallen back to TCP;
- an upper threshold is below +1.0 (MAX_UPPER): one that accepts twice the
  value accepts a latency doubled, which is the same fault as a rate halved;
- lower <= upper (a reversed pair accepts nothing, or everything once a
  sign is flipped);
- a null (unbounded) threshold needs a reason, given in the ``$unbounded``
  section (``{test class: {regex over '<file keys>/<perf variable>': reason}}``):
  ReFrame reads only 3- or 4-element tuples, so the reason cannot sit in the
  tuple itself; the worse side (the metric catalogue's direction: the lower
  bound of a rate, the upper of a time, both of a value without a better
  side) is never null, whatever the reason: such a reference fails nothing;
- test classes and performance variables are ones a check defines, and a
  reference's unit is its metric's: the metric catalogue (hpcnet.metrics)
  says both, so a typo fails instead of silently never applying, and a
  value in Gbit/s is not held against figures in MB/s (ReFrame compares the
  numbers and never the units); so every reference names its unit;
- its value is one a measurement of its metric can give, and its bounds
  leave a metric better higher room to improve
  (hpcnet.acceptance.references.plausible says each rule and its reason).
"""
from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from hpcnet import metrics
from hpcnet.acceptance.references import plausible
from hpcnet.constants import MEASUREMENT_WITHHELD, REFERENCE_DIR
from hpcnet.variables import REFERENCE_DIR_ENV
from hpcnet.yamlfile import YamlFileError, load_yaml

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


#: A lower threshold must be above this: -0.5 accepts half the value.
MIN_LOWER = -0.5
#: An upper threshold must be below this: +1.0 accepts twice the value, the
#: mirror of MIN_LOWER (a time doubled is a rate halved).
MAX_UPPER = 1.0


def _worse_sides(entry: metrics.Metric | None) -> tuple:
    """The thresholds ('lower', 'upper') on the worse side of a metric."""
    if entry is None:
        return ()
    return {metrics.Better.HIGHER: ('lower',), metrics.Better.LOWER: ('upper',)}.get(
        entry.better, ('lower', 'upper'))


def _check_by_catalogue(path, key, val, entry: metrics.Metric | None) -> None:
    """The unit and the worse side's bound, as the metric catalogue says."""
    if entry is None:
        return
    name = key.rsplit('.', 1)[-1]
    if val[3] != entry.unit:
        _fail(path, key, f'unit {val[3]!r} is not the unit of {name} (valid: {entry.unit}, as the '
                         'check reports it; ReFrame compares the numbers, never the units)')
    for side in _worse_sides(entry):
        if val[('lower', 'upper').index(side) + 1] is None:
            better = ('has no better side' if entry.better == metrics.Better.NONE
                      else f'is better {entry.better}')
            _fail(path, key, f'{side} threshold is null, but {name} {better}: its {side} '
                             'threshold is the worse side and must bound it (valid: a bound, '
                             f'{MIN_LOWER} < lower <= 0 <= upper < {MAX_UPPER:g}; a metric that '
                             f'cannot be bounded belongs in {NOT_ASSERTED} with its reason)')


def _check_reftuple(path, key, val, perfvars=None, unbounded_reason=None, entry=None):
    if isinstance(val, list) and val and val[0] == '$xfail':
        if len(val) != 3 or not isinstance(val[1], str):
            _fail(path, key, "an expected failure is ['$xfail', 'reason', [value, lower, upper, unit]]")
        val = val[2]
    if not isinstance(val, list) or len(val) not in (3, 4):
        _fail(path, key, f'{val!r} is not a reference: valid is [value, lower, upper, unit] '
                         '(lower/upper are fractions such as -0.1, 0.1, or null)')
    if len(val) == 3 or val[3] is None:
        _fail(path, key, f'{val!r} has no unit (valid: [value, lower, upper, unit], the unit '
                         + (f'{entry.unit}, ' if entry is not None else '')
                         + 'as the check reports it: ReFrame compares the numbers, never the units)')
    value, lower, upper = val[:3]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        _fail(path, key, f'reference value {value!r} is not a finite number')
    for name, thr in (('lower', lower), ('upper', upper)):
        if thr is not None and (isinstance(thr, bool) or not isinstance(thr, (int, float))
                                or not math.isfinite(thr)):
            _fail(path, key, f'{name} threshold {thr!r} is not a finite number or null')
    if lower is not None and upper is not None and lower > upper:
        _fail(path, key, f'the bounds are reversed: lower threshold {lower} is above upper '
                         f'threshold {upper} (wrong sign; valid: {MIN_LOWER} < lower <= 0 <= upper, '
                         'fractions of the value, e.g. -0.05, 0.05)')
    _check_by_catalogue(path, key, val, entry)
    for name, thr, sign in (('lower', lower, -1), ('upper', upper, 1)):
        if thr is None:
            if not unbounded_reason:
                _fail(path, key, f'{name} threshold is null (unbounded) without a reason: give a '
                                 f'bound (valid: {f"{MIN_LOWER} < lower <= 0" if sign < 0 else "upper >= 0"}) '
                                 f"or name the entry in {UNBOUNDED} with why no bound is needed")
            continue
        if thr * sign < 0:
            _fail(path, key, f'{name} threshold {thr} has the wrong sign '
                             f'(valid: {"<= 0" if sign < 0 else ">= 0"}, a fraction of the value)')
        # A zero reference has absolute thresholds (ReFrame): no fraction applies.
        if value != 0 and name == 'lower' and thr <= MIN_LOWER:
            _fail(path, key, f'lower threshold {thr} accepts {1 + thr:.0%} of the value, a broken '
                             f'system (valid: {MIN_LOWER} < lower <= 0; a metric that varies more '
                             f'belongs in {NOT_ASSERTED} with its reason)')
        if value != 0 and name == 'upper' and thr >= MAX_UPPER:
            _fail(path, key, f'upper threshold {thr:g} accepts {1 + thr:.0%} of the value, no bound '
                             f'at all (valid: 0 <= upper < {MAX_UPPER:g}; a metric that varies '
                             f'more belongs in {NOT_ASSERTED} with its reason)')
    if not isinstance(val[3], str):
        _fail(path, key, f'unit {val[3]!r} is not a string')
    found = None if entry is None else plausible.problem(key.rsplit('.', 1)[-1], val, entry)
    if found:
        _fail(path, key, found)


def _pattern(perfvar) -> str:
    """The name regex of a catalogue entry, or a name or regex as given."""
    return perfvar.pattern if isinstance(perfvar, metrics.Metric) else perfvar


def _known(var, perfvars):
    """The first of ``perfvars`` that ``var`` fullmatches (a catalogue entry,
    or a name or regex as given), or None."""
    return next((p for p in perfvars if re.fullmatch(_pattern(p), str(var))), None)


def _check_perfvars(path, key, node, perfvars, unbounded=(), keys=()):
    if not isinstance(node, dict) or not node:
        _fail(path, key, 'expected a mapping of performance variable: reference')
    for var, ref in node.items():
        known = None if perfvars is None else _known(var, perfvars)
        if perfvars is not None and known is None:
            _fail(path, f'{key}.{var}', f'unknown performance variable {var!r}: no check '
                                        f'defines it (valid: '
                                        f'{", ".join(sorted(_pattern(p) for p in perfvars))})')
        entry = '/'.join(str(k) for k in (*keys, var))
        reason = next((r for p, r in unbounded if re.fullmatch(p, entry)), None)
        _check_reftuple(path, f'{key}.{var}', ref, perfvars, reason,
                        known if isinstance(known, metrics.Metric) else None)


def _check_levels(path, key, node, depth, perfvars, unbounded=(), keys=()):
    if depth == 0:
        _check_perfvars(path, key, node, perfvars, unbounded, keys)
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
        _check_levels(path, f'{key}.{k}', sub, depth - 1, perfvars, unbounded, (*keys, k))


#: Top-level section of a reference file (ReFrame ignores it: it reads only
#: the test's own entry) with the metrics a site deliberately does not judge:
#: ``{test class: {regex over '<index values>/<perf variable>': reason}}``.
NOT_ASSERTED = '$not_asserted'
#: The key of a test's index levels (ReFrame's).
INDEX = '$index'
#: Top-level section (ReFrame ignores it) with why an entry may have a null
#: threshold: ``{test class: {regex over '<file keys>/<perf variable>': reason}}``,
#: the file keys as written (e.g. 'testbed:eth/.*/pingpong/latency_8B').
UNBOUNDED = '$unbounded'
#: How a `$not_asserted` reason written by a baseline starts (its figures
#: follow, per metric).
SPREAD_REASON = 'baseline spread'
#: How a baseline's reason for a metric of a case judged over iperf3 starts.
OVER_IPERF3_REASON = 'judged over iperf3'


def written_by_baseline(reason) -> bool:
    """Whether a `$not_asserted` reason is one a baseline wrote (a new
    baseline replaces it), not a site's own (which stands)."""
    return str(reason).startswith((SPREAD_REASON, OVER_IPERF3_REASON))


def reason_kind(reason: str) -> str:
    """A `$not_asserted` reason as a case's judgement lists it: a baseline's
    per-metric figures stay in the file, the kind is said once."""
    reason = str(reason)
    if reason.startswith(SPREAD_REASON):
        return f'{SPREAD_REASON}: too variable to bound (the reference file gives each figure)'
    return reason


#: Top-level section with what produced the references (hpcnet.acceptance.references.baseline).
PROVENANCE = '$provenance'
#: The default of load()/validate(): check names, units and bounds against hpcnet.metrics.
KNOWN = object()
#: How a case on a system without a reference file is marked.
NOT_JUDGED = 'not judged'


class Basis:
    '''What a case's verdict rests on: its ``judgement_basis``, recorded
    beside the ``judgement`` text so that a summary counts by it.'''
    REFERENCES = 'references'                #: its values held to the file
    NO_FILE = 'no reference file'            #: recorded, not judged
    NOTHING_ASSERTED = 'nothing asserted'    #: the file asserts none of its values
    WITHHELD = 'measurement withheld'        #: not a fair measurement (its judgement says why)
    #: WITHHELD and what reports written before it was named so recorded.
    WITHHELD_AS = (WITHHELD, 'host overloaded')
    NOT_JUDGED = (NO_FILE, NOTHING_ASSERTED, *WITHHELD_AS)


def withheld(tc: dict) -> bool:
    '''Whether a case's measurement was withheld: its values are shown, and
    judged by no reader.'''
    return tc.get('judgement_basis') in Basis.WITHHELD_AS


def withheld_reason(tc: dict) -> str:
    '''The short reason a case's measurement was withheld ("host busy"), as
    its judgement gives it after MEASUREMENT_WITHHELD; a report from before
    the reason was recorded says "host overloaded".'''
    found = re.search(rf'{MEASUREMENT_WITHHELD} \(([^:)]+)', tc.get('judgement') or '')
    return found.group(1) if found else 'host overloaded'


def _check_test_name(path, key, test, perfvars_by_test):
    if perfvars_by_test is not None and test not in perfvars_by_test:
        _fail(path, key, f'unknown test class {test!r}: no check defines it '
                         f'(valid: {", ".join(sorted(perfvars_by_test))})')


def _check_reasons(path, section, node, perfvars_by_test) -> None:
    if not isinstance(node, dict):
        _fail(path, section, 'expected a mapping of test class: {pattern: reason}')
    for test, patterns in node.items():
        _check_test_name(path, f'{section}.{test}', test, perfvars_by_test)
        if not isinstance(patterns, dict) or not patterns:
            _fail(path, f'{section}.{test}', "expected a mapping of pattern: reason, e.g. "
                  "'testbed:eth/.*/latency_.*': 'latency is the host's, not the link's'")
        for pattern, reason in patterns.items():
            if pattern == INDEX:
                # The index the patterns' paths use, where the test has no
                # entry of its own to say it (every metric not asserted).
                if not isinstance(reason, list) or not all(isinstance(a, str) for a in reason):
                    _fail(path, f'{section}.{test}.{INDEX}', 'expected a list of test attributes')
                continue
            try:
                re.compile(str(pattern))
            except re.error as err:
                _fail(path, f'{section}.{test}.{pattern}', f'not a regular expression ({err})')
            if not isinstance(reason, str) or not reason.strip():
                _fail(path, f'{section}.{test}.{pattern}', 'the reason must be a non-empty string')


def known_metrics() -> dict:
    """{test class: (metrics.Metric, ...)}: the metric catalogue
    (hpcnet.metrics), read without loading the checks."""
    return {test: metrics.of_test(test) for test in metrics.classes()}


def validate(data, path='<references>', perfvars_by_test=KNOWN) -> dict:
    '''Check a loaded reference file.  ``perfvars_by_test`` (test class name
    -> performance variable names or regexes they fullmatch) rejects unknown
    tests and variables; by default the checks' own (known_metrics()), with
    None names are not checked.'''
    if perfvars_by_test is KNOWN:
        perfvars_by_test = known_metrics()
    if data is None:
        return {}
    if not isinstance(data, dict):
        _fail(path, '(top level)', 'expected a mapping of test class name: references')
    # The reasons first: each test's entry reads its own among them.
    for block in (NOT_ASSERTED, UNBOUNDED):
        if block in data:
            _check_reasons(path, block, data[block], perfvars_by_test)
    unbounded = data.get(UNBOUNDED) or {}
    for test, refs in data.items():
        if test in (NOT_ASSERTED, UNBOUNDED):
            continue
        if test == PROVENANCE:
            if not isinstance(refs, dict):
                _fail(path, PROVENANCE, 'expected a mapping (what produced the references)')
            continue
        _check_test_name(path, test, test, perfvars_by_test)
        perfvars = None if perfvars_by_test is None else perfvars_by_test[test]
        reasons = tuple((str(p), r) for p, r in (unbounded.get(test) or {}).items()) \
            if isinstance(unbounded, dict) else ()
        if not isinstance(refs, dict):
            _fail(path, test, 'expected a mapping')
        index = refs.get('$index')
        if index is None:
            for part, node in refs.items():
                if not isinstance(part, str) or not re.fullmatch(r'[^:\s]+(:[^:\s]+)?|\*', part):
                    _fail(path, f'{test}.{part}', "expected '<system>:<partition>' (or add an $index)")
                _check_perfvars(path, f'{test}.{part}', node, perfvars, reasons, (part,))
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
                      len(index), perfvars, reasons)
    return data


def load(path: Path, perfvars_by_test=KNOWN) -> dict:
    '''Read and validate a reference file (names against the checks' by
    default); every problem is a ReferenceFileError.'''
    try:
        data = load_yaml(path)
    except YamlFileError as err:
        raise ReferenceFileError(str(err)) from None
    return validate(data, path, perfvars_by_test)


def reference_dir() -> Path:
    """REFERENCE_DIR_ENV's directory, or reference/ where it is unset or empty."""
    return Path(os.environ.get(REFERENCE_DIR_ENV) or REFERENCE_DIR)


def directory_files(path: Path | None = None) -> list:
    """The ``*.yaml`` of a reference directory (default: the one a run
    reads, reference_dir()), sorted; a missing directory, or a ``.yml`` file
    a run would not read, is a ReferenceFileError (a run would judge nothing
    of it)."""
    path = Path(path) if path is not None else reference_dir()
    if not path.is_dir():
        raise ReferenceFileError(f'{path}: not a directory (valid: a directory of '
                                 f'<system>.yaml reference files; {REFERENCE_DIR_ENV} selects it)')
    unread = sorted(path.glob('*.yml'))
    if unread:
        raise ReferenceFileError(f'{unread[0]}: not read (valid: a reference file is '
                                 f'<system>.yaml; rename it to {unread[0].stem}.yaml)')
    return sorted(path.glob('*.yaml'))


def validate_directory(path: Path | None = None) -> list:
    """Validate every file of directory_files(path); the files checked.
    The first problem is a ReferenceFileError naming file and key."""
    files = directory_files(path)
    for f in files:
        load(f)
    return files


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
    exempt = (data.get(NOT_ASSERTED) or {}).get(test_class, {})
    index = (data.get(test_class) or {}).get(INDEX) or exempt.get(INDEX)
    valid = [list(reference_index), per_environment(reference_index)]
    if index is not None and list(index) not in valid:
        raise ReferenceFileError(f'{path}: {test_class}.$index is {index} but the check is '
                                 f'indexed by {valid[0]} (valid: that list'
                                 + (f' or {valid[1]})' if valid[1] != valid[0] else ')'))
    patterns = tuple((str(k), v) for k, v in exempt.items() if k != INDEX)
    # Absolute: ReFrame joins it to its reference prefix, which then has no
    # effect (4.10.4's config schema lacks general/reference_prefix).
    return TestReferences(path, {'$ref': str(path.resolve())}, strict=True,
                          not_asserted=patterns, index=tuple(index or reference_index))


def dump(data: dict) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)


def load_report(path: Path) -> dict:
    """A ReFrame JSON run report (``--report-file``), its shape checked: a
    JSON file of another program is refused, never read as a session
    without cases."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise ReferenceFileError(f'{path}: not a readable ReFrame JSON report: {err}') from None
    check_report_shape(data, path)
    return data


def check_report_shape(data, where) -> None:
    """What every reader of a run report relies on: ``session_info`` (a
    mapping) and ``runs``, a list of runs each with a list of ``testcases``."""
    runs = data.get('runs') if isinstance(data, dict) else None
    if (not isinstance(data, dict) or not isinstance(data.get('session_info'), dict)
            or not isinstance(runs, list)
            or not all(isinstance(run, dict) and isinstance(run.get('testcases'), list)
                       for run in runs)):
        raise ReferenceFileError(f'{where}: not a ReFrame JSON run report (valid: the file of '
                                 'reframe --report-file, or reports/latest.json of hpcnet run: '
                                 'session_info and runs, each run with its testcases)')
