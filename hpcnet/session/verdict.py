"""The verdict of a session's cases, as `hpcnet run` closes a session and
`hpcnet report` reads one: every repeat counts (a case fails if any of its
repeats failed, naming the repeat), a failure that names a known issue of
its stack counts as passed only where its retry passed, and the exit code
follows the contract (hpcnet.exitcodes)."""
from __future__ import annotations

import shlex
from collections import defaultdict

from hpcnet.acceptance.references import references
from hpcnet.acceptance.references.outlying_sessions import TOO_NOISY
from hpcnet.constants import (CHECKS_DIR, CONFIG_DIR, FABRIC_UNUSABLE, KNOWN_ISSUE_MARKER,
                              MEASUREMENT_WITHHELD)
from hpcnet.exitcodes import WORDS, Exit, worst
from hpcnet.paths import reframe_executable

#: Results of a case that did not fail.
NOT_FAILED = ('pass', 'skip')


def case_key(tc: dict) -> tuple:
    '''(name, system, partition, environ): one case, whatever its repeat.'''
    return tc['name'], tc['system'], tc['partition'], tc['environ']


def case_repeats_of(reports: list) -> dict:
    '''case key -> its result in each repeat, in order: every run of every
    report (ReFrame's --reruns, and its --max-retries), earlier ones first.'''
    repeats = defaultdict(list)
    for report in reports:
        for run in report.get('runs', []):
            for tc in run['testcases']:
                repeats[case_key(tc)].append(tc)
    return dict(repeats)


def deciding_repeat(results: list) -> int:
    '''Index of the repeat that decides a case: its first failed one, else
    its first one measured on a host too busy to judge it, else its last.'''
    for wanted in (lambda tc: tc['result'] not in NOT_FAILED, passed_with_measurement_withheld):
        found = [i for i, tc in enumerate(results) if wanted(tc)]
        if found:
            return found[0]
    return len(results) - 1


def final_cases_of(reports: list) -> dict:
    '''case key -> the result that decides it (deciding_repeat()) over run
    reports or stored sessions.'''
    return {key: results[deciding_repeat(results)]
            for key, results in case_repeats_of(reports).items()}


def failed_by_known_issue(tc: dict) -> bool:
    return tc['result'] == 'fail' and KNOWN_ISSUE_MARKER in (tc.get('fail_reason') or '')


def passed_with_measurement_withheld(tc: dict) -> bool:
    return tc['result'] == 'pass' and references.withheld(tc)


def rerun_command(tc: dict) -> str:
    '''The ReFrame command that runs one case again, with this suite's
    configuration (ReFrame's own hint lacks -C).'''
    return ' '.join(shlex.quote(a) for a in [
        reframe_executable(), '-C', str(CONFIG_DIR / 'settings.py'), '-c', str(CHECKS_DIR),
        '-n', f'/{tc.get("hashcode", "")}', '-p', f'^{tc["environ"]}$',
        '--system', f'{tc["system"]}:{tc["partition"]}', '-r', '--exec-policy=serial'])


def case_name(tc: dict) -> str:
    return f'{tc["name"]} @{tc["system"]}:{tc["partition"]}+{tc["environ"]}'


def _in_repeat(numbers: list, repeats: int) -> str:
    '''" in repeat 2 of 5" (" in repeats 2, 4 of 5"); '' for a single run.'''
    if repeats < 2:
        return ''
    return f' in repeat{"s" if len(numbers) > 1 else ""} {", ".join(map(str, numbers))} of {repeats}'


def _outcomes(cases: dict, retried: list) -> dict:
    '''case key -> its result in each repeat, a repeat run again replaced by
    its last attempt.  A retried entry names its repeat (1-based); one of an
    older hpcnet does not, and was its case's last.'''
    outcomes = {key: list(results) if isinstance(results, list) else [results]
                for key, results in cases.items()}
    for tc in retried:
        results = outcomes.setdefault(case_key(tc), [tc])
        results[min(int(tc.get('repeat') or len(results)), len(results)) - 1] = tc
    return outcomes


