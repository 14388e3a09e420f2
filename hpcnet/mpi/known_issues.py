"""Known defects of specific MPI builds, and the signature that names each.

A family's entry in the registry (:mod:`hpcnet.mpi.entries`) lists its
known issues; the records and the evidence they are matched against are
defined here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


class Phase:
    '''The part of an MPI run a known defect strikes in, and what the job's
    output must then show: the phase is part of the signature because the
    same frames and messages also occur in failures of other phases.'''
    #: In MPI_Init: the benchmark printed no result row.
    INIT = 'MPI_Init'
    #: In MPI_Finalize: the evidence comes after the benchmark's final
    #: ``done: ok`` (the results are complete) and is its only error.
    FINALIZE = 'MPI_Finalize'
    ALL = (INIT, FINALIZE)


#: The line that ends the output of our kernels (src/hpcnet_kernel.h,
#: hk_print_done) and of the socket kernel: the run completed.
DONE_OK_LINE = 'done: ok'

#: What our kernels print when MPI_Finalize does not return within
#: HPCNET_FINALIZE_TIMEOUT_S (src/hpcnet_kernel.h, hk_finalize): the whole line.
FINALIZE_WATCHDOG_LINE = (r'error: MPI_Finalize did not return within \d+ s \(the results above '
                          r'are complete: the MPI library hangs in finalize\)')

#: A line our kernels report a failure with (src/hpcnet_kernel.h).
KERNEL_ERROR_PREFIX = 'error: '


@dataclass(frozen=True)
class FailureEvidence:
    '''What a failed job showed, as the known-issue signatures read it
    (built by hpcnet.checklib.sanity.failure_evidence).'''
    #: Every line the job printed, stdout's before stderr's: our kernels
    #: print ``done: ok`` on stdout before they enter MPI_Finalize.
    lines: tuple
    #: One tuple per crashed process: the functions its backtrace names,
    #: innermost first.
    backtraces: tuple = ()
    #: Result rows the benchmark printed (our kernels' ``row:`` lines, the
    #: table rows of OSU and IMB).
    result_rows: int = 0


@dataclass(frozen=True)
class KnownIssue:
    '''A defect of specific MPI builds and its signature: a failure is this
    defect only when every part of the signature is in the job's output, so
    a failure that merely shares a frame or a word with it stays a failure.'''
    #: How an environment names its known issue (hpcnet.model.Stack.known_issue).
    name: str
    family: str
    #: An exact version ('4.0.2') or a release series ('5.0' holds 5.0.11).
    version_series: str
    #: The MPI's transport layer ('ucx', 'ofi'; hpcnet.stacks.candidate.MpiCandidate),
    #: None for the MPI's own.
    layer: str | None
    #: The part of the run it strikes in (:class:`Phase`).
    phase: str
    #: What happens and what to do, as the failure's ``[known issue: ...]`` says it.
    explanation: str
    #: The upstream report or fix.
    upstream: str
    #: Functions one crashed process's backtrace must name, innermost first
    #: (in this order, other frames between them allowed).
    required_frames: tuple = ()
    #: A regular expression one whole output line must match (in the phase).
    required_line: str = ''

    def __post_init__(self):
        if self.phase not in Phase.ALL:
            raise ValueError(f'known issue {self.name}: phase {self.phase!r} '
                             f'(valid: {", ".join(Phase.ALL)})')
        if not (self.required_frames or self.required_line):
            raise ValueError(f'known issue {self.name}: a signature needs required_frames '
                             'or required_line; a phase alone matches too much')
        if self.phase == Phase.FINALIZE and not self.required_line:
            raise ValueError(f'known issue {self.name}: a finalize defect needs the '
                             'required_line it is reported by')

    def applies_to(self, family: str, version: str, layer: str | None) -> bool:
        '''Whether a stack of this family, version and transport layer has the defect.'''
        return ((self.family, self.layer) == (family, layer) and
                (version == self.version_series or
                 version.startswith(self.version_series + '.')))

    def describe(self) -> str:
        '''What a failure's ``[known issue: ...]`` marker says.'''
        return f'{self.explanation} ({self.upstream})'

    def shown_by(self, evidence: FailureEvidence) -> bool:
        '''Whether the failure's evidence is this defect's signature.'''
        lines = [line.strip() for line in evidence.lines]
        if self.phase == Phase.INIT:
            if evidence.result_rows:
                return False        # results printed: the run was past MPI_Init
        else:
            if DONE_OK_LINE not in lines:
                return False        # the run did not complete: not a finalize defect
            errors = [line for line in lines if line.startswith(KERNEL_ERROR_PREFIX)]
            if any(not re.fullmatch(self.required_line, line) for line in errors):
                return False        # the run also failed otherwise
            lines = lines[lines.index(DONE_OK_LINE) + 1:]
        if self.required_line and not any(re.fullmatch(self.required_line, line)
                                          for line in lines):
            return False
        return not self.required_frames or any(_in_order(self.required_frames, frames)
                                               for frames in evidence.backtraces)


def _in_order(wanted: tuple, frames: tuple) -> bool:
    '''``wanted`` is a subsequence of ``frames``.'''
    remaining = iter(frames)
    return all(name in remaining for name in wanted)
