"""Checks for the retry policy of `hpcnet run`: a failure that carries a
stack's named known issue is run again (KNOWN_ISSUE_RETRIES times at most),
and so is a case the testbed host was too busy to judge
(WITHHELD_RETRIES); any other failure is final."""
import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.backends import getlauncher

from hpcnet.checklib.testlib import JudgedByReferences, MpiBenchmark
from hpcnet.constants import MEASUREMENT_WITHHELD
from hpcnet.constants import BUILTIN_ENV


def next_attempt(marker: str) -> int:
    """This attempt's number, counted in the file ``marker`` (a line each)."""
    with open(marker, 'a+') as counter:
        counter.seek(0)
        attempt = len(counter.readlines()) + 1
        counter.write('attempt\n')
    return attempt

#: The watchdog's whole line (hpcnet.mpi.FINALIZE_WATCHDOG_LINE).
FINALIZE_HANG = ('MPI_Finalize did not return within 20 s (the results above are complete: '
                 'the MPI library hangs in finalize)')


class FirstAttemptsFail(MpiBenchmark):
    #: A file counting the attempts so far (one line each).
    marker = variable(str, value='')
    #: How many attempts fail before one passes.
    failing_attempts = variable(int, value=1)
    #: The kernel error line the first attempt prints.
    first_error = variable(str, value='')
    valid_prog_environs = ['+mpich']
    verify_transport = False
    executable = 'true'

    @sanity_function
    def passes_after_the_failing_attempts(self):
        if next_attempt(self.marker) <= self.failing_attempts:
            # As a kernel that completed and then hung in MPI_Finalize: its
            # results and 'done: ok' on stdout, then the watchdog's line.
            with open(os.path.join(self.stagedir, self.stdout.evaluate()), 'a') as fp:
                fp.write('done: ok\n')
            with open(os.path.join(self.stagedir, self.stderr.evaluate()), 'a') as fp:
                fp.write(f'error: {self.first_error}\n')
            self.kernel_output('p2p')          # raises: the kernel's error line
        return True


@rfm.simple_test
class retry_known_issue(FirstAttemptsFail):
    first_error = FINALIZE_HANG


@rfm.simple_test
class retry_other_failure(FirstAttemptsFail):
    first_error = 'payload validation failed'


@rfm.simple_test
class retry_known_issue_every_time(FirstAttemptsFail):
    first_error = FINALIZE_HANG
    failing_attempts = 1000


class FirstAttemptsOverloaded(rfm.RunOnlyRegressionTest, JudgedByReferences):
    """A case whose first attempts find the host too busy to judge it (as
    a testbed case whose iperf3 calibration fell below the wire's floor)."""
    marker = variable(str, value='')
    overloaded_attempts = variable(int, value=1)
    valid_systems = ['*']
    valid_prog_environs = [BUILTIN_ENV]
    executable = 'echo'
    executable_opts = ['seconds: 1.5']

    @run_before('run')
    def without_mpi(self):
        self.job.launcher = getlauncher('local')()

    @sanity_function
    def printed(self):
        return sn.assert_found(r'seconds: ', self.stdout)

    @performance_function('s')
    def seconds(self):
        return sn.extractsingle(r'seconds: (\S+)',
                                os.path.join(self.stagedir, self.stdout.evaluate()), 1, float)

    def withheld_judgement(self):
        attempt = next_attempt(self.marker)
        if attempt <= self.overloaded_attempts:
            return f'{MEASUREMENT_WITHHELD} (host busy: attempt {attempt} of this test)'
        return None


@rfm.simple_test
class remeasure_overloaded_once(FirstAttemptsOverloaded):
    pass


@rfm.simple_test
class remeasure_overloaded_every_time(FirstAttemptsOverloaded):
    overloaded_attempts = 1000
