"""`hpcnet refs validate|generate`: reference files."""
from __future__ import annotations

import sys
from pathlib import Path

from hpcnet import argtypes
from hpcnet.session import runner
from hpcnet.siteconfig import sites
from hpcnet.acceptance.references import baseline, references
from hpcnet.commands.parser import check_writable, write_output
from hpcnet.exitcodes import Exit


def validate(files: list) -> int:
    """One line per file: ok on stdout, or on stderr what refuses it (the
    file, the key and what is valid); USAGE where any is refused."""
    # With no file: the directory the run will read (HPCNET_REFERENCE_DIR).
    if not files:
        files = references.directory_files()
    refused = 0
    for f in files:
        try:
            references.load(f)
        except references.ReferenceFileError as err:
            refused += 1
            print(f'hpcnet: error: {err}', file=sys.stderr)
            continue
        print(f'ok: {f}')
    if refused and len(files) > 1:
        print(f'hpcnet: {refused} of {len(files)} reference files refused: a run stops on them',
              file=sys.stderr)
    return Exit.USAGE if refused else Exit.OK


def run(args) -> int:
    if args.refs_cmd == 'validate':
        return validate([Path(f) for f in args.files])
    if args.output:
        check_writable(Path(args.output), '-o')
    report = references.load_report(Path(args.report))
    systems = {tc['system'] for tc in baseline.judged_cases([report])}
    floor, _ = sites.baseline_floor(systems.pop() if len(systems) == 1 else None, args.floor)
    text = references.dump(baseline.document([report], floor=floor))
    if args.output:
        write_output(text, Path(args.output), '-o', 'references')
        runner.say(f'wrote {args.output}: review it, then commit')
    else:
        print(text, end='')
    return Exit.OK


def add_parser(sub) -> None:
    p = sub.add_parser('refs', help='reference files: validate, generate')
    rs = p.add_subparsers(dest='refs_cmd', required=True)
    v = rs.add_parser('validate', help='check reference files')
    v.add_argument('files', nargs='*', metavar='FILE',
                   help='the reference files to check (default: every file of the reference '
                        'directory, HPCNET_REFERENCE_DIR, else reference/)')
    g = rs.add_parser('generate', help="references (with provenance) from a good run's "
                                       'JSON report')
    g.add_argument('report', help='ReFrame JSON run report of a good run')
    g.add_argument('--floor', type=argtypes.tolerance_floor,
                   help=f"tightest tolerance (default: the site file's {sites.BASELINE_FLOOR}, "
                        f"else {baseline.TOLERANCE_FLOOR:g}); each is derived from the samples' "
                        "spread")
    g.add_argument('-o', '--output', metavar='FILE',
                   help='reference file to write (default: print the references)')
    p.set_defaults(func=run, needs_work_dir=False)
