"""ReFrame building blocks of the hpcnet checks (the checks in checks/ stay
declarative: parameters, fixtures, performance variables).

- the builds they take as fixtures: :mod:`hpcnet.checklib.builds`.
- :class:`NetworkRun`: any run whose bytes should cross the partition's link:
  its ``scale`` places the ranks, the interface counters are read on every
  node before and after, the references come from ``reference/<system>.yaml``.
- :class:`MpiBenchmark`: an MPI run put on the partition's fabric by the fabric
  table, judged in one step (:meth:`MpiBenchmark.prove`): exit status, the
  MPI library really loaded, the hosts, the MPI's own transport report and the
  link counters.
"""
from __future__ import annotations

import os
import re
import shlex

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import fixture, parameter, run_after, run_before, variable
from reframe.core.exceptions import PerformanceError, SanityError
from reframe.utility import ScopedDict

from hpcnet import fabrics, fabrictable, metrics
from hpcnet.acceptance.references import references
from hpcnet.checklib import calibration, linkbytes, preflight, sanity
from hpcnet.checklib.builds import build_kernels
from hpcnet.checklib.calibrated import JudgedOverIperf3
from hpcnet.checklib.flexnodes import TakesAvailableNodes
from hpcnet.constants import (FABRIC_UNUSABLE, FINALIZE_TIMEOUT_OVERSUBSCRIBED_S,
                              FINALIZE_TIMEOUT_S, Fabric, Feature, PartitionFeature, Scale)
from hpcnet.variables import FINALIZE_TIMEOUT_ENV
from hpcnet.model import Partition, Stack
from hpcnet.mpi import start_env
from hpcnet.constants import BUILTIN_ENV
from hpcnet.parsers import parsed_once
from hpcnet.parsers.kernel import parse_kernel_output


#: Where the in-job RDMA probe writes what the nodes lack (stage directory).
RDMA_PROBE_FILE = 'hpcnet-rdma-probe.txt'


class SkipsWithReason(rfm.RegressionTestPlugin):
    '''A case that does not run says why in the JSON report as well (ReFrame
    keeps a skip's message only on the console), so the HTML report and the
    tests can show it.'''

    #: Why the case was skipped ('' when it ran).
    skip_reason = variable(str, value='', loggable=True)
    #: The skip leaves the run "not decided" (a case the partition declares
    #: that could not run now), not a case that does not apply.
    skip_undecided = variable(typ.Bool, value=False, loggable=True)

    def skip_because(self, reason: str) -> None:
        self.skip_reason = reason
        self.skip(reason)

    def not_decided_because(self, reason: str) -> None:
        self.skip_undecided = True
        self.skip_because(f'not decided: {reason}')


