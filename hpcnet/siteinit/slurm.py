"""What Slurm says about a cluster: ``scontrol --oneliner show partition`` and
``scontrol --oneliner show node``, read into partitions and nodes."""
from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass

#: scontrol prints ``Key=value`` pairs separated by blanks; a value may hold
#: blanks itself (``OS=Linux 6.1.0-28-amd64 #1 SMP ...``), so a pair ends
#: where the next ``Key=`` begins.
_PAIR = re.compile(r'(?:^|\s)([A-Za-z][A-Za-z0-9_/:.]*)=(.*?)(?=\s+[A-Za-z][A-Za-z0-9_/:.]*=|\s*$)')
#: What scontrol prints for "not set".
NOT_SET = ('(null)', 'N/A', '')


class SlurmError(RuntimeError):
    """A Slurm command failed or printed what cannot be read."""


def parse_oneliner(text: str) -> list:
    '''One {key: value} per non-empty line of ``scontrol --oneliner show ...``.'''
    return [dict(_PAIR.findall(line)) for line in text.splitlines() if line.strip()]


@dataclass(frozen=True)
class SlurmNode:
    name: str
    partitions: tuple
    state: str
    features: tuple = ()
    gres: str = ''
    cpus: int = 0


@dataclass(frozen=True)
class SlurmPartition:
    name: str
    nodes: tuple          #: node names, from the nodes' own Partitions=
    total_nodes: int      #: TotalNodes=
    state: str
    exclusive: bool       #: OverSubscribe=EXCLUSIVE
    max_time: str
    default: bool


def _listed(value: str) -> tuple:
    return () if value in NOT_SET else tuple(v for v in value.split(',') if v)


def parse_nodes(text: str) -> list:
    '''SlurmNode of each line of ``scontrol --oneliner show node``.'''
    nodes = []
    for fields in parse_oneliner(text):
        if 'NodeName' not in fields:
            raise SlurmError(f'scontrol show node printed a line without NodeName: {fields}')
        nodes.append(SlurmNode(
            name=fields['NodeName'], partitions=_listed(fields.get('Partitions', '')),
            state=fields.get('State', ''),
            features=_listed(fields.get('AvailableFeatures', '')),
            gres='' if fields.get('Gres', '') in NOT_SET else fields['Gres'],
            cpus=int(fields['CPUTot']) if fields.get('CPUTot', '').isdigit() else 0))
    return nodes


def parse_partitions(text: str, nodes: list) -> list:
    '''SlurmPartition of each line of ``scontrol --oneliner show partition``,
    with the nodes (parse_nodes) that name it.'''
    parts = []
    for fields in parse_oneliner(text):
        if 'PartitionName' not in fields:
            raise SlurmError('scontrol show partition printed a line without PartitionName: '
                             f'{fields}')
        name = fields['PartitionName']
        total = fields.get('TotalNodes', '0')
        parts.append(SlurmPartition(
            name=name, nodes=tuple(n.name for n in nodes if name in n.partitions),
            total_nodes=int(total) if total.isdigit() else 0,
            state=fields.get('State', ''),
            exclusive=fields.get('OverSubscribe', '').startswith('EXCLUSIVE'),
            max_time=fields.get('MaxTime', ''), default=fields.get('Default') == 'YES'))
    return parts


def completed(argv: list, timeout: float, env=None) -> subprocess.CompletedProcess:
    '''A Slurm command run to its end, whatever its exit code (a job's
    exit code is a finding); SlurmError when the command is not there.'''
    try:
        return subprocess.run(argv, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, timeout=timeout, env=env)
    except FileNotFoundError:
        raise SlurmError(f'{argv[0]} not found: run this on a Slurm login node') from None


def run(argv: list, timeout: float = 60) -> str:
    '''stdout of a Slurm command; SlurmError naming it when it fails.'''
    try:
        res = completed(argv, timeout)
    except subprocess.TimeoutExpired:
        raise SlurmError(f'{" ".join(argv)} did not answer within {timeout:.0f} s') from None
    if res.returncode != 0:
        last = [ln.strip() for ln in res.stderr.splitlines() if ln.strip()]
        shown = ' '.join(shlex.quote(a) for a in argv)
        shown = shown if len(shown) < 100 else ' '.join(argv[:-1]) + ' SCRIPT'
        raise SlurmError(f'{shown} exited with {res.returncode}: '
                         f'{last[-1] if last else "(no message)"}')
    return res.stdout


def parse_mpi_list(text: str) -> list:
    '''The PMI plugins of ``srun --mpi=list`` (one indented name a line
    after "MPI plugin types are...").'''
    return [line.strip() for line in text.splitlines()
            if line.startswith(('\t', ' ')) and re.fullmatch(r'[\w.-]+', line.strip())]


#: What ``scontrol --oneliner show node`` and ``... show partition`` print.
SHOW_NODES = ('scontrol', '--oneliner', 'show', 'node')
SHOW_PARTITIONS = ('scontrol', '--oneliner', 'show', 'partition')


#: Slurm's configuration in force, "Key = Value" a line.
SHOW_CONFIG = ('scontrol', 'show', 'config')


def parse_config(text: str) -> dict:
    '''{key: value} of ``scontrol show config`` (its section headers and
    lines without " = " left out).'''
    pairs = (line.split(' = ', 1) for line in text.splitlines() if ' = ' in line)
    return {key.strip(): value.strip() for key, value in pairs}


def cluster() -> tuple:
    '''(partitions, nodes) of the cluster this host submits to.'''
    nodes = parse_nodes(run(list(SHOW_NODES)))
    return parse_partitions(run(list(SHOW_PARTITIONS)), nodes), nodes


#: The one node state a job starts on at once: ReFrame's flexible node
#: allocation counts exactly these by default (``--flex-alloc-nodes=idle``).
IDLE = frozenset({'IDLE'})
#: What a node's state shows while a reservation holds it: a job in that
#: reservation starts there.
RESERVED = frozenset({'RESERVED', 'MAINT'})


def available(node: SlurmNode, reservation: str | None = None) -> bool:
    '''Whether a job started now gets ``node`` (scontrol's State, as ReFrame's
    flexible allocation reads it): idle and nothing else (not drained, down,
    allocated, completing, powered down, planned for a pending job); in a
    reservation (``reservation``), idle and held by a reservation too.'''
    states = frozenset(node.state.upper().split('+'))
    return states == IDLE or bool(reservation and 'IDLE' in states and states - IDLE <= RESERVED)


def split_available(part: SlurmPartition, nodes: list, reservation: str | None = None) -> tuple:
    '''([names a job gets now], {name: state} of the others) of ``part``'s nodes.'''
    mine = [n for n in nodes if n.name in part.nodes]
    return ([n.name for n in mine if available(n, reservation)],
            {n.name: n.state for n in mine if not available(n, reservation)})


def option_value(access: list, long: str, short: str | None = None) -> str | None:
    '''The value of the Slurm option ``long`` (or ``short``) in ``access``
    (an hpcnet partition's job options), as ``--long=V``, ``--long V``,
    ``-sV`` or ``-s V``.'''
    forms = [re.escape(long) + '=', re.escape(short)] if short else [re.escape(long) + '=']
    for i, opt in enumerate(access):
        m = re.fullmatch(f'(?:{"|".join(forms)})(\\S+)', opt)
        if m:
            return m.group(1)
        if opt in (long, short) and i + 1 < len(access):
            return access[i + 1]
    return None


def partition_of_access(access: list) -> str | None:
    '''The Slurm partition an hpcnet partition's ``access`` options name.'''
    return option_value(access, '--partition', '-p')
