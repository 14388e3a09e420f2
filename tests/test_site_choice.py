"""The site decides (hpcnet.model): a site file's `stacks` (environments
included and excluded by regular expression, the PyPI MPIs off), a
partition's PMI over the fabric table's, each mistake one line naming the
file and the key; and discovery's caches and its one progress line."""
import os
import re
import subprocess
import sys

import pytest
from test_stacks import CC, make_fake_mpi

from hpcnet import fabrictable, model, stacks
from hpcnet.siteconfig import sites
from hpcnet.constants import BUILTIN_ENV
from hpcnet.paths import PROJECT_ROOT
from hpcnet.model import ConfigError, Partition
from hpcnet.model import StackChoice
from hpcnet.stacks import lmod, modulecache, modules
from hpcnet.variables import MODULEPATH_ENV
from hpcnet.stacks.discover import Environment

SITE = '''\
from hpcnet.model import partition_extras
system = {{'name': 'mysite', 'hostnames': ['^login'], 'partitions': [
  {{'name': 'eth', 'scheduler': 'slurm', 'launcher': {launcher!r},
   'extras': partition_extras(fabric='tcp', iface='eno1', num_nodes=8{pmi})}}]}}
{stacks}
'''


def _site(tmp_path, stacks_text='', launcher='srun', pmi=''):
    path = tmp_path / 'mysite.py'
    path.write_text(SITE.format(launcher=launcher, pmi=pmi, stacks=stacks_text))
    return path


def _environment(name, source):
    cand = stacks.MpiCandidate(label=name, source=source, wrapper='/x/bin/mpicc',
                               bindir='/x/bin', prefix='/x', env_name=name, compiler_in_name=True)
    mpi_stack = stacks.MpiStack(cand, 'openmpi', '5.0.11', 'Open MPI v5.0.11')
    return Environment(stacks.Compiler('gcc', '12.2.0', '/usr/bin/gcc'), mpi_stack)


FOUND = stacks.Discovery([_environment('gcc12-openmpi5', 'pypi'),
                          _environment('gcc12-openmpi4', 'debian'),
                          _environment('gompi-2023b', 'module'),
                          _environment('GCC-13_2_0-OpenMPI-4_1_6', 'module')])


def test_a_site_chooses_its_environments(tmp_path):
    _site(tmp_path, "stacks = {'environments': {'include': [r'OpenMPI', r'^gompi-'],\n"
                    "                           'exclude': [r'^gompi-2023b$']},\n"
                    "          'pypi_stacks': False}\n")
    (site,) = sites.load_site_files(tmp_path)
    assert [e.name for e in stacks.chosen_environments(FOUND, site.stacks)] == [
        'GCC-13_2_0-OpenMPI-4_1_6']
    assert site.stacks.refusal('gcc12-openmpi5', 'pypi') == 'pypi_stacks is False'
    assert site.stacks.refusal('gcc12-openmpi4', 'debian') == (
        "environments.include matches it not (OpenMPI, ^gompi-)")
    assert site.stacks.refusal('gompi-2023b', 'module') == (
        "environments.exclude '^gompi-2023b$' matches it")
    # Each environment goes to the systems that admit it; builtin to all.
    envs = stacks.reframe_environments(FOUND, {'mysite': site.stacks, 'local': StackChoice()})
    targets = {e['name']: e['target_systems'] for e in envs}
    assert targets == {'gcc12-openmpi5': ['local'], 'gcc12-openmpi4': ['local'],
                       'gompi-2023b': ['local'],
                       'GCC-13_2_0-OpenMPI-4_1_6': ['mysite', 'local'],
                       'builtin': ['mysite', 'local']}


def test_each_partition_gets_what_its_site_admits_unless_it_lists_its_own(tmp_path):
    _site(tmp_path, "stacks = {'environments': {'include': [r'^GCC-']}}\n")
    (site,) = sites.load_site_files(tmp_path)
    envs = stacks.site_environments(FOUND, [site])
    assert [p['environs'] for p in site.system['partitions']] == [
        ['GCC-13_2_0-OpenMPI-4_1_6', BUILTIN_ENV]]
    assert {e['name']: e['target_systems'] for e in envs} == {
        'GCC-13_2_0-OpenMPI-4_1_6': ['mysite'], 'builtin': ['mysite']}
    site.system['partitions'][0]['environs'] = ['gcc12-openmpi4']
    stacks.site_environments(FOUND, [site])
    assert site.system['partitions'][0]['environs'] == ['gcc12-openmpi4']