class JudgedByReferences(rfm.RegressionTestPlugin):
    '''Performance judged against ``reference/<system>.yaml``, strictly: where
    the system has a file, every performance variable must resolve to a
    reference, an ``$xfail`` or a ``$not_asserted`` entry (ReFrame's
    ``require_reference``), and one whose value cannot be computed fails.
    Where it has none, the values are recorded and the case says "not
    judged".'''

    #: What reference/<system>.yaml indexes this check's references by (its
    #: `$index`): each check sets it beside the attributes it names.
    reference_index = variable(typ.List[str], value=['$partition'], loggable=True)
    #: 'judged against <file>', or 'not judged: ...' (no reference file).
    judgement = variable(str, value='', loggable=True)
    #: What the verdict rests on (references.Basis).
    judgement_basis = variable(str, value='', loggable=True)
    #: Values the reference file deliberately does not assert, with the reason.
    not_asserted = variable(typ.Dict[str, object], value={}, loggable=True)

    @run_after('setup')
    def set_references(self):
        # Validated first: a malformed file fails here with file, key and
        # what is valid, never with a half-applied reference.
        self.references = references.for_test(self.current_system.name, type(self).__name__,
                                               self.reference_index)
        self.reference = self.references.reference
        self.require_reference = self.references.strict
        self.reference_index = list(self.references.index)     # as the file has it
        self.judgement = (f'judged against {self.references.path}' if self.references.strict
                          else f'{references.NOT_JUDGED}: {self.references.path} does not exist')
        self.judgement_basis = (references.Basis.REFERENCES if self.references.strict
                                else references.Basis.NO_FILE)

    def metric(self, quantity: str) -> metrics.Metric:
        '''This check's catalogue entry of ``quantity`` (hpcnet.metrics).'''
        return metrics.metric(type(self).__name__, quantity)

    def add_metric(self, quantity: str, value, size: int | None = None,
                   qualifier: str = '') -> str:
        '''A performance variable of ``value`` (deferred), named and united
        by the catalogue entry of ``quantity`` at ``size``; its name.'''
        entry = self.metric(quantity)
        name = entry.name_for(size, qualifier)
        self.perf_variables[name] = sn.make_performance_function(value, entry.unit)
        return name

    def index_path(self) -> str:
        '''This case's reference key path: 'local:tcp/openmpi/bw'.'''
        special = {'$partition': self.current_partition.fullname,
                   '$system': self.current_system.name, '$environ': self.current_environ.name}
        return '/'.join(str(special[k]) if k in special else str(getattr(self, k))
                        for k in self.reference_index)

    @run_before('performance', always_last=True)
    def evaluate_every_value(self):
        # ReFrame skips a variable whose value cannot be computed, with a
        # warning: here that fails the case, naming it.  A dry run has no
        # output to compute from: nothing to evaluate.
        if self.is_dry_run():
            return
        withheld = self.withheld_judgement()
        path = self.index_path()
        for name, expr in list(self.perf_variables.items()):
            try:
                expr.evaluate()
            except Exception as err:
                raise PerformanceError(f'performance variable {name} has no value: {err}') \
                    from None
            reason = withheld or self.references.not_asserted_reason(f'{path}/{name}')
            if reason is not None:
                # The reason only: the value and its unit are the report's
                # perfvalues', one copy of each.
                self.not_asserted[name] = {'reason': reason}
        if self.not_asserted:
            self.reference = self.reference_without_bounds(self.not_asserted)
        if withheld:
            self.judgement = f'{references.NOT_JUDGED}: {withheld}'
            self.judgement_basis = references.Basis.WITHHELD
        elif self.references.strict and self.not_asserted:
            reasons = '; '.join(sorted({references.reason_kind(v['reason'])
                                        for v in self.not_asserted.values()}))
            if set(self.perf_variables) <= set(self.not_asserted):
                self.judgement = (f'{references.NOT_JUDGED}: no metric of this case is asserted in '
                                  f'{self.references.path}: {reasons}')
                self.judgement_basis = references.Basis.NOTHING_ASSERTED
            else:
                self.judgement += (f' ({len(self.not_asserted)} metrics recorded, not asserted: '
                                   f'{reasons})')

    def reference_without_bounds(self, unasserted: dict) -> dict:
        '''This case's references as ReFrame resolves them, with each variable
        named in ``unasserted`` given ReFrame's own "no
        reference" (0, no bounds): a value kept, not asserted, still reaches
        the perflog, the report's perfvalues and the results database
        (ReFrame's --performance-compare), and bounds nothing.'''
        partition = self.current_partition.fullname
        if isinstance(self.reference, ScopedDict):
            resolved = self.reference.scope(partition)
        elif self.reference.index:
            try:
                resolved = dict(self.reference[self])
            except KeyError:
                resolved = {}
        else:
            resolved = ScopedDict(self.reference.data).scope(partition)
        # A plain {partition: {...}}: ReFrame's reference field makes it a
        # ScopedDict (assigning a ScopedDict leaves the field None in 4.10).
        return {partition: {**resolved, **{name: (0, None, None, self.perf_variables[name].unit)
                                           for name in unasserted}}}

    def withheld_judgement(self) -> str | None:
        '''Why the host could not give this case a fair measurement this time
        (its values are recorded, not asserted: basis WITHHELD), or
        None; a check whose measurement shows it measured something other
        than the declared system raises here.'''
        return None


class PlacedByScale(rfm.RegressionTestPlugin):
    '''The partitions of a check parametrized by ``scale``
    (hpcnet.constants.Scale), which the check defines.'''

    @run_after('init')
    def select_partitions_by_scale(self):
        '''A single-node run on a multi-node partition measures the node, not
        the link: scale ONE_NODE runs only where the partition is one node,
        the multi-node scales only where it has several.'''
        wanted = (f'-{PartitionFeature.MULTINODE}' if self.scale == Scale.ONE_NODE
                  else f'+{PartitionFeature.MULTINODE}')
        self.valid_systems = [wanted if entry == '*' else f'{entry} {wanted}'
                              for entry in self.valid_systems]


