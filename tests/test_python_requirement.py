"""The Python requirement is one truth: pyproject.toml's requires-python is
what ReFrame 4.10 itself requires, and the Spack recipe, the EasyBuild
easyconfig, docs/your-cluster.md and `make venv` say the same; `make venv`
with an older interpreter (a stand-in script that reports 3.9) stops with
one line naming it."""
import re
import shutil
import subprocess
from importlib.metadata import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
tomllib = pytest.importorskip('tomllib', reason='tomllib (Python 3.11+) reads pyproject.toml')
REQUIRES = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']['requires-python']
MINIMUM = REQUIRES.removeprefix('>=')


def test_requires_python_is_reframes():
    assert REQUIRES == metadata('reframe-hpc')['Requires-Python'] == '>=3.10'


def test_recipes_and_docs_say_the_same():
    spack = (ROOT / 'spack-env/repo/spack_repo/hpcnet/packages/hpcnet/package.py').read_text()
    assert f'depends_on("python@{MINIMUM}:"' in spack
    docs = (ROOT / 'docs/your-cluster.md').read_text()
    assert f'Python {MINIMUM} or newer' in docs and 'make venv PYTHON=python3.11' in docs
    assert not re.search(r'Python 3\.9 or newer', docs)


@pytest.mark.skipif(shutil.which('make') is None, reason='needs make')
def test_make_venv_refuses_an_older_python(tmp_path):
    fake = tmp_path / 'python3.9'
    fake.write_text('#!/bin/sh\necho 3.9\n')       # what `python -c 'print(version)'` prints
    fake.chmod(0o755)
    res = subprocess.run(['make', '--no-print-directory', 'venv', f'PYTHON={fake}',
                          f'VENV={tmp_path / "venv"}'], cwd=ROOT, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert res.returncode == 2
    # make's own error line, 'make: ***' or, under an outer make (make test), 'make[2]: ***'.
    ours = [ln for ln in res.stderr.splitlines() if not re.match(r'make(\[\d+\])?: \*\*\*', ln)]
    assert ours == [f'make venv: {fake} is Python 3.9; hpcnet needs Python {MINIMUM} or newer '
                    '(pyproject.toml requires-python): make venv PYTHON=python3.11, or another '
                    f'{MINIMUM}+ interpreter'], res.stderr
    assert not (tmp_path / 'venv').exists()
