"""The rules a run is judged by (sanity), one function per rule.

Each takes what it needs (the stack, the output, the counters) and returns or
raises a SanityError with a message a site engineer can act on; the ReFrame
base classes in :mod:`hpcnet.testlib` run them, in one step, for every check.
"""
from __future__ import annotations

import contextlib
import re
import signal

from reframe.core.exceptions import SanityError

from hpcnet import stacks
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


def check_link_traffic(deltas, hosts, min_bytes: int, iface: str) -> None:
    '''Every host's interface carried at least ``min_bytes`` (sent plus
    received): the proof for runs whose payload per node the MPI library
    decides (collectives), where the exact bytes cannot be attributed.'''
    by_host = {d.host: d for d in deltas}
    for host in sorted(set(hosts)):
        if host not in by_host:
            raise SanityError(f'no {iface} counters from {host} (have: {sorted(by_host)})')
        carried = by_host[host].delta['tx_bytes'] + by_host[host].delta['rx_bytes']
        if carried < min_bytes:
            raise SanityError(f'{host}: {iface} carried {carried} bytes during the run, less '
                              f'than the {min_bytes} bytes one message of the largest size '
                              f'needs: the traffic took another path than {iface}')


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


#: Marker on a failure a stack's known defect explains (hpcnet.stacks.KNOWN_ISSUES).
KNOWN_ISSUE_MARKER = '[known issue: '


def known_issue_note(message: str, stack: Stack) -> str:
    '''" [known issue: ...]" when ``message`` shows the stack's known defect.'''
    symptom, explanation = stack.known_issue
    return f' {KNOWN_ISSUE_MARKER}{explanation}]' if symptom and symptom in message else ''


def check_kernel_errors(stderr: str, stack: Stack) -> None:
    '''Our kernels report every failure as one ``error: ...`` line on stderr.'''
    for line in stderr.splitlines():
        if line.startswith('error: '):
            raise SanityError(f'kernel: {line[7:]}{known_issue_note(line, stack)}')


#: Lines a job prints when something failed: our kernels, srun, the shell, iperf3.
_ERROR_LINE = re.compile(r'^\s*(error:|srun: error|iperf3: .*error|.*: command not found)', re.I)


def error_lines(text: str, limit: int = 5) -> str:
    '''The job's own error lines, joined (at most ``limit``).'''
    lines = [line.strip() for line in text.splitlines() if _ERROR_LINE.match(line)]
    return '; '.join(lines[:limit])


#: A frame of the backtrace Open MPI prints when a rank crashes:
#: "[cn1:01617] [ 1] /path/libmpi.so.40(mca_pml_ob1_recv_frag_callback_match+0x95)[0x...]".
_BACKTRACE_FRAME = re.compile(r'^\[[^\]\s]+:\d+\] \[ ?\d+\] \S+\((\w+)\+0x[0-9a-f]+\)')


def crash_functions(text: str) -> list:
    '''The functions named in the crash backtraces of ``text``, innermost first.'''
    names = [m.group(1) for m in map(_BACKTRACE_FRAME.match, text.splitlines()) if m]
    return list(dict.fromkeys(names))      # every crashed rank prints the same frames


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


def exit_status(exitcode, signum=None) -> str:
    '''"; the job exited with code 139 (SIGSEGV)" for a failed job, "" else.'''
    def name(n):
        try:
            return signal.Signals(n).name
        except ValueError:
            return f'signal {n}'
    if signum:
        return f'; the job was killed by {name(signum)}'
    if exitcode in (0, None):
        return ''
    return f'; the job exited with code {exitcode}' + (f' ({name(exitcode - 128)})'
                                                       if exitcode > 128 else '')
