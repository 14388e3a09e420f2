"""Known issues are named by signature, not by a word they share with other
failures: each real signature is matched, and each near-miss is not (a named
known issue is retried by `hpcnet run`, so a false match can turn a real
failure into a pass on retry).

Reads real recordings (tests/data/samples/README.md): Open MPI 5.0.11's
MPI_Init crash on the testbed (open-mpi/ompi#12495), Debian Open MPI 4.1.4's
MPI_Init crash on the testbed (Slurm's PMIx barrier, docs/known-issues.md),
our kernels' complete outputs, and the finalize watchdog's message as MPICH
4.0.2 over UCX met it in a recorded `make run` (tests/data/reports/local-run.json).
"""
import json
import re
import types
from pathlib import Path

import pytest

from hpcnet import mpi
from hpcnet.checklib import sanity
from hpcnet.constants import SRC_DIR
from hpcnet.mpi import MpiFamily
from hpcnet.model import Stack
from hpcnet.checklib.testlib import MpiBenchmark, NetworkRun

DATA = Path(__file__).parent / 'data'
SAMPLES = DATA / 'samples'

#: stderr of a collectives job whose rank 0 crashed in MPI_Init (4 ranks, srun).
INIT_CRASH = (SAMPLES / 'openmpi-5.0.11-mpi-init-crash.testbed.err').read_text()
#: stdout and stderr of a Debian Open MPI 4.1.4 collectives job (4 ranks,
#: srun) whose rank 0 crashed in MPI_Init: Slurm's PMIx barrier did not wait.
SLURM_BARRIER_CRASH_OUT = (SAMPLES / 'openmpi-4.1.4-mpi-init-crash.testbed.out').read_text()
SLURM_BARRIER_CRASH_ERR = (SAMPLES / 'openmpi-4.1.4-mpi-init-crash.testbed.err').read_text()
#: A complete p2p kernel stdout, ending with 'done: ok'.
P2P_STDOUT = (SAMPLES / 'hpcnet-p2p-pingpong.local-shm.openmpi-5.0.11.txt').read_text()
#: The same output cut where a run dies midway: result rows, no 'done: ok'.
P2P_STDOUT_MIDWAY = P2P_STDOUT[:P2P_STDOUT.index('bytes-sent:')]


def _recorded_watchdog_line() -> str:
    '''The kernel's error line of an MPICH 4.0.2 finalize hang, as the
    recorded run report quotes it ("kernel: <line without 'error: '>").'''
    report = json.loads((DATA / 'reports' / 'local-run.json').read_text())
    reasons = [tc.get('fail_reason') or '' for run in report['runs'] for tc in run['testcases']]
    quoted = next(r for r in reasons if 'MPI_Finalize did not return' in r)
    return 'error: ' + re.search(r'kernel: (.*?) \[known issue: ', quoted).group(1)


WATCHDOG_LINE = _recorded_watchdog_line()

OPENMPI5 = Stack(environ='gcc12-openmpi5', mpi_family=MpiFamily.OPENMPI,
                 mpi_profile=MpiFamily.OPENMPI, mpi_version='5.0.11',
                 known_issue=mpi.known_issue(MpiFamily.OPENMPI, '5.0.11', None).name)
DEBIAN_OPENMPI4 = Stack(environ='gcc12-openmpi4', mpi_family=MpiFamily.OPENMPI,
                        mpi_profile=MpiFamily.OPENMPI, mpi_version='4.1.4',
                        known_issue=getattr(mpi.known_issue(MpiFamily.OPENMPI, '4.1.4', None),
                                            'name', ''))
MPICH4_UCX = Stack(environ='gcc12-mpich4', mpi_family=MpiFamily.MPICH, mpi_profile='mpich-ucx',
                   mpi_version='4.0.2',
                   known_issue=mpi.known_issue(MpiFamily.MPICH, '4.0.2', 'ucx').name)