def test_without_stacks_a_site_gets_every_environment(tmp_path):
    _site(tmp_path)
    (site,) = sites.load_site_files(tmp_path)
    assert site.stacks == StackChoice()
    assert stacks.chosen_environments(FOUND, site.stacks) == FOUND.environments
    assert sites.load_system_files(tmp_path) == [site.system]


@pytest.mark.parametrize('text,message', [
    ("stacks = {'environments': {'include': ['(']}}",
     r"mysite.py: stacks.environments.include\[0\] is '\(': missing \), unterminated subpattern "
     r"at position 0 \(valid: a regular expression over environment names, as for ReFrame's -p\)$"),
    ("stacks = {'environment': {}}",
     r"mysite.py: stacks.environment is not a stacks setting \(valid: environments, pypi_stacks, "
     r"spack_env, mpi_prefixes, module_paths\)$"),
    ("stacks = {'environments': {'only': ['x']}}",
     r"mysite.py: stacks.environments.only is not a filter \(valid: include, exclude\)$"),
    ("stacks = {'environments': {'exclude': 'impi'}}",
     r"mysite.py: stacks.environments.exclude is 'impi' \(valid: a list of regular expressions"),
    ("stacks = {'pypi_stacks': 'no'}",
     r"mysite.py: stacks.pypi_stacks is 'no' \(valid: True or False\)$"),
    ("stacks = ['x']", r"mysite.py: stacks is \['x'\] \(valid: a mapping with keys"),
    ("baseline_floor = 0.5", r"mysite.py: baseline_floor is 0.5 \(valid: a fraction above 0 and "
                             r"below the tolerance cap 0.4, e.g. 0.1 for 10 %; default 0.03\)$"),
    ("baseline_floor = '10 %'", r"mysite.py: baseline_floor is '10 %' \(valid: a fraction"),
    ("baseline_floor = True", r"mysite.py: baseline_floor is True \(valid: a fraction"),
    ("report_sections = [('Mine', 'mine')]",
     r"mysite.py: report_sections is \[\('Mine', 'mine'\)\] \(valid: a list of \(heading, anchor, "
     r"function of one session's report returning the section's text\)\)$"),
])
def test_a_bad_choice_is_one_line_naming_file_and_key(tmp_path, text, message):
    _site(tmp_path, text)
    with pytest.raises(ConfigError, match=message) as err:
        sites.load_site_files(tmp_path)
    assert '\n' not in str(err.value) and str(err.value).startswith(str(tmp_path / 'mysite.py'))


def test_a_baseline_is_as_tight_as_its_site_file_allows():
    '''The testbed's file widens its baselines' floor; a system without
    baseline_floor, or none at all, gets the default.'''
    floor, source = sites.baseline_floor('testbed')
    assert floor == 0.10 and source == f'{PROJECT_ROOT / "config/systems/testbed.py"}: baseline_floor'
    assert sites.baseline_floor('local') == (0.03, 'the default')
    assert sites.baseline_floor(None) == (0.03, 'the default')


# --------------------------------------------------------------------------
# Launcher and PMI per partition
# --------------------------------------------------------------------------

def _stack(family, profile):
    return model.Stack(environ='e', mpi_family=family, mpi_profile=profile, mpi_version='5.0')


