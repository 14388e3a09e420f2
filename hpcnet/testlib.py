"""ReFrame building blocks of the hpcnet checks (the checks in checks/ stay
declarative: parameters, fixtures, performance variables).

- :class:`build_kernels`: compiles every MPI kernel of ``src/`` once per
  environment (fixture scope ``environment``), warnings are errors.
- :class:`MpiBenchmark`: a run-only test of an MPI program that is put on the
  partition's fabric by the fabric table, proves it (the MPI's own transport
  report and, when the partition names an interface, its byte counters), checks
  that the binary ran with the environment's MPI, and takes its references
  from ``reference/<system>.yaml``.
"""
from __future__ import annotations

import os
import re

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import (run_after, run_before, sanity_function,
                                   variable)
from reframe.core.exceptions import SanityError

from hpcnet import hooks, linkstats, references
from hpcnet.constants import SRC_DIR, Feature
from hpcnet.parsers.kernel import KernelOutputError, parse_kernel_output


class MakeBuild(rfm.CompileOnlyRegressionTest):
    '''Build targets of src/Makefile once per environment (use as a fixture
    with scope 'environment'); warnings are errors.'''

    valid_systems = ['*']
    build_system = 'Make'
    sourcesdir = str(SRC_DIR)
    build_locally = True
    #: Compiler flags; warnings are errors so a new compiler's complaint is seen.
    cflags = variable(typ.List[str], value=['-O2', '-Wall', '-Wextra', '-Werror'])
    #: Make targets, and the variables naming the compiler.
    make_targets = variable(typ.List[str], value=[])
    #: Programs the build must leave in bin/.
    programs = variable(typ.List[str], value=[])

    def compiler_vars(self) -> list:
        raise NotImplementedError

    @run_before('compile')
    def set_make_options(self):
        self.build_system.options = [*self.make_targets, *self.compiler_vars(), 'BINDIR=bin',
                                     f'CFLAGS={" ".join(self.cflags)}']
        self.build_system.max_concurrency = 1

    @sanity_function
    def binaries_built(self):
        return sn.all([sn.assert_true(os.path.exists(os.path.join(self.stagedir, 'bin', p)),
                                      msg=f'bin/{p} was not built') for p in self.programs])


class build_kernels(MakeBuild):
    '''Build src/ (all MPI kernels) with the environment's MPI wrapper.'''

    descr = 'Build the hpcnet MPI kernels'
    valid_prog_environs = [f'+{Feature.MPI}']
    programs = ['p2p', 'collectives', 'pairs']

    def compiler_vars(self) -> list:
        return [f'MPICC={self.current_environ.cc}']


class NetworkRun(rfm.RunOnlyRegressionTest):
    '''Base of every run whose bytes should cross the partition's link: the
    interface's counters are read on every node before and after the run
    (partitions that name an ``iface``), and the references come from
    ``reference/<system>.yaml``.'''

    exclusive_access = True
    #: Nodes the ranks/tasks must span (1: all on one node).
    num_nodes = variable(int, value=1)
    #: Read the interface's counters on every node before and after the run,
    #: and require the bytes it sent to cover what the benchmark sent.
    check_link_counters = variable(typ.Bool, value=True)
    #: Per node: counter deltas over the run (errors and drops included).
    link_counters = variable(typ.List[typ.Dict[str, object]], value=[], loggable=True)

    @run_after('setup')
    def set_references(self):
        # Validated first: a malformed file fails here with file, key and
        # what is valid, never with a half-applied reference.
        self.reference = references.reference_for_test(self.current_system.name)

    def link_iface(self):
        '''The interface whose counters prove the traffic, or None.'''
        if not self.check_link_counters:
            return None
        return self.current_partition.extras.get('iface')

    @run_before('run')
    def read_link_counters(self):
        iface = self.link_iface()
        if iface is None:
            return
        launcher = self.current_partition.launcher_type.registered_name
        self.prerun_cmds.append(linkstats.per_node(
            linkstats.snapshot_command('before', iface), launcher, self.num_nodes))
        # The job's exit status stays the benchmark's, not the last
        # snapshot's: saved first, restored last.
        self.postrun_cmds = ['hpcnet_status=$?',
                             linkstats.per_node(linkstats.snapshot_command('after', iface),
                                                launcher, self.num_nodes),
                             *self.postrun_cmds, 'exit $hpcnet_status']

    def _read(self, name: str) -> str:
        path = os.path.join(self.stagedir, name)
        if not os.path.exists(path):
            return ''
        with open(path, errors='replace') as fp:
            return fp.read()

    def job_output(self) -> str:
        '''Everything the job printed (MPI libraries report on either stream).'''
        return self._read(self.stdout.evaluate()) + self._read(self.stderr.evaluate())

    def check_link(self, bytes_sent_by_host: dict) -> None:
        '''Each node's interface sent at least the payload sent from there.'''
        iface = self.link_iface()
        if iface is None:
            return
        try:
            deltas = linkstats.parse(self.job_output())
        except linkstats.LinkStatsError as err:
            raise SanityError(f'link counters: {err}') from None
        self.link_counters = [{'host': d.host, 'iface': d.iface, **d.delta} for d in deltas]
        hooks.check_link_bytes(deltas, bytes_sent_by_host, iface)


