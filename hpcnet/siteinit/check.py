"""`hpcnet site check`: what a site must hold before its first run, one
finding per line.  For every partition of the site file: its Slurm partition
has nodes and starts a job on all of them; those nodes read a token written
here into the stage directory (a shared filesystem), see every prefix and
module directory of the environments, and have the declared interface and
RDMA devices (hpcnet.checklib.preflight); and the partition's launcher with
its PMI starts 2 MPI ranks of one environment per MPI family, which pass a
message (the discovery probe's program, hpcnet.stacks.candidate)."""
from __future__ import annotations

import os
import re
import secrets
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from hpcnet import fabrictable, mpi
from hpcnet.checklib import preflight
from hpcnet.exitcodes import Exit, worst
from hpcnet.model import PMI_LAUNCHER, ConfigError, Partition, Stack
from hpcnet.siteinit import slurm
from hpcnet.stacks.candidate import PROBE_PROGRAM, probe_source

#: Seconds Slurm may take to start a check's job before it counts as not started.
START_WITHIN_S = 120
#: The same for the job on the partition's idle nodes, asked for by name:
#: it starts at once or a node is busy.
NAMED_START_WITHIN_S = 20
#: How often, and how many seconds apart, sacct is asked for a finished job
#: (slurmdbd records a job's end a moment after it ends).
SACCT_TRIES, SACCT_PAUSE_S = 5, 2
#: Job states sacct reports for a job that has ended.
ENDED = ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT', 'NODE_FAIL', 'OUT_OF_MEMORY')
#: The check's jobs' time limit (minutes): each runs for seconds.
JOB_MINUTES = 3
#: What the probe program prints on each rank of a passed exchange.
_EXCHANGED = re.compile(r'exchange: rank (\d+) of 2 received (\d+)')


@dataclass(frozen=True)
class Finding:
    code: Exit
    text: str

    def line(self) -> str:
        word = {Exit.OK: 'ok', Exit.FAILED: 'FAIL', Exit.UNDECIDED: 'not checked'}[self.code]
        return f'{word:<11} {self.text}'


def ok(text):
    return Finding(Exit.OK, text)


def fail(text):
    return Finding(Exit.FAILED, text)


def exit_code(findings: list) -> Exit:
    return worst(*(f.code for f in findings)) if findings else Exit.UNDECIDED


def _last_words(text: str) -> str:
    '''What a failed job said: its first line naming a PMI (the cause when
    the MPI cannot use the one it was started with), else its last line;
    salloc's own lines and rules of dashes say nothing.'''
    lines = [ln.strip() for ln in (text or '').splitlines()
             if ln.strip() and not ln.startswith('salloc:') and set(ln.strip()) != {'-'}]
    pmi = [ln for ln in lines if 'PMI' in ln]
    return (pmi or lines[-1:] or ['(no output)'])[0]


def environment_paths(environ: dict) -> list:
    '''What the nodes must see of an environment (a ReFrame environment of
    hpcnet.stacks): its MPI prefix and tool prefixes, and its module directories.'''
    extras = environ.get('extras') or {}
    paths = [extras.get('mpi_prefix'), *extras.get('tool_prefixes', [])]
    paths += [m.get('path') for m in environ.get('modules', []) if isinstance(m, dict)]
    return sorted({p for p in paths if p})


def node_script(part: Partition, tokens: dict, paths: list) -> str:
    '''Shell run on each node: the tokens (name -> file) and paths it reads,
    then the preflight probe of the declared interface and RDMA devices.'''
    lines = ['H=$(hostname)', 'echo "hpcnet-preflight: $H job_id=${SLURM_JOB_ID:-none}"']
    for name, path in tokens.items():
        q = shlex.quote(str(path))
        lines.append(f'echo "hpcnet-preflight: $H token_{name}=$(cat {q} 2>/dev/null || '
                     'echo missing)"')
    for i, path in enumerate(paths):
        lines.append(f'if [ -e {shlex.quote(path)} ]; then s=yes; else s=no; fi; '
                     f'echo "hpcnet-preflight: $H path_{i}=$s"')
    if part.iface:
        lines.append(preflight.probe_script(part.iface, None))
    for dev in part.rdma_devices:
        lines.append(preflight.probe_script(None, dev, part.rdma_port, part.gid_index))
    return '\n'.join(lines)


