"""Removing a testbed: every resource its state file records, in reverse
order of creation (daemons, stray processes in its namespaces, links,
namespaces, mounts, files), each removal said when it fails."""
from __future__ import annotations

import os
import shutil
import subprocess
import time

from hpcnet.testbed import softirq
from hpcnet.testbed.config import CMD_TIMEOUT, NETNS_DIR, STOP_WAIT, TestbedError
from hpcnet.testbed.processes import CHILDREN, mounts, ns_inode, procs_in_namespaces, stop


class Teardown:
    """The teardown of hpcnet.testbed.cluster.Testbed (a mixin: it reads the
    testbed's recorded resources and state directory)."""

    def down(self) -> dict:
        """Stop and remove everything. Returns {'was_up', 'seconds', ...}."""
        if os.geteuid() != 0:
            raise TestbedError('hpcnet testbed needs root')
        t0 = time.monotonic()
        st = self.load()
        leftovers = sorted(p.name for p in NETNS_DIR.glob(f'{self.name}-*')) \
            if NETNS_DIR.is_dir() else []
        if st is None and not leftovers:
            return {'was_up': False, 'seconds': 0.0, 'problems': []}
        if st is None:
            # No state but namespaces of ours: clean what the names tell.
            sd = str(self.state_dir)
            self._state = {'name': self.name, 'state_dir_created': False,
                           'netns_dir_created': False, 'resources': [
                               {'kind': 'mount', 'path': m} for m in mounts()
                               if m.startswith(sd + '/')]}
        known = {r.get('name') for r in self._state['resources']
                 if r['kind'] == 'netns'}
        # Created but not yet recorded (up killed at that instant).
        self._state['resources'][:0] = [{'kind': 'netns', 'name': n}
                                        for n in leftovers if n not in known]
        problems = self._teardown()
        if problems:
            raise TestbedError('down left things behind: ' +
                               '; '.join(problems))
        return {'was_up': True, 'seconds': round(time.monotonic() - t0, 3),
                'problems': problems}

    def _teardown(self) -> list[str]:
        st = self._state
        res = st.get('resources', [])
        problems = self._stop_daemons(res)
        problems += self._stop_strays(res)
        self.log('[down] removing links, namespaces, mounts')
        problems += _remove_in_reverse(res)
        if st.get('netns_dir_created'):
            problems += _remove_netns_dir()
        problems += self._remove_files(st)
        procs = [r for r in res if r['kind'] == 'proc']
        for pid in list(CHILDREN):
            if not any(r.get('pid') == pid for r in procs):
                continue
            CHILDREN.pop(pid).poll()
        if not problems:
            self._state = None
        return problems

    def _stop_daemons(self, res: list) -> list[str]:
        """The daemons we started: slurmds, then slurmctld, then munged."""
        procs = [r for r in res if r['kind'] == 'proc']
        slurmds = {r['pid']: r['start'] for r in procs
                   if r['label'].startswith('slurmd')}
        others = {r['pid']: r['start'] for r in procs
                  if not r['label'].startswith('slurmd')}
        self.log('[down] stopping daemons')
        return stop(slurmds, STOP_WAIT) + stop(others, STOP_WAIT)

    def _stop_strays(self, res: list) -> list[str]:
        """Anything else still inside our namespaces (job steps, exec), and
        the softirq and backlog settings the testbed changed."""
        problems: list[str] = []
        inodes = {'net': set(), 'uts': set(), 'mnt': set()}
        for r in res:
            if r['kind'] == 'netns':
                ino = ns_inode(NETNS_DIR / r['name'])
                if ino:
                    inodes['net'].add(ino)
            elif r['kind'] == 'nsfile':
                ino = ns_inode(r['path'])
                kind = 'uts' if r['path'].endswith('.uts') else 'mnt'
                # An unmounted placeholder file is not a namespace.
                if ino and r['path'] in mounts():
                    inodes[kind].add(ino)
        stray = procs_in_namespaces(inodes)
        if stray:
            self.log(f'[down] stopping {len(stray)} process(es) left in the '
                     'namespaces')
            problems += stop(stray, 3.0)

        if any(r['kind'] == 'softirq' for r in res):
            problems += softirq.release(str(self.state_dir))
        if any(r['kind'] == 'backlog' for r in res):
            problems += softirq.release_backlog(str(self.state_dir))
        return problems

    def _remove_files(self, st: dict) -> list[str]:
        """The state directory's files, only if no mount is left under it."""
        problems: list[str] = []
        sd = str(self.state_dir)
        left = [m for m in mounts() if m == sd or m.startswith(sd + '/')]
        if left:
            problems.append(f'mounts left under {sd}: {left}')
        elif self.state_dir.is_dir() and 'resources' in st and \
                'state_dir' in st:
            for child in self.state_dir.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
            if st.get('state_dir_created'):
                try:
                    self.state_dir.rmdir()
                except OSError as e:
                    problems.append(f'rmdir {self.state_dir}: {e}')
        return problems


def _quiet(argv):
    try:
        r = subprocess.run(argv, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True,
                           timeout=CMD_TIMEOUT,
                           stdin=subprocess.DEVNULL)
        return r.returncode, r.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return -1, str(e)


def _remove_in_reverse(res: list) -> list[str]:
    """Links, namespace files, namespaces, mounts: reverse order of creation."""
    problems: list[str] = []
    for r in reversed(res):
        kind = r['kind']
        if kind == 'veth':
            if (NETNS_DIR / r['netns']).exists():
                _quiet(['ip', '-n', r['netns'], 'link', 'del', r['dev']])
        elif kind == 'nsfile':
            p = r['path']
            if p in mounts():
                rc, err = _quiet(['umount', p])
                if rc and p in mounts():
                    _quiet(['umount', '-l', p])
        elif kind == 'netns':
            p = NETNS_DIR / r['name']
            if p.exists():
                rc, err = _quiet(['ip', 'netns', 'del', r['name']])
                if rc and p.exists():
                    problems.append(f'ip netns del {r["name"]}: {err}')
        elif kind == 'mount':
            p = r['path']
            for _ in range(3):
                if p not in mounts():
                    break
                rc, err = _quiet(['umount', p])
                if rc:
                    _quiet(['umount', '-l', p])
    return problems


def _remove_netns_dir() -> list[str]:
    """The namespace directory the testbed created, once it is empty."""
    if not NETNS_DIR.is_dir():
        return []
    try:
        empty = not any(NETNS_DIR.iterdir())
    except OSError:
        empty = False
    if not empty:
        return []
    for _ in range(3):
        if str(NETNS_DIR) not in mounts():
            break
        _quiet(['umount', str(NETNS_DIR)])
    try:
        NETNS_DIR.rmdir()
    except OSError as e:
        return [f'rmdir {NETNS_DIR}: {e}']
    return []