class MpiBenchmark(NetworkRun):
    '''Base of every MPI benchmark run.'''

    valid_systems = ['*']
    valid_prog_environs = [f'+{Feature.MPI}']
    num_tasks = 2
    #: Fail unless the MPI's own report proves the partition's fabric was used.
    verify_transport = variable(typ.Bool, value=True)
    #: MPI library the binary reported (logged with every performance value).
    mpi_library = variable(str, value='', loggable=True)
    #: What the transport proof found.
    transport = variable(str, value='', loggable=True)
    #: MPI family of the environment (a reference $index level).
    mpi_family = variable(str, value='', loggable=True)


    @run_after('setup')
    def apply_fabric(self):
        part = self.current_partition
        self.mpi_family = self.current_environ.extras['mpi_family']
        self.fabric_settings = hooks.fabric_settings(
            part.extras, part.fullname, self.current_environ.extras, part.launcher_type.registered_name)
        missing = hooks.rdma_missing_reason(self.fabric_settings.fabric, part.extras,
                                            part.fullname)
        self.skip_if(missing is not None, missing)
        self.env_vars.update(self.fabric_settings.env)
        self.num_tasks_per_node = max(1, self.num_tasks // self.num_nodes)
        if self.current_environ.extras['mpi_family'] == 'openmpi' and os.geteuid() == 0:
            # Open MPI refuses to start as root without these.
            self.env_vars.update({'OMPI_ALLOW_RUN_AS_ROOT': '1',
                                  'OMPI_ALLOW_RUN_AS_ROOT_CONFIRM': '1'})

    @run_before('run')
    def set_launcher_options(self):
        self.job.launcher.options += list(self.fabric_settings.launcher_options)

    def link_iface(self):
        # Shared memory has no link to count.
        if self.fabric_settings.fabric == 'shm':
            return None
        return super().link_iface()

    def kernel_output(self, kernel: str):
        '''The kernel's parsed stdout (parsed once).'''
        cached = getattr(self, '_kernel_output', None)
        if cached is None:
            path = os.path.join(self.stagedir, self.stdout.evaluate())
            text = self._read(self.stdout.evaluate())
            # A binary linked to the wrong MPI usually also breaks the run
            # (e.g. two 1-rank jobs): name that cause, not the symptom.
            library = re.search(r'^mpi-library: (.*)$', text, re.M)
            if library:
                hooks.check_library(library.group(1), self.current_environ.extras,
                                    self.current_environ.name)
            hooks.check_kernel_errors(self._read(self.stderr.evaluate()),
                                      self.current_environ.extras)
            try:
                cached = parse_kernel_output(text, source=path, expect_kernel=kernel)
            except KernelOutputError as err:
                raise SanityError(f'{err}{hooks.exit_status(self.job.exitcode, self.job.signal)}') from None
            self._kernel_output = cached
        return cached

    def check_common(self, out) -> None:
        '''Library, hosts and transport: the proofs every MPI run owes.'''
        self.mpi_library = out.mpi_library
        hooks.check_library(out.mpi_library, self.current_environ.extras,
                            self.current_environ.name)
        hooks.distinct_hosts(out.hosts, self.num_nodes)
        if self.verify_transport:
            self.transport = hooks.check_transport(self.fabric_settings, self.job_output())
