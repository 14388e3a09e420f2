"""`hpcnet fabrics validate`: the fabric registry, the fabric table, and every
system file against them (a partition's switch tree too, hpcnet.topology)."""
from __future__ import annotations

from pathlib import Path

from hpcnet import fabrics, fabrictable, model
from hpcnet.siteconfig import sites
from hpcnet.constants import FABRICS_FILE


def run(args) -> int:
    '''Validate the fabric table (and every system file against it).'''
    path = Path(args.file) if args.file else FABRICS_FILE
    missing = sites.missing_system_directories()
    if missing:
        raise model.ConfigError(missing)
    # The site files first: the fabrics they add have blocks in the table.
    systems = sites.load_system_files(*sites.system_directories())
    table = fabrictable.load_table(path)
    print(f'ok: {path}: fabrics {", ".join(table["fabrics"])}; MPI profiles '
          f'{", ".join(table["profiles"])}')
    for entry in fabrics.entries():
        block = '' if entry.name in table['fabrics'] else f' (no block in {path})'
        print(f'fabric {entry.name}: {entry.description}; carried by {entry.carrier}{block}')
    if not args.file:
        for system in systems:
            parts = ', '.join(f'{p["name"]} ({p["extras"][model.PartitionKey.FABRIC]})'
                              for p in system['partitions'])
            print(f'ok: system {system["name"]}: {parts}')
            for part in system['partitions']:
                fullname = f'{system["name"]}:{part["name"]}'
                tree = model.Partition.from_extras(fullname, part['extras']).topology
                if tree is not None:
                    print(f'ok: {fullname}: switch tree of {tree.describe()}')
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser('fabrics', help='the fabric registry and the fabric x MPI table')
    fs = p.add_subparsers(dest='fabrics_cmd', required=True)
    v = fs.add_parser('validate', help='check config/fabrics.yaml and every system file')
    v.add_argument('file', nargs='?', help='another fabric table to check')
    p.set_defaults(func=run, needs_work_dir=False)
