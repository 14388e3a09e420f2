"""Every file of the package or the checks the documentation names exists:
a path in docs/*.md or README.md (``hpcnet/session/runner.py``,
``checks/p2p.py``) and a module named dotted (``hpcnet.session.runner``, or a
name in it: ``hpcnet.siteconfig.sites.REPORT_SECTIONS``). A module moved
without its mentions sends a reader to a file that is not there."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([*ROOT.glob('docs/*.md'), ROOT / 'README.md'])
#: A path of the package or the checks, not the tail of a longer one
#: (tests/checks/faults.py is not checks/faults.py).
PATH = re.compile(r'(?<![\w/.-])((?:hpcnet|checks)/[\w/]*\.py)\b')
#: A dotted name of the package.
DOTTED = re.compile(r'(?<![\w/.-])(hpcnet(?:\.\w+)+)')


def _is_module(root: Path, parts: list) -> bool:
    where = root.joinpath(*parts)
    return where.with_suffix('.py').is_file() or (where / '__init__.py').is_file()


def missing_paths(text: str, root: Path = ROOT) -> list:
    '''The package and checks paths ``text`` names that do not exist under ``root``.'''
    return sorted({p for p in PATH.findall(text) if not (root / p).is_file()})


def missing_modules(text: str, root: Path = ROOT) -> list:
    '''The dotted names ``text`` gives that are neither a module under
    ``root`` nor a name directly in one.'''
    missing = set()
    for name in DOTTED.findall(text):
        parts = name.split('.')
        if not (_is_module(root, parts) or _is_module(root, parts[:-1])):
            missing.add(name)
    return sorted(missing)


def test_a_missing_path_or_module_is_found(tmp_path):
    (tmp_path / 'hpcnet' / 'session').mkdir(parents=True)
    (tmp_path / 'hpcnet' / 'session' / '__init__.py').write_text('')
    (tmp_path / 'hpcnet' / 'session' / 'runner.py').write_text('')
    text = ('`hpcnet/session/runner.py` and `hpcnet/runner.py`; tests/checks/faults.py;\n'
            'hpcnet.session.runner.run_suite, hpcnet.session, hpcnet.runner.run_suite.')
    assert missing_paths(text, tmp_path) == ['hpcnet/runner.py']
    assert missing_modules(text, tmp_path) == ['hpcnet.runner.run_suite']


def test_the_documentation_names_only_files_that_exist():
    missing = {doc.relative_to(ROOT).as_posix(): found for doc in DOCS
               if (found := missing_paths(doc.read_text()) + missing_modules(doc.read_text()))}
    assert missing == {}
