"""`hpcnet index build|prune|export`: the metrics index beside ReFrame's
results database (hpcnet.acceptance.history.metricindex states what it holds).

- ``build``: index the sessions the index lacks (resumable: an interrupted
  build keeps the sessions it indexed), forget those the database lost;
- ``prune --older-than DAYS``: delete older sessions from ReFrame's database
  (`reframe --delete-stored-sessions`) and the index, never a session a
  reference file's provenance names (the accepted baseline);
- ``export --format ndjson [--period P]``: the index's rows, with the metric
  catalogue's unit and better side, to stdout or ``-o/--output FILE``.
"""
from __future__ import annotations

import sys
from pathlib import Path

from hpcnet import argtypes
from hpcnet.session import runner
from hpcnet.acceptance.history import metricindex
from hpcnet.commands.parser import add_results_db_option


def run(args) -> int:
    try:
        db = metricindex.results_db(Path(args.db) if args.db else None)
        return {'build': _build, 'prune': _prune, 'export': _export}[args.action](args, db)
    except metricindex.MetricIndexError as err:
        raise runner.SelectionError(str(err)) from None


def _build(args, db: Path) -> int:
    done = metricindex.sync(db)
    runner.say(f'metrics index {metricindex.index_path(db)}: {done.total} sessions of {db}; '
               f'{done.indexed} indexed now, {done.forgotten} no longer stored forgotten')
    return 0


def _prune(args, db: Path) -> int:
    pruned = metricindex.prune(db, args.older_than)
    runner.say(f'{db}: {len(pruned.deleted)} sessions older than {args.older_than:g} days '
               'deleted from the results database and the metrics index'
               + (f'; {len(pruned.kept)} as old kept: a reference file\'s provenance names '
                  f'them (the accepted baseline)' if pruned.kept else ''))
    return 0


def _export(args, db: Path) -> int:
    if args.output:
        try:
            with open(args.output, 'w') as out:
                count = metricindex.export_ndjson(db, out, args.period)
        except OSError as err:
            raise runner.SelectionError(f'--output {args.output}: cannot write: '
                                        f'{err.strerror}') from None
        runner.say(f'{count} rows written to {args.output}')
    else:
        metricindex.export_ndjson(db, sys.stdout, args.period)
    return 0


def add_parser(sub) -> None:
    """Register `hpcnet index` on the subcommands of hpcnet.cli."""
    p = sub.add_parser('index', help="the metrics index beside ReFrame's results database "
                                     '(<db>.index.sqlite): build, prune, export')
    actions = p.add_subparsers(dest='action', required=True)
    build = actions.add_parser('build', help='index the stored sessions the index lacks')
    prune = actions.add_parser('prune', help='delete old sessions from both stores, never '
                                             'those of the accepted baseline')
    prune.add_argument('--older-than', metavar='DAYS', type=argtypes.positive_int,
                       required=True, help='delete the sessions that started before this')
    export = actions.add_parser('export', help="the index's rows with the catalogue's unit and "
                                               'better side')
    export.add_argument('--format', choices=['ndjson'], default='ndjson',
                        help='one JSON object a line (default)')
    export.add_argument('--period', help='only these sessions (START:END as ReFrame takes it; '
                                         'default: all)')
    export.add_argument('-o', '--output', metavar='FILE', help='write here (default: stdout)')
    for action in (build, prune, export):
        add_results_db_option(action)
    p.set_defaults(func=run)
