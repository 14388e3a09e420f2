"""The testbed proves its links wire-true when it comes up, by measuring.

A shaped veth link stands for a wire only where iperf3 between two compute
nodes reaches the wire's TCP payload rate (hpcnet.fabrics.tcp_payload_MBps)
within WIRE_TOLERANCE and retransmits nothing: then a path or node shaped to
90 % measures 90 %, and a fault the testbed plants binds.  The tbf bucket
that gets there depends on the host's kernel (its timers and softirq work:
docs/testbed.md, "A wire-true bucket"), so it is chosen by measuring: the
smallest of BURSTS that passes, since a larger bucket lets a message that
fits in it leave faster than any wire.  The bucket found is kept per kernel
and rate (KNOWN_FILE) and tried first at the next bring-up.

What the proof found is in the testbed's state (``wire``) and reaches the
checks as HPCNET_TESTBED_WIRE_EFFICIENCY, the fraction of the wire's payload
rate the clean link measured (hpcnet.checklib.calibration judges a link
against it).
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass

from hpcnet.fabrics import tcp_payload_MBps
from hpcnet.stacks.candidate import state_dir
from hpcnet.testbed.config import CMD_TIMEOUT, TestbedError, burst_bytes, rate_bps

#: The buckets tried, smallest first: five full frames up to ninety.
BURSTS = ('8kb', '16kb', '32kb', '64kb', '128kb')
#: How far from the wire's payload rate a wire-true link may measure.
WIRE_TOLERANCE = 0.02
#: iperf3's run: seconds measured, after OMIT_SECONDS of slow start.
MEASURE_SECONDS = 3
OMIT_SECONDS = 1
#: Not the checks' iperf3 ports (5201, 5202), so a leftover server of one never answers another.
PORT = 5209
#: The MTU of the testbed's links.
MTU = 1500
#: Where a kernel's wire-true bucket is kept between bring-ups.
KNOWN_FILE = 'testbed-wire.json'
#: How long the iperf3 server may take to listen.
LISTEN_WAIT_S = 5.0


@dataclass(frozen=True)
class WireProof:
    """iperf3 on a clean link, shaped with ``burst``, against the wire."""
    rate: str
    burst: str
    MBps: float
    wire_MBps: float
    retransmits: int
    sender: str
    receiver: str

    @property
    def efficiency(self) -> float:
        return self.MBps / self.wire_MBps

    @property
    def wire_true(self) -> bool:
        return abs(self.efficiency - 1) <= WIRE_TOLERANCE and self.retransmits == 0

    def line(self) -> str:
        verdict = 'wire-true' if self.wire_true else 'NOT wire-true'
        return (f'{verdict}: iperf3 {self.sender} -> {self.receiver} {self.MBps:.1f} MB/s, '
                f'{self.efficiency:.3f} of the {self.rate} wire\'s TCP payload rate '
                f'{self.wire_MBps:.1f} MB/s, {self.retransmits} retransmits (tbf burst '
                f'{self.burst}; wire-true within {WIRE_TOLERANCE:.0%} and none)')

    def state(self) -> dict:
        return {**asdict(self), 'efficiency': round(self.efficiency, 4),
                'wire_true': self.wire_true}


def iperf3_result(text: str, where: str) -> tuple:
    """(received MB/s, sender retransmits) of iperf3's JSON (-J) output."""
    try:
        result = json.loads(text)
        if result.get('error'):
            raise TestbedError(f'{where}: iperf3 failed: {result["error"]}')
        end = result['end']
        received = float(end['sum_received']['bits_per_second']) / 8e6
        retransmits = int(end['sum_sent'].get('retransmits', 0))
    except (ValueError, KeyError, TypeError) as err:
        raise TestbedError(f'{where}: iperf3 printed no result ({type(err).__name__}: {err}): '
                           f'{text.strip()[-300:]}') from None
    return received, retransmits


