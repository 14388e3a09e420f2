"""`hpcnet compare BEFORE AFTER`: did anything get worse than its tolerance
(one-sided bounds, modes)."""
from __future__ import annotations

from hpcnet import argtypes, exitcodes
from hpcnet.session import runner
from hpcnet.acceptance.comparison import compare, comparetext, sides
from hpcnet.commands.parser import add_option, add_results_db_option
from hpcnet.exitcodes import Exit
from hpcnet.longwork.progress import phase


def parse_pairs(specs: list | None) -> dict:
    '''{old: new} of the --pair OLD=NEW options.'''
    pairs = {}
    for spec in specs or []:
        old, sep, new = spec.partition('=')
        if not sep or not old or not new:
            raise runner.SelectionError(f'--pair {spec}: expected OLD=NEW, two environment names '
                                        '(e.g. --pair gcc12-openmpi5=gcc13-openmpi5)')
        pairs[old] = new
    return pairs


def compare_sides(before_spec: str, after_spec: str, *, alpha: float, threshold: float,
                  system: str | None = None, include_baselines: bool = False,
                  pairs: list | None = None) -> tuple:
    """(before, after, outcome) of two side specs."""
    try:
        # Each side of stored sessions is a ReFrame session query: said on stderr.
        with phase(f'loading the sessions of {before_spec} and {after_spec}') as done:
            before, after = sides.load_sides(before_spec, after_spec, system=system,
                                             include_baselines=include_baselines)
            done.outcome = f'{len(before.sessions)} and {len(after.sessions)} session(s)'
        outcome = compare.compare(before, after, alpha=alpha, threshold=threshold,
                                  pairs=parse_pairs(pairs))
    except sides.CompareError as err:
        raise runner.SelectionError(str(err)) from None
    return before, after, outcome


def print_comparison(before, after, outcome, alpha: float, threshold: float) -> None:
    print(f'before: {before.spec} (sessions {", ".join(before.sessions)})')
    print(f'after:  {after.spec} (sessions {", ".join(after.sessions)})')
    print(f'one-sided {1 - alpha:.0%} bounds of each shift against its tolerance (at least '
          f'{threshold:.0%}, more where sessions before moved more), {len(outcome.rows)} metrics')
    print(comparetext.text(outcome))


def run(args) -> int:
    before, after, outcome = compare_sides(
        args.before, args.after, alpha=args.alpha, threshold=args.floor, system=args.baseline_system,
        include_baselines=args.include_baselines, pairs=args.pair)
    print_comparison(before, after, outcome, args.alpha, args.floor)
    code = outcome.exit_code
    runner.say(outcome.summary())
    if code == Exit.UNDECIDED:
        more, needed = outcome.more_samples(), outcome.samples_needed()
        runner.say('NOT DECIDED: ' + (
            f'about {more} more samples after would decide the metrics more samples decide: '
            f'`hpcnet run --repeats {needed}` for the after side, or `hpcnet accept`, which '
            'repeats until decided' if more else
            'more samples after would not decide it (the table says why: too few samples '
            'before, metrics on one side only)'))
    else:
        runner.say(exitcodes.WORDS[code])
    return code


def add_parser(sub) -> None:
    p = sub.add_parser('compare', help='before/after, with statistics: regressed or not')
    p.add_argument('before', help="session UUID, time period (now-1d:now), 'baseline' (the "
                                  'accepted baseline), or a JSON report')
    p.add_argument('after', help='the after side, any of the kinds BEFORE takes')
    p.add_argument('--alpha', type=argtypes.fraction, default=compare.ALPHA,
                   help='one-sided significance level (default %(default)s)')
    add_option(p, '--floor', type=argtypes.fraction, default=compare.THRESHOLD,
               formerly=('--threshold',),
               help="tightest tolerance of each metric (default %(default)s = 3 %%)")
    add_option(p, '--baseline-system', metavar='NAME', formerly=('--system',),
               help="the system whose accepted baseline the word 'baseline' names "
                    '(default: the system the other side ran on)')
    p.add_argument('--include-baselines', action='store_true',
                   help='a time period includes baseline sessions (left out by default)')
    p.add_argument('--pair', action='append', metavar='OLD=NEW',
                   help='pair an environment an upgrade renamed (repeatable)')
    add_results_db_option(p)
    p.set_defaults(func=run)