def _note(stdout: str, stderr: str, stack: Stack) -> str:
    return sanity.known_issue_note(sanity.failure_evidence(stdout, stderr), stack)


def _is_known(stdout: str, stderr: str, stack: Stack) -> bool:
    note = _note(stdout, stderr, stack)
    if note:
        # The marker hpcnet run's retry and tests/conftest.py look for.
        issue = mpi.known_issue_named(stack.known_issue)
        assert note == f' {sanity.KNOWN_ISSUE_MARKER}{issue.describe()}]', note
    return bool(note)


# --- the real signatures -----------------------------------------------------

def test_open_mpi_5_init_crash_is_matched():
    # The crash happened in MPI_Init: rank 0 printed nothing on stdout.
    assert _is_known('', INIT_CRASH, OPENMPI5)
    note = _note('', INIT_CRASH, OPENMPI5)
    assert note.startswith(' [known issue: Open MPI 5.0 can crash in MPI_Init')
    assert 'open-mpi/ompi#12495' in note


def test_mpich_finalize_hang_after_done_ok_is_matched():
    assert WATCHDOG_LINE.startswith('error: MPI_Finalize did not return within 20 s (')
    # Every rank's watchdog may fire: the same line more than once.
    for stderr in (WATCHDOG_LINE + '\n', f'{WATCHDOG_LINE}\n{WATCHDOG_LINE}\n'):
        assert _is_known(P2P_STDOUT, stderr, MPICH4_UCX), stderr
    # Streams merged into one file: the order there is the order of writing.
    assert _is_known(P2P_STDOUT + WATCHDOG_LINE + '\n', '', MPICH4_UCX)


def test_the_signature_is_the_kernels_own_watchdog_message():
    '''FINALIZE_WATCHDOG_LINE matches what src/hpcnet_kernel.h prints, for
    any timeout, and nothing shorter.'''
    source = (SRC_DIR / 'hpcnet_kernel.h').read_text()
    call = re.search(r'snprintf\(hk_finalize_msg, sizeof hk_finalize_msg,'
                     r'(.*?)hk_finalize_timeout_s\)', source, re.S).group(1)
    template = ''.join(re.findall(r'"((?:[^"\\]|\\.)*)"', call)).replace('\\n', '')
    assert template.count('%u') == 1
    for seconds in ('5', '20', '3600'):
        assert re.fullmatch(mpi.FINALIZE_WATCHDOG_LINE, template.replace('%u', seconds))
    assert not re.fullmatch(mpi.FINALIZE_WATCHDOG_LINE,
                            'error: MPI_Finalize did not return within 20 s')


def test_a_crash_note_carries_the_marker_through_the_check():
    '''MpiBenchmark.failure_note, as a check's sanity builds it from the job.'''
    run = _job(exitcode=139, stdout='', stderr=INIT_CRASH, stack=OPENMPI5)
    note = MpiBenchmark.failure_note(run)
    assert note.startswith('; the job exited with code 139 (SIGSEGV): srun: error: cn1: task 0')
    assert 'crashed in mca_pml_ob1_recv_frag_callback_match < ' in note
    assert note.endswith(']') and sanity.KNOWN_ISSUE_MARKER in note
    # The same crash after result rows is a plain failure.
    run = _job(exitcode=139, stdout=P2P_STDOUT_MIDWAY, stderr=INIT_CRASH, stack=OPENMPI5)
    assert sanity.KNOWN_ISSUE_MARKER not in MpiBenchmark.failure_note(run)


def test_a_finalize_hang_is_named_by_the_kernel_error_check():
    with pytest.raises(sanity.SanityError) as err:
        sanity.check_kernel_errors(P2P_STDOUT, WATCHDOG_LINE + '\n', MPICH4_UCX)
    assert str(err.value).startswith('kernel: MPI_Finalize did not return within 20 s')
    assert sanity.KNOWN_ISSUE_MARKER + 'MPICH 4.0.2 over UCX can hang in MPI_Finalize' \
        in str(err.value)


