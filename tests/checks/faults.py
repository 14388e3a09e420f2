"""Checks that must FAIL, each for one named reason, in one ReFrame session
with a passing check beside them (the session runs to the end)."""
import os
import shlex

import reframe as rfm
import reframe.utility.sanity as sn

from hpcnet.checklib import sanity
from hpcnet.constants import P2PMode
from hpcnet.checklib.builds import build_kernels
from hpcnet.checklib.testlib import MpiBenchmark


@rfm.simple_test
class fault_hang(MpiBenchmark):
    '''A kernel that never finishes: killed by its time limit.'''
    time_limit = '5s'
    executable = 'sleep'
    executable_opts = ['600']

    @sanity_function
    def never(self):
        return sn.assert_true(False, msg='unreachable: the job must be killed first')


@rfm.simple_test
class fault_crash(MpiBenchmark):
    '''A kernel that dies of a signal.'''
    executable = 'sh'
    executable_opts = ['-c', '"kill -SEGV $$"']

    @sanity_function
    def output_parses(self):
        return self.kernel_output('p2p') is not None


class build_with_other_mpi(build_kernels):
    '''Builds with the Debian Open MPI wrapper whatever the environment: a
    binary linked to the wrong MPI.'''
    def compiler_vars(self) -> dict:
        return {'MPICC': 'mpicc.openmpi'}


@rfm.simple_test
class fault_wrong_mpi(MpiBenchmark):
    valid_prog_environs = ['+mpich']
    kernels = fixture(build_with_other_mpi, scope='environment')

    @run_after('setup')
    def set_executable(self):
        self.executable = os.path.join(self.kernels.stagedir, 'bin', 'p2p')
        self.executable_opts = ['--mode', P2PMode.PINGPONG, '--max-size', '1K', '--iters', '20']
        # Whatever transport the wrong library picks is beside the point.
        self.verify_transport = False

    @sanity_function
    def library_matches(self):
        out = self.kernel_output('p2p')
        self.prove(out.mpi_library, out.hosts)
        return True


@rfm.simple_test
class fault_crash_after_output(MpiBenchmark):
    '''Every rank prints its complete, valid output, then dies of SIGSEGV.'''
    kernels = fixture(build_kernels, scope='environment')

    @run_after('setup')
    def set_executable(self):
        p2p = os.path.join(self.kernels.stagedir, 'bin', 'p2p')
        self.executable = 'sh'
        self.executable_opts = ['-c', shlex.quote(
            f'{p2p} --mode pingpong --max-size 1024 --time-per-size 2 && kill -SEGV $$')]

    @sanity_function
    def output_complete(self):
        out = self.kernel_output('p2p')
        self.prove(out.mpi_library, out.hosts, sanity.bytes_sent_by_host(out))
        return True


@rfm.simple_test
class fault_wrong_transport(MpiBenchmark):
    '''TCP asked for, shared memory forced behind the check's back.'''
    valid_prog_environs = ['+openmpi']
    kernels = fixture(build_kernels, scope='environment')

    @run_after('setup')
    def set_executable(self):
        self.executable = os.path.join(self.kernels.stagedir, 'bin', 'p2p')
        self.executable_opts = ['--mode', 'pingpong', '--max-size', '1024', '--time-per-size', '2']

    @run_before('run')
    def force_shared_memory(self):
        self.env_vars['OMPI_MCA_btl'] = 'self,vader'

    @sanity_function
    def transport_proved(self):
        out = self.kernel_output('p2p')
        self.prove(out.mpi_library, out.hosts, sanity.bytes_sent_by_host(out))
        return True


class build_broken(build_kernels):
    '''A compiler that does not exist, in the Open MPI environments only:
    the other environments build and run.'''
    def compiler_vars(self) -> dict:
        if 'openmpi' in self.current_environ.features:
            return {'MPICC': '/nonexistent/mpicc'}
        return super().compiler_vars()


@rfm.simple_test
class fault_compile_error(MpiBenchmark):
    kernels = fixture(build_broken, scope='environment')

    @run_after('setup')
    def set_executable(self):
        self.executable = os.path.join(self.kernels.stagedir, 'bin', 'p2p')
        self.executable_opts = ['--mode', 'pingpong', '--max-size', '1024', '--time-per-size', '2']

    @sanity_function
    def runs_where_it_built(self):
        out = self.kernel_output('p2p')
        self.prove(out.mpi_library, out.hosts, sanity.bytes_sent_by_host(out))
        return True