def _hosts(names) -> str:
    names = sorted(names)
    return ', '.join(names) if len(names) <= 6 else f'{len(names)} nodes ({names[0]} ...)'


def check_accounting(job_id: str) -> Finding:
    '''sacct answers for ``job_id``, a job that has ended: ReFrame polls the
    state of its Slurm jobs with sacct and stops after 3 failed calls.'''
    # The command ReFrame's slurm scheduler polls with (SLURM_TIME_FORMAT aside).
    argv = ['sacct', '-S', time.strftime('%F'), '-P', '-j', job_id,
            '-o', 'jobid,state,exitcode,end,nodelist']
    said = ''
    for attempt in range(SACCT_TRIES):
        if attempt:
            time.sleep(SACCT_PAUSE_S)
        try:
            res = slurm.completed(argv, 30)
        except (slurm.SlurmError, subprocess.TimeoutExpired) as err:
            return fail(f'sacct: {err or "did not answer within 30 s"} (ReFrame polls Slurm '
                        'jobs with sacct)')
        rows = [ln.split('|') for ln in res.stdout.splitlines() if ln.strip()]
        state = next((row[1] for row in rows if row[0] == job_id and len(row) > 1), '')
        if res.returncode == 0 and state.split()[:1] and state.split()[0] in ENDED:
            return ok(f'sacct: job {job_id}, which ended, is {state} in the accounting '
                      '(ReFrame polls Slurm jobs with sacct)')
        said = _last_words(res.stderr or res.stdout) if res.returncode else (
            f'state {state!r}' if state else 'no record of it')
    return fail(f'sacct: no answer for job {job_id}, which ended: {" ".join(argv)}: {said} '
                '(ReFrame polls Slurm jobs with sacct: slurmdbd and AccountingStorageType must '
                'be set up)')


