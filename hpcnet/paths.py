"""Where hpcnet reads and writes: its two roots, and the checks that an
installed copy finds its data and can write where runs write.

hpcnet.constants names the directories below these roots; this module holds
the functions (one creates the work directory).
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from hpcnet.variables import HOME_ENV, REFERENCE_DIR_ENV, REPORTS_DIR_ENV, WORK_DIR_ENV

# Two roots.  DATA_DIR holds what the suite reads (checks/, config/,
# reference/, src/); WORK_DIR is where runs write (.state/, reports/,
# output/, perflogs/).  In a source tree (a git checkout, editable install)
# both are that tree, as always.  An installed copy (Spack, EasyBuild) reads
# <prefix>/share/hpcnet, named by HPCNET_HOME (its module sets it), and
# writes in HPCNET_WORK_DIR, default the current directory (as ReFrame does).


def _is_suite_tree(path: Path) -> bool:
    return (path / 'checks').is_dir() and (path / 'config' / 'settings.py').is_file()


_PACKAGE_PARENT = Path(__file__).resolve().parent.parent
#: The source tree (git checkout) this package runs from, holding also what
#: only a checkout has (ci/, spack-env/, tests/); None for an installed copy
#: (its parent is site-packages).  A source tree ignores HPCNET_HOME: code
#: and data of one version stay together.
PROJECT_ROOT = _PACKAGE_PARENT if _is_suite_tree(_PACKAGE_PARENT) else None
# Without HPCNET_HOME an installed copy has no data: installation_problem() says so.
DATA_DIR = PROJECT_ROOT or Path(os.environ.get(HOME_ENV) or _PACKAGE_PARENT)
WORK_DIR = Path(os.environ.get(WORK_DIR_ENV) or PROJECT_ROOT or Path.cwd())


def installation_problem() -> str | None:
    '''Why this copy cannot find its data (one message naming the
    variable and what is valid), or None.'''
    if PROJECT_ROOT or _is_suite_tree(DATA_DIR):
        return None
    home = os.environ.get(HOME_ENV)
    if not home:
        return (f'{HOME_ENV} is not set: an installed hpcnet reads its checks, configuration '
                f'and references from there (`module load hpcnet` or `spack load hpcnet` sets '
                f'it to <prefix>/share/hpcnet)')
    return (f'{HOME_ENV}={home} holds no checks/ and config/settings.py: set it to the '
            f'share/hpcnet directory of the hpcnet installation')


def work_dir_problem() -> str | None:
    '''Why runs cannot write in WORK_DIR (one message), or None.  Creates
    WORK_DIR when it is missing.'''
    if os.environ.get(WORK_DIR_ENV):
        named = f'{WORK_DIR_ENV}={WORK_DIR}'
    elif PROJECT_ROOT:
        named = f'work directory {WORK_DIR} (the source tree)'
    else:
        named = f'work directory {WORK_DIR} (the current directory; {WORK_DIR_ENV} names another)'
    if not WORK_DIR.is_absolute():
        return f'{named}: must be an absolute path'
    if PROJECT_ROOT is None:
        # Never write into the installation, even where its owner could.
        installation = (DATA_DIR.parents[1] if DATA_DIR.parts[-2:] == ('share', 'hpcnet')
                        else DATA_DIR).resolve()
        here = WORK_DIR.resolve()
        if here == installation or installation in here.parents:
            return (f'{named}: is inside the hpcnet installation {installation}; '
                    f'run from, or set {WORK_DIR_ENV} to, a directory of your own')
    return (_writable_directory_problem(WORK_DIR, named, f'set {WORK_DIR_ENV} to a directory '
                                       'you can write') or _reports_dir_problem())


def _writable_directory_problem(path: Path, named: str, fix: str) -> str | None:
    """Why ``path`` (``named`` so in the message) cannot be written in, or
    None; creates it when it is missing."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        return f'{named}: cannot be created: {err.strerror}'
    if not os.access(path, os.W_OK | os.X_OK):
        return f'{named}: is not writable; {fix}'
    return None


def _reports_dir_problem() -> str | None:
    """Why the reports directory a user named (HPCNET_REPORTS_DIR) cannot
    take the reports, or None."""
    named = os.environ.get(REPORTS_DIR_ENV)
    if not named:
        return None
    where = f'{REPORTS_DIR_ENV}={named}'
    if not Path(named).is_absolute():
        return f'{where}: must be an absolute path'
    return _writable_directory_problem(Path(named), where, 'set it to a directory you can write')


class InstallationError(RuntimeError):
    '''Something hpcnet needs is not installed or not found.'''


def reframe_executable() -> str:
    '''ReFrame beside this Python (pip into the same venv), else the first on
    PATH: Spack and EasyBuild install ReFrame as a package of its own.'''
    beside = Path(sys.executable).with_name('reframe')
    if beside.is_file():
        return str(beside)
    found = shutil.which('reframe')
    if not found:
        raise InstallationError(f'no reframe command, neither beside {sys.executable} nor on PATH: '
                                'install reframe-hpc 4.10 with pip, or load its module '
                                '(module load ReFrame, spack load reframe)')
    return found


def isolate_history(scratch: Path) -> Path:
    """Point this process's sessions at ``scratch``: its own results
    database, reports, perflogs and an empty reference directory (nothing
    judged), so that a benchmark's sessions land in none of the user's
    history.  Returns ``scratch``."""
    (scratch / 'refs').mkdir(parents=True, exist_ok=True)
    os.environ.update({REFERENCE_DIR_ENV: str(scratch / 'refs'),
                       REPORTS_DIR_ENV: str(scratch / 'reports'),
                       'RFM_SQLITE_DB_FILE': str(scratch / 'results.db'),
                       'RFM_PERFLOG_DIR': str(scratch / 'perflogs')})
    return scratch