# --- the near-misses: not matched ---------------------------------------------

#: The recorded crash, moved out of MPI_Init: the receive callback fails in
#: a receive the benchmark made (the callback is in every receive).
CRASH_IN_A_RECEIVE = (INIT_CRASH
                      .replace('(ompi_mpi_init+0x425)', '(ompi_request_default_wait+0x5d)')
                      .replace('(MPI_Init+0x4b)', '(PMPI_Recv+0x1b4)'))


def test_ob1_crash_outside_mpi_init_is_not_matched():
    assert 'mca_pml_ob1_recv_frag_callback_match' in sanity.crash_functions(CRASH_IN_A_RECEIVE)
    assert 'ompi_mpi_init' not in sanity.crash_functions(CRASH_IN_A_RECEIVE)
    assert not _is_known('', CRASH_IN_A_RECEIVE, OPENMPI5)


def test_crash_after_result_rows_is_not_matched():
    # Rows printed: the run was past MPI_Init, whatever the frames say.
    assert sanity.result_rows(P2P_STDOUT_MIDWAY) == 18
    assert not _is_known(P2P_STDOUT_MIDWAY, INIT_CRASH, OPENMPI5)
    assert not _is_known(P2P_STDOUT, INIT_CRASH, OPENMPI5)


def test_frames_of_two_processes_do_not_make_one_signature():
    '''The receive callback in one rank's backtrace and MPI_Init in another's
    are two crashes, neither of them this defect.'''
    receive = CRASH_IN_A_RECEIVE
    other_rank_in_init = '\n'.join([
        '[cn2:01626] *** Process received signal ***',
        '[cn2:01626] [ 0] /lib/x86_64-linux-gnu/libc.so.6(+0x3c050)[0x7f42ba45a050]',
        '[cn2:01626] [ 1] /opt/mpi/lib/libmpi.so.40(ompi_mpi_init+0x425)[0x7f42ba691215]',
        '[cn2:01626] [ 2] /opt/mpi/lib/libmpi.so.40(MPI_Init+0x4b)[0x7f42ba6c06db]'])
    stderr = receive + other_rank_in_init + '\n'
    assert len(sanity.crash_backtraces(stderr)) == 2
    assert not _is_known('', stderr, OPENMPI5)


def test_frames_in_the_wrong_order_are_not_matched():
    # MPI_Init's frame inside the receive callback is not this call path.
    swapped = INIT_CRASH.replace('(mca_pml_ob1_recv_frag_callback_match+', '(SWAP+') \
                        .replace('(ompi_mpi_init+', '(mca_pml_ob1_recv_frag_callback_match+') \
                        .replace('(SWAP+', '(ompi_mpi_init+')
    assert not _is_known('', swapped, OPENMPI5)


def test_a_segfault_without_backtrace_is_not_matched():
    plain = ''.join(l + '\n' for l in INIT_CRASH.splitlines() if l.startswith('srun: '))
    assert not _is_known('', plain, OPENMPI5)


def test_open_mpi_4_1_init_crash_stays_a_failure():
    '''Slurm's defect, not the MPI's (docs/known-issues.md): no MPI known issue
    names it, so hpcnet run does not retry it into a pass.'''
    out, err = SLURM_BARRIER_CRASH_OUT, SLURM_BARRIER_CRASH_ERR
    assert 'Failing at address: (nil)' in err
    # Open MPI printed only libc's frame: no function to match.
    assert sanity.crash_backtraces(err) == ()
    assert sanity.result_rows(out) == 0
    assert DEBIAN_OPENMPI4.known_issue == ''
    assert not _is_known(out, err, DEBIAN_OPENMPI4)
    # Open MPI 5.0's MPI_Init crash has this shape, but its signature needs frames.
    assert not _is_known(out, err, OPENMPI5)
    # As the testbed's Slurm reported it: exit code 0, state TIMEOUT.
    run = _job(exitcode=0, stdout=out, stderr=err, stack=DEBIAN_OPENMPI4, state='TIMEOUT')
    note = MpiBenchmark.failure_note(run)
    assert note.startswith('; the job ended as TIMEOUT on cn1: '), note
    assert 'srun: error: cn1: task 0: Segmentation fault' in note
    assert sanity.KNOWN_ISSUE_MARKER not in note