def test_the_partition_pmi_replaces_the_tables():
    table = fabrictable.load_table()
    assert table['launchers']['srun']['openmpi'] == ['--mpi=pmix']
    default = Partition.from_extras('s:p', {'fabric': 'shm'})
    assert fabrictable.settings(default, _stack('openmpi', 'openmpi'), 'srun').launcher_options[:1] \
        == ('--mpi=pmix',)
    one = Partition.from_extras('s:p', {'fabric': 'shm', 'pmi': 'pmix_v4'})
    options = fabrictable.settings(one, _stack('openmpi', 'openmpi'), 'srun').launcher_options
    assert '--mpi=pmix_v4' in options and '--mpi=pmix' not in options
    per_family = Partition.from_extras('s:p', {'fabric': 'shm',
                                               'pmi': {'mpich': 'pmix', 'openmpi': 'pmix_v3'}})
    assert '--mpi=pmix' in fabrictable.settings(per_family, _stack('mpich', 'mpich-ofi'),
                                                'srun').launcher_options
    # A family it does not name keeps the table's.
    assert '--mpi=pmi2' in fabrictable.settings(per_family, _stack('impi', 'impi'),
                                                'srun').launcher_options
    # mpirun takes no --mpi=.
    assert not any(o.startswith('--mpi') for o in fabrictable.settings(
        one, _stack('openmpi', 'openmpi'), 'mpirun').launcher_options)


@pytest.mark.parametrize('launcher,pmi,message', [
    ('srun', ", pmi='pmi3'", r"extras.pmi is 'pmi3' \(valid: pmix, pmix_v2, .*, none: what "
                            r"`srun --mpi=` takes\)$"),
    ('srun', ", pmi={'openmpi': 'x'}", r"extras.pmi.openmpi is 'x' \(valid: pmix"),
    ('srun', ", pmi={'ompi': 'pmix'}", r"extras.pmi names MPI family 'ompi' \(valid: openmpi"),
    ('srun', ", pmi=2", r"extras.pmi is 2 \(valid: one of pmix"),
    ('mpirun', ", pmi='pmix'", r"extras.pmi is for launcher 'srun', but the partition's "
                               r"launcher is 'mpirun'"),
])
def test_a_bad_pmi_is_one_line_naming_file_partition_and_key(tmp_path, launcher, pmi, message):
    _site(tmp_path, launcher=launcher, pmi=pmi)
    with pytest.raises(ConfigError, match=f'{re.escape(str(tmp_path))}/mysite.py: partition '
                                          f'mysite:eth: {message}') as err:
        sites.load_site_files(tmp_path)
    assert '\n' not in str(err.value)