def _retried_lines(retried: list, outcomes: dict) -> list:
    lines = []
    for tc in retried:
        where = _in_repeat([tc.get('repeat') or len(outcomes[case_key(tc)])],
                           len(outcomes[case_key(tc)]))
        if tc.get('retried_for') == MEASUREMENT_WITHHELD:
            verdict = (f'NOT JUDGED {tc["attempts"]} TIMES' if passed_with_measurement_withheld(tc)
                       else f'MEASURED AGAIN (attempt {tc["attempts"]})' if tc['result'] == 'pass'
                       else f'FAILED WHEN MEASURED AGAIN (attempt {tc["attempts"]})')
        else:
            verdict = (f'PASSED ONLY ON RETRY (attempt {tc["attempts"]})' if tc['result'] == 'pass'
                       else f'FAILED {tc["attempts"]} TIMES')
        lines.append(f'{verdict}{where}: {case_name(tc)} (first attempt: {tc["first_attempt"]})')
    return lines


def _failure_lines(outcomes: dict, retried: list) -> list:
    '''FAILED (in repeat N of K) with the reason of the first failed repeat
    and the command that runs it again, for every case with a failed repeat
    not run again (those are listed with their attempts).'''
    again = {id(tc) for tc in retried}
    lines = []
    for key, results in sorted(outcomes.items()):
        failed = [i for i, tc in enumerate(results, 1)
                  if tc['result'] not in NOT_FAILED and id(tc) not in again]
        if failed:
            tc = results[failed[0] - 1]
            lines.append(f'FAILED{_in_repeat(failed, len(results))}: {case_name(tc)}: '
                         f'{(tc.get("fail_reason") or tc["result"])[:300]}')
            lines.append(f'  rerun: {rerun_command(tc)}')
    return lines


def too_noisy_metrics(tc: dict) -> list:
    '''The metrics of a case the reference file leaves unasserted for the
    baseline's spread (too noisy to judge), not by the site's own reason nor
    by design (judged over iperf3): metrics meant to be judged that nothing
    can fail.'''
    return sorted(name for name, v in (tc.get('not_asserted') or {}).items()
                  if str(v.get('reason', '')).startswith(references.SPREAD_REASON))


def _not_decided_lines(final: dict, judged_elsewhere: str) -> list:
    '''The contract's "not decided" cases besides a withheld measurement: a case
    with a metric the baseline found too noisy to judge, a case skipped
    because its stack cannot use the fabric its partition declares.'''
    lines = []
    noisy = [] if judged_elsewhere else \
        sorted((case_name(tc), too_noisy_metrics(tc)) for tc in final.values()
               if too_noisy_metrics(tc))
    for name, metrics in noisy:
        lines.append(f'NOT DECIDED: {name}: {", ".join(metrics)} {TOO_NOISY} '
                     f'({references.SPREAD_REASON} in the reference file gives the spread and the '
                     f'cap): nothing can fail {"them" if len(metrics) > 1 else "it"}')
    unusable = [tc for tc in final.values() if tc['result'] == 'skip'
                and FABRIC_UNUSABLE in (tc.get('skip_reason') or '')]
    for tc in sorted(unusable, key=case_name):
        lines.append(f'NOT DECIDED: {case_name(tc)}: skipped, but its partition declares the '
                     f'fabric: {tc["skip_reason"]}')
    return lines


