"""The MPI registry (hpcnet.mpi): a new family is one registry entry plus one
fabric-table profile, and the registry sits below everything that reads it.

The fake family "fakempi" is registered with :func:`hpcnet.mpi.register` and
given a profile in a temporary copy of config/fabrics.yaml; nothing else is
touched, and discovery, the probe, the library check, module and Spack
names, the transport report and its known issue all pick it up.
"""
import re
import subprocess
import sys
from pathlib import Path

import pytest
from reframe.core.exceptions import SanityError
from helpers import registered_entry, shipped_fabric_table, write_fabric_table
from test_stacks import CC, FAKE_MPI_API, FAKE_MPI_LIBRARY

from hpcnet import fabrictable, mpi, stacks
from hpcnet.checklib import sanity
from hpcnet.stacks import modulenames, sources
from hpcnet.constants import Fabric
from hpcnet.model import Partition, Stack

FAKE = 'fakempi'
#: What the fake MPI prints when its transport report is on.
FAKE_REPORT = re.compile(r'^fakempi: peer over (\S+)$', re.M)


def _fake_transports(text: str) -> set:
    return set(FAKE_REPORT.findall(text))


FAKE_ENTRY = mpi.FamilyEntry(
    name=FAKE,
    wrapper_cc_variable='FAKEMPI_CC',
    wrapper_show_args=('-show',),
    header_macro='FAKEMPI_VERSION',
    library_pattern=re.compile(r'FakeMPI Version (\d+\.\d+\.\d+)'),
    transport_parsers=(mpi.TransportParser('fakempi', _fake_transports),),
    spack_packages=('fakempi',),
    easybuild_name='FakeMPI',
    module_packages=('fakempi',),
    mpi_toolchains=('gfakempi',),
    known_issues=(mpi.KnownIssue(
        name='fakempi-1.2-init-crash', family=FAKE, version_series='1.2', layer=None,
        phase=mpi.Phase.INIT, explanation='FakeMPI 1.2 crashes in MPI_Init',
        upstream='none', required_frames=('fakempi_init',)),),
)


fakempi = registered_entry(mpi, FAKE_ENTRY)


@pytest.fixture
def fabric_table(tmp_path):
    '''config/fabrics.yaml plus the fake family's profile.'''
    table = shipped_fabric_table()
    table['profiles'][FAKE] = {'report': {'env': {'FAKEMPI_REPORT': '1'}, 'parser': 'fakempi'}}
    table['fabrics'][Fabric.TCP][FAKE] = {'env': {'FAKEMPI_NET': 'tcp:{iface}'},
                                          'expect': ['tcp']}
    return write_fabric_table(tmp_path / 'fabrics.yaml', table)


def make_fake_prefix(root: Path) -> Path:
    '''A FakeMPI 1.2.3 installation: include/mpi.h, lib/libmpi.so, bin/mpicc
    (which honours FAKEMPI_CC, the entry's wrapper variable).'''
    prefix = root / FAKE
    for d in ('bin', 'include', 'lib'):
        (prefix / d).mkdir(parents=True)
    (prefix / 'include' / 'mpi.h').write_text(
        '#pragma once\n#define MPI_MAX_LIBRARY_VERSION_STRING 256\n'
        '#define FAKEMPI_VERSION "1.2.3"\n' + FAKE_MPI_API)
    src = prefix / 'lib' / 'mpi.c'
    src.write_text('#include <string.h>\n#include <mpi.h>\n'
                   'int MPI_Get_library_version(char *v, int *len) {\n'
                   '  strcpy(v, "FakeMPI Version 1.2.3 (test)"); *len = (int)strlen(v); return 0; }\n'
                   + FAKE_MPI_LIBRARY)
    subprocess.run([CC, '-shared', '-fPIC', f'-I{prefix}/include', str(src), '-o',
                    str(prefix / 'lib' / 'libmpi.so')], check=True)
    wrapper = prefix / 'bin' / 'mpicc'
    wrapper.write_text(f'#!/bin/sh\nexec "${{FAKEMPI_CC:-{CC}}}" -I{prefix}/include "$@" '
                       f'-L{prefix}/lib -Wl,-rpath,{prefix}/lib -lmpi\n')
    wrapper.chmod(0o755)
    return prefix