def test_fabrics_validate_reports_a_bad_site_as_one_line(tmp_path):
    _site(tmp_path, "stacks = {'environments': {'include': ['[']}}")
    res = subprocess.run([sys.executable, '-m', 'hpcnet.cli', 'fabrics', 'validate'],
                         env={**os.environ, 'HPCNET_SYSTEMS_DIRS': str(tmp_path)},
                         cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert res.stderr.splitlines() == [
        f"hpcnet: error: {tmp_path / 'mysite.py'}: stacks.environments.include[0] is '[': "
        "unterminated character set at position 0 (valid: a regular expression over "
        "environment names, as for ReFrame's -p)"]


# --------------------------------------------------------------------------
# Discovery: the caches and the progress line
# --------------------------------------------------------------------------

@pytest.mark.skipif(CC is None, reason='no C compiler (cc/gcc) on PATH')
def test_probing_says_so_in_one_line_on_stderr(tmp_path, capsys):
    prefix = make_fake_mpi(tmp_path, 'openmpi', 'openmpi')

    def source(state):
        return [stacks.prefix_candidate(prefix, 'fake', 'test')]
    gcc = stacks.Compiler('gcc', '99.1.0', CC)
    stacks.discover(tmp_path / 'state', sources=[source], compilers=[gcc], fabrics=())
    out, err = capsys.readouterr()
    assert out == ''
    assert re.fullmatch(r'hpcnet: probing 1 MPI\(s\) with 1 compiler\(s\) on this host '
                        r'\(.*stacks.json: no cache yet\) \.\.\. 1 environment\(s\) in \d+ s\n', err)
    stacks.discover(tmp_path / 'state', sources=[source], compilers=[gcc], fabrics=())
    assert capsys.readouterr() == ('', '')          # the cache: no probe, nothing said
    (prefix / 'bin' / 'mpicc').touch()
    os.utime(prefix / 'bin' / 'mpicc', ns=(1, 1))
    stacks.discover(tmp_path / 'state', sources=[source], compilers=[gcc], fabrics=())
    assert 'an MPI, a compiler or the probe changed' in capsys.readouterr().err


@pytest.mark.skipif(lmod.lmod_command() is None, reason='Lmod is not installed')
@pytest.mark.skipif(CC is None, reason='no C compiler (cc/gcc) on PATH')
def test_the_module_source_runs_no_lmod_until_a_modulefile_changes(tmp_path, monkeypatch):
    prefix = make_fake_mpi(tmp_path / 'mpi', 'openmpi', 'openmpi')
    tree = tmp_path / 'modules'
    (tree / 'Core' / 'GCC').mkdir(parents=True)
    (tree / 'Core' / 'GCC' / '99.lua').write_text(
        f'prepend_path("MODULEPATH", "{tree}/Compiler/GCC/99")\n')
    mpi_file = tree / 'Compiler' / 'GCC' / '99' / 'OpenMPI' / '9.0.lua'
    mpi_file.parent.mkdir(parents=True)
    mpi_file.write_text(f'prepend_path("PATH", "{prefix}/bin")\n')
    monkeypatch.delenv('MODULEPATH', raising=False)
    monkeypatch.setenv(MODULEPATH_ENV, str(tree / 'Core'))
    surveys = []
    real_survey = modules.survey
    monkeypatch.setattr(modules, 'survey', lambda: surveys.append(1) or real_survey())
    first = modulecache.module_candidates(tmp_path)
    assert [c.label for c in first] == ['module-GCC/99 OpenMPI/9.0'] and len(surveys) == 1
    assert modulecache.module_candidates(tmp_path) == first and len(surveys) == 1
    # A level the compiler opened (outside the search path) is watched too.
    mpi_file.write_text(mpi_file.read_text() + '-- changed\n')
    os.utime(mpi_file, ns=(1, 1))
    assert modulecache.module_candidates(tmp_path) == first and len(surveys) == 2
    # A cache cut short is made again.
    (tmp_path / modulecache.CACHE_FILE).write_text('{"cut sh')
    assert modulecache.module_candidates(tmp_path) == first and len(surveys) == 3
    # `hpcnet stacks --refresh` (use_cache=False) forgets it.
    stacks.discover(tmp_path, sources=[], compilers=[], use_cache=False, fabrics=())
    assert not (tmp_path / modulecache.CACHE_FILE).exists()


def test_stacks_of_one_system_say_what_its_site_leaves_out(tmp_path, monkeypatch, capsys):
    from hpcnet import cli
    _site(tmp_path, "stacks = {'environments': {'exclude': [r'^gompi-']}, 'pypi_stacks': False}")
    monkeypatch.setenv('HPCNET_SYSTEMS_DIRS', str(tmp_path))
    discovered_for = []

    def discover(use_cache, site):
        discovered_for.append(site.system['name'])
        return stacks.Discovery(list(FOUND.environments))
    monkeypatch.setattr(stacks, 'discover', discover)
    assert cli.main(['stacks', '--system', 'mysite']) == 0
    assert discovered_for == ['mysite']
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out if not line.startswith('left out')] == [
        'gcc12-openmpi4', 'GCC-13_2_0-OpenMPI-4_1_6']
    site = tmp_path / 'mysite.py'
    assert [line for line in out if line.startswith('left out')] == [
        f'left out by {site}: gcc12-openmpi5: pypi_stacks is False',
        f"left out by {site}: gompi-2023b: environments.exclude '^gompi-' matches it"]
    assert cli.main(['stacks', '--system', 'nosuch']) == 2
    assert 'hpcnet: error: --system nosuch: no such system (valid: ' in capsys.readouterr().err


def test_the_system_is_the_last_system_option_as_reframe_reads_it():
    '''hpcnet run, config/settings.py, baseline and accept choose the system
    one way, ReFrame's (its --system keeps the last value).'''
    from hpcnet.siteconfig.reframeargs import named_system
    assert named_system(['--system', 'a', '-n', 'x', '--system=b:eth'], {}) == 'b:eth'
    assert named_system(['-n', 'x'], {'RFM_SYSTEM': 'c'}) == 'c'
    assert named_system(['--system', 'a'], {'RFM_SYSTEM': 'c'}) == 'a'
    assert named_system([], {}) == ''
