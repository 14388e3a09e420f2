"""`hpcnet config` prints every setting and variable in force with its
source, and the HPCNET_* variables are named in one table
(hpcnet/variables.py) that the code, the command and the docs share."""
import functools
import re

from helpers import run_hpcnet

from hpcnet import model, variables
from hpcnet.siteconfig import sites
from hpcnet.constants import OUTPUT_DIR, REFERENCE_DIR
from hpcnet.paths import PROJECT_ROOT

#: Where the code reads variables (src/: the kernels; Makefile: the build).
CODE = [PROJECT_ROOT / d for d in ('hpcnet', 'config', 'checks', 'src')]
SITE = '''\
from hpcnet.model import partition_extras
system = {'name': 'mysite', 'hostnames': [r'^mysite-login\\d+$'], 'partitions': [
    {'name': 'eth', 'scheduler': 'slurm', 'launcher': 'srun', 'access': ['--partition=eth'],
     'extras': partition_extras(fabric='tcp', iface='eno1', num_nodes=4, pmi='pmix')}]}
stacks = {'environments': {'exclude': [r'impi']}, 'pypi_stacks': False}
'''


def _sources() -> dict:
    '''{path: text without its import statements} of the code.'''
    return {p: _without_imports(p.read_text()) for d in CODE for p in sorted(d.rglob('*'))
            if p.suffix in ('.py', '.h', '.c') and '__pycache__' not in p.parts}


def test_every_variable_the_code_reads_is_in_the_table():
    named = {v.name for v in variables.VARIABLES}
    texts = _sources().values()
    found = {m for text in texts for m in re.findall(r'HPCNET_[A-Z_0-9]+', text)}
    # A header's include guard (#ifndef X / #define X) is a macro, not a variable.
    guards = {m for text in texts for m in re.findall(r'^#ifndef (HPCNET_\w+_H)\n#define \1$', text, re.M)}
    assert found - guards - named == set()
    # ... and every entry of the table is read somewhere: used, not only
    # imported.
    read = {name for name in named
            if any(name in text or re.search(rf'\b{_constant(name)}\b', text)
                   for path, text in _sources().items() if path.name != 'variables.py')}
    assert named - read == set()


def _without_imports(text: str) -> str:
    return _IMPORT.sub('', text)


_IMPORT = re.compile(r'^\s*(from\s+\S+\s+)?import\s+(\([^)]*\)|.*(\\\n.*)*)$', re.M)


def _constant(name: str) -> str:
    '''The name hpcnet/variables.py gives a variable's name.'''
    (constant,) = [k for k, v in vars(variables).items() if v == name and k.isupper()]
    return constant


def test_names_are_spelled_only_in_the_table():
    spelled = {str(path.relative_to(PROJECT_ROOT)): re.findall(r'[\'"]HPCNET_[A-Z_0-9]+', text)
               for path, text in _sources().items()
               if path.suffix == '.py' and path.name != 'variables.py'}
    assert {p: names for p, names in spelled.items() if names} == {}


def test_the_site_guide_holds_the_table():
    guide = (PROJECT_ROOT / 'docs' / 'site-guide.md').read_text()
    assert variables.markdown() in guide


#: `hpcnet config` run from the project's root.
_config = functools.partial(run_hpcnet, 'config', cwd=PROJECT_ROOT, timeout=120)


def _settings(stdout: str) -> dict:
    '''{name: (value, source)} of `hpcnet config`'s lines (the last of a name).'''
    found = {}
    for line in stdout.splitlines():
        m = re.fullmatch(r'(\S.*?)\s+= (.*)  \[(.*)\]', line)
        if m:
            found[m.group(1)] = (m.group(2), m.group(3))
    return found


