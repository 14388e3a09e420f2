"""`hpcnet testbed up|down|exec|status|shape`: the Slurm virtual cluster
(hpcnet.testbed); `hpcnet testbed run|baseline|accept`: the testbed up, that
command with every ReFrame session inside its head node, the testbed down."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence

from hpcnet import testbed
from hpcnet.session import runner
from hpcnet.commands import accept, baseline
from hpcnet.commands import run as run_command
from hpcnet.commands.parser import CommandParser, add_option, results_db_in_force
from hpcnet.exitcodes import Exit
from hpcnet.paths import WORK_DIR
from hpcnet.testbed.config import HEAD
from hpcnet.variables import TESTBED_STATE_DIR_ENV

#: The hpcnet commands `hpcnet testbed` runs on a testbed it brings up and
#: down, and their modules (each has add_options()).
COMMANDS_ON_TESTBED = {'run': run_command, 'baseline': baseline, 'accept': accept}


def add_up_options(parser: argparse.ArgumentParser):
    """The options of ``up`` (shared with ``hpcnet testbed run|baseline|accept``)."""
    parser.add_argument('--nodes', type=int, default=testbed.DEFAULTS.nodes,
                        help=f'compute nodes (default {testbed.DEFAULTS.nodes})')
    parser.add_argument('--leaves', type=int, default=1,
                        help='leaf switches (bridges) the compute nodes spread over evenly, in '
                             'order, joined by an unshaped uplink each to a spine where the head '
                             'node hangs; Slurm gets their topology.conf (default 1: one bridge, '
                             'no tree)')
    parser.add_argument('--rate', default=testbed.DEFAULTS.rate,
                        help=f'tbf rate of every link, or "none" '
                             f'(default {testbed.DEFAULTS.rate})')
    parser.add_argument('--burst', default=None,
                        help='tbf burst of every link (default: the smallest that measures '
                             'wire-true on this host, hpcnet.testbed.wire)')
    parser.add_argument('--softirq-priority', type=int, default=testbed.DEFAULTS.softirq_priority,
                        help='SCHED_FIFO priority of the host\'s ksoftirqd threads while up, '
                             f'0 to leave them alone (default {testbed.DEFAULTS.softirq_priority})')


def up_from_options(tb: testbed.Testbed, args) -> dict:
    return tb.up(args.nodes, args.rate, args.burst, args.softirq_priority, args.leaves)


def _parser() -> argparse.ArgumentParser:
    common = CommandParser(add_help=False)
    common.add_argument('--state-dir', default=None,
                        help='state directory (default /run/<testbed name>-testbed, '
                             f'or ${TESTBED_STATE_DIR_ENV})')
    # Not --name: that is ReFrame's (and history's) regex of check names.
    add_option(common, '--testbed-name', dest='name', metavar='NAME', formerly=('--name',),
               default=testbed.DEFAULTS.name,
               help='testbed name, prefix of its network namespaces '
                    f'(default {testbed.DEFAULTS.name})')
    p = CommandParser(
        prog='hpcnet testbed',
        description='Slurm virtual cluster in network namespaces.',
        epilog='hpcnet testbed run|baseline|accept [options]: testbed up, that hpcnet command '
               'on it (its options, and ReFrame\'s), testbed down; '
               'hpcnet testbed run --help lists them')
    sub = p.add_subparsers(dest='cmd', required=True)
    up = sub.add_parser('up', parents=[common], help='build the testbed')
    add_up_options(up)
    sub.add_parser('down', parents=[common], help='remove everything')
    ex = sub.add_parser('exec', parents=[common],
                        help='run a command on a node: exec NODE -- CMD...')
    ex.add_argument('node', help='the node (hn0, cn1, ...)')
    ex.add_argument('argv', nargs=argparse.REMAINDER, metavar='-- CMD',
                    help='the command and its arguments')
    stp = sub.add_parser('status', parents=[common], help='show the testbed')
    stp.add_argument('--json', action='store_true', help='print the status as JSON')
    sh = sub.add_parser('shape', parents=[common],
                        help="change the tbf rate of every link, of one node's, of one path's, "
                             "or of one leaf's uplink")
    sh.add_argument('--rate', required=True, help='e.g. 500mbit, or "none"')
    sh.add_argument('--burst', default=None, help="tbf burst (default: the testbed's, else "
                                                  f'{testbed.DEFAULTS.burst})')
    sh.add_argument('--node', default=None, help='only this compute node (e.g. cn3)')
    sh.add_argument('--peer', default=None,
                    help='with --node: only the path between the two nodes, both directions '
                         '("none": back to the nodes\' own rate)')
    sh.add_argument('--uplink', default=None, metavar='LEAF',
                    help='only the uplink of this leaf (e.g. leaf2) of a testbed up with '
                         '--leaves, both directions ("none": unshaped, as it came up)')
    return p


def _status_text(s: dict) -> str:
    '''`hpcnet testbed status` of ``Testbed.status()``.'''
    lines = [f'testbed {s["name"]}: state dir {s["state_dir"]}'
             f'{"" if s["complete"] else " (INCOMPLETE: run down)"}',
             f'SLURM_CONF={s["slurm_conf"]}  interface {s["iface"]}  '
             f'rate {s["rate"] or "unshaped"}'
             f'{" burst " + s["burst"] if s["burst"] else ""}  '
             f'host backlog {s["backlog"]} packets']
    for n in s['nodes']:
        d = ', '.join(f'{p["label"]} {p["pid"]} '
                      f'{"running" if p["alive"] else "DEAD"}'
                      for p in n['daemons'])
        paths = ', '.join(f'{peer} {rate}' for peer, rate in sorted(n['paths'].items()))
        lines.append(f'  {n["name"]:5} {n["addr"]:12} netns {n["netns"]:12} '
                     f'{n["qdisc"] or "no qdisc"}' + (f'  [{d}]' if d else '')
                     + (f'  path to {paths}' if paths else ''))
    for leaf in s.get('leaves', []):
        ends = '; '.join(f'{end}: {qdisc or "no qdisc"}'
                         for end, qdisc in leaf['uplink_qdisc'].items())
        lines.append(f'  {leaf["leaf"]:6} netns {leaf["netns"]:12} nodes {",".join(leaf["nodes"])}'
                     f'  uplink {leaf["uplink_rate"] or "unshaped"} ({ends})')
    lines.append(s['sinfo'])
    return '\n'.join(lines)


def testbed_main(argv: Sequence[str] | None = None) -> int:
    '''`hpcnet testbed up|down|exec|status|shape`.'''
    args = _parser().parse_args(argv)
    try:
        tb = testbed.Testbed(args.state_dir, args.name)
        if args.cmd == 'up':
            tb.log = lambda m: print(m, file=sys.stderr, flush=True)
            r = up_from_options(tb, args)
            addrs = tb.addresses()
            print(f'testbed {tb.name} up in {r["seconds"]:.2f} s: ' +
                  ', '.join(f'{n} {a}' for n, a in addrs.items()) +
                  f'; rate {tb.rate or "unshaped"}')
            if tb.leaves:
                print('switch tree: ' + '; '.join(f'{leaf} {",".join(nodes)}'
                                                  for leaf, nodes in tb.leaves.items())
                      + f' under the spine (with {HEAD}); {tb.topology_conf}')
            print(f'links {r["wire"]}')
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
            status = tb.status()
            print(json.dumps(status, indent=1) if args.json else _status_text(status))
            return 0
        if args.cmd == 'shape' and args.uplink:
            if args.node or args.peer:
                print('hpcnet testbed shape: --uplink shapes a leaf\'s uplink alone (valid: '
                      '--uplink, or --node [--peer])', file=sys.stderr)
                return 2
            tb.shape_uplink(args.uplink, args.rate, args.burst)
            print(f'uplink of {args.uplink} on testbed {tb.name}: {args.rate}')
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
    except testbed.TestbedUsageError as e:
        print(f'hpcnet testbed {args.cmd}: {e}', file=sys.stderr)
        return Exit.USAGE
    except testbed.TestbedError as e:
        print(f'hpcnet testbed {args.cmd}: {e}', file=sys.stderr)
        return 1
    return Exit.USAGE



def _on_testbed_parser(command: str, up_options: bool) -> CommandParser:
    """The parser of `hpcnet testbed COMMAND`: the testbed's options (with
    ``up_options``), the command's, and ReFrame's in its --help."""
    p = CommandParser(prog=f'hpcnet testbed {command}',
                      description=f'testbed up, hpcnet {command} on it, testbed down')
    if up_options:
        add_up_options(p)
    COMMANDS_ON_TESTBED[command].add_options(p)
    if command == 'run':
        # `hpcnet paper` reads the testbed's run as reports/testbed-latest.json.
        p.set_defaults(report_name='testbed')
    return p


def testbed_parsers() -> list:
    """Every parser `hpcnet testbed` parses with: hpcnet.cli's parser hands
    the testbed its arguments unparsed, so its --help tree is here."""
    return [_parser(), *(_on_testbed_parser(command, True) for command in COMMANDS_ON_TESTBED)]


def parse_on_testbed(command: str, argv: list, up_options: bool = False) -> argparse.Namespace:
    """The arguments of `hpcnet COMMAND` (run, baseline or accept) run on the
    testbed: what that command does not know goes to reframe."""
    inner, extra = _on_testbed_parser(command, up_options).parse_known_args(argv)
    inner.reframe_args = ['--system', run_command.TESTBED_SYSTEM, *extra]
    return inner


def run_on(tb, inner: argparse.Namespace) -> int:
    """On the testbed ``tb``, which is up, ReFrame inside its head node: the
    command parse_on_testbed() gave."""
    with runner.launched_through(tb.head_prefix(cwd=str(WORK_DIR)), tb.env), \
            results_db_in_force(inner):
        return inner.func(inner)


def run(args) -> int:
    argv = [*args.testbed_args, *args.reframe_args]
    command = argv[0] if argv else None
    if command not in COMMANDS_ON_TESTBED:
        return testbed_main(argv)
    # The testbed's options, the command's, and what neither knows goes to
    # reframe (e.g. -n NAME, -p ENV).
    opts = parse_on_testbed(command, argv[1:], up_options=True)
    try:
        tb = testbed.Testbed()
        tb.log = lambda m: print(m, file=sys.stderr, flush=True)
        runner.say(f'testbed links {up_from_options(tb, opts)["wire"]}')
    except testbed.TestbedUsageError as err:
        runner.say(f'testbed {command}: {err}')
        return Exit.USAGE
    except testbed.TestbedError as err:
        runner.say(f'testbed did not come up: {err}')
        return 1
    no_roce = (f'RoCE NOT JUDGED: testbed:roce is not declared: {tb.rdma_absent_reason}'
               if tb.rdma_absent_reason else None)
    try:
        if no_roce:
            runner.say(no_roce)
        return run_on(tb, opts)
    finally:
        tb.down()
        runner.say('testbed down')
        if no_roce:
            runner.say(no_roce)


def add_parser(sub) -> None:
    p = sub.add_parser('testbed', help='the Slurm virtual cluster: up|down|exec|status|shape, '
                                       'and run|baseline|accept on it', add_help=False)
    p.add_argument('testbed_args', nargs=argparse.REMAINDER, metavar='COMMAND ...',
                   help='up|down|exec|status|shape|run|baseline|accept and its options '
                        '(hpcnet testbed --help)')
    # The options hpcnet does not know are the testbed's, or those of the
    # command run on it.
    p.set_defaults(func=run, takes_reframe_args=True)
