"""Small pure functions of a test, shared by the checks.

Each takes what it needs (partition extras, environment extras, output) and
returns a value or raises with a message a site engineer can act on; the
ReFrame classes in :mod:`hpcnet.testlib` only wire them into the pipeline.
"""
from __future__ import annotations

import math
import os
import signal

from reframe.core.exceptions import SanityError

from hpcnet import fabrics, stacks


def partition_fabric(partition_extras: dict, partition_name: str) -> str:
    fabric = partition_extras.get('fabric')
    valid = fabrics.fabrics()
    if fabric not in valid:
        raise fabrics.FabricTableError(
            f'partition {partition_name!r}: extras.fabric is {fabric!r} '
            f'(valid: {", ".join(valid)}); set it in hpcnet/sites.py')
    return fabric


def fabric_settings(partition_extras: dict, partition_name: str, environ_extras: dict,
                    launcher: str) -> fabrics.FabricSettings:
    return fabrics.settings_for(partition_fabric(partition_extras, partition_name),
                                environ_extras['mpi_profile'], environ_extras['mpi_family'],
                                launcher, partition_extras)


def check_library(mpi_library: str, environ_extras: dict, environ_name: str) -> None:
    '''The library the binary really loaded must be the environment's MPI.'''
    found = stacks.library_family(mpi_library)
    want = (environ_extras['mpi_family'], environ_extras['mpi_version'])
    if found is None:
        raise SanityError(f'kernel reports an unknown MPI library {mpi_library!r}; '
                          f'environment {environ_name} is {want[0]} {want[1]}')
    if found[0] != want[0] or found[1].split('.')[:2] != want[1].split('.')[:2]:
        raise SanityError(f'kernel ran with {found[0]} {found[1]} ({mpi_library!r}) but '
                          f'environment {environ_name} is {want[0]} {want[1]}: '
                          'the binary is linked to the wrong MPI')


def check_transport(settings: fabrics.FabricSettings, mpi_output: str) -> str:
    ok, message = settings.verify(mpi_output)
    if not ok:
        raise SanityError(message)
    return message


def _row_label(row) -> str:
    if 'size_bytes' in row:
        return f'{int(row["size_bytes"])} B'
    if 'rank_a' in row:
        return f'pair {int(row["rank_a"])}-{int(row["rank_b"])}'
    return str(row)


def check_finite_positive(rows, columns, allow_zero_at_size0=(), what='value'):
    '''Every value of ``columns`` in every row is finite and > 0 (or >= 0 for
    the columns named in ``allow_zero_at_size0`` at size 0).'''
    for row in rows:
        for col in columns:
            v = row[col]
            if not math.isfinite(v):
                raise SanityError(f'{what} {col} at {_row_label(row)} is {v}')
            zero_ok = col in allow_zero_at_size0 and row.get('size_bytes') == 0
            if v < 0 or (v == 0 and not zero_ok):
                raise SanityError(f'{what} {col} at {_row_label(row)} is {v} (must be > 0)')


def check_sizes(found: tuple, expected: tuple) -> None:
    missing = sorted(set(expected) - set(found))
    if missing:
        raise SanityError(f'sizes missing from the output: {missing} (found {list(found)})')


def powers_of_two(min_size: int, max_size: int) -> tuple:
    '''0 (when min_size is 0), then every power of two from max(1, min_size)
    to max_size: the kernels' default size list.'''
    sizes = [0] if min_size == 0 else []
    s = 1
    while s <= max_size:
        if s >= max(1, min_size):
            sizes.append(s)
        s *= 2
    return tuple(sizes)


def size_label(nbytes: int) -> str:
    '''8 -> '8B', 65536 -> '64KiB', 1048576 -> '1MiB' (perf variable names).'''
    for unit, factor in (('MiB', 1 << 20), ('KiB', 1 << 10)):
        if nbytes >= factor and nbytes % factor == 0:
            return f'{nbytes // factor}{unit}'
    return f'{nbytes}B'


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


def link_efficiency(payload_MBps: float, rate_bps: float, directions: int = 1) -> float:
    '''Achieved payload rate over the link's wire rate (1.0 = every bit on
    the wire is payload, unreachable: framing and headers cost ~4-6 %).'''
    return payload_MBps * 8e6 / (float(rate_bps) * directions)


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


#: Where the kernel lists RDMA devices (rdma-core's tools read the same).
RDMA_SYSFS = '/sys/class/infiniband'


def rdma_missing_reason(fabric: str, partition_extras: dict, partition_name: str):
    '''Why an RDMA fabric cannot run here, or None when it can.'''
    if fabric not in ('roce', 'ib'):
        return None
    devices = fabrics.rdma_devices(partition_extras)
    if not devices:
        return (f'partition {partition_name} declares fabric {fabric} but no extras.rdma_device')
    for dev in devices:
        if not os.path.isdir(os.path.join(RDMA_SYSFS, dev)):
            present = sorted(os.listdir(RDMA_SYSFS)) if os.path.isdir(RDMA_SYSFS) else []
            return (f'partition {partition_name} declares fabric {fabric} on RDMA device {dev}, '
                    f'but {RDMA_SYSFS}/{dev} does not exist (RDMA devices here: '
                    f'{", ".join(present) or "none; the kernel has no RDMA device or driver"})')
    return None


def check_kernel_errors(stderr: str, environ_extras: dict) -> None:
    '''Our kernels report every failure as one ``error: ...`` line on stderr.'''
    symptom, explanation = environ_extras.get('mpi_known_issue') or ('', '')
    for line in stderr.splitlines():
        if line.startswith('error: '):
            known = symptom and symptom in line
            raise SanityError(f'kernel: {line[7:]}' +
                              (f' [known issue: {explanation}]' if known else ''))


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