@pytest.mark.parametrize('stderr', [
    'error: MPI_Finalize returned MPI_ERR_OTHER: connection reset by peer\n',
    'error: MPI_Finalize did not return within 20 s\n',
    'error: MPI_Finalize did not return within 20 s (the results above are complete: '
    'the MPI library hangs in finalize) and more\n',
])
def test_other_finalize_failures_are_not_matched(stderr):
    assert not _is_known(P2P_STDOUT, stderr, MPICH4_UCX)
    with pytest.raises(sanity.SanityError) as err:
        sanity.check_kernel_errors(P2P_STDOUT, stderr, MPICH4_UCX)
    assert sanity.KNOWN_ISSUE_MARKER not in str(err.value)


def test_watchdog_message_without_done_ok_before_it_is_not_matched():
    # The run did not complete: whatever hung, it was not only finalize.
    assert not _is_known(P2P_STDOUT_MIDWAY, WATCHDOG_LINE + '\n', MPICH4_UCX)
    assert not _is_known('', WATCHDOG_LINE + '\n', MPICH4_UCX)
    # Merged streams: the message before 'done: ok' is not after it.
    assert not _is_known(WATCHDOG_LINE + '\n' + P2P_STDOUT, '', MPICH4_UCX)


def test_watchdog_message_beside_another_kernel_error_is_not_matched():
    stderr = f'error: payload validation failed at 4096 bytes\n{WATCHDOG_LINE}\n'
    assert not _is_known(P2P_STDOUT, stderr, MPICH4_UCX)


@pytest.mark.parametrize('family, version, layer', [
    (MpiFamily.MPICH, '4.0.3', 'ucx'),       # another version
    (MpiFamily.MPICH, '4.0.20', 'ucx'),      # not the 4.0.2 series: an exact version
    (MpiFamily.MPICH, '4.0', 'ucx'),
    (MpiFamily.MPICH, '4.0.2', 'ofi'),       # another transport layer
    (MpiFamily.MPICH, '4.0.2', None),
    (MpiFamily.OPENMPI, '5.1.0', None),      # outside the 5.0 series
    (MpiFamily.OPENMPI, '4.1.4', None),
    (MpiFamily.OPENMPI, '5.01', None),
    (MpiFamily.IMPI, '5.0.1', None),         # another family of the same numbers
    (MpiFamily.MVAPICH2, '4.0.2', None),
])
def test_right_symptom_in_another_stack_is_not_matched(family, version, layer):
    assert mpi.known_issue(family, version, layer) is None
    stack = Stack(environ='e', mpi_family=family, mpi_profile=family, mpi_version=version)
    assert not _is_known('', INIT_CRASH, stack)
    assert not _is_known(P2P_STDOUT, WATCHDOG_LINE + '\n', stack)


def test_each_signature_is_its_own_familys():
    # The MPICH hang's evidence in Open MPI 5.0, and the other way round.
    assert not _is_known(P2P_STDOUT, WATCHDOG_LINE + '\n', OPENMPI5)
    assert not _is_known('', INIT_CRASH, MPICH4_UCX)


# --- the table ------------------------------------------------------------------

def test_release_series_and_exact_versions():
    assert mpi.known_issue(MpiFamily.OPENMPI, '5.0.11', None).name == 'openmpi-5.0-init-crash'
    assert mpi.known_issue(MpiFamily.OPENMPI, '5.0.3', None).phase == mpi.Phase.INIT
    issue = mpi.known_issue(MpiFamily.MPICH, '4.0.2', 'ucx')
    assert (issue.name, issue.phase) == ('mpich-4.0.2-ucx-finalize-hang', mpi.Phase.FINALIZE)


