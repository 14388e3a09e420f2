"""`hpcnet crosscheck`: our kernel against IMB and OSU, ratios of medians."""
from __future__ import annotations

from pathlib import Path

from hpcnet import argtypes, stacks
from hpcnet.session import runner
from hpcnet.siteconfig import sites
from hpcnet.acceptance.references import references
from hpcnet.commands.parser import pass_through
from hpcnet.constants import Feature
from hpcnet.exitcodes import Exit


def run(args) -> int:
    from hpcnet.acceptance.comparison import crosscheck
    if args.report:
        report = Path(args.report)
    else:
        envs = [e.name for e in stacks.discover(site=sites.session_site(None)).environments
                if e.primary and ({Feature.IMB, Feature.OSU} & set(e.features))]
        if not envs:
            runner.say('no environment ships IMB-MPI1 or the OSU benchmarks (feature +imb or '
                       '+osu): nothing to cross-check')
            return Exit.UNDECIDED
        modes = '|'.join(sorted({p.ours_mode for p in crosscheck.PAIRINGS}))
        refs = '|'.join(f'{p.check}.*benchmark={p.benchmark}' for p in crosscheck.PAIRINGS)
        session = runner.run_suite(
            'crosscheck', ['-n', rf'^(hpcnet_p2p.*scale=1_node.*mode=({modes})|{refs})( |$)',
                           '-p', '^(' + '|'.join(envs) + ')$',
                           '--reruns', str(args.repeats - 1), *args.reframe_args])
        if (report := session.report) is None:
            return session.nothing_ran('the cross-check', 'no ratios')
        if session.code != 0:
            runner.say(f'some runs failed (exit {int(session.code)}); ratios below use the ones '
                       'that passed')
    data = references.load_report(report)
    cases = [tc for run in data.get('runs', []) for tc in run['testcases']]
    rows = crosscheck.ratios(cases)
    if not rows:
        runner.say(f'{report}: no environment with both our kernel and IMB or OSU passing')
        return 1
    print(crosscheck.table(rows))
    return Exit.OK if all(r.ok for r in rows) else Exit.FAILED


def add_parser(sub) -> None:
    p = sub.add_parser('crosscheck', help='our kernel against IMB and OSU (ratios of medians)')
    p.add_argument('--report', help='use this ReFrame JSON report instead of running')
    p.add_argument('--repeats', type=argtypes.positive_int, default=5,
                   help='runs of each side in the session; figures are medians (default 5)')
    pass_through(p, 'crosscheck', '--repeats K (K runs of each side)')
    p.set_defaults(func=run)
