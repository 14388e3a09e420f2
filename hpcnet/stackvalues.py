"""The stack variables a site sets once, in its site file's ``stacks``.

``spack_env``, ``mpi_prefixes`` and ``module_paths`` say what
HPCNET_SPACK_ENV, HPCNET_MPI_PREFIXES and HPCNET_MODULEPATH say; a variable
set in the environment wins over its key.  Load checks the form (every site
file loads on every host); the values of the site a session runs on are
checked on disk and exported to the process before discovery, so that
discovery, its cache and the jobs read one place.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from hpcnet.model import ConfigError, SiteKey
from hpcnet.variables import MODULEPATH_ENV, MPI_PREFIXES_ENV, SPACK_ENV_VAR

SPACK_ENV, MPI_PREFIXES, MODULE_PATHS = SiteKey.SPACK_ENV, SiteKey.MPI_PREFIXES, SiteKey.MODULE_PATHS
#: Site file key -> the variable it stands for, and what the key holds.
KEYS = {SPACK_ENV: (SPACK_ENV_VAR, 'the absolute path of a Spack environment directory '
                    '(holding spack.yaml)'),
        MPI_PREFIXES: (MPI_PREFIXES_ENV, 'a list of absolute MPI installation prefixes, each '
                       'with bin/mpicc'),
        MODULE_PATHS: (MODULEPATH_ENV, 'a list of absolute directories of modulefiles')}


@dataclass(frozen=True)
class StackValue:
    """One key of a site file's ``stacks`` that stands for a variable."""
    where: str          #: the site file
    key: str
    paths: tuple        #: absolute paths, in the key's order

    @property
    def variable(self) -> str:
        return KEYS[self.key][0]

    @property
    def value(self) -> str:
        """The value as the variable spells it (colon separated)."""
        return ':'.join(self.paths)

    def error(self, what: str) -> ConfigError:
        return ConfigError(f'{self.where}: stacks.{self.key} {what} (valid: {KEYS[self.key][1]})')


def _paths(key: str, value, where: str) -> tuple:
    listed = value if key != SPACK_ENV else [value]
    valid = KEYS[key][1]
    if not isinstance(listed, (list, tuple)) or not listed:
        raise ConfigError(f'{where}: stacks.{key} is {value!r} (valid: {valid})')
    for path in listed:
        if not isinstance(path, str) or not os.path.isabs(path) or ':' in path:
            raise ConfigError(f'{where}: stacks.{key} holds {path!r} (valid: {valid}, no colon)')
    return tuple(listed)


def from_site(stacks, where: str) -> tuple:
    """The StackValues of a site file's ``stacks`` (from ``where``), their
    form checked; a ConfigError names the file and the key."""
    if not isinstance(stacks, dict):
        return ()
    return tuple(StackValue(where, key, _paths(key, stacks[key], where))
                 for key in KEYS if key in stacks)


def _check_on_disk(value: StackValue) -> None:
    for path in map(Path, value.paths):
        if value.key == SPACK_ENV and not (path / 'spack.yaml').is_file():
            raise value.error(f'{str(path)!r} holds no spack.yaml')
        if value.key == MPI_PREFIXES and not (path / 'bin' / 'mpicc').exists():
            raise value.error(f'{str(path)!r} has no bin/mpicc')
        if value.key == MODULE_PATHS and not path.is_dir():
            raise value.error(f'{str(path)!r} is not a directory')


def export(values: tuple, environ=None) -> None:
    """Set each value's variable in ``environ`` (the process's) where it is
    unset, after checking the value on disk; a set variable wins."""
    environ = os.environ if environ is None else environ
    for value in values:
        if not environ.get(value.variable):
            _check_on_disk(value)
            environ[value.variable] = value.value


def in_force(variable: str, values: tuple, environ) -> tuple | None:
    """(value, where it came from) of a stack variable a site file may set:
    the environment's (naming the site file it wins over), else the site
    file's; None where neither sets it."""
    site = next((v for v in values if v.variable == variable), None)
    if environ.get(variable):
        over = f' (wins over site file {site.where}: stacks.{site.key})' if site else ''
        return environ[variable], f'environment{over}'
    if site:
        return site.value, f'site file {site.where}: stacks.{site.key}'
    return None