def check_nodes(part: Partition, access: list, stage: Path, environs: list,
                hosts: list | None = None, left_out: dict | None = None) -> list:
    '''([Finding], the job's id or None) of one job on the partition's nodes
    ``hosts`` (idle ones, named; None: as many as it declares, Slurm's
    choice); ``left_out`` {name: state}: its nodes that are not idle.'''
    stage.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(8)
    token_file = stage / f'.hpcnet-site-check-{token}'
    token_file.write_text(token + '\n')
    paths = sorted({p for env in environs for p in environment_paths(env)})
    script = node_script(part, {'stage': token_file}, paths)
    count = len(hosts) if hosts else part.num_nodes
    where = [f'--nodelist={",".join(hosts)}'] if hosts else []
    within = NAMED_START_WITHIN_S if hosts else START_WITHIN_S
    argv = ['srun', *access, *where, f'--nodes={count}', '--ntasks-per-node=1',
            f'--immediate={within}', f'--time={JOB_MINUTES}', 'sh', '-c', script]
    try:
        res = slurm.completed(argv, within + 60 * JOB_MINUTES)
    except subprocess.TimeoutExpired:
        return [fail(f'{part.fullname}: a job on {count} of its node(s) did not end within '
                     f'{JOB_MINUTES} min')], None
    finally:
        token_file.unlink()
    nodes = preflight.parse(res.stdout)
    if res.returncode != 0 or not nodes:
        return [fail(f'{part.fullname}: no job ran on {count} of its node(s): srun '
                      f'{" ".join(access + where)} --nodes={count} exited with {res.returncode}: '
                      f'{_last_words(res.stderr or res.stdout)}')], None
    findings = [ok(f'{part.fullname}: a job ran on {_hosts(nodes)}')]
    if left_out:
        findings.append(ok(f'{part.fullname}: left out, not idle now: ' + ', '.join(
            f'{n} ({s})' for n, s in sorted(left_out.items())) + ' (the checks run on the '
            'nodes idle when they start)'))
    if len(nodes) < count:
        findings.append(fail(f'{part.fullname}: only {len(nodes)} of the {count} nodes '
                              'the job asked for answered'))
    blind = [n.host for n in nodes.values() if n.values.get('token_stage') != token]
    if blind:
        findings.append(fail(
            f'{part.fullname}: {_hosts(blind)} cannot see the stage directory {stage}: a token '
            'written there on this host was not there (the nodes must share the filesystem '
            'that holds it; the site file\'s prefix or HPCNET_WORK_DIR moves it)'))
    else:
        findings.append(ok(f'{part.fullname}: every node reads the stage directory {stage} '
                            '(a token written on this host)'))
    missing = {p: [n.host for n in nodes.values() if n.values.get(f'path_{i}') != 'yes']
               for i, p in enumerate(paths)}
    missing = {p: hosts for p, hosts in missing.items() if hosts}
    for path, hosts in sorted(missing.items()):
        findings.append(fail(f'{part.fullname}: {_hosts(hosts)} cannot see {path}, which an '
                              'environment of this partition uses (an MPI prefix or module '
                              'directory)'))
    if paths and not missing:
        findings.append(ok(f'{part.fullname}: every node sees the {len(paths)} prefixes and '
                            'module directories of its environments'))
    problems = []
    for node in nodes.values():
        if part.iface:
            problems += preflight.ethernet_problems(node, part.iface, part.mtu, part.link_speed_mbps)
        for dev in part.rdma_devices:
            report = preflight.parse_device(res.stdout, dev).get(node.host,
                                                                 preflight.NodeReport(node.host))
            problems += preflight.rdma_problems(report, part.fabric, dev, part.gid_index)
    findings += [fail(f'{part.fullname}: {p} (the partition declares it)') for p in problems]
    declared = ', '.join(filter(None, [part.iface, *part.rdma_devices]))
    if declared and not problems:
        findings.append(ok(f'{part.fullname}: {declared} present and as declared on every node'))
    job_ids = {n.values.get('job_id') for n in nodes.values()} - {'none', None}
    return findings, (job_ids.pop() if len(job_ids) == 1 else None)


def one_per_family(environs: list) -> list:
    '''One MPI environment per family: the first without a known defect
    (else the first), so that each PMI the partition uses is started once.'''
    chosen = {}
    for env in environs:
        extras = env.get('extras') or {}
        family = extras.get('mpi_family')
        if family is None:
            continue
        best = chosen.get(family)
        if best is None or ((best.get('extras') or {}).get('mpi_known_issue')
                            and not extras.get('mpi_known_issue')):
            chosen[family] = env
    return list(chosen.values())


def _environment_setup(env: dict) -> tuple:
    '''(shell lines loading ``env``'s modules, {variable: value}) of a ReFrame
    environment: what ReFrame's job script does before the launcher.'''
    lines = list(env.get('prepare_cmds', []))
    for module in env.get('modules', []):
        spec = module if isinstance(module, dict) else {'name': module}
        if spec.get('path'):
            lines.append(f'module use {shlex.quote(spec["path"])}')
        lines.append(f'module load {shlex.quote(spec["name"])}')
    # Each value is a shell word (ReFrame writes `export NAME=VALUE`).
    variables = {name: os.path.expandvars(''.join(shlex.split(value)))
                 for name, value in env.get('env_vars', [])}
    return lines, variables


