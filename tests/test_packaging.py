"""hpcnet packaged for Spack and EasyBuild: the recipe and the easyconfig say
what pyproject.toml says, and `eb` installs hpcnet into a module that works.

The installation test needs EasyBuild (the test extras) and Lmod (Debian's
`lmod`, `make deps`); CI has both.  EasyBuild builds nothing but hpcnet: its
dependencies are filtered out (`--filter-deps`) and come from this venv,
whose Python is on PATH, as a site's system-provided ones would.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from hpcnet.variables import STATE_DIR_ENV
from hpcnet.paths import HOME_ENV, PROJECT_ROOT, WORK_DIR_ENV

tomllib = pytest.importorskip('tomllib', reason='tomllib (Python 3.11+) reads pyproject.toml')

PYPROJECT = tomllib.loads((PROJECT_ROOT / 'pyproject.toml').read_text())
NAME = PYPROJECT['project']['name']
VERSION = PYPROJECT['project']['version']

SPACK_REPO = PROJECT_ROOT / 'spack-env' / 'repo' / 'spack_repo' / 'hpcnet'
SPACK_RECIPE = SPACK_REPO / 'packages' / 'hpcnet' / 'package.py'
SPACK_REFRAME = SPACK_REPO / 'packages' / 'reframe' / 'package.py'
EASYCONFIG_DIR = PROJECT_ROOT / 'easybuild' / 'hpcnet'
EASYBUILD_CONFIGS = Path(sys.prefix) / 'easybuild' / 'easyconfigs'

#: Each dependency of pyproject.toml by its name in each packaging system, in
#: one place: PyPI name -> (Spack package, EasyBuild software name).
DEPENDENCY_NAMES = {
    'reframe-hpc': ('reframe', 'ReFrame'),
    'PyYAML': ('py-pyyaml', 'PyYAML'),
    'matplotlib': ('py-matplotlib', 'matplotlib'),
    'scipy': ('py-scipy', 'SciPy-bundle'),
    'ruptures': ('py-ruptures', 'ruptures'),
}
#: EasyBuild bundles: the bundle's version -> the version of the PyPI package
#: it holds (SciPy-bundle's easyconfig lists its scipy).
BUNDLED_VERSIONS = {('SciPy-bundle', '2025.07'): {'scipy': '1.16.1'}}
#: requires-python, likewise.
PYTHON_NAMES = ('python', 'Python')
#: The build backend ([build-system] requires): Spack needs it as a build
#: dependency; EasyBuild's Python includes it.
BUILD_BACKEND_NAMES = {'setuptools': 'py-setuptools'}

LMOD_INIT = Path('/usr/share/lmod/lmod/init/bash')
EB = Path(sys.executable).with_name('eb')
#: Under this the installation test fails: CI waits for it.
EB_SECONDS_LIMIT = 120


def _requirements() -> dict:
    reqs = [Requirement(r) for r in PYPROJECT['project']['dependencies']]
    return {r.name: r.specifier for r in reqs}


def _spack_range(specifier: SpecifierSet) -> str:
    '''The Spack version range that equals a PEP 440 specifier of the forms
    pyproject.toml uses: ">=A" is "A:", ">=A,<B" with B the next minor
    release of A is "A" (Spack's "4.10" is every 4.10.x).'''
    by_operator = {s.operator: Version(s.version) for s in specifier}
    assert set(by_operator) in ({'>='}, {'>=', '<'}), \
        f'{specifier}: no Spack translation here for these operators; add one'
    lower = by_operator['>=']
    if '<' not in by_operator:
        return f'{lower}:'
    assert by_operator['<'] == Version(f'{lower.major}.{lower.minor + 1}'), \
        f'{specifier}: only an upper bound of the next minor release translates'
    return str(lower)


def _spack_calls(recipe: Path, class_name: str) -> list:
    '''The directive calls (version, depends_on) of the recipe's package class,
    read without Spack: (function name, first argument, keyword arguments).'''
    tree = ast.parse(recipe.read_text(), str(recipe))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name]
    calls = []
    for node in cls.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Name):
            call = node.value
            calls.append((call.func.id, ast.literal_eval(call.args[0]),
                          {k.arg: ast.literal_eval(k.value) for k in call.keywords}))
    return calls


def _spack_dependencies(recipe: Path, class_name: str) -> dict:
    '''name -> (version range, type) of the unconditional depends_on calls.'''
    deps = {}
    for func, spec, kwargs in _spack_calls(recipe, class_name):
        if func == 'depends_on' and 'when' not in kwargs:
            name, _, version_range = spec.partition('@')
            assert name not in deps, f'{recipe}: {name} twice'
            deps[name] = (version_range, kwargs.get('type'))
    return deps


def _easyconfig() -> Path:
    (path,) = EASYCONFIG_DIR.glob(f'{NAME}-{VERSION}-*.eb')
    return path


def _easyconfig_dict(path: Path) -> dict:
    from easybuild.framework.easyconfig.parser import EasyConfigParser
    return EasyConfigParser(str(path)).get_config_dict()


# --- the recipe and the easyconfig say what pyproject.toml says -----------------------------

def test_spack_recipe_version_and_dependencies_match_pyproject():
    versions = [arg for func, arg, _ in _spack_calls(SPACK_RECIPE, 'Hpcnet') if func == 'version']
    assert versions == [VERSION]
    deps = _spack_dependencies(SPACK_RECIPE, 'Hpcnet')
    expected = {DEPENDENCY_NAMES[pypi][0]: (_spack_range(spec), ('build', 'run'))
                for pypi, spec in _requirements().items()}
    expected[PYTHON_NAMES[0]] = (_spack_range(SpecifierSet(PYPROJECT['project']['requires-python'])),
                                 ('build', 'run'))
    for req in map(Requirement, PYPROJECT['build-system']['requires']):
        expected[BUILD_BACKEND_NAMES[req.name]] = (_spack_range(req.specifier), 'build')
    assert deps == expected


def test_spack_reframe_recipe_has_a_version_pyproject_accepts():
    '''The builtin recipes stop before 4.10: this repository's reframe adds it.'''
    versions = [arg for func, arg, _ in _spack_calls(SPACK_REFRAME, 'Reframe') if func == 'version']
    assert any(v in _requirements()['reframe-hpc'] for v in versions), versions


def test_spack_repository_layout():
    '''Spack 1.x: <root>/spack_repo/<namespace>/repo.yaml with a package API
    version, packages/<name>/package.py; the environment lists it.'''
    import yaml
    repo = yaml.safe_load((SPACK_REPO / 'repo.yaml').read_text())['repo']
    assert repo['namespace'] == SPACK_REPO.name == 'hpcnet'
    assert repo['api'].startswith('v2.')
    env = yaml.safe_load((PROJECT_ROOT / 'spack-env' / 'spack.yaml').read_text())['spack']
    listed = env['repos']['hpcnet'].replace('$env', str(PROJECT_ROOT / 'spack-env'))
    assert Path(listed) == SPACK_REPO


def test_easyconfig_version_and_dependencies_match_pyproject():
    config = _easyconfig_dict(_easyconfig())
    assert (config['name'], config['version']) == (NAME, VERSION)
    deps = {dep[0]: dep[1] for dep in config['dependencies']}
    expected_names = {eb for _, eb in DEPENDENCY_NAMES.values()} | {PYTHON_NAMES[1]}
    assert set(deps) == expected_names
    for pypi, spec in _requirements().items():
        name = DEPENDENCY_NAMES[pypi][1]
        version = BUNDLED_VERSIONS.get((name, deps[name]), {}).get(pypi, deps[name])
        assert spec.contains(version), f'{name} {deps[name]} ({pypi} {version}) is not {pypi}{spec}'
    python = SpecifierSet(PYPROJECT['project']['requires-python'])
    assert python.contains(deps[PYTHON_NAMES[1]])


# --- `eb` -------------------------------------------------------------------------------------

needs_eb = pytest.mark.skipif(not EB.exists() or not LMOD_INIT.exists(),
                              reason=f'needs EasyBuild ({EB}: pip install .[test]) and Lmod '
                                     f'({LMOD_INIT}: make deps)')


def _eb_environment(scratch: Path) -> dict:
    '''This venv's Python first on PATH (the filtered dependencies come from
    it), no EasyBuild configuration of the user or the machine, and none of
    the HPCNET_ variables the other tests set: a user's plain shell.'''
    env = {k: v for k, v in os.environ.items() if not k.startswith(('EASYBUILD_', 'HPCNET_'))}
    env['PATH'] = f'{Path(sys.executable).parent}{os.pathsep}{env["PATH"]}'
    env['XDG_CONFIG_HOME'] = env['XDG_CONFIG_DIRS'] = str(scratch / 'no-config')
    return env


def _in_lmod_shell(script: str, env: dict, cwd: Path, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run(['bash', '-c', f'source {LMOD_INIT}\n{script}'], env=env, cwd=cwd,
                          text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=timeout)


@needs_eb
def test_eb_resolves_every_dependency_to_an_easyconfig(tmp_path):
    '''Every dependency, by the name and version the easyconfig gives it, down
    to the toolchain: an easyconfig of EasyBuild's or one beside ours.'''
    config = _easyconfig()
    proc = _in_lmod_shell(
        f'eb {config} --dry-run-short --robot={EASYCONFIG_DIR}:{EASYBUILD_CONFIGS} '
        f'--prefix={tmp_path} --installpath={tmp_path / "install"} --tmpdir={tmp_path / "tmp"} '
        '--modules-tool=Lmod --module-syntax=Lua --allow-use-as-root-and-accept-consequences',
        _eb_environment(tmp_path), tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for name, version, *_ in _easyconfig_dict(config)['dependencies']:
        assert f'(module: {name}/{version}-' in proc.stdout, f'{name} {version} not resolved'


def _source_tarball(directory: Path) -> Path:
    '''hpcnet-<version>.tar.gz of the working tree as git sees it (tracked and
    new files, not ignored ones): what is being tested, committed or not.'''
    listed = subprocess.run(['git', '-C', str(PROJECT_ROOT), 'ls-files', '-z', '--cached',
                             '--others', '--exclude-standard'],
                            stdout=subprocess.PIPE, check=True).stdout.decode()
    tarball = directory / f'{NAME}-{VERSION}.tar.gz'
    directory.mkdir(parents=True)
    with tarfile.open(tarball, 'w:gz') as tar:
        for name in sorted(set(listed.split('\0')) - {''}):
            if (PROJECT_ROOT / name).exists():   # deleted, not yet committed
                tar.add(PROJECT_ROOT / name, arcname=f'{NAME}-{VERSION}/{name}', recursive=False)
    return tarball


def _tree_state(root: Path) -> dict:
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob('*') if p.is_file()}


@dataclass(frozen=True)
class Installed:
    prefix: Path       # software/hpcnet/<module version>
    modules: Path      # what `module use` needs
    tarball: Path
    env: dict
    scratch: Path


@pytest.fixture(scope='module')
def eb_installed(tmp_path_factory) -> Installed:
    '''hpcnet installed by `eb` from a tarball of this checkout, its Lmod
    module generated.'''
    if not EB.exists() or not LMOD_INIT.exists():
        pytest.skip(f'needs EasyBuild ({EB}) and Lmod ({LMOD_INIT})')
    scratch = tmp_path_factory.mktemp('eb-hpcnet')
    tarball = _source_tarball(scratch / 'sources')
    config = _easyconfig()
    env = _eb_environment(scratch)
    filtered = ','.join(dep[0] for dep in _easyconfig_dict(config)['dependencies'])
    start = time.monotonic()
    # The gfbf/2025b toolchain cannot be built offline: SYSTEM instead (all the
    # dependencies that would need it are filtered out).
    proc = _in_lmod_shell(
        f'eb {config} --try-toolchain=SYSTEM --disable-map-toolchains --filter-deps={filtered} '
        f'--prefix={scratch / "eb"} --installpath={scratch / "install"} --sourcepath={tarball.parent} '
        f'--buildpath={scratch / "build"} --tmpdir={scratch / "tmp"} '
        '--modules-tool=Lmod --module-syntax=Lua --allow-use-as-root-and-accept-consequences',
        env, scratch, timeout=600)
    seconds = time.monotonic() - start
    print(f'eb installed hpcnet in {seconds:.1f} s')
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert seconds < EB_SECONDS_LIMIT, f'eb took {seconds:.0f} s'
    (prefix,) = (scratch / 'install' / 'software' / NAME).iterdir()
    modules = scratch / 'install' / 'modules' / 'all'
    assert (modules / NAME / f'{prefix.name}.lua').is_file()
    return Installed(prefix, modules, tarball, env, scratch)


def _with_module(installed: Installed, commands: str, **extra_env) -> subprocess.CompletedProcess:
    '''`module load hpcnet` then commands, runs writing in a work directory of
    the test; the MPIs of this checkout's state (`make stacks`) are reused.'''
    work, state = installed.scratch / 'work', installed.scratch / 'state'
    if not state.exists():
        state.mkdir()
        if (PROJECT_ROOT / '.state' / 'mpi').is_dir():
            (state / 'mpi').symlink_to(PROJECT_ROOT / '.state' / 'mpi')
    work.mkdir(exist_ok=True)
    env = {**installed.env, WORK_DIR_ENV: str(work), STATE_DIR_ENV: str(state), **extra_env}
    return _in_lmod_shell(f'module use {installed.modules}\nmodule load {NAME}\nset -e\n{commands}',
                          env, work, timeout=600)


def test_module_sets_home_and_runs_the_installed_copy(eb_installed):
    proc = _with_module(eb_installed, f'echo "${HOME_ENV}"\n'
                                      'python -c "import hpcnet; print(hpcnet.__file__)"')
    assert proc.returncode == 0, proc.stderr
    home, package = map(Path, proc.stdout.split())
    assert home == eb_installed.prefix / 'share' / 'hpcnet'
    assert package.is_relative_to(eb_installed.prefix), 'imported the checkout, not the installation'
    # Every file of the data directories in the source tarball, and nothing else.
    with tarfile.open(eb_installed.tarball) as tar:
        shipped = {Path(*Path(m.name).parts[1:]) for m in tar.getmembers()}
    data = {p for p in shipped if p.parts[0] in ('checks', 'config', 'reference', 'src')}
    assert {p.relative_to(home) for p in home.rglob('*') if p.is_file()} == data


def test_module_hpcnet_stacks_and_listing(eb_installed):
    prefix = eb_installed.prefix
    before = _tree_state(prefix)
    proc = _with_module(eb_installed, 'hpcnet stacks\necho ---\nhpcnet run -l')
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    stacks, listing = proc.stdout.split('---\n')
    environments = [line.split()[0] for line in stacks.splitlines()
                    if line and not line.startswith((' ', 'left out', 'fabric probe'))]
    assert environments, stacks
    assert '- hpcnet_p2p ' in listing and '- hpcnet_collectives ' in listing, listing[-2000:]
    # ReFrame read the installation's configuration and checks, and wrote in the work dir.
    (running,) = [line for line in listing.splitlines() if line.startswith('hpcnet: running: ')]
    share, work = prefix / 'share' / 'hpcnet', eb_installed.scratch / 'work'
    reframe, arguments = running.removeprefix('hpcnet: running: ').split(' ', 1)
    assert Path(reframe).parent == Path(sys.executable).parent, 'the venv provides ReFrame'
    assert arguments.startswith(f'-C {share}/config/settings.py -c {share}/checks -R '
                                f'--prefix {work}/output/run --report-file {work}/reports/'), running
    # A listing logs apart from runs (reports/reframe.log is the last run's).
    assert (work / 'reports' / 'reframe-listing.log').is_file()
    assert _tree_state(prefix) == before, 'the run wrote into the installation'


def test_installed_copy_without_home_or_with_work_dir_inside_is_one_error(eb_installed):
    prefix = eb_installed.prefix
    proc = _with_module(eb_installed, f'unset {HOME_ENV}\nhpcnet stacks')
    assert proc.returncode == 2
    assert proc.stderr.startswith(f'hpcnet: error: {HOME_ENV} is not set: '), proc.stderr
    inside = prefix / 'share' / 'hpcnet' / 'work'
    proc = _with_module(eb_installed, 'hpcnet stacks', **{WORK_DIR_ENV: str(inside)})
    assert proc.returncode == 2
    assert proc.stderr == (f'hpcnet: error: {WORK_DIR_ENV}={inside}: is inside the hpcnet '
                           f'installation {prefix}; run from, or set {WORK_DIR_ENV} to, a '
                           'directory of your own\n'), proc.stderr
    assert not inside.exists()


def test_in_the_checkout_data_and_work_are_the_checkout():
    '''Nothing changes for a clone: data and runs stay in it, whatever
    HPCNET_HOME says.'''
    env = {k: v for k, v in os.environ.items() if k != WORK_DIR_ENV}
    env[HOME_ENV] = '/nonexistent'
    out = subprocess.run([sys.executable, '-c', 'from hpcnet import paths as c; '
                          'print(c.PROJECT_ROOT, c.DATA_DIR, c.WORK_DIR, c.installation_problem())'],
                         env=env, cwd='/', text=True, stdout=subprocess.PIPE, check=True).stdout
    assert out.split() == [str(PROJECT_ROOT)] * 3 + ['None']
