"""A rank that crashes: the verdict names where (the MPI's own backtrace), and a
crash that is a stack's known defect is marked as such, only for that stack.

Reads a real recorded crash (tests/data/samples/README.md):
Open MPI 5.0.11 crashing in MPI_Init on the testbed (open-mpi/ompi#12495).
"""
from pathlib import Path

from hpcnet import mpi
from hpcnet.checklib import sanity
from hpcnet.mpi import MpiFamily
from hpcnet.model import Stack

CRASH = (Path(__file__).parent / 'data' / 'samples' /
         'openmpi-5.0.11-mpi-init-crash.testbed.err').read_text()


def _stack(family, version, layer=None):
    issue = mpi.known_issue(family, version, layer)
    return Stack(environ='e', mpi_family=family, mpi_profile=family, mpi_version=version,
                 known_issue=issue.name if issue else '')


def test_crash_functions_are_the_named_frames_innermost_first():
    assert sanity.crash_functions(CRASH) == [
        'mca_pml_ob1_recv_frag_callback_match', 'event_base_loop', 'opal_progress',
        'ompi_mpi_init', 'MPI_Init', '__libc_start_main']
    assert sanity.crash_functions('srun: error: cn1: task 0: Segmentation fault\n') == []
    # One backtrace, of the one process that crashed (cn1's rank 0).
    assert sanity.crash_backtraces(CRASH) == (tuple(sanity.crash_functions(CRASH)),)


def test_known_issue_by_release_series():
    # '5.0' holds every 5.0.x, not 5.1 or 4.1.
    assert mpi.known_issue(MpiFamily.OPENMPI, '5.0.11', None).required_frames == \
        ('mca_pml_ob1_recv_frag_callback_match', 'ompi_mpi_init')
    assert mpi.known_issue(MpiFamily.OPENMPI, '5.0.3', None)
    for version in ('5.1.0', '4.1.4', '5.01'):
        assert mpi.known_issue(MpiFamily.OPENMPI, version, None) is None, version
    # An exact version stays exact, and the transport layer is part of the key.
    assert mpi.known_issue(MpiFamily.MPICH, '4.0.2', 'ucx').phase == mpi.Phase.FINALIZE
    assert mpi.known_issue(MpiFamily.MPICH, '4.0.2', 'ofi') is None
    assert mpi.known_issue(MpiFamily.MPICH, '4.0.20', 'ucx') is None


def test_the_crash_is_known_for_open_mpi_5_only():
    # Rank 0 crashed in MPI_Init: nothing on stdout.
    crash = sanity.failure_evidence('', CRASH)
    note = sanity.known_issue_note(crash, _stack(MpiFamily.OPENMPI, '5.0.11'))
    assert note.startswith(f' {sanity.KNOWN_ISSUE_MARKER}Open MPI 5.0 can crash in MPI_Init')
    assert 'open-mpi/ompi#12495' in note
    # The same crash in another MPI is a plain failure.
    assert sanity.known_issue_note(crash, _stack(MpiFamily.OPENMPI, '4.1.4')) == ''
    # Without the backtrace (a plain segfault) it is not this defect.
    segfault = sanity.failure_evidence('', sanity.error_lines(CRASH).replace('; ', '\n'))
    assert segfault.backtraces == ()
    assert sanity.known_issue_note(segfault, _stack(MpiFamily.OPENMPI, '5.0.11')) == ''
