"""Hierarchical Lmod trees (Core -> Compiler -> MPI) as a stack source
(hpcnet.stacks.modules): the layout Spack's Lmod generator writes, by hand
over fake MPIs; and a real tree made by EasyBuild with HierarchicalMNS of
this machine's GCC and MPIs, whose environments are found, loaded in the job
and run by the p2p check."""
import os
import re
from pathlib import Path

import pytest
from conftest import discovery_of_tree, env_regex, run_reframe
from test_stacks import CC, make_fake_mpi

from hpcnet import stacks
from hpcnet.paths import PROJECT_ROOT
from hpcnet.mpi import MpiFamily
from hpcnet.stacks import lmod, modulecache, modulenames, modules
from hpcnet.variables import MODULEPATH_ENV

needs_lmod = pytest.mark.skipif(lmod.lmod_command() is None,
                                reason='Lmod is not installed (Debian package lmod; LMOD_CMD unset)')
needs_cc = pytest.mark.skipif(CC is None, reason='no C compiler (cc/gcc) on PATH')


def _modulefile(path: Path, body: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)


@pytest.fixture
def spack_hierarchy(tmp_path, monkeypatch):
    '''What Spack's Lmod generator writes (hierarchy: [mpi]): Core/gcc/<v>
    opens gcc/<v>, where openmpi/5.0.5 (the same name under each compiler)
    opens openmpi/5.0.5-<hash>/gcc/<v>, where OSU is; and, in a flat directory
    of the search path, an EasyBuild MPI whose name says its compiler.'''
    root = tmp_path / 'lmod' / 'linux-debian12-x86_64'
    prefixes = {}
    for version, digest in (('99.1.0', 'aaaaaaa'), ('98.1.0', 'bbbbbbb')):
        mpi_prefix = make_fake_mpi(tmp_path / f'mpi-{version}', 'openmpi', 'openmpi')
        prefixes[version] = mpi_prefix
        _modulefile(root / 'Core' / 'gcc' / f'{version}.lua',
                    f'family("compiler")\nprepend_path("MODULEPATH", "{root}/gcc/{version}")\n')
        mpi_level = root / f'openmpi/5.0.5-{digest}' / 'gcc' / version
        _modulefile(root / 'gcc' / version / 'openmpi' / '5.0.5.lua',
                    f'family("mpi")\nprepend_path("MODULEPATH", "{mpi_level}")\n'
                    f'prepend_path("PATH", "{mpi_prefix}/bin")\n'
                    f'prepend_path("LD_LIBRARY_PATH", "{mpi_prefix}/lib")\n')
        osu = tmp_path / f'osu-{version}'
        bindir = osu / 'libexec' / 'osu-micro-benchmarks' / 'mpi' / 'pt2pt'
        bindir.mkdir(parents=True)
        (bindir / 'osu_latency').write_text('#!/bin/sh\n')
        (bindir / 'osu_latency').chmod(0o755)
        _modulefile(mpi_level / 'osu-micro-benchmarks' / '7.4.lua',
                    f'prepend_path("PATH", "{bindir}")\n')
    flat = tmp_path / 'eb' / 'modules' / 'all'
    eb_prefix = make_fake_mpi(tmp_path / 'mpi-eb', 'openmpi', 'openmpi')
    _modulefile(flat / 'OpenMPI' / '4.1.6-GCC-13.2.0.lua',
                f'prepend_path("PATH", "{eb_prefix}/bin")\n')
    monkeypatch.delenv('MODULEPATH', raising=False)
    monkeypatch.setenv(MODULEPATH_ENV, f'{root / "Core"}:{flat}')
    return {'root': root, 'flat': flat, 'prefixes': prefixes, 'eb': eb_prefix,
            'osu': {v: tmp_path / f'osu-{v}' for v in prefixes}}