class NetworkRun(rfm.RunOnlyRegressionTest, JudgedOverIperf3, JudgedByReferences,
                 SkipsWithReason, TakesAvailableNodes, PlacedByScale):
    '''Base of every run whose bytes should cross the partition's link.'''

    exclusive_access = True
    #: Where the ranks run (hpcnet.constants.Scale); checks narrow the values.
    scale = parameter(Scale.POINT_TO_POINT)
    #: Ranks on the one node of scale ONE_NODE.
    ranks_on_one_node = variable(int, value=2)
    #: Nodes the ranks span (set from the scale and the partition).
    num_nodes = variable(int, value=1)
    #: Read the interface's counters on every node before and after the run,
    #: and require the bytes it sent to cover what the benchmark sent.
    check_link_counters = variable(typ.Bool, value=True)
    #: Per node: counter deltas over the run (errors and drops included).
    link_counters = variable(typ.List[typ.Dict[str, object]], value=[], loggable=True)
    #: The partition's wire rate (bit/s; None where unknown), for provenance.
    link_rate_bps = variable(int, type(None), value=None, loggable=True)

    @run_after('setup')
    def place_ranks(self):
        self.partition = Partition.of(self.current_partition)
        self.link_rate_bps = self.partition.link_rate_bps
        if self.scale == Scale.ONE_NODE:
            self.num_nodes, self.num_tasks = 1, self.ranks_on_one_node
        elif self.scale == Scale.TWO_NODES:
            self.num_nodes, self.num_tasks = 2, 2
        else:
            self.num_nodes = self.num_tasks = self.available_nodes(self.partition.num_nodes)
        self.num_tasks_per_node = self.num_tasks // self.num_nodes


    def link_iface(self):
        '''The interface whose counters prove the traffic, or None.'''
        if not self.check_link_counters or not fabrics.fabric(self.partition.fabric).has_link:
            return None
        return self.partition.iface

    @run_before('run')
    def read_link_counters(self):
        launcher = self.current_partition.launcher_type.registered_name
        if self.partition.is_rdma:
            # RDMA readiness is judged where the ranks will run, not on the
            # host running ReFrame: a node without the device ends the job
            # before the MPI starts, and the case skips naming it.
            probe = preflight.rdma_probe_command(self.partition.rdma_devices)
            self.prerun_cmds += [
                f'{fabrics.per_node(probe, launcher, self.num_nodes)} > {RDMA_PROBE_FILE}',
                f'if [ -s {RDMA_PROBE_FILE} ]; then cat {RDMA_PROBE_FILE}; exit 0; fi']
        iface = self.link_iface()
        if iface is None:
            return
        before, after = [], []
        if self.calibrates_link():
            # Outside the counters' window: the link proof counts the benchmark's bytes.
            log = shlex.quote(os.path.join(self.stagedir, calibration.LOG_FILE))
            shaper = shlex.quote(os.path.join(self.stagedir, calibration.SHAPER_FILE))
            before = [f'{calibration.shaper_command(iface, launcher, self.num_nodes)} > {shaper} 2>&1',
                      f'{calibration.iperf3_command("before", self.stagedir, iface, launcher)} '
                      f'> {log} 2>&1']
            after = [f'{calibration.iperf3_command("after", self.stagedir, iface, launcher)} '
                     f'>> {log} 2>&1']
            part = self.partition
            if part.wire_efficiency is not None:
                confirm = calibration.confirm_command(self.stagedir, iface, launcher,
                                                      part.link_rate_bps, part.mtu,
                                                      part.wire_efficiency)
                after.append(f'{{ {confirm}; }} >> {log} 2>&1')
            self.keep_files += calibration.FILES
        self.prerun_cmds += before + [fabrics.per_node(
            fabrics.snapshot_command('before', iface), launcher, self.num_nodes)]
        # The job's exit status stays the benchmark's, not the last
        # snapshot's: saved first, restored last.
        self.postrun_cmds = ['hpcnet_status=$?',
                             fabrics.per_node(fabrics.snapshot_command('after', iface),
                                              launcher, self.num_nodes),
                             *after, *self.postrun_cmds, 'exit $hpcnet_status']

    @run_before('sanity')
    def fail_without_rdma_devices(self):
        # A partition declares its fabric: a node without the device is a
        # broken node, not a reason to leave the fabric untested.
        missing = preflight.rdma_missing(self.job_stdout())
        if missing is not None:
            raise SanityError(f'partition {self.partition.fullname} declares fabric '
                              f'{self.partition.fabric}, but {missing}')

    def _read(self, name: str) -> str:
        path = os.path.join(self.stagedir, name)
        if not os.path.exists(path):
            return ''
        with open(path, errors='replace') as fp:
            return fp.read()

    def job_stdout(self) -> str:
        return self._read(self.stdout.evaluate())

    def job_stderr(self) -> str:
        return self._read(self.stderr.evaluate())

    def job_output(self) -> str:
        '''Everything the job printed (MPI libraries report on either stream).'''
        return self.job_stdout() + self.job_stderr()

    def output_complete(self) -> bool:
        '''Whether the program's output shows a completed run: our kernels
        and the socket kernel end it with ``done: ok``; a program that ends
        its output otherwise overrides this.'''
        return sanity.output_is_complete(self.job_stdout())

    def job_failure(self) -> str:
        '''"; the job exited with code 139 (SIGSEGV)", "; the job ended as
        NODE_FAIL on cn1" when it failed, else "".  A job whose scheduler
        reported no exit code succeeded only if its output is complete.'''
        # Only some schedulers' jobs know the signal (the local one does).
        return (sanity.exit_status(self.job.exitcode, getattr(self.job, 'signal', None),
                                   complete_output=self.output_complete())
                or sanity.job_end(self.job.state, self.job.nodelist))

    def link_deltas(self) -> list:
        try:
            deltas = fabrics.link_deltas(self.job_output())
        except fabrics.LinkStatsError as err:
            raise SanityError(f'link counters: {err}') from None
        self.link_counters = [{'host': d.host, 'iface': d.iface, **d.delta} for d in deltas]
        return deltas

    def check_link(self, bytes_sent_by_host: dict) -> None:
        '''Each node's interface sent at least the payload sent from there.'''
        iface = self.link_iface()
        if iface is not None:
            sanity.check_link_bytes(self.link_deltas(), bytes_sent_by_host, iface)

    def check_link_traffic(self, hosts, link_bound: linkbytes.LinkBound) -> None:
        '''Each node's interface carried at least what ``link_bound`` says
        the benchmark's algorithm must move across it.'''
        iface = self.link_iface()
        if iface is not None:
            sanity.check_link_traffic(self.link_deltas(), hosts, link_bound, iface)

    def efficiency(self, payload_MBps: float, directions: int = 1) -> float:
        '''Payload rate over the partition's wire rate (its link_rate_bps).'''
        return fabrics.link_efficiency(payload_MBps, self.partition.link_rate_bps, directions)


