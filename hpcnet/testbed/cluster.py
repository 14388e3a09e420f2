"""The testbed cluster: ``Testbed`` builds it (up, hpcnet.testbed.build),
changes its links (shape), runs commands in its nodes (exec) and removes it
(down)."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Sequence

from hpcnet.variables import (TESTBED_NODES_ENV, TESTBED_RATE_ENV, TESTBED_RDMA_ENV,
                              TESTBED_STATE_DIR_ENV, TESTBED_TOPOLOGY_ENV, TESTBED_WIRE_ENV)
from hpcnet.testbed import softirq, tree
from hpcnet.testbed.config import (CMD_TIMEOUT, DEFAULTS, HEAD, HOST_OFFSET, IFACE, NETNS_DIR,
                                   SUBNET_PREFIX, TestbedError, TestbedUsageError,
                                   default_state_dir, default_template_dir, rate_bps)
from hpcnet.testbed.build import Build
from hpcnet.testbed.daemons import Daemons
from hpcnet.testbed.shaping import Shaping
from hpcnet.testbed.processes import alive, fmt_cmd
from hpcnet.testbed.teardown import Teardown


class Testbed(Build, Daemons, Teardown, Shaping):
    """One virtual cluster, identified by its name and state directory.

    ``name`` prefixes the network namespaces (``<name>-hn0``, ``<name>-cn1``,
    ``<name>-br``, or with a switch tree ``<name>-spine``, ``<name>-leaf1``
    ...), so two testbeds of different names can coexist.
    """

    __test__ = False

    def __init__(self, state_dir=None, name: str = DEFAULTS.name,
                 template_dir=None):
        if not re.fullmatch(r'[a-z][a-z0-9]{0,9}', name):
            raise TestbedUsageError(f'bad testbed name {name!r}: '
                                    'use 1-10 lowercase letters/digits')
        self.name = name
        self.state_dir = Path(os.path.abspath(state_dir)) if state_dir \
            else default_state_dir(name)
        # Its paths go into slurm.conf, which has no quoting.
        if not re.fullmatch(r'[A-Za-z0-9._/+-]+', str(self.state_dir)):
            raise TestbedUsageError(f'testbed state directory {str(self.state_dir)!r} '
                                    f'(--state-dir or {TESTBED_STATE_DIR_ENV}): use letters, '
                                    'digits and . _ - + / only; slurm.conf cannot carry the others')
        self.template_dir = Path(template_dir) if template_dir else \
            default_template_dir()
        self.state_file = self.state_dir / 'state.json'
        self.ns_dir = self.state_dir / 'ns'
        self.slurm_conf = self.state_dir / 'etc' / 'slurm.conf'
        self.bin_dir = self.state_dir / 'bin'
        self.iface = IFACE
        self._state: dict | None = None
        self.log = lambda msg: None       # set to print for the CLI

    # -- state ------------------------------------------------------------

    def load(self) -> dict | None:
        try:
            with open(self.state_file) as f:
                self._state = json.load(f)
        except FileNotFoundError:
            self._state = None
        except (OSError, ValueError) as e:
            raise TestbedError(f'cannot read {self.state_file}: {e}')
        return self._state

    def _save(self):
        tmp = self.state_file.with_suffix('.tmp')
        with open(tmp, 'w') as f:
            json.dump(self._state, f, indent=1)
        os.replace(tmp, self.state_file)

    def _record(self, kind: str, **kw):
        self._state['resources'].append(dict(kind=kind, **kw))
        self._save()

    @property
    def state(self) -> dict:
        st = self._state if self._state is not None else self.load()
        if st is None:
            raise TestbedError(f'testbed not up (no {self.state_file})')
        return st

    def is_up(self) -> bool:
        st = self.load()
        return bool(st and st.get('complete'))

    # -- names, paths, addresses -------------------------------------------

    def netns(self, node: str) -> str:
        return f'{self.name}-{node}'

    @property
    def bridge_netns(self) -> str:
        """The one bridge's namespace of a testbed without a tree."""
        return f'{self.name}-br'

    def switch_netns(self, node: str) -> str:
        """The namespace of the bridge ``node``'s cable plugs into."""
        for n in self.state['nodes']:
            if n['name'] == node:
                return n.get('switch', self.bridge_netns)
        raise TestbedError(f'unknown node {node!r} (nodes: {", ".join(self.nodes())})')

    @property
    def leaves(self) -> dict[str, list[str]] | None:
        """{leaf: its compute nodes} of the switch tree; None: one bridge."""
        found = self.state.get('tree')
        return {leaf: each['nodes'] for leaf, each in found['leaves'].items()} if found else None

    @property
    def topology_conf(self) -> Path:
        """Slurm's topology.conf, beside slurm.conf (written with a tree only)."""
        return self.slurm_conf.with_name('topology.conf')

    @staticmethod
    def address_of(index: int) -> str:
        """Address of node ``index`` (0 = head, i = cn<i>)."""
        return f'{SUBNET_PREFIX}.{HOST_OFFSET + index}'

    def nodes(self) -> list[str]:
        """All node names, head first."""
        return [n['name'] for n in self.state['nodes']]

    def compute_nodes(self) -> list[str]:
        return [n['name'] for n in self.state['nodes']
                if n['role'] == 'compute']

    def addresses(self) -> dict[str, str]:
        return {n['name']: n['addr'] for n in self.state['nodes']}

    @property
    def head(self) -> str:
        return HEAD

    @property
    def rate(self) -> str | None:
        """The tbf rate configured on every link (None: unshaped)."""
        return self.state.get('rate')

    @property
    def burst(self) -> str | None:
        return self.state.get('burst')

    def node_prefix(self, node: str, cwd=None) -> list[str]:
        """Command prefix running a command inside ``node``'s namespaces.

        The mount namespace resets the working directory, so it is given
        explicitly (default: the current one; the filesystem is shared).
        """
        if node not in self.nodes():
            raise TestbedError(f'unknown node {node!r} '
                               f'(nodes: {", ".join(self.nodes())})')
        return ['nsenter', f'--net={NETNS_DIR / self.netns(node)}',
                f'--uts={self.ns_dir / (node + ".uts")}',
                f'--mount={self.ns_dir / (node + ".mnt")}',
                f'--wd={os.path.abspath(cwd or os.getcwd())}', '--']

    def head_prefix(self, cwd=None) -> list[str]:
        """Command prefix running a command on the head node (Slurm client)."""
        return self.node_prefix(HEAD, cwd)

    def env(self, base: dict | None = None) -> dict[str, str]:
        """Environment for Slurm clients: SLURM_CONF, and the sacct wrapper
        (``sacct --completion``) first on PATH."""
        base = dict(os.environ if base is None else base)
        base['SLURM_CONF'] = str(self.slurm_conf)
        # What config/systems/testbed.py builds the partitions from.
        base[TESTBED_NODES_ENV] = str(len(self.compute_nodes()))
        if self.rate:
            base[TESTBED_RATE_ENV] = str(rate_bps(self.rate))
        else:
            base.pop(TESTBED_RATE_ENV, None)
        proof = self.state.get('wire') or {}
        if proof.get('wire_true') and proof.get('as_checks_measure'):
            base[TESTBED_WIRE_ENV] = str(proof['as_checks_measure'])
        else:
            base.pop(TESTBED_WIRE_ENV, None)
        if self.leaves:
            base[TESTBED_TOPOLOGY_ENV] = str(self.topology_conf)
        else:
            base.pop(TESTBED_TOPOLOGY_ENV, None)
        if self.rdma_device:
            base[TESTBED_RDMA_ENV] = self.rdma_device
        else:
            base.pop(TESTBED_RDMA_ENV, None)
        path = base.get('PATH', os.defpath)
        if not path.startswith(str(self.bin_dir) + os.pathsep):
            base['PATH'] = f'{self.bin_dir}{os.pathsep}{path}'
        return base

    def run(self, node: str, argv: Sequence[str], timeout=CMD_TIMEOUT,
            check=False, capture=True, cwd=None, env=None,
            **kw) -> subprocess.CompletedProcess:
        """Run ``argv`` inside ``node`` (bounded by ``timeout``)."""
        full = self.node_prefix(node, cwd) + list(argv)
        if capture:
            kw.setdefault('stdout', subprocess.PIPE)
            kw.setdefault('stderr', subprocess.PIPE)
        res = subprocess.run(full, timeout=timeout, text=True,
                             env=self.env(env), stdin=subprocess.DEVNULL,
                             **kw)
        if check and res.returncode != 0:
            raise TestbedError(f'{fmt_cmd(argv)} on {node} exited with '
                               f'{res.returncode}: {(res.stderr or "").strip()}')
        return res

    @property
    def rdma_device(self) -> str | None:
        """The nodes' RDMA device on eth0, or None (see rdma_absent_reason)."""
        return (self.state.get('rdma') or {}).get('device')

    @property
    def rdma_absent_reason(self) -> str | None:
        return (self.state.get('rdma') or {}).get('why')

    # -- status, shape ----------------------------------------------------

    def status(self) -> dict:
        st = self.state
        nodes = []
        for n in st['nodes']:
            procs = [dict(pid=r['pid'], label=r['label'],
                          alive=alive(r['pid'], r['start']))
                     for r in st['resources']
                     if r['kind'] == 'proc' and r['node'] == n['name']]
            qd = subprocess.run(['tc', '-n', n['netns'], '-d', 'qdisc', 'show',
                                 'dev', IFACE], text=True,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, timeout=10)
            nodes.append(dict(n, daemons=procs, paths=self.path_rates(n['name']),
                              qdisc=' '.join(qd.stdout.split())
                              if qd.stdout.strip() else ''))
        sinfo = ''
        if st.get('complete'):
            r = self.run(HEAD, ['sinfo', '-N', '-o', '%N %P %T %C'],
                         timeout=15, cwd='/')
            sinfo = (r.stdout + r.stderr).strip()
        return {'name': st['name'], 'state_dir': str(self.state_dir),
                'leaves': self._leaf_status(),
                'complete': st.get('complete', False),
                'slurm_conf': str(self.slurm_conf), 'iface': IFACE,
                'rate': st.get('rate'), 'burst': st.get('burst'),
                'backlog': int(softirq.BACKLOG_SYSCTL.read_text()),
                'nodes': nodes, 'sinfo': sinfo}

    def _leaf_status(self) -> list[dict]:
        """Each leaf of the tree: its namespace, nodes, uplink rate (None:
        unshaped) and the qdisc of both uplink ends ([] without a tree)."""
        found = self.state.get('tree')
        if not found:
            return []
        rates = self.state.get('uplink_rates', {})
        out = []
        for leaf, each in found['leaves'].items():
            ends = {}
            for netns, dev in ((found['spine'], tree.port_of(leaf)),
                               (each['netns'], tree.UPLINK_DEV)):
                qd = subprocess.run(['tc', '-n', netns, '-d', 'qdisc', 'show', 'dev', dev],
                                    text=True, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, timeout=10)
                ends[f'{netns}/{dev}'] = ' '.join(qd.stdout.split())
            out.append({'leaf': leaf, 'netns': each['netns'], 'nodes': each['nodes'],
                        'uplink_rate': rates.get(leaf), 'uplink_qdisc': ends})
        return out
