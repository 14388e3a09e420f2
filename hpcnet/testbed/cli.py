"""``hpcnet testbed up|down|exec|status|shape`` (also ``python -m
hpcnet.testbed``); ``hpcnet testbed run`` is in hpcnet.cli (it runs the suite)."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Optional, Sequence

from hpcnet.testbed.cluster import Testbed
from hpcnet.testbed.config import DEFAULTS, HEAD, TestbedError
from hpcnet.variables import TESTBED_STATE_DIR_ENV


def add_up_options(parser: argparse.ArgumentParser):
    """The options of ``up`` (shared with ``hpcnet testbed run``)."""
    parser.add_argument('--nodes', type=int, default=DEFAULTS.nodes,
                        help=f'compute nodes (default {DEFAULTS.nodes})')
    parser.add_argument('--rate', default=DEFAULTS.rate,
                        help=f'tbf rate of every link, or "none" '
                             f'(default {DEFAULTS.rate})')
    parser.add_argument('--burst', default=DEFAULTS.burst,
                        help=f'tbf burst (default {DEFAULTS.burst})')
    parser.add_argument('--softirq-priority', type=int, default=DEFAULTS.softirq_priority,
                        help='SCHED_FIFO priority of the host\'s ksoftirqd threads while up, '
                             f'0 to leave them alone (default {DEFAULTS.softirq_priority})')


def up_from_options(tb: Testbed, args) -> dict:
    return tb.up(args.nodes, args.rate, args.burst, args.softirq_priority)


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument('--state-dir', default=None,
                        help='state directory (default /run/<name>-testbed, '
                             f'or ${TESTBED_STATE_DIR_ENV})')
    common.add_argument('--name', default=DEFAULTS.name,
                        help='testbed name, prefix of its network namespaces '
                             f'(default {DEFAULTS.name})')
    p = argparse.ArgumentParser(
        prog='hpcnet testbed',
        description='Slurm virtual cluster in network namespaces.')
    sub = p.add_subparsers(dest='cmd', required=True)
    up = sub.add_parser('up', parents=[common], help='build the testbed')
    add_up_options(up)
    sub.add_parser('down', parents=[common], help='remove everything')
    ex = sub.add_parser('exec', parents=[common],
                        help='run a command on a node: exec NODE -- CMD...')
    ex.add_argument('node')
    ex.add_argument('argv', nargs=argparse.REMAINDER)
    stp = sub.add_parser('status', parents=[common], help='show the testbed')
    stp.add_argument('--json', action='store_true')
    sh = sub.add_parser('shape', parents=[common],
                        help="change the tbf rate of every link, of one node's, or of one path's")
    sh.add_argument('--rate', required=True, help='e.g. 500mbit, or "none"')
    sh.add_argument('--burst', default=None)
    sh.add_argument('--node', default=None, help='only this compute node (e.g. cn3)')
    sh.add_argument('--peer', default=None,
                    help='with --node: only the path between the two nodes, both directions '
                         '("none": back to the nodes\' own rate)')
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        tb = Testbed(args.state_dir, args.name)
        if args.cmd == 'up':
            tb.log = lambda m: print(m, file=sys.stderr, flush=True)
            r = up_from_options(tb, args)
            addrs = tb.addresses()
            print(f'testbed {tb.name} up in {r["seconds"]:.2f} s: ' +
                  ', '.join(f'{n} {a}' for n, a in addrs.items()) +
                  f'; rate {tb.rate or "unshaped"}')
            print(f'SLURM_CONF={tb.slurm_conf}')
            print(f'run Slurm commands with: hpcnet testbed exec {HEAD} -- '
                  'sinfo')
            return 0
        if args.cmd == 'down':
            tb.log = lambda m: print(m, file=sys.stderr, flush=True)
            r = tb.down()
            if not r['was_up']:
                print(f'testbed {tb.name} not up (no {tb.state_file}): '
                      'nothing to do')
            else:
                print(f'testbed {tb.name} down in {r["seconds"]:.2f} s')
            return 0
        if args.cmd == 'exec':
            argv = args.argv[1:] if args.argv[:1] == ['--'] else args.argv
            if not argv:
                print('usage: hpcnet testbed exec NODE -- CMD...',
                      file=sys.stderr)
                return 2
            prefix = tb.node_prefix(args.node)
            try:
                return subprocess.run(prefix + argv, env=tb.env()).returncode
            except KeyboardInterrupt:
                return 130
        if args.cmd == 'status':
            s = tb.status()
            if args.json:
                print(json.dumps(s, indent=1))
                return 0
            print(f'testbed {s["name"]}: state dir {s["state_dir"]}'
                  f'{"" if s["complete"] else " (INCOMPLETE: run down)"}')
            print(f'SLURM_CONF={s["slurm_conf"]}  interface {s["iface"]}  '
                  f'rate {s["rate"] or "unshaped"}'
                  f'{" burst " + s["burst"] if s["burst"] else ""}  '
                  f'host backlog {s["backlog"]} packets')
            for n in s['nodes']:
                d = ', '.join(f'{p["label"]} {p["pid"]} '
                              f'{"running" if p["alive"] else "DEAD"}'
                              for p in n['daemons'])
                paths = ', '.join(f'{peer} {rate}' for peer, rate in sorted(n['paths'].items()))
                print(f'  {n["name"]:5} {n["addr"]:12} netns {n["netns"]:12} '
                      f'{n["qdisc"] or "no qdisc"}' + (f'  [{d}]' if d else '')
                      + (f'  path to {paths}' if paths else ''))
            print(s['sinfo'])
            return 0
        if args.cmd == 'shape' and args.peer:
            if not args.node:
                print('hpcnet testbed shape: --peer needs --node (the path between them)',
                      file=sys.stderr)
                return 2
            tb.shape_path(args.node, args.peer, args.rate, args.burst)
            print(f'path {args.node}-{args.peer} on testbed {tb.name}: {args.rate}')
            return 0
        if args.cmd == 'shape':
            tb.shape(args.rate, args.burst, node=args.node)
            if args.node:
                print(f'link of {args.node} on testbed {tb.name}: {args.rate}')
                return 0
            print(f'every link of testbed {tb.name}: '
                  f'{tb.rate or "unshaped"}'
                  f'{" burst " + tb.burst if tb.burst else ""}')
            return 0
    except TestbedError as e:
        print(f'hpcnet testbed {args.cmd}: {e}', file=sys.stderr)
        return 1
    return 2


if __name__ == '__main__':
    sys.exit(main())