def measure(tb, sender: str, receiver: str, rate: str, burst: str) -> WireProof:
    """iperf3 from ``sender`` to ``receiver`` of testbed ``tb`` as it is shaped."""
    address = tb.addresses()[receiver]
    server = subprocess.Popen(tb.node_prefix(receiver, cwd='/') + [
        'iperf3', '-s', '-1', '-p', str(PORT), '-B', address],
        env=tb.env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    try:
        client = _client(tb, sender, address)
    finally:
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    where = f'iperf3 {sender} -> {receiver}'
    if client.returncode != 0:
        raise TestbedError(f'{where} exited with {client.returncode}; its server on {receiver} '
                           f'said: {server.stderr.read().strip()[-300:] or "nothing"}; the client: '
                           f'{client.stdout.strip()[-300:]}')
    MBps, retransmits = iperf3_result(client.stdout, where)
    return WireProof(rate, burst, MBps, tcp_payload_MBps(rate_bps(rate), MTU), retransmits,
                     sender, receiver)


def _client(tb, sender: str, address: str) -> subprocess.CompletedProcess:
    argv = ['iperf3', '-c', address, '-p', str(PORT), '-t', str(MEASURE_SECONDS),
            '-O', str(OMIT_SECONDS), '-J']
    deadline = time.monotonic() + LISTEN_WAIT_S
    while True:
        res = tb.run(sender, argv, timeout=CMD_TIMEOUT + MEASURE_SECONDS, cwd='/')
        # The server may not listen yet: iperf3 then says so in its JSON.
        if 'Connection refused' not in res.stdout or time.monotonic() > deadline:
            return res
        time.sleep(0.2)


def _known(rate: str) -> dict:
    path = state_dir() / KNOWN_FILE
    try:
        known = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except ValueError as err:
        raise TestbedError(f'{path}: not JSON ({err}); delete it, the next `hpcnet testbed up` '
                           'measures again') from None
    return known.get(platform.release(), {}).get(rate, {})


def _keep(proof: WireProof) -> None:
    path = state_dir() / KNOWN_FILE
    known = json.loads(path.read_text()) if path.exists() else {}
    known.setdefault(platform.release(), {})[proof.rate] = {'burst': proof.burst}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix('.tmp')
    tmp.write_text(json.dumps(known, indent=1))
    os.replace(tmp, path)


def candidates(rate: str, burst: str | None) -> list:
    """The buckets to try: the one asked for alone; else the one this
    kernel kept last, then BURSTS from the smallest."""
    if burst is not None:
        return [burst]
    kept = _known(rate).get('burst')
    return ([kept] if kept in BURSTS else []) + [b for b in BURSTS if b != kept]


def prove(tb, rate: str, burst: str | None, reshape) -> tuple:
    """(the bucket chosen, its WireProof or None, what to say): each
    candidate bucket is applied (``reshape(burst)``) and measured between the
    first two compute nodes until one is wire-true; none: the one that came
    closest stays."""
    if shutil.which('iperf3') is None:
        return (burst or BURSTS[0], None,
                'the links are not proven wire-true: iperf3 is not installed (Debian package '
                'iperf3, `make deps`)')
    nodes = tb.compute_nodes()
    if len(nodes) < 2:
        return (burst or BURSTS[0], None,
                'the links are not proven wire-true: it takes two compute nodes')
    tried = []
    for each in candidates(rate, burst):
        burst_bytes(each)
        reshape(each)
        proof = measure(tb, nodes[0], nodes[1], rate, each)
        tried.append(proof)
        if proof.wire_true:
            if burst is None:
                _keep(proof)
            return each, proof, proof.line()
    best = min(tried, key=lambda p: (p.retransmits > 0, abs(p.efficiency - 1)))
    if best is not tried[-1]:
        reshape(best.burst)
    return best.burst, best, (f'{best.line()}; tried {", ".join(p.burst for p in tried)}: '
                              'faults planted on it may not bind')


def require_wire_true(tb) -> WireProof:
    """Measure the clean link of ``tb`` between its first two compute nodes,
    as it is shaped; TestbedError unless it is wire-true.  A fault
    benchmark asks this before it plants anything: a fault planted on a
    link that does not run at the shaped rate may not bind, and then no
    verdict on it says anything."""
    if shutil.which('iperf3') is None:
        raise TestbedError('iperf3 is not installed (Debian package iperf3, `make deps`): the '
                           'clean link cannot be proven wire-true before a fault is planted')
    first, second = tb.compute_nodes()[:2]
    proof = measure(tb, first, second, tb.rate, tb.burst)
    if not proof.wire_true:
        raise TestbedError(f'testbed {tb.name}: the clean link is {proof.line()}: a fault planted '
                           'on it may not bind')
    return proof
