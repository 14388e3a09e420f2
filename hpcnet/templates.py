"""Templates with ``@NAME@`` placeholders: the job scripts of the checks
(``checks/templates/*.sh.in``) and the testbed's files (``ci/testbed/*.in``).

Values that go into a shell script are quoted here, once (``shell=True``): a
list becomes its items, each quoted, separated by blanks.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

from hpcnet.constants import CHECKS_DIR

#: Where the checks' job script templates live.
CHECK_TEMPLATES = CHECKS_DIR / 'templates'

_PLACEHOLDER = re.compile(r'@([A-Z][A-Z0-9_]*)@')


class TemplateError(ValueError):
    '''A template and its values do not fit.'''


def _shell(value) -> str:
    if isinstance(value, (list, tuple)):
        return ' '.join(shlex.quote(str(v)) for v in value)
    return shlex.quote(str(value))


def render(text: str, values: dict, *, shell: bool = False, source: str = '<template>') -> str:
    '''Fill every ``@NAME@`` of ``text``; a placeholder without a value, or a
    value without a placeholder, is an error naming both.'''
    names = set(_PLACEHOLDER.findall(text))
    missing, unused = sorted(names - set(values)), sorted(set(values) - names)
    if missing or unused:
        raise TemplateError(f'{source}: placeholders without a value: {missing}; '
                            f'values without a placeholder: {unused}')
    fill = _shell if shell else str
    return _PLACEHOLDER.sub(lambda m: fill(values[m.group(1)]), text)


def job_script(name: str, **values) -> str:
    '''checks/templates/<name>.sh.in with its values shell-quoted.'''
    path = Path(CHECK_TEMPLATES) / f'{name}.sh.in'
    return render(path.read_text(), values, shell=True, source=str(path))