def check_mpi(part: Partition, rfm_part: dict, env: dict, stage: Path) -> Finding:
    '''Two ranks of ``env`` started by the partition's launcher with its PMI
    pass a message (on two nodes where the partition has them).'''
    stack = Stack.from_extras(env['name'], env['extras'])
    what = f'{part.fullname}: {env["name"]} ({stack.mpi_family} {stack.mpi_version})'
    launcher = rfm_part.get('launcher')
    if launcher != PMI_LAUNCHER:
        return Finding(Exit.UNDECIDED, f'{what}: launcher {launcher!r} is not checked (site '
                                       f'check starts MPI jobs with {PMI_LAUNCHER} only)')
    try:
        settings = fabrictable.settings(part, stack, launcher)
    except ConfigError as err:
        return fail(f'{what}: {err}')
    pmi = next((o for o in settings.launcher_options if o.startswith('--mpi=')), '(no --mpi=)')
    pmi_from = ('extras pmi' if part.pmi else
                f'config/fabrics.yaml launchers.{launcher}.{stack.mpi_family}')
    workdir = stage / 'site-check' / part.fullname.replace(':', '-') / env['name']
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / 'probe.c').write_text(probe_source())
    lines, variables = _environment_setup(env)
    nodes = min(2, part.num_nodes)
    wrapper = mpi.family(stack.mpi_family).wrapper_cc_variable
    lines += [f'cd {shlex.quote(str(workdir))}',
              f'{shlex.quote(env["cc"])} probe.c -o {PROBE_PROGRAM} || exit 97',
              f'srun {" ".join(shlex.quote(o) for o in settings.launcher_options)} '
              f'--nodes={nodes} --ntasks=2 ./{PROBE_PROGRAM} exchange']
    argv = ['salloc', *rfm_part.get('access', []), f'--nodes={nodes}',
            f'--immediate={START_WITHIN_S}', f'--time={JOB_MINUTES}',
            'bash', '-c', '\n'.join(lines)]
    try:
        res = slurm.completed(argv, START_WITHIN_S + 60 * JOB_MINUTES,
                         env={**os.environ, **variables, **settings.env})
    except subprocess.TimeoutExpired:
        return fail(f'{what}: 2 ranks started with srun {pmi} did not end within '
                     f'{JOB_MINUTES} min')
    ranks = {int(r) for r, _ in _EXCHANGED.findall(res.stdout)}
    if res.returncode == 0 and ranks == {0, 1}:
        return ok(f'{what}: srun {pmi} ({pmi_from}) started 2 ranks on {nodes} node(s); they '
                   'passed a message')
    if res.returncode == 97:
        return fail(f'{what}: {env["cc"]} cannot compile an MPI program in {workdir} '
                     f'({wrapper}): {_last_words(res.stderr)}')
    return fail(f'{what}: srun {pmi} ({pmi_from}) did not start 2 ranks that pass a message '
                 f'(exit {res.returncode}): {_last_words(res.stderr or res.stdout)}')


#: Slurm's TreeWidth where slurm.conf sets none (22.05 and later).
DEFAULT_TREE_WIDTH = 50
#: The fewest nodes a step of the suite spans (the p2p checks across nodes).
SMALLEST_STEP_NODES = 2
#: The job variable that does what PMIxCollFence=ring in mpi.conf does.
PMIX_FENCE_VARIABLE = 'SLURM_PMIX_FENCE'


def check_pmix_fence(system: dict, config: dict) -> Finding | None:
    '''Whether Slurm's PMIx barrier waits in the suite's steps: where
    TreeWidth exceeds a step's node count and fences take the tree, each
    node's barrier completes alone and a rank can start before its peers
    have their addresses (docs/known-issues.md, the Open MPI crash in
    MPI_Init).  None where no partition launches with srun.'''
    srun_parts = [p for p in system['partitions'] if p.get('launcher') == 'srun']
    if not srun_parts:
        return None
    width = int(config.get('TreeWidth') or DEFAULT_TREE_WIDTH)
    fence = (config.get('PMIxCollFence') or '(null)').lower()
    ring_in_jobs = [p['name'] for p in srun_parts
                    if any(name == PMIX_FENCE_VARIABLE and str(value).lower() == 'ring'
                           for name, value in (p.get('env_vars') or []))]
    what = f'Slurm PMIx fence: TreeWidth {width}, PMIxCollFence {fence}'
    if fence == 'ring' or width <= SMALLEST_STEP_NODES or len(ring_in_jobs) == len(srun_parts):
        return ok(f'{what}: the barrier of a {SMALLEST_STEP_NODES}-node step waits for every '
                  'node')
    return fail(f'{what}: in steps of fewer than {width} nodes the PMIx barrier does not wait '
                '(Open MPI can crash in MPI_Init): add PMIxCollFence=ring to mpi.conf beside '
                f'slurm.conf, or {PMIX_FENCE_VARIABLE}=ring to the partitions\' env_vars '
                '(docs/known-issues.md)')


