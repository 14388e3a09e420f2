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
from reframe.core.builtins import (fixture, run_after, run_before, sanity_function,
                                   variable)
from reframe.core.exceptions import SanityError

from hpcnet import hooks, linkstats, references
from hpcnet.constants import SRC_DIR, Feature
from hpcnet.parsers.kernel import KernelOutputError, parse_kernel_output


class build_kernels(rfm.CompileOnlyRegressionTest):
    '''Build src/ (all MPI kernels) with the environment's MPI wrapper.'''

    descr = 'Build the hpcnet MPI kernels'
    valid_systems = ['*']
    valid_prog_environs = [f'+{Feature.MPI}']
    build_system = 'Make'
    sourcesdir = str(SRC_DIR)
    build_locally = True
    #: Compiler flags; warnings are errors so a new compiler's complaint is seen.
    cflags = variable(typ.List[str], value=['-O2', '-Wall', '-Wextra', '-Werror'])

    @run_before('compile')
    def set_make_options(self):
        self.build_system.options = [f'MPICC={self.current_environ.cc}', 'BINDIR=bin',
                                     f'CFLAGS={" ".join(self.cflags)}']
        self.build_system.max_concurrency = 1

    @sanity_function
    def binaries_built(self):
        return sn.all([sn.assert_true(os.path.exists(os.path.join(self.stagedir, 'bin', k)),
                                      msg=f'bin/{k} was not built')
                       for k in ('p2p', 'collectives', 'pairs')])


class MpiBenchmark(rfm.RunOnlyRegressionTest):
    '''Base of every MPI benchmark run.'''

    valid_systems = ['*']
    valid_prog_environs = [f'+{Feature.MPI}']
    exclusive_access = True
    num_tasks = 2
    #: Nodes the ranks must span (1: every rank on one node).
    num_nodes = variable(int, value=1)
    #: Fail unless the MPI's own report proves the partition's fabric was used.
    verify_transport = variable(bool, value=True)
    #: MPI library the binary reported (logged with every performance value).
    mpi_library = variable(str, value='', loggable=True)
    #: What the transport proof found.
    transport = variable(str, value='', loggable=True)
    #: MPI family of the environment (a reference $index level).
    mpi_family = variable(str, value='', loggable=True)

    #: Read the fabric interface's counters on every node before and after
    #: the run (partitions that name an ``iface``), and require the bytes the
    #: interface sent to cover what the benchmark says it sent.
    check_link_counters = variable(bool, value=True)
    #: Per node: counter deltas over the run (errors and drops included).
    link_counters = variable(typ.List[typ.Dict[str, object]], value=[], loggable=True)

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
        '''The interface whose counters prove the traffic, or None (shared
        memory has none).'''
        if self.fabric_settings.fabric == 'shm' or not self.check_link_counters:
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
        self.postrun_cmds.insert(0, linkstats.per_node(
            linkstats.snapshot_command('after', iface), launcher, self.num_nodes))

    def check_link(self, bytes_sent_by_host: dict) -> None:
        '''Each node's interface sent at least the payload its ranks sent.'''
        iface = self.link_iface()
        if iface is None:
            return
        try:
            deltas = linkstats.parse(self.mpi_output())
        except linkstats.LinkStatsError as err:
            raise SanityError(f'link counters: {err}') from None
        self.link_counters = [{'host': d.host, 'iface': d.iface, **d.delta} for d in deltas]
        hooks.check_link_bytes(deltas, bytes_sent_by_host, iface)

    @run_after('setup')
    def set_references(self):
        # Validated first: a malformed file fails here with file, key and
        # what is valid, never with a half-applied reference.
        self.reference = references.reference_for_test(self.current_system.name)

    def _read(self, name: str) -> str:
        path = os.path.join(self.stagedir, name)
        if not os.path.exists(path):
            return ''
        with open(path, errors='replace') as fp:
            return fp.read()

    def mpi_output(self) -> str:
        '''Everything the job printed (MPI libraries report on either stream).'''
        return self._read(self.stdout.evaluate()) + self._read(self.stderr.evaluate())

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
                raise SanityError(str(err)) from None
            self._kernel_output = cached
        return cached

    def check_common(self, out) -> None:
        '''Library, hosts and transport: the proofs every MPI run owes.'''
        self.mpi_library = out.mpi_library
        hooks.check_library(out.mpi_library, self.current_environ.extras,
                            self.current_environ.name)
        hooks.distinct_hosts(out.hosts, self.num_nodes)
        if self.verify_transport:
            self.transport = hooks.check_transport(self.fabric_settings, self.mpi_output())
