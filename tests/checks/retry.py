"""Checks for the retry policy of `hpcnet run`: a failure that carries a
stack's named known issue is run once more; any other failure is final."""
import os

import reframe as rfm

from hpcnet.testlib import MpiBenchmark


class FirstAttemptFails(MpiBenchmark):
    #: A file whose absence makes the first attempt fail (it is created then).
    marker = variable(str, value='')
    #: The kernel error line the first attempt prints.
    first_error = variable(str, value='')
    valid_prog_environs = ['+mpich']
    verify_transport = False
    executable = 'true'

    @sanity_function
    def passes_the_second_time(self):
        if not os.path.exists(self.marker):
            open(self.marker, 'w').close()
            with open(os.path.join(self.stagedir, self.stderr.evaluate()), 'a') as fp:
                fp.write(f'error: {self.first_error}\n')
            self.kernel_output('p2p')          # raises: the kernel's error line
        return True


@rfm.simple_test
class retry_known_issue(FirstAttemptFails):
    first_error = 'MPI_Finalize did not return within 20 s'


@rfm.simple_test
class retry_other_failure(FirstAttemptFails):
    first_error = 'payload validation failed'
