"""The layers of hpcnet/, read from the source: the modules of hpcnet itself
at the bottom (the constants, the model, the fabric and metric catalogues),
long work on the host (hpcnet.longwork, a leaf), discovery (hpcnet.stacks),
what runs inside checks (hpcnet.checklib), what judges sessions after the
run (hpcnet.acceptance, in wings: WINGS), a site's configuration
(hpcnet.siteconfig), a session's run and verdict (hpcnet.session), the MPI
family registry (hpcnet.mpi, a leaf), the commands on top (hpcnet.commands,
one module each, assembled by hpcnet.cli) and the lab beside them
(hpcnet.testbed), which only commands import.

Every ``import`` counts, also one inside a function: an import moved into a
function to dodge a circle is still a circle. Circles are looked for
between modules and between packages (a wing of hpcnet.acceptance with all
its modules is one node, any other subpackage of hpcnet with all its modules
one, a module of hpcnet itself another).

And the size of the rooms: a package (hpcnet itself too) holds at most
MAX_PACKAGE_MODULES modules and MAX_PACKAGE_LINES lines, a module one job (MAX_LINES), a function one step
(MAX_FUNCTION_LINES).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / 'hpcnet'
CHECKS = PACKAGE.parent / 'checks'
#: The wings of hpcnet.acceptance, each a package with one job, in their
#: order: a wing imports only the wings before it.
WINGS = ('hpcnet.acceptance.references', 'hpcnet.acceptance.comparison',
         'hpcnet.acceptance.report', 'hpcnet.acceptance.history')
#: The packages that hold one job of hpcnet's own each, every one saying its
#: job and what it may import in its docstring.
ROOMS = ('hpcnet.longwork', 'hpcnet.siteconfig', 'hpcnet.session')
#: A package holds a few jobs: a bigger one is split into packages of one job each.
MAX_PACKAGE_MODULES = 20
MAX_PACKAGE_LINES = 3000
#: The modules of `hpcnet compare` and `hpcnet history` grow with every new
#: rule: they are held below the general MAX_LINES.
MAX_COMPARE_HISTORY_LINES = 400
#: A module holds one job: a longer one is cut by job, not trimmed.
MAX_LINES = 500
#: A function does one step: a longer one is cut into named steps.
MAX_FUNCTION_LINES = 80
#: The parsers' state machines: each reads an output line by line through its
#: states, which read best together.
STATE_MACHINES = {('hpcnet.parsers.imb', 'parse_imb'), ('hpcnet.parsers.osu', 'parse_osu'),
                  ('hpcnet.parsers.kernel', 'parse_kernel_output')}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix('').parts
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def _sources() -> dict:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob('*.py'))}


MODULES = _sources()


def _imports(name: str, path: Path) -> set:
    '''The hpcnet modules ``name`` imports (the module itself, or the package
    when the imported name is not a module of its own).'''
    is_package = path.name == '__init__.py'
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                anchor = name.split('.')
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = '.'.join(anchor + ([base] if base else []))
            for alias in node.names:
                sub = f'{base}.{alias.name}'
                found.add(sub if sub in MODULES else base)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + '.')


def _package(module: str) -> str:
    '''The node of ``module`` in the package graph: the wing of
    hpcnet.acceptance it is in, else the subpackage of hpcnet it is in, or
    itself for a module of hpcnet itself.'''
    wing = next((w for w in WINGS if _in(module, w)), None)
    return wing or '.'.join(module.split('.')[:2])


def _package_graph(graph: dict) -> dict:
    packages = {_package(m): set() for m in graph}
    for module, imported in graph.items():
        packages[_package(module)].update(_package(i) for i in imported)
    return {p: imported - {p} for p, imported in packages.items()}


PACKAGE_GRAPH = _package_graph(GRAPH)


def _cycles(graph: dict) -> list:
    '''The strongly connected components with more than one module
    (Tarjan, iterative).'''
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_graph_sees_function_level_imports():
    assert 'hpcnet.acceptance.comparison.crosscheck' in GRAPH['hpcnet.commands.crosscheck']


def test_cycle_detection_finds_a_circle():
    assert _cycles({'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}}) == [['a', 'b', 'c']]
    assert _cycles({'a': {'b'}, 'b': set()}) == []


def test_package_graph_finds_a_circle_no_module_makes():
    # references -> session -> checklib -> references, through two different
    # modules of the references wing.
    modules = {'hpcnet.acceptance.references.accept': {'hpcnet.session.runner'},
               'hpcnet.session.runner': {'hpcnet.checklib.testlib'},
               'hpcnet.checklib.testlib': {'hpcnet.acceptance.references.references'},
               'hpcnet.acceptance.references.references': {'hpcnet.constants'},
               'hpcnet.constants': set()}
    assert _cycles(modules) == []
    assert _cycles(_package_graph(modules)) == [['hpcnet.acceptance.references', 'hpcnet.checklib',
                                                 'hpcnet.session']]


def test_package_graph_finds_a_circle_between_wings():
    # comparison -> history -> comparison, through three different modules.
    modules = {'hpcnet.acceptance.comparison.compare': {'hpcnet.acceptance.history.levels'},
               'hpcnet.acceptance.history.levels': {'hpcnet.acceptance.comparison.statcompare'},
               'hpcnet.acceptance.comparison.statcompare': set()}
    assert _cycles(modules) == []
    assert _cycles(_package_graph(modules)) == [['hpcnet.acceptance.comparison',
                                                 'hpcnet.acceptance.history']]


def test_no_import_circle():
    assert _cycles(GRAPH) == []


def test_no_package_circle():
    assert _cycles(PACKAGE_GRAPH) == []


def test_only_the_command_line_imports_the_commands():
    wrong = {m: sorted(i for i in GRAPH[m] if _in(i, 'hpcnet.commands'))
             for m in GRAPH if not _in(m, 'hpcnet.commands') and m != 'hpcnet.cli'}
    assert {m: i for m, i in wrong.items() if i} == {}


def test_the_command_line_assembles_every_command():
    commands = {m for m in MODULES if _in(m, 'hpcnet.commands')}
    assert commands - GRAPH['hpcnet.cli'] == {'hpcnet.commands'}


@pytest.mark.parametrize('package', ['hpcnet.stacks', 'hpcnet.checklib', 'hpcnet.acceptance',
                                     'hpcnet.commands', *WINGS, *ROOMS])
def test_layers_are_packages(package):
    assert package in MODULES and MODULES[package].name == '__init__.py'


def test_acceptance_is_its_wings():
    # Every module of hpcnet.acceptance is in a wing; its own __init__ names
    # the wings and imports none of them.
    outside = sorted(m for m in MODULES if _in(m, 'hpcnet.acceptance')
                     and m != 'hpcnet.acceptance' and _package(m) not in WINGS)
    assert outside == []
    assert GRAPH['hpcnet.acceptance'] == set()


@pytest.mark.parametrize('package', [*WINGS, *ROOMS])
def test_a_wing_or_room_says_what_it_does(package):
    assert ast.get_docstring(ast.parse(MODULES[package].read_text()))


def _against_the_order(graph: dict) -> dict:
    '''{module of a wing: the modules of the same or a later wing it
    imports} over ``graph``, leaving out imports within the module's own wing.'''
    found = {}
    for module, imported in graph.items():
        wing = _package(module)
        if wing not in WINGS:
            continue
        later = sorted(i for i in imported if _package(i) in WINGS[WINGS.index(wing) + 1:])
        if later:
            found[module] = later
    return found


def test_a_wing_importing_a_later_wing_is_found():
    assert _against_the_order({'hpcnet.acceptance.comparison.compare':
                               {'hpcnet.acceptance.references.baseline',
                                'hpcnet.acceptance.history.levels'}}) == {
        'hpcnet.acceptance.comparison.compare': ['hpcnet.acceptance.history.levels']}


def test_a_wing_imports_only_the_wings_before_it():
    assert _against_the_order(GRAPH) == {}


def _checks_layer() -> dict:
    '''{module: the hpcnet modules it imports} of the checks (checks/*.py)
    and of what runs inside them (hpcnet.checklib).'''
    checks = {f'checks.{p.stem}': _imports(f'checks.{p.stem}', p)
              for p in sorted(CHECKS.glob('*.py'))}
    return {**checks, **{m: GRAPH[m] for m in GRAPH if _in(m, 'hpcnet.checklib')}}


def test_the_checks_import_only_the_references_wing_of_acceptance():
    references = WINGS[0]
    assert MODULES[references].name == '__init__.py'
    layer = _checks_layer()
    assert 'hpcnet.acceptance.references.references' in layer['hpcnet.checklib.testlib']
    wrong = {m: sorted(i for i in imported
                       if _in(i, 'hpcnet.acceptance') and not _in(i, references))
             for m, imported in layer.items()}
    assert {m: i for m, i in wrong.items() if i} == {}


def _package_sizes(package: Path = PACKAGE) -> dict:
    '''{package: (modules, lines)} of every package in ``package`` (hpcnet
    itself and every directory below it with an __init__.py). A package counts
    the .py files directly in its directory, so each subpackage (a wing of
    hpcnet.acceptance) is a package of its own, not part of its parent's count.'''
    sizes = {}
    for init in sorted(package.rglob('__init__.py')):
        modules = sorted(init.parent.glob('*.py'))
        name = '.'.join(init.parent.relative_to(package.parent).parts)
        sizes[name] = (len(modules),
                                     sum(len(p.read_text().splitlines()) for p in modules))
    return sizes


def test_no_big_package():
    '''No package in hpcnet/ holds over MAX_PACKAGE_MODULES modules or
    MAX_PACKAGE_LINES lines, counted as _package_sizes counts them: the .py
    files directly in the package's directory.'''
    sizes = _package_sizes()
    assert {'hpcnet', 'hpcnet.acceptance.history'} <= set(sizes)
    assert _big(sizes) == {}


def _big(sizes: dict) -> dict:
    return {p: size for p, size in sizes.items()
            if size[0] > MAX_PACKAGE_MODULES or size[1] > MAX_PACKAGE_LINES}


def test_the_top_level_counts_like_any_package(tmp_path):
    top = tmp_path / 'hpcnet'
    (top / 'room').mkdir(parents=True)
    (top / '__init__.py').write_text('')
    for i in range(MAX_PACKAGE_MODULES):
        (top / f'module{i}.py').write_text('x = 1\n')
    (top / 'room' / '__init__.py').write_text('y = 1\nz = 2\n')
    sizes = _package_sizes(top)
    assert sizes == {'hpcnet': (MAX_PACKAGE_MODULES + 1, MAX_PACKAGE_MODULES),
                     'hpcnet.room': (1, 2)}
    assert _big(sizes) == {'hpcnet': (MAX_PACKAGE_MODULES + 1, MAX_PACKAGE_MODULES)}


def test_compare_and_history_modules_are_short():
    capped = {m: len(MODULES[m].read_text().splitlines()) for m in MODULES
              if _in(m, 'hpcnet.acceptance')
              and m.split('.')[-1].startswith(('compare', 'history'))}
    assert {'hpcnet.acceptance.comparison.compare',
            'hpcnet.acceptance.history.history'} <= set(capped)
    assert {m: n for m, n in capped.items() if n >= MAX_COMPARE_HISTORY_LINES} == {}


def test_long_work_is_a_leaf():
    wrong = {m: sorted(i for i in GRAPH[m] if not _in(i, 'hpcnet.longwork'))
             for m in GRAPH if _in(m, 'hpcnet.longwork')}
    assert {m: i for m, i in wrong.items() if i} == {}


def test_a_site_configuration_never_imports_a_session_or_a_command():
    above = ('hpcnet.session', 'hpcnet.commands', 'hpcnet.cli')
    wrong = {m: sorted(i for i in GRAPH[m] if any(_in(i, a) for a in above))
             for m in GRAPH if _in(m, 'hpcnet.siteconfig')}
    assert {m: i for m, i in wrong.items() if i} == {}


def test_only_the_commands_run_a_session():
    wrong = {m: sorted(i for i in GRAPH[m] if _in(i, 'hpcnet.session'))
             for m in GRAPH if not any(_in(m, p) for p in ('hpcnet.session', 'hpcnet.commands',
                                                          'hpcnet.cli'))}
    assert {m: i for m, i in wrong.items() if i} == {}


def test_the_product_never_imports_the_lab():
    # The testbed, the Rocks paper and CI's module trees (hpcnet.testbed) sit
    # above the product: only their commands reach them.
    wrong = {m: sorted(i for i in GRAPH[m] if _in(i, 'hpcnet.testbed'))
             for m in GRAPH if not (_in(m, 'hpcnet.testbed') or _in(m, 'hpcnet.commands'))}
    assert {m: i for m, i in wrong.items() if i} == {}


@pytest.mark.parametrize('module', sorted(m for m in MODULES if _in(m, 'hpcnet.acceptance.report')))
def test_the_report_names_no_system(module):
    # A system's own sections come from its site file (hpcnet.siteconfig.sites.REPORT_SECTIONS).
    assert 'testbed' not in MODULES[module].read_text().lower()


def test_judging_never_imports_discovery():
    wrong = {m: sorted(i for i in GRAPH[m] if _in(i, 'hpcnet.stacks'))
             for m in GRAPH if _in(m, 'hpcnet.acceptance')}
    assert {m: i for m, i in wrong.items() if i} == {}


@pytest.mark.parametrize('module', ['hpcnet.checklib.sanity', 'hpcnet.stacks.modules',
                                    'hpcnet.stacks.lmod', 'hpcnet.stacks.modulenames',
                                    'hpcnet.stacks.spacklock'])
def test_judged_and_sources_without_discovery(module):
    assert not GRAPH[module] & {'hpcnet.stacks', 'hpcnet.stacks.discover'}


def test_mpi_registry_is_a_leaf():
    wrong = {m: sorted(i for i in GRAPH[m] if not _in(i, 'hpcnet.mpi'))
             for m in GRAPH if _in(m, 'hpcnet.mpi')}
    assert {m: i for m, i in wrong.items() if i} == {}


def test_the_metric_catalogue_is_a_floor_below_the_checks():
    # Checks, reference validation and judging all read it.
    assert GRAPH['hpcnet.metrics'] <= {'hpcnet.constants', 'hpcnet.sizes', 'hpcnet.paths',
                                       'hpcnet.variables', 'hpcnet.fabrics'}
    assert 'hpcnet.metrics' in GRAPH['hpcnet.acceptance.references.references']


def test_fabric_registry_sits_on_the_mpi_registry():
    # The model, discovery, the checks and the metric catalogue read it.
    assert {m for m in GRAPH['hpcnet.fabrics'] if not _in(m, 'hpcnet.mpi')} == {'hpcnet.constants'}


def test_the_fabric_table_is_read_in_one_module():
    # Its validation and its interpretation (placeholders, PMI, profiles) are
    # one concept: the model only supplies a partition's values.
    assert 'hpcnet.fabrictable' not in GRAPH['hpcnet.model']
    readers = {m for m, path in MODULES.items()
               if re.search(r'\bFABRICS_FILE\b', path.read_text())}
    assert readers == {'hpcnet.constants', 'hpcnet.fabrictable', 'hpcnet.commands.fabrics'}


def test_constants_imports_no_layer():
    assert GRAPH['hpcnet.constants'] <= {'hpcnet.paths', 'hpcnet.variables'}


@pytest.mark.parametrize('module', ['hpcnet.variables', 'hpcnet.siteconfig.reframeargs',
                                    'hpcnet.yamlfile'])
def test_leaves_import_nothing_of_hpcnet(module):
    assert GRAPH[module] == set()


def test_no_long_file():
    long = {name: n for name, path in MODULES.items()
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def _long_functions(source: str) -> dict:
    """{function name: lines} of the functions and methods of ``source``
    longer than MAX_FUNCTION_LINES (a nested function counts on its own
    and within the one around it)."""
    return {node.name: node.end_lineno - node.lineno + 1 for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES}


def test_a_long_function_is_found():
    def method(lines: int) -> str:
        return 'class C:\n    def f(self):\n' + ''.join(f'        x = {i}\n'
                                                         for i in range(lines - 1))
    assert _long_functions(method(MAX_FUNCTION_LINES)) == {}
    assert _long_functions(method(MAX_FUNCTION_LINES + 1)) == {'f': MAX_FUNCTION_LINES + 1}


def test_no_long_function():
    long = {(name, function): n for name, path in MODULES.items()
            for function, n in _long_functions(path.read_text()).items()
            if (name, function) not in STATE_MACHINES}
    assert long == {}


def test_the_state_machines_are_there():
    # An exemption for a function that was cut or renamed would hide the next one.
    found = {(name, function) for name, path in MODULES.items()
             for function in _long_functions(path.read_text())}
    assert STATE_MACHINES <= found


def _ends_in_return(body) -> bool:
    last = body[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    if isinstance(last, ast.With):
        return _ends_in_return(last.body)
    if isinstance(last, ast.Try):
        return _ends_in_return(last.body) and all(_ends_in_return(h.body) for h in last.handlers)
    if isinstance(last, ast.If):
        return _ends_in_return(last.body) and bool(last.orelse) and _ends_in_return(last.orelse)
    return False


def test_every_command_returns_its_exit_code():
    '''A command that falls off its end returns None: `hpcnet` still exits 0,
    but a caller of the function (the testbed, a benchmark) gets no code.'''
    falls_off = []
    for path in sorted((PACKAGE / 'commands').glob('*.py')):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.returns is not None \
                    and ast.unparse(node.returns) == 'int' and not _ends_in_return(node.body):
                falls_off.append(f'{path.name}:{node.name}')
    assert falls_off == []
