"""ReFrame's console output as `hpcnet run` passes it on, fit for a log file:
no colour where our standard output is no terminal (ReFrame's own
``RFM_COLORIZE``), and the cases skipped for one reason on one line with
their count, in place of one line per case.

A leaf: it imports nothing of hpcnet.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections import defaultdict

#: ReFrame's switch for colour on its console (``--nocolor`` sets it false).
COLORIZE_ENV = 'RFM_COLORIZE'
#: An ANSI colour sequence (what ReFrame's printer writes around a status).
ANSI_COLOUR = re.compile(r'\x1b\[[0-9;]*m')
#: ReFrame's line for a skipped case (its policies' on_task_skip):
#: ``[     SKIP ] ( 5/286) NAME /HASH @SYSTEM:PARTITION+ENVIRON [REASON]``.
SKIP_LINE = re.compile(r'\[\s*SKIP\s*\] \(\s*\d+/\d+\) (?P<check>.+?) @(?P<partition>\S+?)'
                       r'\+(?P<environ>\S+) \[(?P<reason>.*)\]')
#: ReFrame's line after the last case: the skipped cases are told before it.
CASES_FINISHED = '[----------] all spawned checks have finished'
#: Where a group's cases start (under the reason, aligned with ReFrame's case names).
INDENT = ' ' * 13


def reframe_environment(env: dict | None, to_terminal: bool) -> dict:
    '''ReFrame's environment (``env``, else ours) with colour off where its
    output goes to no terminal (``to_terminal`` false), unless the user set
    RFM_COLORIZE: a log file shows escape codes as text.'''
    env = dict(os.environ if env is None else env)
    if not to_terminal:
        env.setdefault(COLORIZE_ENV, 'false')
    return env


class SkipGroups:
    '''ReFrame's console lines with every SKIP line held back, and each
    reason told once, with the count and the cases compactly, before the
    line that ends the cases (or at the end of the output).'''

    def __init__(self):
        self._skipped = defaultdict(list)     # reason -> [(check, partition, environ)]

    def feed(self, line: str) -> list:
        '''The lines to print now for ReFrame's ``line`` (no newline).'''
        skip = SKIP_LINE.fullmatch(ANSI_COLOUR.sub('', line))
        if skip:
            self._skipped[skip['reason']].append(
                (skip['check'], skip['partition'], skip['environ']))
            return []
        if line.startswith(CASES_FINISHED):
            return self.close() + [line]
        return [line]

    def close(self) -> list:
        '''The groups held back, each reason once; none are held after.'''
        lines = []
        for reason, cases in self._skipped.items():
            count = f'{len(cases)} case' + ('s' if len(cases) > 1 else '')
            lines.append(f'[     SKIP ] {count}: {reason}')
            lines += [INDENT + case for case in compact_cases(cases)]
        self._skipped.clear()
        return lines


def compact_cases(cases: list) -> list:
    '''One line per check and partition, its environments listed:
    ``NAME /HASH @SYSTEM:PARTITION+{ENV1,ENV2}``, in the order seen.'''
    environs = defaultdict(list)
    for check, partition, environ in cases:
        environs[(check, partition)].append(environ)
    return [f'{check} @{partition}+' + (names[0] if len(names) == 1 else
                                        '{' + ','.join(names) + '}')
            for (check, partition), names in environs.items()]


def pass_on(stream, write) -> None:
    '''Every line of ReFrame's output ``stream`` through SkipGroups to
    ``write``, as it comes.'''
    groups = SkipGroups()
    for line in stream:
        for out in groups.feed(line.rstrip('\n')):
            write(out + '\n')
    for out in groups.close():
        write(out + '\n')


def _pass_on_to_stdout(read_end: int) -> None:
    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()
    with open(read_end, encoding='utf-8', errors='replace') as stream:
        pass_on(stream, write)


@contextlib.contextmanager
def passed_on():
    '''The file descriptor to give ReFrame as its standard output: what it
    writes there is passed on by pass_on() to ours, until the block ends.'''
    read_end, write_end = os.pipe()
    reader = threading.Thread(target=_pass_on_to_stdout, args=(read_end,))
    reader.start()
    try:
        yield write_end
    finally:
        # ReFrame is gone: the reader sees the end once our copy is closed.
        os.close(write_end)
        reader.join()
