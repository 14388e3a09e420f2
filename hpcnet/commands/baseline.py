"""`hpcnet baseline [--sessions K]`: K sessions -> reference/<system>.yaml with provenance."""
from __future__ import annotations

import datetime
import os
import tempfile
from pathlib import Path

from hpcnet import argtypes, exitcodes
from hpcnet.session import runner
from hpcnet.siteconfig import sites
from hpcnet.acceptance.references import accepted, baseline, references, refmerge
from hpcnet.acceptance.references.outlying_sessions import TOO_NOISY, left_out_words
from hpcnet.commands.parser import (add_option, add_results_db_option, check_writable,
                                    pass_through, write_output)
from hpcnet.commands.run import on_the_testbed_named
from hpcnet.constants import REFERENCE_DIR
from hpcnet.paths import PROJECT_ROOT
from hpcnet.variables import REFERENCE_DIR_ENV
from hpcnet.exitcodes import Exit
from hpcnet.siteconfig.reframeargs import named_system


def run(args) -> int:
    '''K sessions of the selected checks (not judged meanwhile), each
    stored tagged as one candidate; references with provenance from the
    passed samples, merged into the system's file (entries not measured
    are kept): written there, the baseline (hpcnet.acceptance.references.accepted).
    Separate sessions, so the tolerance sees the drift between sessions
    that the next clean run will have, not only the spread within one.'''
    if PROJECT_ROOT is None and not args.output and not os.environ.get(REFERENCE_DIR_ENV):
        raise runner.SelectionError(f'an installed hpcnet does not write into its installation '
                                    f'({REFERENCE_DIR}): set {REFERENCE_DIR_ENV} to your own '
                                    'reference directory (runs are then judged against it), or '
                                    'give -o FILE')
    system = named_system(args.reframe_args, os.environ).split(':')[0] or None
    if args.output or system:
        # Before the sessions run: they take minutes, a wrong path seconds.
        check_writable(Path(args.output or baseline.reference_path_for(system)),
                       '-o' if args.output else REFERENCE_DIR_ENV)
    baseline_id = datetime.datetime.now().strftime('%Y%m%dT%H%M%S')
    reports, codes = [], []
    with tempfile.TemporaryDirectory(prefix='hpcnet-baseline-refs-') as scratch, \
            on_the_testbed_named(args.reframe_args):
        for session in range(1, args.sessions + 1):
            runner.say(f'baseline session {session} of {args.sessions}')
            suite_run = runner.run_suite('baseline', [
                *args.reframe_args, '--session-extras', f'{baseline.BASELINE_TAG}={baseline_id}'],
                env=baseline.environment_for_baseline_runs(scratch),
                judged_elsewhere='the baseline being made')
            codes.append(suite_run.code)
            if suite_run.report is None:
                return suite_run.nothing_ran(f'baseline session {session}',
                                             'no references written')
            reports.append(references.load_report(suite_run.report))
    rc = exitcodes.worst(*codes)
    systems = {tc['system'] for tc in baseline.judged_cases(reports)}
    if system is None and len(systems) == 1:
        system = systems.pop()
    path = Path(args.output or baseline.reference_path_for(system))
    # What the file's site says is not asserted stays so, and its spread
    # does not widen or unassert the metrics measured beside it.
    existing = references.load(path) if path.exists() else {}
    floor, source = sites.baseline_floor(system, args.floor)
    runner.say(f'tolerance floor {floor:g} ({source})')
    data = baseline.document(reports, floor=floor,
                             declared=baseline.site_not_asserted(existing))
    if not data:
        runner.say('no passed case with performance values: no references written')
        return rc if rc != Exit.OK else Exit.UNDECIDED
    prov = data[references.PROVENANCE]
    rc = exitcodes.worst(rc, say_what_was_left_out(prov))
    if existing:
        data = refmerge.merge(existing, data)
    text = references.dump(data)
    if path.exists():
        changes = refmerge.diff(path.read_text(), text, str(path))
        print(changes or f'{path}: the references are unchanged (only the provenance is new)')
        if not args.write:
            proposed = path.with_name(path.name + '.baseline')
            write_output(text, proposed, '-o' if args.output else REFERENCE_DIR_ENV,
                         'candidate baseline')
            runner.say(f'{path} exists and was kept; the candidate baseline is {proposed} '
                 '(hpcnet baseline --write replaces the file; entries it did not measure are kept)')
            runner.say(accepted.candidate_note(baseline_id, path))
            return rc
    write_output(text, path, '-o' if args.output else REFERENCE_DIR_ENV, 'references')
    runner.say(f'wrote {path} from {args.sessions} sessions ({prov["passed_cases"]} passed cases): '
         'review it, then commit')
    reference = Path(baseline.reference_path_for(system)) if system else None
    if reference is None or path.resolve() != reference.resolve():
        runner.say(accepted.candidate_note(baseline_id, reference))
    return rc


def say_what_was_left_out(prov: dict) -> Exit:
    '''The outliers, outlying sessions and metrics too noisy to judge of a
    baseline's provenance, one line each; UNDECIDED where a metric is too
    noisy to judge, else OK.'''
    for left in prov.get('left_out') or []:
        runner.say(f'left out as an outlier: {left}')
    for left in prov.get('left_out_sessions') or []:
        runner.say(f'left out an outlying session of {left["metric"]}: ' + left_out_words(
            (left['session'], left['median'], left['others_median'])))
    for metric in prov.get('too_noisy') or []:
        print(f'{TOO_NOISY}: {metric}')
    if not prov.get('too_noisy'):
        return Exit.OK
    # Per metric: the others are bounded and written; the site must not
    # take a file that cannot fail some of its metrics as a pass.
    runner.say(f'{len(prov["too_noisy"])} metrics {TOO_NOISY} (each named above): recorded '
               'and compared, not asserted ($not_asserted in the file says why each)')
    return Exit.UNDECIDED


def add_options(p) -> None:
    '''The options of `hpcnet baseline` (also of `hpcnet testbed baseline`).'''
    add_option(p, '--sessions', type=argtypes.positive_int, default=5, metavar='K',
               formerly=('--repeats',), help='sessions of samples (default 5)')
    p.add_argument('--floor', type=argtypes.tolerance_floor,
                   help=f"tightest tolerance (fraction; default: the site file's "
                        f"{sites.BASELINE_FLOOR}, else {baseline.TOLERANCE_FLOOR:g})")
    p.add_argument('--write', action='store_true', help='replace an existing reference file')
    p.add_argument('-o', '--output', metavar='FILE',
                   help="reference file (default reference/<system>.yaml; ReFrame's -o is not "
                        'passed through)')
    add_results_db_option(p)
    pass_through(p, 'baseline', '--sessions K (K sessions)')
    p.set_defaults(func=run)


def add_parser(sub) -> None:
    add_options(sub.add_parser('baseline', help='K sessions -> references with provenance'))