@needs_lmod
@needs_cc
def test_walks_each_compiler_and_finds_its_mpi(spack_hierarchy):
    root = spack_hierarchy['root']
    found = modules.survey()
    by_label = {c.label: c for c in found.candidates}
    assert sorted(by_label) == ['module-OpenMPI/4.1.6-GCC-13.2.0',
                                'module-gcc/98.1.0 openmpi/5.0.5',
                                'module-gcc/99.1.0 openmpi/5.0.5'], found.skipped
    # What each compiler opened, and what each MPI opened, were listed.
    assert set(found.opened) == {str(root / 'gcc' / '99.1.0'), str(root / 'gcc' / '98.1.0'),
                                 str(root / 'openmpi/5.0.5-aaaaaaa/gcc/99.1.0'),
                                 str(root / 'openmpi/5.0.5-bbbbbbb/gcc/98.1.0')}
    for version in ('99.1.0', '98.1.0'):
        cand = by_label[f'module-gcc/{version} openmpi/5.0.5']
        # The same name under two compilers: two MPIs, each with its own OSU.
        assert cand.wrapper == str(spack_hierarchy['prefixes'][version] / 'bin' / 'mpicc')
        assert cand.expected_family == MpiFamily.OPENMPI
        # The job loads the compiler from Core, then the MPI it opened, then OSU.
        assert cand.modules == ({'name': f'gcc/{version}', 'path': str(root / 'Core')},
                                {'name': 'openmpi/5.0.5'}, {'name': 'osu-micro-benchmarks/7.4'})
        assert cand.tool_prefixes == (str(spack_hierarchy['osu'][version]),)
        assert cand.env_name == f'gcc-{version.replace(".", "_")}-openmpi-5_0_5'
        assert cand.compiler_in_name and cand.compiler_command == CC
    flat = by_label['module-OpenMPI/4.1.6-GCC-13.2.0']
    assert flat.modules == ({'name': 'OpenMPI/4.1.6-GCC-13.2.0',
                             'path': str(spack_hierarchy['flat'])},)
    assert flat.compiler_in_name and flat.env_name == 'OpenMPI-4_1_6-GCC-13_2_0'
    assert 'levels opened by compiler and MPI modules' in found.summary()


@needs_lmod
@needs_cc
def test_module_mpis_take_their_own_compiler_only(spack_hierarchy, tmp_path):
    # Compilers of the machine that no module MPI was built with: none is used.
    others = [stacks.Compiler('gcc', '97.0.0', CC), stacks.Compiler('clang', '96.0.0', CC)]
    found = stacks.discover(tmp_path / 'state', sources=[modulecache.module_candidates],
                            compilers=others, fabrics=())
    names = sorted(e.name for e in found.environments)
    assert names == ['OpenMPI-4_1_6-GCC-13_2_0', 'gcc-98_1_0-openmpi-5_0_5',
                     'gcc-99_1_0-openmpi-5_0_5'], found.rejected
    for env in found.environments:
        assert env.compiler.command == CC and env.compiler not in others
        assert env.primary and modulenames.ENVIRONMENT_NAME.fullmatch(env.name)
        # One compiler in each name: no 'gcc97-OpenMPI-4_1_6-GCC-13_2_0'.
        assert not re.match(r'(gcc|clang)\d+-', env.name), env.name
    gcc99 = next(e for e in found.environments if e.name.startswith('gcc-99'))
    assert 'osu' in gcc99.features
    assert gcc99.to_reframe(['local'])['modules'][:2] == [
        {'name': 'gcc/99.1.0', 'path': str(spack_hierarchy['root'] / 'Core')},
        {'name': 'openmpi/5.0.5'}]


def test_a_module_mpi_whose_wrapper_names_no_compiler_is_left_out(tmp_path):
    wrapper = tmp_path / 'mpicc'
    wrapper.write_text('#!/bin/sh\nexit 1\n')
    wrapper.chmod(0o755)
    skipped = []
    chosen = modules._Chosen(modulenames.AvailableModule('OpenMPI/0.1', '/m'), {'PATH': str(tmp_path)},
                             '/m/OpenMPI/0.1.lua', {'/m/OpenMPI/0.1.lua'})
    assert modules._candidate(chosen, {}, skipped) is None
    assert skipped == [('OpenMPI/0.1', f'{wrapper} names no compiler on the module\'s PATH '
                                       '(--showme:command or -show): a module MPI is paired '
                                       'with its own compiler only')]


