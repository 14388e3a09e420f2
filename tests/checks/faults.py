"""Checks that must FAIL, each for one named reason, in one ReFrame session
with a passing check beside them (the session runs to the end)."""
import os

import reframe as rfm
import reframe.utility.sanity as sn

from hpcnet.constants import P2PMode
from hpcnet.testlib import MpiBenchmark, build_kernels


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
    def compiler_vars(self) -> list:
        return ['MPICC=mpicc.openmpi']


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
        self.check_common(self.kernel_output('p2p'))
        return True