def check_site(system: dict, environs: dict, stage: Path, slurm_parts: dict,
               report=lambda finding: None, slurm_nodes: tuple = ()) -> list:
    '''Every finding for ``system`` (validated), whose partitions get the
    ReFrame environments ``environs`` {partition name: [environment]}, with
    the Slurm partitions ``slurm_parts`` {name: SlurmPartition} and their
    nodes ``slurm_nodes`` (SlurmNode); each is passed to ``report`` as soon
    as it is made.  The first job that ran is looked up in sacct.'''
    findings, ended = [], []
    for rfm_part in system['partitions']:
        for finding in _check_partition(system, rfm_part, environs, stage, slurm_parts,
                                        slurm_nodes, ended):
            report(finding)
            findings.append(finding)
    accounting = (check_accounting(ended[0]) if ended else
                  Finding(Exit.UNDECIDED, 'sacct: not checked: no job ran'))
    report(accounting)
    return findings + [accounting]


def _check_partition(system: dict, rfm_part: dict, environs: dict, stage: Path,
                     slurm_parts: dict, slurm_nodes: tuple, ended: list):
    '''The findings of one partition, each as soon as it is made; the id of
    its job on the nodes is appended to ``ended``.'''
    part = Partition.from_extras(f'{system["name"]}:{rfm_part["name"]}', rfm_part['extras'])
    access = list(rfm_part.get('access', []))
    name = slurm.partition_of_access(access)
    if rfm_part.get('scheduler') != 'slurm':
        yield Finding(Exit.UNDECIDED, f'{part.fullname}: scheduler '
                                      f'{rfm_part.get("scheduler")!r} is not checked (Slurm only)')
        return
    if name is None:
        yield fail(f'{part.fullname}: access {access} names no Slurm partition '
                    '(valid: --partition=NAME)')
        return
    if name not in slurm_parts:
        yield fail(f'{part.fullname}: Slurm has no partition {name!r} (scontrol show '
                    f'partition: {", ".join(sorted(slurm_parts)) or "none"})')
        return
    total = slurm_parts[name].total_nodes
    if total == 0:
        yield fail(f'{part.fullname}: Slurm partition {name} has no nodes (scontrol show '
                    'partition: TotalNodes=0)')
        return
    if total < part.num_nodes:
        yield fail(f'{part.fullname}: declares {part.num_nodes} nodes (extras num_nodes) but '
                    f'Slurm partition {name} has {total}')
        return
    mine = environs.get(rfm_part['name'], [])
    hosts, busy = slurm.split_available(slurm_parts[name], slurm_nodes,
                                        slurm.option_value(access, '--reservation'))
    if not hosts:
        yield Finding(Exit.UNDECIDED, f'{part.fullname}: not checked: no node of Slurm partition '
                                      f'{name} is idle (' + ', '.join(
                                          f'{n} {s}' for n, s in sorted(busy.items())) + ')')
        return
    found, job_id = check_nodes(part, access, stage, mine, hosts[:part.num_nodes], busy)
    yield from found
    ended += [job_id] if job_id else []
    chosen = one_per_family(mine)
    if not chosen:
        yield Finding(Exit.UNDECIDED, f'{part.fullname}: no MPI environment to start '
                                      '(hpcnet stacks --system lists them)')
    for env in chosen:
        yield check_mpi(part, rfm_part, env, stage)