@pytest.mark.skipif(CC is None, reason='no C compiler (cc/gcc) on PATH')
def test_discovery_probes_and_names_a_registered_family(tmp_path, fakempi):
    assert '#elif defined(FAKEMPI_VERSION)\n    printf("header: fakempi %s\\n", FAKEMPI_VERSION);' \
        in stacks.probe_source()
    prefix = make_fake_prefix(tmp_path)
    compiler = stacks.Compiler('gcc', '99.1.0', CC)
    found = stacks.discover(tmp_path / 'state', compilers=[compiler], fabrics=(),
                            sources=[lambda state: [stacks.prefix_candidate(prefix, 'fake',
                                                                            'test')]])
    assert found.rejected == []
    env, = found.environments
    assert (env.name, env.mpi.family, env.mpi.version) == ('gcc99-fakempi1', FAKE, '1.2.3')
    assert FAKE in env.features
    cfg = env.to_reframe(['local'])
    assert ['FAKEMPI_CC', CC] in cfg['env_vars']
    assert cfg['extras']['mpi_known_issue'] == 'fakempi-1.2-init-crash'


def test_library_check_and_known_issue_read_the_entry(fakempi):
    assert mpi.library_family('FakeMPI Version 1.2.3 (test)') == (FAKE, '1.2.3')
    stack = Stack(environ='e', mpi_family=FAKE, mpi_profile=FAKE, mpi_version='1.2.3',
                  known_issue='fakempi-1.2-init-crash')
    sanity.check_library('FakeMPI Version 1.2.3 (test)', stack)
    with pytest.raises(SanityError, match='linked to the wrong MPI'):
        sanity.check_library('Open MPI v4.1.4, package: Debian', stack)
    built = Stack(environ='clang14-fakempi1', mpi_family=FAKE, mpi_profile=FAKE,
                  mpi_version='1.2.3', compiler_family='clang', compiler_version='14.0.6')
    assert built.compiler_mismatch('clang 14.0.6') is None
    assert built.compiler_mismatch('clang 14.0.9') is None     # to the minor version
    assert built.compiler_mismatch('') is None                 # an output from before the line
    assert built.compiler_mismatch('gcc 12.2.0') == (
        'the kernel was built by gcc 12.2.0 but environment clang14-fakempi1 is clang 14.0.6: '
        "the MPI wrapper did not call the environment's compiler")
    assert 'did not call' in built.compiler_mismatch('clang 15.0.7')
    crash = mpi.FailureEvidence(lines=(), backtraces=(('fakempi_init', 'main'),))
    assert 'FakeMPI 1.2 crashes in MPI_Init' in sanity.known_issue_note(crash, stack)


def test_module_and_spack_names_read_the_entry(fakempi):
    assert modulenames.role('FakeMPI/1.2.3') == modulenames.Role.MPI
    assert modulenames.expected_family('FakeMPI/1.2.3') == FAKE
    assert modulenames.expected_family('gfakempi/2024a') == FAKE
    assert mpi.spack_family('fakempi') == FAKE and 'fakempi' in mpi.spack_packages()


def test_transport_report_is_parsed_with_the_entry_parser(fakempi, fabric_table):
    partition = Partition.from_extras('test:tcp', {'fabric': Fabric.TCP, 'iface': 'eth0'})
    stack = Stack(environ='e', mpi_family=FAKE, mpi_profile=FAKE, mpi_version='1.2.3')
    settings = fabrictable.settings(partition, stack, 'mpirun', fabric_table)
    assert settings.env == {'FAKEMPI_NET': 'tcp:eth0', 'FAKEMPI_REPORT': '1'}
    assert settings.verify('fakempi: peer over tcp\n') == (
        True, "fakempi used tcp on fabric 'tcp'")
    ok, message = settings.verify('fakempi: peer over shm\n')
    assert not ok and 'used shm' in message


def test_the_fake_family_leaves_no_trace(fakempi):
    mpi.unregister(FAKE)
    assert FAKE not in mpi.family_names()
    assert 'FAKEMPI_VERSION' not in stacks.probe_source()
    assert FAKE not in [e.name for e in sources.pypi_stacks()]


def test_an_entry_that_contradicts_the_registry_is_refused(fakempi):
    with pytest.raises(mpi.RegistryError, match="'fakempi' is already registered"):
        mpi.register(FAKE_ENTRY)
    clash = mpi.FamilyEntry(name='othermpi', wrapper_cc_variable='X', wrapper_show_args=(),
                            header_macro='OTHER', module_packages=('openmpi',))
    with pytest.raises(mpi.RegistryError, match="module_packages 'openmpi' is already openmpi's"):
        mpi.register(clash)
    assert 'othermpi' not in mpi.family_names()


# --------------------------------------------------------------------------
# Imports go one way
# --------------------------------------------------------------------------

# The import graph (no circle, the registry a leaf) is tests/test_layers.py's.


@pytest.mark.parametrize('module', ['mpi', 'stacks.candidate', 'stacks.sources',
                                    'stacks.modules', 'stacks.lmod', 'stacks.modulenames',
                                    'stacks.spacklock', 'model', 'stacks',
                                    'testbed.moduletree', 'checklib.sanity'])
def test_each_module_imports_alone(module):
    subprocess.run([sys.executable, '-c', f'import hpcnet.{module}'], check=True)