def summary(cases: dict, retried: list, judged_elsewhere: str = '') -> tuple:
    '''(lines, exit code) of a session's cases: ``cases`` maps each case key
    to its result in each repeat (a single result is one repeat); ``retried``
    holds the last attempt of each repeat run again.  A case fails if any
    repeat failed (naming it) and was not passed on a known issue's retry;
    nothing ran, a withheld measurement, a case nothing could fail or a declared
    fabric skipped is NOT DECIDED; else OK (values recorded but not judged
    are said on the last line, not turned into a failure).'''
    outcomes = _outcomes(cases, retried)
    final = {key: results[deciding_repeat(results)] for key, results in outcomes.items()}
    lines = _retried_lines(retried, outcomes) + _failure_lines(outcomes, retried)
    codes = [Exit.OK]
    by_result = defaultdict(list)
    for tc in final.values():
        by_result[tc['result']].append(tc)
    if any(tc['result'] not in NOT_FAILED for tc in final.values()):
        codes.append(Exit.FAILED)
    skips = defaultdict(list)
    for tc in by_result.get('skip', []):
        skips[tc.get('skip_reason') or 'no reason recorded'].append(tc)
    for reason, tcs in sorted(skips.items(), key=lambda kv: -len(kv[1])):
        lines.append(f'SKIPPED ({len(tcs)}): {reason}')
    ran = [tc for tc in final.values() if tc['result'] != 'skip']
    if not ran:
        lines.append('NOTHING RAN: every selected case was skipped')
        codes.append(Exit.UNDECIDED)
    not_decided = _not_decided_lines(final, judged_elsewhere)
    lines += not_decided
    if not_decided:
        codes.append(Exit.UNDECIDED)
    not_judged, basis = defaultdict(int), defaultdict(int)
    for tc in ran if not judged_elsewhere else []:
        if tc.get('judgement_basis') in references.Basis.NOT_JUDGED:
            not_judged[str(tc.get('judgement'))] += 1
            basis[tc['judgement_basis']] += 1
    for why, count in sorted(not_judged.items()):
        lines.append(f'NOT JUDGED ({count}): {why[len(references.NOT_JUDGED) + 2:]}')
    # A case the partition declares that could not run now (too few nodes
    # available) decides nothing about it.
    if any(tc.get('skip_undecided') for tc in by_result.get('skip', [])):
        codes.append(Exit.UNDECIDED)
    if sum(basis[b] for b in references.Basis.WITHHELD_AS):
        codes.append(Exit.UNDECIDED)
    code = worst(*codes)
    lines.append(_last_line(code, by_result, ran, not_judged, basis, judged_elsewhere,
                            len(not_decided)))
    return lines, code


def _last_line(code: Exit, by_result: dict, ran: list, not_judged: dict, basis: dict,
               judged_elsewhere: str, not_decided: int) -> str:
    counts = ', '.join(f'{len(v)} {k}' for k, v in sorted(by_result.items()))
    last = f'{WORDS[code]}: {counts}'
    withheld = sum(basis[b] for b in references.Basis.WITHHELD_AS)
    if withheld:
        last += (f'; {withheld} case(s) not judged: {MEASUREMENT_WITHHELD} (NOT JUDGED says why; '
                 'run again when that has passed)')
    if not_decided:
        last += f'; {not_decided} NOT DECIDED line(s) above say which cases and why'
    elif code == Exit.OK and not_judged:
        unjudged = sum(not_judged.values())
        judged = sum(1 for tc in ran if tc.get('judgement_basis') == references.Basis.REFERENCES)
        no_file = basis[references.Basis.NO_FILE] > 0
        last += (f'; performance: {judged} case(s) judged against references, {unjudged} '
                 'recorded, not judged (NOT JUDGED says why'
                 + ('; `hpcnet baseline` makes references)' if no_file else ')'))
    if judged_elsewhere and code == Exit.OK:
        last += f'; performance is judged by {judged_elsewhere}'
    return last


def reports_summary(reports: list) -> tuple:
    """(lines, exit code) of summary() over every repeat of ``reports`` (run
    reports or stored sessions, of hpcnet run or of plain reframe -r): the
    verdict `hpcnet run` gives the same cases.  A retried repeat is numbered
    within its own report; an entry of an older hpcnet counts no attempts and
    names no repeat (it was its case's last)."""
    cases, retried = defaultdict(list), []
    for report in reports:
        own = case_repeats_of([report])
        for tc in report.get('hpcnet_retried', []):
            key = case_key(tc)
            number = int(tc.get('repeat') or len(own.get(key, [tc])))
            retried.append({'attempts': '?', **tc, 'repeat': len(cases.get(key, [])) + number})
        for key, results in own.items():
            cases[key] += results
    return summary(dict(cases), retried)
