"""The module source (hpcnet.stacks.modules) with a cache: a survey loads
every MPI module, so its candidates are kept in the state directory against a
fingerprint of the modulefiles it read, and a configuration load runs no
Lmod command until one of them changes.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

from hpcnet.longwork.progress import phase
from hpcnet.stacks import lmod, modulenames, modules
from hpcnet.stacks.candidate import MpiCandidate
from hpcnet.stacks.lmod import lmod_command, search_path


#: The module source's cache in the state directory: its candidates, valid
#: while every modulefile it read (and Lmod, PATH, this code) is unchanged.
CACHE_FILE = 'modules.json'
#: The code of the module source: a survey's result is only as current as it.
SOURCE_CODE = (modules.__file__, lmod.__file__, modulenames.__file__)


def tree_fingerprint(lmod: str, dirs: list) -> str:
    '''A digest of every file and directory under ``dirs`` (name, size,
    modification time), of Lmod, PATH and this source's code: what a survey
    of ``dirs`` depends on, read without loading a module.'''
    digest = hashlib.sha256()
    for code in SOURCE_CODE:
        digest.update(Path(code).read_bytes())
    digest.update(f'{lmod}\n{os.environ.get("PATH", "")}\n'.encode())
    for top in dirs:
        for root, subdirs, files in os.walk(top):
            subdirs.sort()
            for name in [''] + sorted(files):
                path = os.path.join(root, name)
                try:
                    st = os.stat(path)
                except FileNotFoundError:
                    digest.update(f'{path}:missing\n'.encode())   # a dangling link
                    continue
                digest.update(f'{path}:{st.st_size}:{st.st_mtime_ns}\n'.encode())
    return digest.hexdigest()


def module_candidates(state: Path) -> list:
    '''The source for hpcnet.stacks.discover.SOURCES: one candidate per MPI or
    toolchain module (none without Lmod).  The survey loads every module, so
    its candidates are kept in ``state``/CACHE_FILE against tree_fingerprint
    of the search path and the levels it opened: a configuration load then
    runs no Lmod command until a modulefile changes.'''
    lmod = lmod_command()
    dirs = search_path() if lmod else []
    if not dirs:
        return modules.survey().candidates      # no Lmod or nothing to search: it says so
    cache = Path(state) / CACHE_FILE
    try:
        data = json.loads(cache.read_text()) if cache.exists() else None
    except ValueError:
        data = None     # a cache cut short (a run killed while writing it) is made again
    if data and _unchanged(lmod, dirs, data):
        return [MpiCandidate.from_json(c) for c in data['candidates']]
    found = modules.survey()
    with phase(f'recording the modulefiles under {len(dirs) + len(found.opened)} '
               'director(ies) for the next configuration load') as done:
        fingerprint = tree_fingerprint(lmod, dirs + found.opened)
        done.outcome = f'kept in {cache}'
    cache.write_text(json.dumps({
        'fingerprint': fingerprint, 'opened': found.opened,
        'candidates': [dataclasses.asdict(c) for c in found.candidates]}, indent=1))
    return found.candidates


def _unchanged(lmod: str, dirs: list, data: dict) -> bool:
    '''The module tree is as the cached survey ``data`` read it; said on
    stderr, since every configuration load walks the whole tree (long on
    EESSI or CVMFS).'''
    opened = data['opened']
    with phase(f'checking the modulefiles under {len(dirs) + len(opened)} director(ies) '
               'against the last module survey') as done:
        unchanged = data['fingerprint'] == tree_fingerprint(lmod, dirs + opened)
        done.outcome = 'unchanged' if unchanged else 'changed, surveying again'
    return unchanged
