"""Checks for the retry policy of `hpcnet run`: a failure that carries a
stack's named known issue is run again (KNOWN_ISSUE_RETRIES times at most);
any other failure is final."""
import os

import reframe as rfm

from hpcnet.checklib.testlib import MpiBenchmark

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
        with open(self.marker, 'a+') as counter:
            counter.seek(0)
            attempt = len(counter.readlines()) + 1
            counter.write('attempt\n')
        if attempt <= self.failing_attempts:
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