@pytest.mark.parametrize('module,names_it', [
    ('OpenMPI/4.1.6-GCC-13.2.0', True), ('openmpi/5.0.5-gcc-12.2.0-abcdefg', True),
    ('impi/2021.9.0-intel-compilers-2023.1.0', True), ('gompi/2023b', True),
    ('MPICH/9.1.2', False), ('openmpi/5.0.5', False), ('mpich/4.2-gccfoo', False),
])
def test_names_compiler(module, names_it):
    assert modulenames.AvailableModule(module, '/m').names_compiler() is names_it


def test_a_hierarchy_module_names_its_compiler_first():
    compiler = modulenames.AvailableModule('GCC/13.2.0', '/t/Core')
    mpi_module = modulenames.AvailableModule('OpenMPI/4.1.6', '/t/Compiler/GCC/13.2.0', (compiler,))
    assert mpi_module.names_compiler() and mpi_module.title == 'GCC/13.2.0 OpenMPI/4.1.6'
    assert mpi_module.environment_name() == 'GCC-13_2_0-OpenMPI-4_1_6'
    assert mpi_module.specs() == ({'name': 'GCC/13.2.0', 'path': '/t/Core'},
                                  {'name': 'OpenMPI/4.1.6'})


# --------------------------------------------------------------------------
# EasyBuild HierarchicalMNS + Lmod + ReFrame: this machine's GCC and MPIs
# --------------------------------------------------------------------------

@pytest.fixture(scope='module')
def hierarchical_discovery(hierarchical_tree, tmp_path_factory):
    '''(variables a ReFrame run needs, the discovery it makes), as
    conftest's module_discovery for the flat tree.'''
    return discovery_of_tree(hierarchical_tree, tmp_path_factory.mktemp('hmns-state'))


@pytest.mark.integration
def test_easybuild_hierarchical_tree_yields_environments(hierarchical_tree, hierarchical_discovery):
    core = hierarchical_tree.modulepath
    assert core.name == 'Core' and (core / 'GCC' / 'system.lua').is_file()
    assert (core.parent / 'Compiler' / 'GCC' / 'system' / 'OpenMPI' / 'system.lua').is_file()
    _, found = hierarchical_discovery
    envs = {e.name: e for e in found.environments if e.mpi.candidate.source == 'module'}
    assert 'GCC-system-OpenMPI-system' in envs, found.rejected
    openmpi = envs['GCC-system-OpenMPI-system']
    assert openmpi.mpi.candidate.modules == ({'name': 'GCC/system', 'path': str(core)},
                                             {'name': 'OpenMPI/system'})
    assert openmpi.mpi.family == MpiFamily.OPENMPI and openmpi.compiler.family == 'gcc'
    if os.path.exists('/usr/bin/mpicc.mpich'):
        assert envs['GCC-system-MPICH-system'].mpi.family == MpiFamily.MPICH
    # One environment per module MPI, with its own compiler: not one per
    # compiler of the machine (gcc-11, clang).
    assert all(not re.match(r'(gcc|clang)\d+-', name) for name in envs), sorted(envs)


@pytest.mark.integration
def test_p2p_runs_through_the_hierarchy(hierarchical_tree, hierarchical_discovery, tmp_path):
    '''ReFrame loads the compiler, then the MPI it opens, in the job, and the
    p2p check passes with it.'''
    variables, found = hierarchical_discovery
    name = 'GCC-system-OpenMPI-system'
    assert name in [e.name for e in found.environments], found.rejected
    proc, cases = run_reframe(
        tmp_path, '-c', str(PROJECT_ROOT / 'checks' / 'p2p.py'), '-n', '^hpcnet_p2p.*mode=pingpong',
        '-p', env_regex([name]), '-S', 'time_per_size_ms=5', system='local:shm', retries=0,
        env=variables, timeout=600)
    p2p = [c for c in cases if c['name'].startswith('hpcnet_p2p')]
    assert [c['environ'] for c in p2p] == [name], proc.stdout[-3000:]
    case = p2p[0]
    assert case['result'] == 'pass', case.get('fail_reason')
    outdir = Path(case['outputdir'])
    script = (outdir / 'rfm_job.sh').read_text()
    assert (f'module use {hierarchical_tree.modulepath}\nmodule load GCC/system\n'
            'module load OpenMPI/system\n') in script
    errors = (outdir / 'rfm_job.err').read_text()
    assert not re.search(r'Lmod has detected|module: command not found', errors), errors
    assert case['mpi_library'].startswith('Open MPI v')