class MpiBenchmark(NetworkRun):
    '''Base of every MPI benchmark run.'''

    valid_systems = ['*']
    valid_prog_environs = [f'+{Feature.MPI}']
    #: Fail unless the MPI's own report proves the partition's fabric was used.
    verify_transport = variable(typ.Bool, value=True)
    #: MPI library the binary reported (logged with every performance value).
    mpi_library = variable(str, value='', loggable=True)
    #: The compiler that built our kernel, as it reported it ('gcc 12.2.0').
    kernel_compiler = variable(str, value='', loggable=True)
    #: What the transport proof found.
    transport = variable(str, value='', loggable=True)
    #: MPI family of the environment (a reference $index level).
    mpi_family = variable(str, value='', loggable=True)
    #: The package manager's name of the MPI build (a Spack spec), or ''.
    mpi_spec = variable(str, value='', loggable=True)

    @run_after('setup')
    def apply_fabric(self):
        self.stack = Stack.of(self.current_environ)
        self.mpi_family = self.stack.mpi_family
        self.mpi_spec = self.stack.mpi_spec
        # Found by the stack probe on this host (hpcnet.stacks.probe_fabrics):
        # a library the MPI loads for this fabric is not installed.
        # Only where the ranks run on this host: a compute node is judged by
        # its own job (a missing library there fails the case, naming it).
        gap = self.stack.fabric_gap(self.partition.fabric)
        runs_here = self.current_partition.scheduler.registered_name == 'local'
        if gap is not None and runs_here:
            self.skip_because(f'{self.stack.environ} {FABRIC_UNUSABLE} '
                              f'{self.partition.fabric} on this host: {gap}')
        unable = fabrictable.oversubscription_refusal(self.partition, self.stack, self.num_tasks)
        if unable is not None:
            self.skip_because(unable)
        launcher = self.current_partition.launcher_type.registered_name
        self.fabric_settings = fabrictable.settings(
            self.partition, self.stack, launcher,
            oversubscribed=self.partition.oversubscribed(self.num_tasks))
        # ReFrame writes `export NAME=value` as it is: quoted here.
        self.env_vars.update({k: shlex.quote(v) for k, v in self.fabric_settings.env.items()})
        self.env_vars.update(start_env(self.stack.mpi_family))

    @run_before('run')
    def set_launcher_options(self):
        self.job.launcher.options += [shlex.quote(o) for o in self.fabric_settings.launcher_options]

    @parsed_once
    def kernel_output(self, kernel: str):
        '''The kernel's parsed stdout, after the checks that name a cause
        better than a parse error would: the kernel's own ``error:`` lines and
        a binary linked to the wrong MPI.'''
        text = self.job_stdout()
        # A binary linked to the wrong MPI usually also breaks the run (two
        # 1-rank jobs): name that cause first, not the symptom.
        library = re.search(r'^mpi-library: (.*)$', text, re.M)
        if library:
            sanity.check_library(library.group(1), self.stack)
        sanity.check_kernel_errors(text, self.job_stderr(), self.stack)
        with sanity.sanity_from_output_errors(note=self.failure_note()):
            out = parse_kernel_output(
                text, source=os.path.join(self.stagedir, self.stdout.evaluate()),
                expect_kernel=kernel)
        self.kernel_compiler = out.header.get('compiler', '')
        if wrong := self.stack.compiler_mismatch(self.kernel_compiler):
            raise SanityError(wrong)
        return out

    def failure_note(self) -> str:
        '''"" for a job that succeeded; else how it ended, its error lines,
        the functions its crash backtrace names and, where they show the
        stack's known defect, the "[known issue: ...]" marker.'''
        failure = self.job_failure()
        if not failure:
            return ''
        output = self.job_output()
        said = sanity.error_lines(output)
        crashed_in = sanity.crash_functions(output)
        where = f"; crashed in {' < '.join(crashed_in[:5])}" if crashed_in else ''
        evidence = sanity.failure_evidence(self.job_stdout(), self.job_stderr())
        return (failure + (f': {said}' if said else '') + where +
                sanity.known_issue_note(evidence, self.stack))

    def prove(self, mpi_library: str | None, hosts: dict, bytes_sent_by_host: dict | None = None,
              link_bound: linkbytes.LinkBound | None = None) -> None:
        '''The one sanity step of every MPI run: the job's exit status (a
        crash after complete output fails), the MPI library really loaded,
        the hosts, the MPI's own transport report, and the link counters
        (the exact payload per host where known, else the least traffic per
        node the benchmark's algorithm must move, hpcnet.checklib.linkbytes).'''
        failure = self.failure_note()
        if failure:
            raise SanityError(f'the job failed{failure}')
        if mpi_library is not None:
            sanity.check_library(mpi_library, self.stack)
            self.mpi_library = mpi_library
        sanity.distinct_hosts(hosts, self.num_nodes)
        if self.verify_transport:
            ok, message = self.fabric_settings.verify(self.job_output())
            if not ok:
                raise SanityError(message)
            self.transport = message
        if bytes_sent_by_host is not None:
            self.check_link(bytes_sent_by_host)
        elif link_bound is not None:
            self.check_link_traffic(hosts.values(), link_bound)
        elif self.link_iface() is not None:
            raise SanityError(f'{type(self).__name__} has no link proof for '
                              f'{self.partition.iface}: it must attribute payload to hosts')


