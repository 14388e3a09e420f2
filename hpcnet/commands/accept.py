"""`hpcnet accept`: what a site does after an upgrade, in one command.

Run the selection K times, compare with the system's baseline, and where a
metric is still not decided, run only the cases that hold such metrics
again, as many repeats as the statistics say would decide them and never
fewer than K (a case that failed a repeat has failed the acceptance: it is
not run again), until every
metric is decided (each judged one-sided against its own tolerance:
hpcnet.acceptance.comparison.statcompare), a regression or a failed case
has failed the acceptance, more samples of the after side would decide
none of those left, or a budget (``--max-repeats``, ``--time-budget``) is
spent (Chromium Pinpoint's "collect more data"). Then the verdict table,
the HTML report with its before/after section, and the exit code of the
contract (hpcnet.exitcodes): a failed case or a regression is FAILED, what
the budget left undecided is NOT DECIDED, never OK.
"""
from __future__ import annotations

import os
import re
import tempfile
import time
from dataclasses import dataclass

from hpcnet import argtypes
from hpcnet.session import runner, verdict
from hpcnet.acceptance.comparison import compare, comparetext, sides
from hpcnet.acceptance.references import references
from hpcnet.acceptance.report import report as hpcnet_report
from hpcnet.commands.compare import parse_pairs
from hpcnet.commands.parser import add_option, add_results_db_option, pass_through
from hpcnet.commands.run import on_the_testbed_named
from hpcnet.variables import REFERENCE_DIR_ENV
from hpcnet.exitcodes import WORDS, Exit, worst
from hpcnet.longwork.progress import phase
from hpcnet.siteconfig.reframeargs import named_system

#: Report name of the acceptance runs (reports/accept-latest.json, .html).
NAME = 'accept'
#: Samples of every metric in the first round (the nightly templates' --repeats):
#: enough that a fault in one repeat of three shows in a round with p > 0.85.
FIRST_ROUND_REPEATS = 5


@dataclass(frozen=True)
class Budget:
    repeats: int          #: samples of every metric in the first round
    max_repeats: int      #: samples of any metric, all rounds together
    time_budget_s: float  #: wall time after which no new round starts


def _named(rows: list) -> str:
    '''The metrics of verdict rows, each with its case and ratio.'''
    return '; '.join(f'{r.metric} of {r.test} @{r.partition}+{r.environ} at {r.result.ratio:.3f}'
                     for r in rows)


def _failed_cases(reports: list) -> set:
    '''(test, system:partition, environ) of each case that failed a repeat
    (an attempt of a known issue that ReFrame retried aside): the acceptance
    has failed on it, and no sample of a further round changes that.'''
    return {(name.split(' /')[0], f'{system}:{partition}', environ)
            for (name, system, partition, environ), results
            in verdict.case_repeats_of(reports).items()
            if any(tc['result'] not in verdict.NOT_FAILED and not verdict.failed_by_known_issue(tc)
                   for tc in results)}


def _undecided_selection(outcome: compare.Outcome, after: sides.Side, failed: set) -> list:
    '''ReFrame options that select exactly the cases with undecided metrics
    that more samples decide, but those that ``failed`` (_failed_cases): one
    -n /<hash> per case (ReFrame ORs repeated -n), their environments.'''
    wanted = {(r.test, r.partition, r.environ.split(' -> ')[-1]) for r in outcome.undecided()
              if r.result.more_samples} - failed
    hashes, envs = set(), set()
    for report in after.reports:
        for tc in compare.measured_cases([report]):
            if (tc['name'].split(' /')[0], f'{tc["system"]}:{tc["partition"]}',
                    tc['environ']) in wanted:
                hashes.add(tc['hashcode'])
                envs.add(tc['environ'])
    args = [a for h in sorted(hashes) for a in ('-n', f'/{h}')]
    return args + ['-p', '^(' + '|'.join(re.escape(e) for e in sorted(envs)) + ')$'] if envs else args


def _round(reframe_args: list, repeats: int) -> tuple:
    '''(exit code, report or None) of one ReFrame session of ``repeats``
    passes: the report this session wrote, None where it wrote none (it
    selected no case, or ReFrame refused its options).  The runs are not
    held to the reference files: the comparison with the baseline's samples
    is the verdict, and one verdict is not given twice by two rules.'''
    with tempfile.TemporaryDirectory(prefix='hpcnet-accept-refs-') as no_references:
        run = runner.run_suite(NAME, [*reframe_args, *runner.repeats_args(repeats)],
                               env={**os.environ, REFERENCE_DIR_ENV: no_references},
                               judged_elsewhere='the comparison with the baseline below')
    if run.report is None:
        return run.nothing_ran(f'a round of {repeats} repeats', 'no samples to compare'), None
    return run.code, references.load_report(run.report)


def _failed_already(outcome: compare.Outcome, run_codes: list) -> bool:
    '''Whether the rounds so far failed the acceptance (a regression, a
    failed case), saying so with the metrics still undecided beside it.
    The question is whether anything got worse: once something did, no
    round changes that, and a further look at a decided metric would only
    spend its alpha again.'''
    if worst(outcome.exit_code, *run_codes) != Exit.FAILED:
        return False
    undecided = outcome.undecided()
    runner.say(f'{len(undecided)} metrics not decided ({_named(undecided)}) beside what failed: '
               'no more rounds (the acceptance has failed whatever they decide)')
    return True


