"""What `hpcnet compare` prints: the verdict table of a comparison
(hpcnet.acceptance.comparison.compare), what changed under each regression,
and what one side lacks."""
from __future__ import annotations

from hpcnet.acceptance.comparison import statcompare
from hpcnet.acceptance.comparison.compare import Outcome


def table(rows: list, failed_cases: dict | None = None) -> str:
    """The verdict table, regressions first; what changed under each; under
    each metric of a case with a failed repeat after (``failed_cases``:
    {(test, partition, environment): what failed}), that repeat."""
    failed_cases = failed_cases or {}
    order = {statcompare.Verdict.REGRESSED: 0, statcompare.Verdict.INCONCLUSIVE: 1,
             statcompare.Verdict.IMPROVED: 2, statcompare.Verdict.UNCHANGED: 3,
             statcompare.Verdict.SHOWN: 4}
    lines = [f'{"verdict":12} {"ratio":>7} {"n":>5} {"tol":>6}  '
             f'{"test @ partition + environment":60} metric']
    for row in sorted(rows, key=lambda r: (order[r.result.verdict], r.test, r.partition,
                                           r.environ, r.metric)):
        c = row.result
        lines.append(f'{c.verdict.upper():12} {c.ratio:7.3f} {c.n_before:>2}+{c.n_after:<2} '
                     f'{tolerance_words(c):>6}  '
                     f'{row.test + " @" + row.partition + " +" + row.environ:60} '
                     f'{row.metric} [{row.unit}]')
        if c.verdict != statcompare.Verdict.UNCHANGED:
            lines.append(f'{"":28}{c.reason}')
        elif c.left_out_after:
            lines.append(f'{"":28}left out after: {c.left_out_after}')
        if row.left_out:
            lines.append(f'{"":28}{row.left_out}')
        if row.withheld:
            lines.append(f'{"":28}{row.withheld}')
        failure = failed_cases.get((row.test, row.partition, row.environ.split(' -> ')[-1]))
        if failure:
            lines.append(f'{"":28}its case FAILED {failure}')
        if c.verdict == statcompare.Verdict.REGRESSED and row.changed:
            lines.append(f'{"":28}what changed: ' + ' | '.join(row.changed))
    return '\n'.join(lines)


def tolerance_words(result: statcompare.Comparison) -> str:
    """The tolerance a verdict was judged against: '3.0%'; 'exact' for one
    decided without one (counts, configured values), '-' for one not compared."""
    if result.tolerance != result.tolerance:      # NaN
        return '-' if result.ratio != result.ratio else 'exact'
    return f'{result.tolerance:.1%}'


def _keys_line(what: str, keys: list) -> str:
    shown = ', '.join(f'{k[3]} of {k[0]} @{k[1]} +{k[2]}' for k in keys[:10])
    return f'{what} ({len(keys)}): {shown}' + (' ...' if len(keys) > 10 else '')


def text(outcome: Outcome) -> str:
    """What `hpcnet compare` prints: the pairing, the verdict table, what is
    missing after (failures) and what only the after side has."""
    lines = [f'environment renamed by the upgrade, paired: {p} {old} -> {new}'
             for (p, old), new in sorted(outcome.pairs.items())]
    failed_cases: dict = {}
    for repeat in outcome.failed_after:
        failed_cases.setdefault(repeat.case, f'in repeat {repeat.repeat} of {repeat.repeats} of '
                                             f'session {repeat.session} (after): {repeat.reason}')
    lines.append(table(outcome.rows, failed_cases))
    lines += [f'FAILED: {r.describe("after")} (a failed repeat fails its case, whatever its '
              'other repeats measured)' for r in outcome.failed_after]
    lines += [f'left out: {r.describe("before")} (no figures: its case\'s samples before are '
              'its other repeats)' for r in outcome.failed_before]
    if outcome.missing_after:
        lines.append('FAILED: ' + _keys_line('measured before, missing after', outcome.missing_after)
                     + ' (the case failed or did not run; an environment renamed ambiguously '
                       'pairs with --pair OLD=NEW)')
    if outcome.only_after:
        lines.append('not decided: ' + _keys_line('only after', outcome.only_after))
    return '\n'.join(lines)