class KernelRun(MpiBenchmark):
    '''A run of one of our MPI kernels (src/), built once per environment.'''

    kernels = fixture(build_kernels, scope='environment')
    #: The program of src/ this check runs (p2p, collectives, pairs).
    kernel_name = variable(str)

    def kernel_args(self) -> list:
        '''The kernel's command-line options.'''
        raise NotImplementedError

    @run_after('setup')
    def set_kernel_command(self):
        self.executable = shlex.quote(os.path.join(self.kernels.stagedir, 'bin', self.kernel_name))
        self.executable_opts = self.kernel_args()
        self.env_vars[FINALIZE_TIMEOUT_ENV] = str(
            FINALIZE_TIMEOUT_OVERSUBSCRIBED_S if self.partition.oversubscribed(self.num_tasks)
            else FINALIZE_TIMEOUT_S)


class SocketRun(NetworkRun):
    '''A network test without MPI (socket kernel, iperf3) on the partition's
    interface, whose bytes must show on that interface.'''

    valid_systems = [f'+{Fabric.TCP}']
    valid_prog_environs = [BUILTIN_ENV]
    #: No MPI in these tests (the perflog format has an MPI library column).
    mpi_library = variable(str, value='none', loggable=True)

    @run_before('run')
    def launcher_without_mpi(self):
        if self.num_nodes > 1 and self.job.launcher.registered_name == 'srun':
            self.job.launcher.options += ['--mpi=none']

    def check_exit(self):
        '''A non-zero job exit status fails with what the job said.'''
        status = self.job_failure()
        if status:
            said = sanity.error_lines(self.job_output())
            raise SanityError(f'the job failed{status}: {said or "(no error message)"}')
