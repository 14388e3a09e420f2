"""The rules a run is judged by (sanity), one function per rule.

Each takes what it needs (the stack, the output, the counters) and returns or
raises a SanityError with a message a site engineer can act on; the ReFrame
base classes in :mod:`hpcnet.checklib.testlib` run them, in one step, for every check.
"""
from __future__ import annotations

import contextlib
import re
import signal

from reframe.core.exceptions import SanityError

from hpcnet import mpi as stacks  # the MPI registry: judging never imports discovery
from hpcnet.constants import KNOWN_ISSUE_MARKER
from hpcnet.model import Stack
from hpcnet.parsers.errors import BenchmarkOutputError


def check_library(mpi_library: str, stack: Stack) -> None:
    '''The library the binary really loaded must be the environment's MPI.'''
    found = stacks.library_family(mpi_library)
    want = (stack.mpi_family, stack.mpi_version)
    environ_name = stack.environ
    if found is None:
        raise SanityError(f'kernel reports an unknown MPI library {mpi_library!r}; '
                          f'environment {environ_name} is {want[0]} {want[1]}')
    if found[0] != want[0] or found[1].split('.')[:2] != want[1].split('.')[:2]:
        raise SanityError(f'kernel ran with {found[0]} {found[1]} ({mpi_library!r}) but '
                          f'environment {environ_name} is {want[0]} {want[1]}: '
                          'the binary is linked to the wrong MPI')


@contextlib.contextmanager
def sanity_from_output_errors(note: str = ''):
    '''Inside this block, a parser's error (a malformed output, a value that
    is not finite and positive) fails the test: ReFrame's SanityError with the
    parser's message, followed by ``note`` (what else is known of the run).'''
    try:
        yield
    except BenchmarkOutputError as err:
        # Not chained: ReFrame would append the cause's message a second time.
        raise SanityError(f'{err}{note}') from None


def check_sizes(found: tuple, expected: tuple) -> None:
    missing = sorted(set(expected) - set(found))
    if missing:
        raise SanityError(f'sizes missing from the output: {missing} (found {list(found)})')


def distinct_hosts(hosts: dict, num_nodes: int) -> None:
    if num_nodes > 1 and len(set(hosts.values())) < num_nodes:
        raise SanityError(f'ranks were meant to run on {num_nodes} nodes but ran on '
                          f'{sorted(set(hosts.values()))}')


def check_link_bytes(deltas, bytes_sent_by_host: dict, iface: str) -> None:
    '''Every host's interface sent at least the payload its ranks sent.'''
    by_host = {d.host: d for d in deltas}
    for host, payload in sorted(bytes_sent_by_host.items()):
        if host not in by_host:
            raise SanityError(f'no {iface} counters from {host} (have: {sorted(by_host)})')
        sent = by_host[host].delta['tx_bytes']
        if sent < payload:
            raise SanityError(f'{host}: {iface} sent {sent} bytes during the run but the ranks '
                              f'there sent {payload} bytes of payload: the traffic took '
                              f'another path than {iface}')


#: How a failure names each bound of :class:`hpcnet.checklib.linkbytes.Traffic`.
_TRAFFIC_WORDS = {'tx_bytes': ('sent', 'bytes'), 'rx_bytes': ('received', 'bytes'),
                  'carried_bytes': ('carried (sent + received)', 'bytes'),
                  'tx_packets': ('sent', 'packets'), 'rx_packets': ('received', 'packets')}


def check_link_traffic(deltas, hosts, bound, iface: str) -> None:
    '''Every host's interface carried at least the traffic ``bound`` (a
    :class:`hpcnet.checklib.linkbytes.LinkBound`) sets for it: the proof for runs
    whose payload per node the MPI library or the benchmark's defaults
    decide (collectives, OSU, IMB), where the exact bytes are not printed.'''
    by_host = {d.host: d for d in deltas}
    for host in sorted(set(hosts) | set(bound.per_host)):
        if host not in by_host:
            raise SanityError(f'no {iface} counters from {host} (have: {sorted(by_host)})')
        delta = by_host[host].delta
        seen = {**delta, 'carried_bytes': delta['tx_bytes'] + delta['rx_bytes']}
        least = bound.per_host.get(host)
        for counter, minimum in (least.items() if least is not None else ()):
            if seen.get(counter, 0) < minimum:
                verb, unit = _TRAFFIC_WORDS[counter]
                raise SanityError(f'{host}: {iface} {verb} {seen.get(counter, 0)} {unit} during '
                                  f'the run, fewer than the {minimum} {unit} that {bound.basis} '
                                  f'must put on this node\'s link: the traffic took another '
                                  f'path than {iface}')


def bytes_sent_by_host(out) -> dict:
    '''Payload bytes each host's ranks sent, from the kernel's
    ``bytes-sent:`` line (one value per rank, in rank order).'''
    values = out.header.get('bytes-sent', '').split()
    if len(values) != len(out.hosts):
        raise SanityError(f'kernel printed bytes-sent {values} for {len(out.hosts)} ranks')
    totals = {}
    for rank, value in enumerate(values):
        host = out.hosts[rank]
        totals[host] = totals.get(host, 0) + int(value)
    return totals


