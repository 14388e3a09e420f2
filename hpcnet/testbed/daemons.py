"""The testbed's daemons: munged, slurmctld and one slurmd per node,
started in their node's namespaces and waited for; and the slurmd fault
(killed, started again) the fault tests inject."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from hpcnet.testbed.config import HEAD, READY_TIMEOUT, STOP_WAIT, StepError, TestbedError
from hpcnet.testbed.processes import CHILDREN, alive, fmt_cmd, proc_stat


class Daemons:
    """The daemon steps of hpcnet.testbed.cluster.Testbed (a mixin: it uses
    the testbed's state directory, node prefixes and resource record)."""

    def _log_tail(self, path: Path, lines: int = 15) -> str:
        try:
            text = path.read_text(errors='replace').splitlines()
        except OSError:
            return ''
        return '\n'.join(text[-lines:])

    def _spawn(self, step: str, node: str, label: str, argv: list[str]) -> int:
        out = self.state_dir / 'log' / f'{label}.out'
        with open(out, 'ab') as f:
            try:
                proc = subprocess.Popen(
                    self._in_node(node) + argv, stdin=subprocess.DEVNULL,
                    stdout=f, stderr=subprocess.STDOUT,
                    start_new_session=True, env=self.env())
            except OSError as e:
                raise StepError(step, f'{fmt_cmd(argv)}: {e}')
        CHILDREN[proc.pid] = proc
        st = proc_stat(proc.pid)
        self._record('proc', pid=proc.pid, start=st[1] if st else None,
                     label=label, node=node, argv=argv)
        return proc.pid

    def _require_alive(self, step, label, pid, log):
        '''A daemon that exited ends the step with the tail of its log.'''
        if not alive(pid):
            raise StepError(step, f'{label} (pid {pid}) exited; log {log}:\n{self._log_tail(log)}')

    def _wait_for(self, step, what, pred, pid, label, log, timeout):
        deadline = time.monotonic() + timeout
        while True:
            if pred():
                return
            self._require_alive(step, label, pid, log)
            if time.monotonic() > deadline:
                raise StepError(step, f'{what}: not after {timeout} s; '
                                      f'log {log}:\n{self._log_tail(log)}')
            time.sleep(0.1)

    def _step_start_munged(self):
        step = 'start munged'
        sd = self.state_dir
        sock = sd / 'munge' / 'munge.socket'
        pid = self._spawn(step, HEAD, 'munged', [
            'munged', '--foreground', '--force', f'--socket={sock}',
            f'--key-file={sd / "munge-key" / "munge.key"}',
            f'--pid-file={sd / "run" / "munged.pid"}',
            f'--seed-file={sd / "munge-key" / "munged.seed"}',
            f'--log-file={sd / "log" / "munged.log"}'])
        self._wait_for(step, f'munge socket {sock}', sock.exists, pid,
                       'munged', sd / 'log' / 'munged.log', 10)

    def _slurm_ok(self, argv, node=HEAD) -> str | None:
        try:
            res = subprocess.run(self._in_node(node) + argv, text=True,
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL,
                                 stdin=subprocess.DEVNULL,
                                 timeout=10, env=self.env())
        except subprocess.TimeoutExpired:
            return None
        return res.stdout if res.returncode == 0 else None

    def _step_start_slurmctld(self):
        step = 'start slurmctld'
        pid = self._spawn(step, HEAD, 'slurmctld', ['slurmctld', '-D', '-i'])
        self._wait_for(step, 'scontrol ping',
                       lambda: 'UP' in (self._slurm_ok(['scontrol', 'ping'])
                                        or ''),
                       pid, 'slurmctld', self.state_dir / 'log' /
                       'slurmctld.log', READY_TIMEOUT)

    def _step_start_slurmd(self):
        self._slurmd_pids = {}
        for node in self.compute_nodes():
            self._slurmd_pids[node] = self._spawn(
                'start slurmd', node, f'slurmd-{node}',
                ['slurmd', '-D', '-N', node])

    def _step_wait_for_nodes(self):
        step = 'wait for nodes'
        want = set(self.compute_nodes())
        deadline = time.monotonic() + READY_TIMEOUT
        last = ''
        while True:
            out = self._slurm_ok(['sinfo', '-h', '-N', '-o', '%N %T']) or ''
            last = out.strip()
            states = dict(l.split(None, 1) for l in out.splitlines()
                          if len(l.split(None, 1)) == 2)
            if want <= set(states) and all(
                    states[n].rstrip('*') == 'idle' for n in want):
                return
            for node, pid in self._slurmd_pids.items():
                self._require_alive(step, f'slurmd of {node}', pid,
                                    self.state_dir / 'log' / f'slurmd-{node}.log')
            if time.monotonic() > deadline:
                raise StepError(step, f'nodes not idle after {READY_TIMEOUT} '
                                      f's; sinfo: {last!r}')
            time.sleep(0.2)

    # -- faults -----------------------------------------------------------

    def kill_slurmd(self, node: str) -> int:
        """SIGKILL the slurmd of ``node`` (a fault to test against: job steps
        already running there live on in their slurmstepd, but the node takes
        no new step).  Returns the pid killed."""
        label = f'slurmd-{node}'
        live = [r for r in self.state['resources']
                if r['kind'] == 'proc' and r['label'] == label and alive(r['pid'], r['start'])]
        if not live:
            raise TestbedError(f'no running slurmd on {node!r}')
        pid = live[-1]['pid']
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + STOP_WAIT
        while alive(pid, live[-1]['start']) and time.monotonic() < deadline:
            time.sleep(0.05)
        return pid

    def start_slurmd(self, node: str):
        """Start ``node``'s slurmd again after kill_slurmd, return the node
        to service and wait until Slurm sees it idle."""
        self._spawn('start slurmd', node, f'slurmd-{node}', ['slurmd', '-D', '-N', node])
        self._save()
        # A node whose job ended in NODE_FAIL stays 'completing' until Slurm
        # gives up on that job's epilog: longer than a start-up.
        deadline = time.monotonic() + 3 * READY_TIMEOUT
        while True:
            state = (self._slurm_ok(['sinfo', '-h', '-n', node, '-o', '%T']) or '').strip()
            if state.rstrip('*') == 'idle':
                return
            if state.rstrip('*') in ('down', 'drained', 'draining', 'fail'):
                # ReturnToService=2 brings back only nodes down for not responding.
                self._slurm_ok(['scontrol', 'update', f'nodename={node}', 'state=resume'])
            if time.monotonic() > deadline:
                raise TestbedError(f'{node} not idle {3 * READY_TIMEOUT:g} s after its slurmd '
                                   f'restarted (sinfo: {state!r})')
            time.sleep(0.2)
