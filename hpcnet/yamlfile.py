"""Reading the YAML files a site edits (references, the fabric table,
acknowledgements): a mistake is one line naming the file, the line and
column, and the problem, and a key given twice in one mapping is refused
(YAML would keep the last one silently).
"""
from __future__ import annotations

from pathlib import Path

import yaml


class YamlFileError(ValueError):
    '''A YAML file that cannot be read or parsed; the message is one line.'''


class _UniqueKeyLoader(yaml.SafeLoader):
    '''yaml.SafeLoader that refuses a key given twice in one mapping.'''

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, _ in node.value:
                if key_node.tag == 'tag:yaml.org,2002:merge':
                    continue
                key = self.construct_object(key_node, deep=deep)
                try:
                    duplicate = key in seen
                except TypeError:
                    continue        # unhashable: SafeLoader names it below
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        None, None, f'key {key!r} is given twice in this mapping',
                        key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep)


def _one_line(text: str) -> str:
    return ' '.join(str(text).split())


def load_yaml(path: str | Path):
    '''The document of the YAML file ``path``; YamlFileError otherwise.'''
    try:
        text = Path(path).read_text(encoding='utf-8')
    except UnicodeDecodeError as err:
        raise YamlFileError(f'{path}: not UTF-8 text (byte {err.start} is '
                            f'{err.object[err.start]:#04x})') from None
    except OSError as err:
        raise YamlFileError(f'{path}: cannot read: {err.strerror}') from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        where = f'{path}:{mark.line + 1}:{mark.column + 1}' if mark else str(path)
        context = f' ({_one_line(err.context)})' if err.context else ''
        raise YamlFileError(f'{where}: not valid YAML: {_one_line(err.problem)}{context}') \
            from None
    except yaml.YAMLError as err:
        raise YamlFileError(f'{path}: not valid YAML: {_one_line(err)}') from None
