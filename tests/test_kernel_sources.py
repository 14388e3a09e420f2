"""The C kernels in src/ under the package's caps, read from the source.

A file holds one job (MAX_LINES), a function one step (MAX_FUNCTION_LINES),
except the argument parsers named in ARGUMENT_PARSERS, whose option table
reads best in one piece.  A module is a ``.c`` file with the header of the
same name; a header declares only its own module's functions, and the
modules depend on each other one way: neither their ``#include "..."`` lines
nor their calls into each other's functions close a circle.

The reader is a brace counter over the source with comments, string and
character literals and preprocessor lines blanked out (the kernels' style is
regular: a function's body opens at the top level after its parameter list).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / 'src'
#: A file holds one job: a longer one is cut by job, not trimmed.
MAX_LINES = 500
#: A function does one step: a longer one is cut into named steps.
MAX_FUNCTION_LINES = 80
#: Argument parsers over the cap, (file, function): one option table each.
ARGUMENT_PARSERS = {('sockets_options.c', 'parse_args')}
#: Words followed by '(' that are no calls.
NOT_CALLS = {'if', 'for', 'while', 'switch', 'return', 'sizeof', 'defined', '__attribute__', 'alignof',
             '_Alignof', 'offsetof', '__typeof__', 'typeof'}

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
_SIGNATURE = re.compile(r'(\w+)\s*\((?:[^()]|\([^()]*\))*\)\s*$')
_PROTOTYPE = re.compile(r'(\w+)\s*\((?:[^()]|\([^()]*\))*\)\s*(?:__attribute__\s*\(\(.*\)\)\s*)?$', re.S)
_CALL = re.compile(r'\b([A-Za-z_]\w*)\s*\(')


def blank_non_code(text: str) -> str:
    '''The text with comments, literals and preprocessor lines replaced by
    spaces; newlines are kept, so offsets map to the same lines.'''
    out = list(text)
    i, n = 0, len(text)
    at_line_start = True

    def blank(start, end):
        for k in range(start, end):
            if out[k] != '\n':
                out[k] = ' '

    while i < n:
        c = text[i]
        if at_line_start and c == '#':
            end = i
            while end < n and (text[end] != '\n' or text[end - 1] == '\\'):
                end += 1
            blank(i, end)
            i = end
            continue
        if c == '\n':
            at_line_start = True
            i += 1
            continue
        if not c.isspace():
            at_line_start = False
        if text.startswith('//', i):
            end = text.find('\n', i)
            end = n if end < 0 else end
        elif text.startswith('/*', i):
            end = text.index('*/', i + 2) + 2
        elif c in '"\'':
            end = i + 1
            while text[end] != c:
                end += 2 if text[end] == '\\' else 1
            end += 1
        else:
            i += 1
            continue
        blank(i, end)
        i = end
    return ''.join(out)


@dataclass
class Function:
    name: str
    first_line: int
    last_line: int
    file_local: bool
    calls: set = field(default_factory=set)

    @property
    def lines(self) -> int:
        return self.last_line - self.first_line + 1


@dataclass
class Source:
    path: Path
    text: str
    code: str
    functions: list
    prototypes: set

    @property
    def module(self) -> str:
        return self.path.stem

    @property
    def includes(self) -> list:
        return _INCLUDE.findall(self.text)


def _line_of(text: str, offset: int) -> int:
    return text.count('\n', 0, offset) + 1


def _matching_brace(code: str, start: int) -> int:
    depth = 0
    for k in range(start, len(code)):
        if code[k] == '{':
            depth += 1
        elif code[k] == '}':
            depth -= 1
            if depth == 0:
                return k
    raise AssertionError(f'unbalanced braces after offset {start}')


def read_source(path: Path) -> Source:
    '''The functions defined and the prototypes declared at the top level.'''
    text = path.read_text()
    code = blank_non_code(text)
    functions, prototypes = [], set()
    statement_start, k = 0, 0
    while k < len(code):
        c = code[k]
        if c == ';':
            match = _PROTOTYPE.search(code[statement_start:k])
            head = code[statement_start:k]
            if match and '=' not in head and not re.match(r'\s*typedef\b', head):
                prototypes.add(match.group(1))
            statement_start = k + 1
        elif c == '{':
            head = code[statement_start:k]
            end = _matching_brace(code, k)
            match = _SIGNATURE.search(head)
            if match and '=' not in head:
                body = code[k:end]
                functions.append(Function(
                    name=match.group(1),
                    first_line=_line_of(code, statement_start + match.start(1)),
                    last_line=_line_of(code, end),
                    file_local=bool(re.match(r'\s*static\b', head)) and path.suffix == '.c',
                    calls={m.group(1) for m in _CALL.finditer(body)} - NOT_CALLS))
                statement_start = end + 1
            k = end
        k += 1
    return Source(path, text, code, functions, prototypes)


@pytest.fixture(scope='module')
def sources() -> dict:
    return {p.name: read_source(p) for p in sorted(SRC.glob('*.[ch]'))}


def _find_circle(edges: dict) -> list:
    '''One circle of the directed graph ``edges`` (node -> set of nodes), or [].'''
    state, stack = {}, []

    def visit(node):
        state[node] = 'open'
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 'open':
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                circle = visit(nxt)
                if circle:
                    return circle
        stack.pop()
        state[node] = 'done'
        return []

    for node in sorted(edges):
        if node not in state:
            circle = visit(node)
            if circle:
                return circle
    return []


def module_edges(sources: dict) -> dict:
    '''module -> the modules it includes or calls into.  A call counts when
    it names a function another module exports and the caller's file does
    not define; a header's own functions (static inline) count only calls
    into headers: a header links with no object file of its own.'''
    owners = {}
    for src in sources.values():
        for fn in src.functions:
            if not fn.file_local:
                owners.setdefault(fn.name, set()).add((src.module, src.path.suffix == '.h'))
    edges = {}
    for src in sources.values():
        targets = edges.setdefault(src.module, set())
        targets.update(Path(name).stem for name in src.includes)
        in_header = src.path.suffix == '.h'
        own = {fn.name for fn in src.functions}
        for fn in src.functions:
            for call in fn.calls - own:
                targets.update(module for module, is_header in owners.get(call, ())
                               if is_header or not in_header)
        targets.discard(src.module)
    return edges


# ---------------------------------------------------------------------------
# the reader itself


def test_reader_skips_braces_in_literals_and_comments(tmp_path):
    path = tmp_path / 'x.c'
    path.write_text('#define OPEN {\n/* { */\nstatic int f(void)\n{\n    puts("}{");\n'
                    "    return '{';\n}\nint g(int (*h)(void)) { return f() + h(); }\nvoid p(void);\n")
    src = read_source(path)
    assert [(f.name, f.first_line, f.last_line, f.file_local) for f in src.functions] == [
        ('f', 3, 7, True), ('g', 8, 8, False)]
    assert src.functions[1].calls == {'f', 'h'}
    assert src.prototypes == {'p'}


def test_circle_finder():
    assert _find_circle({'a': {'b'}, 'b': {'c'}, 'c': set()}) == []
    assert _find_circle({'a': {'b'}, 'b': {'c'}, 'c': {'a'}}) == ['a', 'b', 'c', 'a']


# ---------------------------------------------------------------------------
# the caps


def test_files_within_line_cap(sources):
    long = {name: src.text.count('\n') for name, src in sources.items() if src.text.count('\n') > MAX_LINES}
    assert not long, f'src/ files over {MAX_LINES} lines: {long}'


def test_functions_within_line_cap(sources):
    long = {f'{name}:{fn.first_line} {fn.name}': fn.lines
            for name, src in sources.items() for fn in src.functions
            if fn.lines > MAX_FUNCTION_LINES and (name, fn.name) not in ARGUMENT_PARSERS}
    assert not long, f'functions over {MAX_FUNCTION_LINES} lines: {long}'


def test_argument_parsers_exist(sources):
    '''Each exemption names a function there is.'''
    defined = {(name, fn.name) for name, src in sources.items() for fn in src.functions}
    assert ARGUMENT_PARSERS <= defined, ARGUMENT_PARSERS - defined


def test_header_declares_its_own_module(sources):
    '''A header with a .c of the same name declares only functions that .c defines.'''
    foreign = {}
    for name, src in sources.items():
        impl = sources.get(src.module + '.c')
        if src.path.suffix != '.h' or impl is None:
            continue
        defined = {fn.name for fn in impl.functions if not fn.file_local}
        if src.prototypes - defined:
            foreign[name] = sorted(src.prototypes - defined)
    assert not foreign, f'headers declaring other modules\' functions: {foreign}'


def test_modules_depend_one_way(sources):
    circle = _find_circle(module_edges(sources))
    assert not circle, f'src/ modules in a circle (includes and calls): {" -> ".join(circle)}'


def test_calls_across_modules_go_through_includes(sources):
    '''A module calling another's function includes that module's header
    (directly or through another header), so the #include lines draw the
    dependency.'''
    edges = module_edges(sources)
    included = {}
    for src in sources.values():
        included.setdefault(src.module, set()).update(Path(n).stem for n in src.includes)

    def reach(module, seen):
        for nxt in included.get(module, ()):
            if nxt not in seen:
                seen.add(nxt)
                reach(nxt, seen)
        return seen

    missing = {m: sorted(targets - reach(m, set())) for m, targets in edges.items() if targets - reach(m, set())}
    assert not missing, f'modules calling into modules they do not include: {missing}'