def test_the_table_is_consistent():
    names = [issue.name for issue in mpi.known_issues()]
    assert len(names) == len(set(names))
    assert all(mpi.known_issue_named(name).name == name for name in names)
    with pytest.raises(mpi.RegistryError, match=r"known issue 'MPI_Finalize' is not in the "
                                                r'MPI registry \(hpcnet.mpi; valid: openmpi-5.0'):
        mpi.known_issue_named('MPI_Finalize')


def test_a_signature_must_name_its_evidence():
    common = dict(name='x', family=MpiFamily.MPICH, version_series='4.1', layer=None,
                  explanation='e', upstream='u')
    with pytest.raises(ValueError, match='phase alone matches too much'):
        mpi.KnownIssue(phase=mpi.Phase.INIT, **common)
    with pytest.raises(ValueError, match='needs the required_line'):
        mpi.KnownIssue(phase=mpi.Phase.FINALIZE, required_frames=('f',), **common)
    with pytest.raises(ValueError, match=r"phase 'run'"):
        mpi.KnownIssue(phase='run', required_line='x', **common)


def test_the_environment_carries_the_issue_by_name():
    again = Stack.from_extras(MPICH4_UCX.environ, MPICH4_UCX.to_extras())
    assert again == MPICH4_UCX and again.known_issue == 'mpich-4.0.2-ucx-finalize-hang'


def test_result_rows_of_every_benchmark_format():
    assert sanity.result_rows(P2P_STDOUT) == 18
    assert sanity.result_rows(P2P_STDOUT[:P2P_STDOUT.index('row:')]) == 0
    for name in ('osu_latency.mpich-4.0.2.txt', 'IMB-MPI1_PingPong.mpich-4.0.2.txt'):
        text = (SAMPLES / name).read_text()
        assert sanity.result_rows(text) >= 20, name
        assert sanity.result_rows(''.join(l + '\n' for l in text.splitlines()
                                          if l.lstrip().startswith('#'))) == 0, name


# --- a job without an exit code -------------------------------------------------

def _job(exitcode, stdout, stderr='', stack=None, state=None):
    '''What NetworkRun/MpiBenchmark read of a finished job.'''
    run = types.SimpleNamespace(
        job=types.SimpleNamespace(exitcode=exitcode, state=state, nodelist=['cn1']),
        stack=stack, job_stdout=lambda: stdout, job_stderr=lambda: stderr,
        job_output=lambda: stdout + stderr)
    run.output_complete = lambda: NetworkRun.output_complete(run)
    run.job_failure = lambda: NetworkRun.job_failure(run)
    return run


def test_no_exit_code_is_said_and_the_output_decides():
    # A complete output passes.
    assert NetworkRun.job_failure(_job(None, P2P_STDOUT)) == ''
    # Anything less fails, naming that no exit code was known.
    for stdout in (P2P_STDOUT_MIDWAY, ''):
        failure = NetworkRun.job_failure(_job(None, stdout))
        assert failure == ("; the scheduler reported no exit code, and the output is "
                           "incomplete (no final 'done: ok')"), failure
    # A known exit code is taken as it is.
    assert NetworkRun.job_failure(_job(0, '')) == ''
    assert NetworkRun.job_failure(_job(3, P2P_STDOUT)) == '; the job exited with code 3'
    # The scheduler's end state still counts.
    assert NetworkRun.job_failure(_job(None, P2P_STDOUT, state='NODE_FAIL')) == \
        '; the job ended as NODE_FAIL on cn1'


def test_no_exit_code_in_exit_status():
    assert sanity.exit_status(None).startswith('; the scheduler reported no exit code')
    assert sanity.exit_status(None, complete_output=True) == ''
    assert sanity.exit_status(None, signum=9) == '; the job was killed by SIGKILL'
    assert sanity.output_is_complete(P2P_STDOUT)
    assert not sanity.output_is_complete(P2P_STDOUT_MIDWAY)
