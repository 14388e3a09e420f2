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


def cluster() -> tuple:
    '''(partitions, nodes) of the cluster this host submits to.'''
    nodes = parse_nodes(run(['scontrol', '--oneliner', 'show', 'node']))
    return parse_partitions(run(['scontrol', '--oneliner', 'show', 'partition']), nodes), nodes


def partition_of_access(access: list) -> str | None:
    '''The Slurm partition an hpcnet partition's ``access`` options name.'''
    for i, opt in enumerate(access):
        m = re.fullmatch(r'(?:--partition=|-p)(\S+)', opt)
        if m:
            return m.group(1)
        if opt in ('--partition', '-p') and i + 1 < len(access):
            return access[i + 1]
    return None
