"""The repeats of a side of `hpcnet compare` that failed (hpcnet.acceptance.comparison.compare).

A repeat that failed its sanity (wrong transport, a crash, a hang) gave no
figure, so the samples of its case come from the other repeats alone and
may well be unchanged.  The comparison names every such repeat: after, it is
a failure of its case (a broken stack that fails one run in five is broken,
whatever the four others measured); before, it is left out of the samples
and named, since the after side is not to blame for it.  A repeat that
failed only on its references (the performance phase) is a sample, judged
by the statistics; one that failed on a known issue and passed when run
again (``hpcnet_retried``) passed.
"""
from __future__ import annotations

from dataclasses import dataclass

from hpcnet.acceptance.comparison.sides import Side, case_key

#: Results of a case that gave its figures or was never meant to run.
NOT_FAILED = ('pass', 'skip')


@dataclass(frozen=True)
class FailedRepeat:
    """A repeat of a case that failed, and why."""
    case: tuple        #: (test, system:partition, environment): sides.case_key
    session: str
    repeat: int        #: 1-based, among its case's repeats in its session
    repeats: int
    reason: str

    def describe(self, side: str) -> str:
        """'repeat 2 of 5 of session ab12 (after): test @p +env: reason'."""
        test, partition, environ = self.case
        return (f'repeat {self.repeat} of {self.repeats} of session {self.session} ({side}): '
                f'{test} @{partition} +{environ}: {self.reason}')


def failed(tc: dict) -> bool:
    """Whether a case's result is a failure that gave no figure."""
    return tc.get('result') not in NOT_FAILED and tc.get('fail_phase') != 'performance'


def of_side(side: Side) -> list:
    """Every failed repeat of every report of ``side``, in order."""
    found = []
    for number, report in enumerate(side.reports):
        session = report.get('session_info', {}).get('uuid') or f'{side.spec} #{number + 1}'
        repeats: dict = {}
        for run in report.get('runs', []):
            for tc in run.get('testcases', []):
                if not tc.get('fixture'):
                    repeats.setdefault(case_key(tc), []).append(tc)
        again = {}
        for tc in report.get('hpcnet_retried') or []:
            key = case_key(tc)
            again[key, int(tc.get('repeat') or len(repeats.get(key, [tc])))] = tc
        for key, results in repeats.items():
            for repeat, tc in enumerate(results, 1):
                last = again.get((key, repeat), tc)
                if failed(last):
                    reason = (last.get('fail_reason') or last.get('result') or '?').splitlines()
                    found.append(FailedRepeat(key, session, repeat, len(results),
                                              (reason or ['?'])[0][:300]))
    return found
