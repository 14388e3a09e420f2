"""What `site init` asks Slurm and the nodes, as commands each with the file
its output is saved in: the same plan runs here, is printed without running
(``--dry-run``), becomes a script that saves every output into a directory
on the cluster (``--dump-commands``), or is read back from that directory
(``--from DIR``), so that the live and the offline paths write one file."""
from __future__ import annotations

import re
import shlex
import socket
from dataclasses import dataclass
from pathlib import Path

from hpcnet import topology
from hpcnet.model import ConfigError
from hpcnet.siteinit import nodes, slurm

#: Seconds the probe job may wait for its nodes: it asks for idle nodes by
#: name, so it starts at once or not at all (a busy node is Slurm's answer).
PROBE_START_WITHIN_S = 20
#: The probe job's time limit (minutes): it runs for seconds.
PROBE_MINUTES = 3
#: What a reservation, account or QOS name may hold (Slurm's names): a value
#: outside it never reaches a job script or a shell.
SLURM_NAME = re.compile(r'[A-Za-z0-9_.+-]+')


@dataclass(frozen=True)
class Command:
    file: str              #: where its output is saved (--dump-commands, --from)
    argv: tuple
    submits: bool = False  #: it starts a job (never run by --dry-run)
    timeout: float = 60
    hosts: tuple = ()      #: the nodes a job runs on

    def shown(self) -> str:
        '''The command as typed (the probe's long script as $PROBE).'''
        argv = ['"$PROBE"' if a == nodes.PROBE_SCRIPT else shlex.quote(a) for a in self.argv]
        return ' '.join(argv)


HOSTNAME = Command('hostname.txt', ('hostname',))
SHOW_NODES = Command('scontrol-show-node.txt', slurm.SHOW_NODES)
SHOW_PARTITIONS = Command('scontrol-show-partition.txt', slurm.SHOW_PARTITIONS)
MPI_LIST = Command('srun-mpi-list.txt', ('srun', '--mpi=list'))
SHOW_TOPOLOGY = Command('scontrol-show-topology.txt', topology.SHOW_TOPOLOGY)


def access_options(reservation: str | None, account: str | None, qos: str | None) -> list:
    '''The job options every probe and check job takes (the written
    partition's ``access``); a value that is not a Slurm name is refused.'''
    options = []
    for option, value in (('--reservation', reservation), ('--account', account),
                          ('--qos', qos)):
        if value is None:
            continue
        if not SLURM_NAME.fullmatch(value):
            raise ConfigError(f'{option} {value!r} is not a Slurm name (valid: letters, digits, '
                              '_ . + -)')
        options.append(f'{option}={value}')
    return options


def probe(part: slurm.SlurmPartition, hosts: list, access: list) -> Command:
    '''One short job on ``hosts`` (named: idle nodes start it at once) that
    runs the probe script once on each.'''
    safe = re.sub(r'[^\w.-]', '_', part.name)
    return Command(f'probe-{safe}.txt', (
        'srun', '-l', f'--partition={part.name}', *access, f'--nodelist={",".join(hosts)}',
        f'--nodes={len(hosts)}', '--ntasks-per-node=1', f'--immediate={PROBE_START_WITHIN_S}',
        f'--time={PROBE_MINUTES}', 'sh', '-c', nodes.PROBE_SCRIPT),
        submits=True, timeout=PROBE_START_WITHIN_S + 60 * PROBE_MINUTES, hosts=tuple(hosts))


class Live:
    """The commands run on this host (a Slurm login node)."""

    def hostname(self) -> str:
        return socket.gethostname()

    def output(self, command: Command) -> str:
        return slurm.run(list(command.argv), command.timeout)


class Saved:
    """The outputs ``--dump-commands``' script saved in ``directory``."""

    def __init__(self, directory: Path):
        if not directory.is_dir():
            raise ConfigError(f'--from {directory}: no such directory (hpcnet site init NAME '
                              '--dump-commands prints the script that makes it)')
        self.directory = directory

    def hostname(self) -> str:
        return self.output(HOSTNAME).strip()

    def output(self, command: Command) -> str:
        path = self.directory / command.file
        if not path.is_file():
            raise slurm.SlurmError(f'{path} is missing: the output of {command.shown()}')
        return path.read_text()


def dump_script(commands: list) -> str:
    '''A POSIX shell script that saves each command's output in $1 (default
    hpcnet-site-init/), its errors beside it; a failed command is noted and
    the next one runs.'''
    lines = ['#!/bin/sh',
             '# Written by `hpcnet site init --dump-commands`: run it on a login node of the',
             '# cluster, copy the directory back, then `hpcnet site init NAME --from DIR`.',
             'DIR=${1:-hpcnet-site-init}', 'mkdir -p "$DIR" || exit 2',
             f'PROBE={shlex.quote(nodes.PROBE_SCRIPT)}']
    for command in commands:
        out = shlex.quote(command.file)
        err = shlex.quote(command.file[:-len('.txt')] + '.err')
        lines.append(f'{command.shown()} > "$DIR"/{out} 2> "$DIR"/{err} || '
                     f'echo "failed: {command.file} (see $DIR/{command.file[:-4]}.err)" >&2')
    lines.append('echo "saved in $DIR: copy it back and run hpcnet site init NAME --from $DIR"')
    return '\n'.join(lines) + '\n'


def _node_states(by_name: dict) -> str:
    return ', '.join(f'{name} ({state})' for name, state in sorted(by_name.items()))


def probes_for(wanted: list, slurm_nodes: list, access: list, reservation: str | None,
                count: int | None) -> tuple:
    '''([(partition, probe Command)], [why a partition is not probed],
    [which nodes are left out and why]): each partition's probe runs on the
    nodes Slurm would start a job on now (slurm.available), ``count`` of them
    at most.'''
    probes, skipped, left_out = [], [], []
    for part in wanted:
        if part.total_nodes == 0:
            skipped.append(f'{part.name}: no nodes (scontrol show partition: TotalNodes=0)')
            continue
        hosts, busy = slurm.split_available(part, slurm_nodes, reservation)
        if busy:
            left_out.append(f'{part.name}: {_node_states(busy)} left out: scontrol shows '
                            f'{"them" if len(busy) > 1 else "it"} not idle'
                            + (f' nor in reservation {reservation}' if reservation else ''))
        if not hosts:
            skipped.append(f'{part.name}: no node is idle (scontrol show node: {_node_states(busy)}); '
                           'run site init again when some are, or in a reservation (--reservation)')
            continue
        probes.append((part, probe(part, hosts[:count] if count else hosts, access)))
    return probes, skipped, left_out