def accept(reframe_args: list, budget: Budget, *, baseline_spec: str = sides.BASELINE,
           system: str | None = None, pairs: dict | None = None,
           alpha: float = compare.ALPHA, threshold: float = compare.THRESHOLD) -> int:
    '''The whole acceptance (module docstring); returns the exit code.'''
    start = time.monotonic()
    system = system or named_system(reframe_args, os.environ).split(':')[0] or None
    try:
        with phase(f'loading the sessions of {baseline_spec}') as done:
            before = sides.load_side(baseline_spec, system=system)
            done.outcome = f'{len(before.sessions)} session(s)'
    except sides.CompareError as err:
        raise runner.SelectionError(str(err)) from None
    runner.say(f'baseline: {baseline_spec} (sessions {", ".join(before.sessions)})')
    run_codes, reports, taken = [], [], budget.repeats
    code, report = _round(reframe_args, budget.repeats)
    if report is None:
        # Never a verdict on the reports of an earlier invocation.
        runner.say(f'{WORDS[code]}: exit code {int(code)}')
        return code
    run_codes.append(code)
    reports.append(report)
    while True:
        after = sides.Side(NAME, list(reports))
        try:
            outcome = compare.compare(before, after, alpha=alpha, threshold=threshold, pairs=pairs)
        except sides.CompareError as err:
            raise runner.SelectionError(str(err)) from None
        undecided = outcome.undecided()
        if not undecided:
            break
        if _failed_already(outcome, run_codes):
            break
        more = outcome.more_samples()
        if not more:
            runner.say(f'{len(undecided)} metrics not decided, and more samples would not decide '
                       'them (the table says why each)')
            break
        room = budget.max_repeats - taken
        spent = time.monotonic() - start
        if room <= 0 or spent >= budget.time_budget_s:
            runner.say(f'budget spent ({taken} of {budget.max_repeats} repeats, {spent:.0f} of '
                       f'{budget.time_budget_s:.0f} s): {len(undecided)} metrics not decided')
            break
        selection = _undecided_selection(outcome, after, _failed_cases(reports))
        if not selection:
            runner.say(f'{len(undecided)} metrics not decided, of cases that failed a repeat: no '
                       'more rounds (a failed case fails the acceptance whatever its samples)')
            break
        # A round is never smaller than the first: near the tolerance's edge
        # the statistics' estimate is optimistic, and a round that falls
        # short costs another round's session.
        extra = min(max(more, budget.repeats), room)
        runner.say(f'{len(undecided)} metrics not decided ({_named(undecided)}): {extra} more '
                   f'repeats of the cases that hold them (the statistics ask for about {more})')
        code, report = _round([*runner.option_values_removed(reframe_args, ('-n', '--name')),
                               *selection], extra)
        run_codes.append(code)
        if report is None:
            break
        reports.append(report)
        taken += extra
    print(f'before: {before.spec} (sessions {", ".join(before.sessions)})')
    print(f'after:  {NAME}: {taken} repeats in {len(reports)} sessions '
          f'({", ".join(after.sessions)})')
    print(comparetext.text(outcome))
    # A failed case fails the acceptance; a round that ran nothing, or skipped
    # a case its partition declares, leaves it not decided.
    code = worst(outcome.exit_code, *run_codes)
    page = runner.reports_dir() / f'{NAME}-latest.html'
    runner.say('rendering the HTML report')
    page.write_text(hpcnet_report.render(
        before.reports + after.reports, title=f'hpcnet accept: {" ".join(reframe_args)}',
        verdict=f'{WORDS[code]}: {outcome.summary()}', comparison_of=(outcome, before, after)))
    runner.say(f'HTML report: {page}')
    runner.say(f'{outcome.summary()}; {taken} repeats, {time.monotonic() - start:.0f} s')
    runner.say(f'{WORDS[code]}: exit code {int(code)}')
    return code


def run(args) -> int:
    if args.max_repeats < args.repeats:
        raise runner.SelectionError(f'--max-repeats {args.max_repeats} is below --repeats '
                                    f'{args.repeats}')
    with on_the_testbed_named(args.reframe_args):
        return accept(args.reframe_args, Budget(args.repeats, args.max_repeats, args.time_budget),
                      baseline_spec=args.baseline, system=args.baseline_system,
                      pairs=parse_pairs(args.pair), alpha=args.alpha, threshold=args.floor)


def add_options(p) -> None:
    '''The options of `hpcnet accept` (also of `hpcnet testbed accept`).'''
    p.add_argument('--repeats', type=argtypes.positive_int, default=FIRST_ROUND_REPEATS,
                   help='samples of every metric in the first round '
                        f'(default {FIRST_ROUND_REPEATS})')
    p.add_argument('--max-repeats', type=argtypes.positive_int, default=15,
                   help='samples of any metric in all rounds together (default 15)')
    p.add_argument('--time-budget', type=float, default=3600, metavar='SECONDS',
                   help='no new round starts after this (default 3600)')
    p.add_argument('--baseline', default=sides.BASELINE,
                   help="the before side, any side `hpcnet compare` takes (default: "
                        "'baseline', the accepted baseline: the sessions the provenance of "
                        "the system's reference file names)")
    p.add_argument('--pair', action='append', metavar='OLD=NEW',
                   help='pair an environment an upgrade renamed (repeatable)')
    p.add_argument('--alpha', type=argtypes.fraction, default=compare.ALPHA,
                   help=f'one-sided significance level (default {compare.ALPHA:g})')
    add_option(p, '--floor', type=argtypes.fraction, default=compare.THRESHOLD,
               formerly=('--threshold',),
               help=f"tightest tolerance of each metric (default {compare.THRESHOLD:g})")
    add_option(p, '--baseline-system', metavar='NAME', formerly=('--system-baseline',),
               help="the system whose accepted baseline the word 'baseline' names "
                    '(default: the system of --system)')
    add_results_db_option(p)
    pass_through(p, 'accept', '--repeats K and --max-repeats K')
    p.set_defaults(func=run)


def add_parser(sub) -> None:
    add_options(sub.add_parser('accept', help='K repeats compared with the baseline; more until '
                                              'decided'))
