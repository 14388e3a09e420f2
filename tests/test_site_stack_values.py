"""The stack variables a site sets once (HPCNET_SPACK_ENV,
HPCNET_MPI_PREFIXES, HPCNET_MODULEPATH) set in its site file's ``stacks``:
discovery reads the chosen site's values, a variable set in the
environment wins and `hpcnet config` says which, and a bad value is one
line naming the file, the key and what is valid."""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpcnet import cli, stacks
from hpcnet.siteconfig import sites
from hpcnet.constants import SYSTEMS_DIR
from hpcnet.exitcodes import Exit
from hpcnet.model import ConfigError
from hpcnet.stacks.sources import extra_prefix_candidates
from hpcnet.variables import MODULEPATH_ENV, MPI_PREFIXES_ENV, SPACK_ENV_VAR, SYSTEMS_DIRS_ENV

HPCNET = Path(sys.executable).with_name('hpcnet')
EXAMPLE_SITE = (SYSTEMS_DIR / 'example.py').read_text().replace("'example'", "'mysite'")
STACK_VARIABLES = (SPACK_ENV_VAR, MPI_PREFIXES_ENV, MODULEPATH_ENV)


def _prefix(root: Path, name: str) -> Path:
    '''An MPI installation prefix as discovery recognises one (bin/mpicc).'''
    (root / name / 'bin').mkdir(parents=True)
    (root / name / 'bin' / 'mpicc').write_text('#!/bin/sh\n')
    return root / name


def _site_dir(tmp_path: Path, stacks_setting: str) -> Path:
    systems = tmp_path / 'sites'
    systems.mkdir(exist_ok=True)
    (systems / 'mysite.py').write_text(f'{EXAMPLE_SITE}\nstacks = {stacks_setting}\n')
    return systems


@pytest.fixture
def clean_environment(monkeypatch):
    # Set first, so that what discovery exports is undone after the test.
    for name in STACK_VARIABLES:
        monkeypatch.setenv(name, '')
        monkeypatch.delenv(name)
    return monkeypatch


def _prefixes_discovery_sees(tmp_path: Path, site) -> list:
    '''The prefixes of the candidates HPCNET_MPI_PREFIXES gives discovery of
    ``site``; nothing is probed.'''
    seen = []

    def source(state):
        seen.extend(c.prefix for c in extra_prefix_candidates(state))
        return []
    stacks.discover(tmp_path / 'state', sources=[source], compilers=[], site=site)
    return seen


def test_discovery_reads_the_chosen_sites_prefixes(tmp_path, clean_environment):
    first, second = _prefix(tmp_path, 'mpi-a'), _prefix(tmp_path, 'mpi-b')
    systems = _site_dir(tmp_path, f"{{'mpi_prefixes': [{str(first)!r}, {str(second)!r}]}}")
    site, = sites.load_site_files(systems)
    assert _prefixes_discovery_sees(tmp_path, site) == [str(first), str(second)]
    assert os.environ[MPI_PREFIXES_ENV] == f'{first}:{second}'


def test_the_variable_wins_over_the_site_file(tmp_path, clean_environment):
    mine, sites_own = _prefix(tmp_path, 'mine'), _prefix(tmp_path, 'sites-own')
    systems = _site_dir(tmp_path, f"{{'mpi_prefixes': [{str(sites_own)!r}]}}")
    site, = sites.load_site_files(systems)
    clean_environment.setenv(MPI_PREFIXES_ENV, str(mine))
    assert _prefixes_discovery_sees(tmp_path, site) == [str(mine)]


def test_without_a_site_discovery_reads_the_variables_alone(tmp_path, clean_environment):
    assert _prefixes_discovery_sees(tmp_path, None) == []


