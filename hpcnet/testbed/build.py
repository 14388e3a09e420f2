"""Building a testbed, step by step (``up``): each step records what it
makes in the testbed's state before the next one runs, so a step that fails
is undone by the teardown (hpcnet.testbed.teardown)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Sequence

from hpcnet.templates import render
from hpcnet.testbed import softirq, tree, wire
from hpcnet.testbed.config import (BRIDGE, CMD_TIMEOUT, DEFAULTS, HEAD, IFACE, MAX_NODES,
                                   NETMASK_BITS, NETNS_DIR, REQUIRED_TOOLS, StepError,
                                   TestbedError, burst_bytes, rate_bps)
from hpcnet.testbed.processes import fmt_cmd
from hpcnet.variables import TESTBED_TEMPLATES_ENV


class Build:
    """The ``up`` of hpcnet.testbed.cluster.Testbed (a mixin: it writes the
    testbed's state, its state directory and its namespaces)."""

    STEPS = ('check prerequisites', 'probe namespaces', 'create state dir',
             'private namespace dir', 'create network namespaces',
             'create node namespaces', 'create bridge', 'connect nodes', 'connect uplinks',
             'probe rdma', 'shape links', 'prioritise softirq', 'size backlog',
             'prove the wire', 'write configuration',
             'start munged',
             'start slurmctld', 'start slurmd', 'wait for nodes')

    def up(self, nodes: int = DEFAULTS.nodes, rate: str | None = DEFAULTS.rate,
           burst: str | None = None,
           softirq_priority: int = DEFAULTS.softirq_priority, leaves: int = 1) -> dict:
        """Build the testbed; ``burst`` None: the smallest tbf bucket that
        proves the links wire-true (hpcnet.testbed.wire); ``leaves`` > 1: the
        nodes spread over that many leaf bridges under a spine
        (hpcnet.testbed.tree). Returns
        {'seconds': ..., 'steps': {...}, 'wire': what the proof found}."""
        if not 0 <= softirq_priority <= 99:
            raise TestbedError(f'--softirq-priority {softirq_priority}: valid: 0 (leave '
                               'ksoftirqd alone) or a SCHED_FIFO priority 1..99')
        if rate in ('none', ''):
            rate = None
        if rate:            # bad values are one clear error before anything is made
            rate_bps(rate)
            if burst is not None:
                burst_bytes(burst)
        if not 1 <= nodes <= MAX_NODES:
            raise TestbedError(f'--nodes must be in 1..{MAX_NODES}')
        tree.check_leaves(leaves, nodes)
        if os.geteuid() != 0:
            raise TestbedError('hpcnet testbed needs root (network, UTS and '
                               'mount namespaces, mounts, daemons)')
        if self.state_file.exists():
            raise TestbedError(f'testbed already up (state dir '
                               f'{self.state_dir}): run down first')
        leftovers = [p.name for p in NETNS_DIR.glob(f'{self.name}-*')] \
            if NETNS_DIR.is_dir() else []
        if leftovers:
            raise TestbedError(
                f'network namespaces {", ".join(sorted(leftovers))} already '
                f'exist (another testbed named {self.name!r} with another '
                'state dir, or leftovers): run down for it first')
        if self.state_dir.exists() and (not self.state_dir.is_dir()
                                        or any(self.state_dir.iterdir())):
            raise TestbedError(f'state dir {self.state_dir} exists and is '
                               'not an empty directory')

        self._nodes_wanted = nodes
        self._leaves_wanted = leaves
        self._state = None
        timings = {}
        t0 = time.monotonic()
        for step in self.STEPS:
            method = getattr(self, '_step_' + step.replace(' ', '_'))
            ts = time.monotonic()
            self.log(f'[up] {step}')
            try:
                if step == 'shape links':
                    method(rate, burst or DEFAULTS.burst)
                elif step == 'prove the wire':
                    method(rate, burst)
                elif step == 'prioritise softirq':
                    method(softirq_priority)
                else:
                    method()
            except BaseException as e:
                err = e if isinstance(e, StepError) else StepError(
                    step, f'{type(e).__name__}: {e}')
                problems = []
                if self._state is not None:
                    self.log(f'[up] step {step!r} failed: undoing')
                    try:
                        problems = self._teardown()
                    except Exception as te:  # pragma: no cover
                        problems = [f'teardown: {te}']
                if isinstance(e, KeyboardInterrupt):
                    raise
                raise StepError(step, err.detail + (
                    '\n(undone: nothing left)' if not problems else
                    '\n(undo problems: ' + '; '.join(problems) + ')')) from e
            timings[step] = round(time.monotonic() - ts, 3)
        total = round(time.monotonic() - t0, 3)
        self._state['complete'] = True
        self._state['up_seconds'] = total
        self._save()
        return {'seconds': total, 'steps': timings, 'wire': self._state['wire_said']}

    def _cmd(self, step: str, argv: Sequence[str], timeout=CMD_TIMEOUT,
             input=None, env=None) -> str:
        try:
            res = subprocess.run(list(argv), input=input, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 timeout=timeout, env=env,
                                 stdin=None if input is not None
                                 else subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise StepError(step, f'{fmt_cmd(argv)}: timed out after '
                                  f'{timeout} s')
        except OSError as e:
            raise StepError(step, f'{fmt_cmd(argv)}: {e}')
        if res.returncode != 0:
            raise StepError(step, f'{fmt_cmd(argv)} exited with '
                                  f'{res.returncode}: {res.stderr.strip()}')
        return res.stdout

    def _in_node(self, node: str) -> list[str]:
        """nsenter prefix usable while the node is being built."""
        return ['nsenter', f'--net={NETNS_DIR / self.netns(node)}',
                f'--uts={self.ns_dir / (node + ".uts")}',
                f'--mount={self.ns_dir / (node + ".mnt")}', '--wd=/', '--']

    def _in_net(self, netns: str) -> list[str]:
        return ['nsenter', f'--net={NETNS_DIR / netns}', '--']

    def _step_check_prerequisites(self):
        missing = [t for t in REQUIRED_TOOLS if not shutil.which(t)]
        if missing:
            raise StepError('check prerequisites',
                            f'not installed: {", ".join(missing)}')
        if not self.template_dir.is_dir():
            raise StepError('check prerequisites',
                            f'template dir {self.template_dir} not found '
                            f'(set {TESTBED_TEMPLATES_ENV})')
        out = self._cmd('check prerequisites', ['slurmd', '-C'])
        hw = dict(re.findall(r'(\w+)=(\S+)', out.splitlines()[0]))
        self._hw = {k: hw[k] for k in ('CPUs', 'Boards', 'SocketsPerBoard',
                                       'CoresPerSocket', 'ThreadsPerCore')
                    if k in hw}
        if 'CPUs' not in self._hw:
            self._hw = {'CPUs': str(os.cpu_count() or 1)}

    def _step_probe_namespaces(self):
        self._cmd('probe namespaces',
                  ['unshare', '--net', '--uts', '--mount', 'true'],
                  timeout=10)

    def _step_create_state_dir(self):
        # munged refuses a socket whose every parent is not world-searchable.
        for parent in self.state_dir.parents:
            if parent.exists() and not os.stat(parent).st_mode & 0o001:
                raise StepError('create state dir', f'{parent} is not '
                                'world-searchable (o+x), which munged requires '
                                'of its socket path: choose another --state-dir')
        created = not self.state_dir.exists()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.state_dir, 0o755)
        self._state = {
            'name': self.name, 'state_dir': str(self.state_dir),
            'state_dir_created': created, 'complete': False,
            'netns_dir_created': False, 'nodes': [], 'rate': None,
            'burst': None, 'iface': IFACE, 'resources': [], 'tree': None, 'uplink_rates': {},
            'started': time.strftime('%Y-%m-%dT%H:%M:%S%z'),
        }
        self._save()
        self._plan_nodes()
        for sub, mode in (('ns', 0o755), ('etc', 0o755), ('bin', 0o755),
                          ('log', 0o755), ('run', 0o755), ('slurmd', 0o755),
                          ('tmpfs', 0o1777), ('slurmctld', 0o755),
                          ('munge', 0o755), ('munge-key', 0o700)):
            d = self.state_dir / sub
            d.mkdir(mode=mode)
            os.chmod(d, mode)
        for node in self.nodes():
            nd = self.state_dir / 'nodes' / node
            for sub in ('spool', 'tmp', 'cgroup'):
                (nd / sub).mkdir(parents=True)
            os.chmod(nd / 'tmp', 0o1777)
        self._save()

    def _plan_nodes(self):
        """The nodes, their addresses and each one's switch: the one bridge;
        with a tree the spine for the head node (every leaf then reaches
        Slurm's controller through its own uplink alike) and its leaf for
        each compute node."""
        st = self._state
        st['nodes'] = [
            {'name': HEAD, 'role': 'head', 'addr': self.address_of(0),
             'netns': self.netns(HEAD)}] + [
            {'name': f'cn{i}', 'role': 'compute', 'addr': self.address_of(i),
             'netns': self.netns(f'cn{i}')} for i in range(1, self._nodes_wanted + 1)]
        if self._leaves_wanted == 1:
            for n in st['nodes']:
                n['switch'] = self.bridge_netns
            return
        spine = self.netns(tree.SPINE)
        placed = tree.spread(self.compute_nodes(), self._leaves_wanted)
        st['tree'] = {'spine': spine, 'leaves': {
            leaf: {'netns': self.netns(leaf), 'nodes': nodes} for leaf, nodes in placed.items()}}
        switch_of = {node: self.netns(leaf) for leaf, nodes in placed.items() for node in nodes}
        for n in st['nodes']:
            n['switch'] = switch_of.get(n['name'], spine)

    def _switch_namespaces(self) -> list[str]:
        """The bridges' namespaces: the one bridge, or the spine and the leaves."""
        found = self.state.get('tree')
        if not found:
            return [self.bridge_netns]
        return [found['spine']] + [each['netns'] for each in found['leaves'].values()]

    def _step_private_namespace_dir(self):
        step = 'private namespace dir'
        # unshare --mount=FILE refuses a FILE on a shared mount.
        self._cmd(step, ['mount', '--bind', self.ns_dir, self.ns_dir])
        self._record('mount', path=str(self.ns_dir))
        self._cmd(step, ['mount', '--make-private', self.ns_dir])

    def _step_create_network_namespaces(self):
        step = 'create network namespaces'
        if not NETNS_DIR.exists():
            self._state['netns_dir_created'] = True
            self._save()
        for ns in self._switch_namespaces() + [self.netns(n) for n in self.nodes()]:
            self._cmd(step, ['ip', 'netns', 'add', ns])
            self._record('netns', name=ns)
            # No IPv6 chatter (router solicitations, DAD) on the links.
            self._cmd(step, self._in_net(ns) + [
                'sh', '-c', 'for f in /proc/sys/net/ipv6/conf/all/disable_ipv6 '
                '/proc/sys/net/ipv6/conf/default/disable_ipv6; do '
                '[ -e $f ] && echo 1 > $f; done; true'])
            self._cmd(step, ['ip', '-n', ns, 'link', 'set', 'lo', 'up'])

    def _step_create_node_namespaces(self):
        step = 'create node namespaces'
        script_t = (self.template_dir / 'node-setup.sh.in').read_text()
        hosts = Path('/etc/hosts').read_text() if Path('/etc/hosts').exists() \
            else '127.0.0.1 localhost\n'
        hosts += f'\n# hpcnet testbed {self.name}\n' + ''.join(
            f'{n["addr"]} {n["name"]}\n' for n in self.state['nodes'])
        (self.state_dir / 'etc' / 'hosts').write_text(hosts)
        for node in self.nodes():
            uts = self.ns_dir / f'{node}.uts'
            mnt = self.ns_dir / f'{node}.mnt'
            uts.touch()
            mnt.touch()
            script = render(script_t, {
                'NODE': node, 'NS_DIR': self.ns_dir,
                'NODE_DIR': self.state_dir / 'nodes' / node,
                'STATE_DIR': self.state_dir}, shell=True, source='node-setup.sh.in')
            # Record first: unshare may have persisted one of them before a
            # failure of the script; teardown tolerates unmounted files.
            self._record('nsfile', path=str(uts))
            self._record('nsfile', path=str(mnt))
            self._cmd(step, self._in_net(self.netns(node)) + [
                'unshare', f'--uts={uts}', f'--mount={mnt}',
                '--propagation', 'private', '--', 'sh', '-ec', script])

    def _step_create_bridge(self):
        step = 'create bridge'
        for br in self._switch_namespaces():
            self._cmd(step, ['ip', '-n', br, 'link', 'add', BRIDGE, 'type',
                             'bridge', 'stp_state', '0', 'forward_delay', '0'])
            self._cmd(step, ['ip', '-n', br, 'link', 'set', BRIDGE, 'up'])

    def _step_connect_nodes(self):
        step = 'connect nodes'
        for n in self.state['nodes']:
            node, ns, br = n['name'], n['netns'], n['switch']
            port = tree.port_of(node)
            # Created inside the bridge namespace, peer straight into the
            # node's: no interface named eth0 ever appears in the root one.
            self._cmd(step, ['ip', '-n', br, 'link', 'add', port, 'type',
                             'veth', 'peer', 'name', IFACE, 'netns', ns])
            self._record('veth', netns=br, dev=port)
            self._cmd(step, ['ip', '-n', br, 'link', 'set', port, 'master',
                             BRIDGE, 'up'])
            self._cmd(step, ['ip', '-n', ns, 'addr', 'add',
                             f'{n["addr"]}/{NETMASK_BITS}', 'dev', IFACE])
            self._cmd(step, ['ip', '-n', ns, 'link', 'set', IFACE, 'up'])

    def _step_connect_uplinks(self):
        """One veth pair per leaf, a port of the spine's bridge and of the
        leaf's: a tree without loops, so no spanning tree is needed."""
        step = 'connect uplinks'
        found = self.state.get('tree')
        if not found:
            return
        spine = found['spine']
        for leaf, each in found['leaves'].items():
            port = tree.port_of(leaf)
            self._cmd(step, ['ip', '-n', spine, 'link', 'add', port, 'type', 'veth', 'peer',
                             'name', tree.UPLINK_DEV, 'netns', each['netns']])
            self._record('veth', netns=spine, dev=port, uplink=leaf)
            for netns, dev in ((spine, port), (each['netns'], tree.UPLINK_DEV)):
                self._cmd(step, ['ip', '-n', netns, 'link', 'set', dev, 'master', BRIDGE, 'up'])

    def _step_probe_rdma(self):
        """Which RDMA device (e.g. Soft-RoCE rxe0 that an admin bound to the
        nodes' eth0) the nodes have: the roce partition is declared only
        then; otherwise the reason is kept and `hpcnet testbed run` says it."""
        node = self.compute_nodes()[0]
        res = subprocess.run([*self._in_net(self.netns(node)), 'rdma', '-j', 'link', 'show'],
                             text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, timeout=CMD_TIMEOUT)
        if res.returncode != 0:
            why = res.stderr.strip() or f'exit code {res.returncode}'
            self._state['rdma'] = {'device': None,
                                   'why': f'`rdma link show` on {node}: {why} (no RDMA in this '
                                          'kernel: no rdma_rxe for Soft-RoCE)'}
            return
        links = [link for link in json.loads(res.stdout or '[]')
                 if link.get('netdev') == IFACE and link.get('state') == 'ACTIVE']
        if not links:
            self._state['rdma'] = {'device': None,
                                   'why': f'no active RDMA link on {node}\'s {IFACE} '
                                          f'(e.g. rdma link add rxe0 type rxe netdev {IFACE})'}
            return
        self._state['rdma'] = {'device': links[0]['ifname'].split('/')[0], 'why': None}

    def _step_shape_links(self, rate, burst):
        if rate:
            # Each node's eth0 shapes what it sends: every direction of every
            # path crosses exactly one shaper, as a frame crosses one wire.
            for node in self.nodes():
                self._tc('shape links', self.netns(node), IFACE, rate, burst)
        self._state['rate'] = rate
        self._state['burst'] = burst if rate else None
        self._state['node_rates'] = {}
        self._state['path_rates'] = {}
        self._state['uplink_rates'] = {}
        self._save()

    def _step_prove_the_wire(self, rate, burst):
        if not rate:
            self._state['wire'] = None
            self._state['wire_said'] = 'links not shaped: no wire to prove'
            return

        def reshape(each):
            for node in self.nodes():
                self._tc('prove the wire', self.netns(node), IFACE, rate, each, verb='replace')
        chosen, proof, said = wire.prove(self, rate, burst, reshape)
        if self.leaves:
            across, said_across = wire.cross_leaf(self, rate, chosen)
            self._state['wire_cross_leaf'] = across.state() if across else None
            said += '; ' + said_across
        self._state['burst'] = chosen
        self._state['wire'] = proof.state() if proof else None
        self._state['wire_said'] = said
        self._save()
        self.log(f'[up] {said}')

    def _step_prioritise_softirq(self, priority):
        if priority:
            self._record('softirq', priority=priority)
            softirq.hold(str(self.state_dir), priority)

    def _step_size_backlog(self):
        packets = softirq.backlog_needed(self._nodes_wanted)
        self._record('backlog', packets=packets)
        softirq.hold_backlog(str(self.state_dir), packets)

    def _step_write_configuration(self):
        step = 'write configuration'
        sd = self.state_dir
        st = self.state
        hw = ' '.join(f'{k}={v}' for k, v in self._hw.items())
        lines = ''.join(
            f'NodeName={n["name"]} NodeAddr={n["addr"]} '
            f'NodeHostname={n["name"]} {hw} State=UNKNOWN\n'
            for n in st['nodes'] if n['role'] == 'compute')
        computes = self.compute_nodes()
        values = {'NAME': self.name, 'HEAD': HEAD,
                  'HEAD_ADDR': st['nodes'][0]['addr'],
                  'STATE_DIR': sd, 'MUNGE_SOCKET': sd / 'munge' / 'munge.socket',
                  'NODE_LINES': lines.rstrip('\n'),
                  'COMPUTE_NODES': ','.join(computes),
                  # Slurm's tree plugin only where there is a tree: with one
                  # switch it would only ask for a topology.conf.
                  'TOPOLOGY_PLUGIN': 'TopologyPlugin=topology/tree' if self.leaves
                  else '# One bridge: no switch tree (up --leaves 1).'}
        try:
            text = render((self.template_dir / 'slurm.conf.in').read_text(),
                           values)
            self.slurm_conf.write_text(text)
            if self.leaves:
                self.topology_conf.write_text(tree.topology_conf(self.leaves))
            shutil.copyfile(self.template_dir / 'mpi.conf', self.slurm_conf.with_name('mpi.conf'))
            (sd / 'etc' / 'plugstack.conf').write_text('')
            sacct = shutil.which('sacct')
            wrapper = self.bin_dir / 'sacct'
            wrapper.write_text(render(
                (self.template_dir / 'sacct.in').read_text(),
                {'SACCT': sacct, 'SLURM_CONF': self.slurm_conf}, shell=True, source='sacct.in'))
            os.chmod(wrapper, 0o755)
            key = sd / 'munge-key' / 'munge.key'
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, 'wb') as f:
                f.write(os.urandom(1024))
        except OSError as e:
            raise StepError(step, str(e))