def test_config_says_where_each_setting_came_from(tmp_path):
    systems, refs = tmp_path / 'sites', tmp_path / 'refs'
    systems.mkdir()
    refs.mkdir()
    (systems / 'mysite.py').write_text(SITE)
    env = {'HPCNET_SYSTEMS_DIRS': str(systems), 'HPCNET_REFERENCE_DIR': str(refs),
           'RFM_PREFIX': str(tmp_path / 'rfm')}
    res = _config('--system', 'mysite', env=env)
    assert res.returncode == 0, res.stderr
    got = _settings(res.stdout)
    where = f'site file {systems / "mysite.py"}'
    assert got['system'] == ('mysite', 'command line (--system)')
    assert got['site file'][0] == str(systems / 'mysite.py')
    assert got['site file'][1] == 'in environment variable HPCNET_SYSTEMS_DIRS'
    assert got['partition eth'] == ('fabric tcp, scheduler slurm, launcher srun, pmi pmix, '
                                    'access --partition=eth, max_jobs 1 (config/settings.py)',
                                    where)
    assert got['stacks'] == ("include [], exclude ['impi'], pypi_stacks False", where)
    assert got['reference dir'] == (str(refs), 'environment variable HPCNET_REFERENCE_DIR')
    assert got['reference file'] == (f'{refs / "mysite.yaml"} (none: runs record values and '
                                     'judge none)', 'environment variable HPCNET_REFERENCE_DIR')
    assert got['HPCNET_REFERENCE_DIR'] == (str(refs), 'environment')
    assert got['HPCNET_SPACK_LOCK'][1] == 'default'
    assert got['prefix (reframe -r)'] == (str(tmp_path / 'rfm'), 'environment variable RFM_PREFIX')
    assert got['prefix (hpcnet run)'] == (str(OUTPUT_DIR / '<report name>'), 'hpcnet run --prefix '
                                          'under default (default report name: run)')
    assert got['execution policy'][0].startswith('serial under hpcnet run')
    # Every variable of the table has its line.
    assert {v.name for v in variables.VARIABLES} <= set(got)
    # Environments come from the cache, never from a probe.
    assert 'probing' not in res.stderr
    assert not any('impi' in name for name in got['environments'][0].split(', '))


def test_config_names_the_host_match_and_its_defaults(tmp_path):
    res = _config(env={'HPCNET_REFERENCE_DIR': ''})
    assert res.returncode == 0, res.stderr
    got = _settings(res.stdout)
    assert got['system'][0] == 'local' and got['system'][1].startswith(
        "hostname matches '.*' of site file "), got['system']
    assert got['reference dir'] == (str(REFERENCE_DIR), 'default')
    assert got['execution policy'][0].startswith('serial only: its ranks share the cores')


def test_config_on_a_host_no_site_file_names_is_one_error(tmp_path):
    systems = tmp_path / 'sites'
    systems.mkdir()
    (systems / 'mysite.py').write_text(SITE)
    res = _config(env={'HPCNET_SYSTEMS_DIRS': str(systems)})
    assert res.returncode == 2
    # Everything else is still shown, then the one line.
    assert 'HPCNET_SYSTEMS_DIRS' in res.stdout and 'Traceback' not in res.stderr
    assert res.stderr.startswith("hpcnet: error: host ") and 'matches no site file: mysite' \
        in res.stderr, res.stderr
    res = _config('--system', 'nosuch', env={'HPCNET_SYSTEMS_DIRS': str(systems)})
    assert res.returncode == 2 and 'hpcnet: error: --system nosuch: no such system (valid: ' \
        'example, local, mysite, testbed)' in res.stderr, res.stderr


def test_the_first_matching_site_is_the_system():
    def site(name, *patterns):
        return sites.SiteFile(f'{name}.py', {'name': name, 'hostnames': list(patterns),
                                             'partitions': []}, model.StackChoice())
    chosen = [site('a', r'^login\d$'), site('b', r'^log'), site('local', '.*')]
    assert sites.matching_system(chosen, 'login1')[0].system['name'] == 'a'
    assert sites.matching_system(chosen, 'logger')[1] == r'^log'
    assert sites.matching_system(chosen, 'x')[0].system['name'] == 'local'
    assert sites.matching_system(chosen[:2], 'x') is None


def test_systems_whose_ranks_share_a_host():
    def system(**part):
        return {'partitions': [{'scheduler': 'slurm', 'extras': {}, **part}]}
    assert sites.shares_host_cores(system(scheduler='local'))
    assert sites.shares_host_cores(system(extras={'nodes_share_cores': True}))
    assert not sites.shares_host_cores(system())


def test_the_session_runs_on_the_named_system_else_the_matching_one():
    def site(name, *patterns):
        return sites.SiteFile(f'{name}.py', {'name': name, 'hostnames': list(patterns),
                                             'partitions': []}, model.StackChoice())
    chosen = [site('a', r'^login\d$'), site('local', '.*')]
    assert sites.selected_site(chosen, 'local:tcp', 'login1').system['name'] == 'local'
    assert sites.selected_site(chosen, '', 'login1').system['name'] == 'a'
    assert sites.selected_site(chosen, 'nosuch', 'login1') is None
    assert sites.selected_site(chosen[:1], '', 'x') is None


def test_config_follows_reframes_own_system_variable():
    res = _config(env={'RFM_SYSTEM': 'example'})
    assert res.returncode == 0, res.stderr
    assert _settings(res.stdout)['system'] == ('example', 'environment variable RFM_SYSTEM')
    res = _config(env={'RFM_SYSTEM': 'nosuch'})
    assert res.returncode == 2 and 'hpcnet: error: RFM_SYSTEM=nosuch: no such system' in res.stderr