def test_spack_env_and_module_paths_reach_their_variables(tmp_path, clean_environment):
    env_dir, modules = tmp_path / 'spack-env', tmp_path / 'modules'
    env_dir.mkdir()
    (env_dir / 'spack.yaml').write_text('spack: {specs: []}\n')
    modules.mkdir()
    systems = _site_dir(tmp_path, f"{{'spack_env': {str(env_dir)!r}, "
                                  f"'module_paths': [{str(modules)!r}]}}")
    site, = sites.load_site_files(systems)
    stacks.discover(tmp_path / 'state', sources=[], compilers=[], site=site)
    assert os.environ[SPACK_ENV_VAR] == str(env_dir)
    assert os.environ[MODULEPATH_ENV] == str(modules)


def test_a_value_missing_on_disk_names_the_file_and_key(tmp_path, clean_environment):
    systems = _site_dir(tmp_path, f"{{'mpi_prefixes': [{str(tmp_path / 'nompi')!r}]}}")
    site, = sites.load_site_files(systems)
    with pytest.raises(stacks.StackError) as err:
        stacks.discover(tmp_path / 'state', sources=[], compilers=[], site=site)
    assert str(err.value) == (f"{systems / 'mysite.py'}: stacks.mpi_prefixes "
                              f"'{tmp_path / 'nompi'}' has no bin/mpicc (valid: a list of "
                              'absolute MPI installation prefixes, each with bin/mpicc)')
    assert MPI_PREFIXES_ENV not in os.environ


@pytest.mark.parametrize('setting, named', [
    ("{'spack_env': 'spack-env'}", "stacks.spack_env holds 'spack-env' (valid: the absolute "
                                   'path of a Spack environment directory'),
    ("{'mpi_prefixes': '/opt/mpi'}", "stacks.mpi_prefixes is '/opt/mpi' (valid: a list of "
                                     'absolute MPI installation prefixes'),
    ("{'module_paths': ['/a:/b']}", "stacks.module_paths holds '/a:/b' (valid: a list of "
                                    'absolute directories of modulefiles, no colon)'),
    ("{'module_path': ['/a']}", 'stacks.module_path is not a stacks setting (valid: '
                                'environments, pypi_stacks, spack_env, mpi_prefixes, '
                                'module_paths)'),
], ids=['relative', 'not-a-list', 'colon', 'unknown-key'])
def test_a_bad_value_is_one_line_at_load_and_in_validate(tmp_path, monkeypatch, setting, named):
    systems = _site_dir(tmp_path, setting)
    with pytest.raises(ConfigError) as err:
        sites.load_site_files(systems)
    assert str(err.value).startswith(f"{systems / 'mysite.py'}: {named}"), err.value
    monkeypatch.setenv(SYSTEMS_DIRS_ENV, str(systems))
    out = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(out):
        code = cli.main(['fabrics', 'validate'])
    assert code == Exit.USAGE
    assert out.getvalue().count('\n') == 1 and named in out.getvalue(), out.getvalue()


def _config_line(stdout: str, name: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith(f'{name} '))


def test_config_says_which_of_variable_and_site_file_is_in_force(tmp_path):
    prefix, modules, mine = _prefix(tmp_path, 'mpi'), tmp_path / 'modules', tmp_path / 'mine'
    modules.mkdir()
    mine.mkdir()
    systems = _site_dir(tmp_path, f"{{'mpi_prefixes': [{str(prefix)!r}], "
                                  f"'module_paths': [{str(modules)!r}]}}")
    env = {k: v for k, v in os.environ.items() if k not in STACK_VARIABLES}
    env.update({SYSTEMS_DIRS_ENV: str(systems), MODULEPATH_ENV: str(mine)})
    res = subprocess.run([str(HPCNET), 'config', '--system', 'mysite'], text=True,
                         capture_output=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    site_file = systems / 'mysite.py'
    assert _config_line(res.stdout, MPI_PREFIXES_ENV).endswith(
        f'= {prefix}  [site file {site_file}: stacks.mpi_prefixes]')
    assert _config_line(res.stdout, MODULEPATH_ENV).endswith(
        f'= {mine}  [environment (wins over site file {site_file}: stacks.module_paths)]')
    assert _config_line(res.stdout, SPACK_ENV_VAR).endswith('[default]')