def known_issue_note(evidence: stacks.FailureEvidence, stack: Stack) -> str:
    '''" [known issue: ...]" when ``evidence`` is the signature of the
    stack's known defect, else "".'''
    if not stack.known_issue:
        return ''
    issue = stacks.known_issue_named(stack.known_issue)
    return f' {KNOWN_ISSUE_MARKER}{issue.describe()}]' if issue.shown_by(evidence) else ''


def check_kernel_errors(stdout: str, stderr: str, stack: Stack) -> None:
    '''Our kernels report every failure as one ``error: ...`` line on stderr.'''
    for line in stderr.splitlines():
        if line.startswith(stacks.KERNEL_ERROR_PREFIX):
            note = known_issue_note(failure_evidence(stdout, stderr), stack)
            raise SanityError(f'kernel: {line[len(stacks.KERNEL_ERROR_PREFIX):]}{note}')


#: Lines a job prints when something failed: our kernels, srun, the shell, iperf3.
_ERROR_LINE = re.compile(r'^\s*(error:|srun: error|iperf3: .*error|.*: command not found)', re.I)


def error_lines(text: str, limit: int = 5) -> str:
    '''The job's own error lines, joined (at most ``limit``).'''
    lines = [line.strip() for line in text.splitlines() if _ERROR_LINE.match(line)]
    return '; '.join(lines[:limit])


#: A frame of the backtrace Open MPI prints when a rank crashes:
#: "[cn1:01617] [ 1] /path/libmpi.so.40(mca_pml_ob1_recv_frag_callback_match+0x95)[0x...]"
#: (the process, then the function).
_BACKTRACE_FRAME = re.compile(r'^\[([^\]\s]+:\d+)\] \[ ?\d+\] \S+\((\w+)\+0x[0-9a-f]+\)')


def crash_backtraces(text: str) -> tuple:
    '''One tuple per crashed process of ``text``: the functions its
    backtrace names, innermost first (lines of other processes may come
    between its frames).'''
    by_process = {}
    for m in map(_BACKTRACE_FRAME.match, text.splitlines()):
        if m:
            by_process.setdefault(m.group(1), []).append(m.group(2))
    return tuple(tuple(frames) for frames in by_process.values())


def crash_functions(text: str) -> list:
    '''The functions named in the crash backtraces of ``text``, innermost first.'''
    names = [name for frames in crash_backtraces(text) for name in frames]
    return list(dict.fromkeys(names))      # every crashed rank prints the same frames


#: A result row on a benchmark's stdout: our kernels' "row: ..." lines, and
#: the table rows of OSU and IMB (a size, then a figure).
_RESULT_ROW = re.compile(r'^(row: |\s*\d+\s+\d+(\.\d+)?(\s|$))')


def result_rows(stdout: str) -> int:
    '''How many result rows the benchmark printed.'''
    return sum(1 for line in stdout.splitlines() if _RESULT_ROW.match(line))


def failure_evidence(stdout: str, stderr: str) -> stacks.FailureEvidence:
    '''What a job showed, for the known-issue signatures: its lines with
    stdout's first (our kernels print ``done: ok`` there before they enter
    MPI_Finalize), its crash backtraces and its result rows.'''
    output = stdout + ('' if not stdout or stdout.endswith('\n') else '\n') + stderr
    return stacks.FailureEvidence(lines=tuple(output.splitlines()),
                                  backtraces=crash_backtraces(output),
                                  result_rows=result_rows(stdout))


def output_is_complete(stdout: str) -> bool:
    '''The benchmark's output ends its run: our kernels and the socket
    kernel print ``done: ok`` last.'''
    return stacks.DONE_OK_LINE in (line.strip() for line in stdout.splitlines())


#: Scheduler states of a job that ended as it should (Slurm's; the local
#: scheduler's jobs have no state worth naming).
_NORMAL_END_STATES = ('COMPLETED', 'SUCCESS', None, '')


def job_end(state, nodelist) -> str:
    '''"; the job ended as NODE_FAIL on cn1, cn2" where the scheduler ended
    the job abnormally (a node or its slurmd died, a time limit), else "".'''
    if state in _NORMAL_END_STATES:
        return ''
    where = f' on {", ".join(nodelist)}' if nodelist else ''
    return f'; the job ended as {state}{where}'


#: Why a job without an exit code failed: the scheduler did not say how the
#: job ended (ReFrame's squeue backend never does), and its output does not
#: show a completed run either.
NO_EXIT_CODE = ('; the scheduler reported no exit code, and the output is incomplete '
                f"(no final '{stacks.DONE_OK_LINE}')")


def exit_status(exitcode, signum=None, complete_output: bool = False) -> str:
    '''"; the job exited with code 139 (SIGSEGV)" for a failed job, "" else.
    Without an exit code, only a complete output (``complete_output``,
    :func:`output_is_complete`) is success: an unknown end is never taken
    for a clean one.'''
    def name(n):
        try:
            return signal.Signals(n).name
        except ValueError:
            return f'signal {n}'
    if signum:
        return f'; the job was killed by {name(signum)}'
    if exitcode is None:
        return '' if complete_output else NO_EXIT_CODE
    if exitcode == 0:
        return ''
    return f'; the job exited with code {exitcode}' + (f' ({name(exitcode - 128)})'
                                                       if exitcode > 128 else '')
