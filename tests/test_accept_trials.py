"""The accept benchmark names the rule that decided each trial, from what
`hpcnet accept` printed (tests/data/accept_trials: trial 1 of each scenario
of a real run on the testbed)."""
from __future__ import annotations

import runpy

import pytest

from hpcnet.paths import DATA_DIR

RECORDED = DATA_DIR / 'tests' / 'data' / 'accept_trials'
CHECK = 'hpcnet_p2p'


@pytest.fixture(scope='module')
def bench():
    return runpy.run_path(str(DATA_DIR / 'ci' / 'benchmarks' / 'accept_trials.py'))


@pytest.mark.parametrize('scenario, decided', [
    ('clean', ['none']),
    # The metrics of a case that failed every repeat are "missing after":
    # a consequence of the failure, not a rule of their own.
    ('path', ['measured link']),
    ('mpi-setting', ['statistics']),
    ('slow-node', ['measured link']),
])
def test_the_rule_that_decided(bench, scenario, decided):
    text = (RECORDED / f'{scenario}.txt').read_text()
    found = bench['deciders'](text, CHECK)
    assert list(found) == decided
    assert bench['rounds'](text) == (5, 1)


def test_a_regressed_row_is_statistics_and_names_its_metric(bench):
    found = bench['deciders']((RECORDED / 'mpi-setting.txt').read_text(), CHECK)
    assert all(line.startswith('REGRESSED') and '_over_iperf3' in line
               for line in found['statistics'])


@pytest.mark.parametrize('codes, taken, refused', [
    ([0], 1, False),
    ([3, 0], 2, False),         # too noisy once: taken again, as its advice says
    ([3, 3, 3], 3, True),       # refused every take: no trial
    ([1], 1, True),             # a case failed: not retaken
])
def test_a_baseline_refused_as_too_noisy_is_taken_again(bench, monkeypatch, codes, taken,
                                                          refused):
    calls = []

    def baseline(tb, argv):
        calls.append(argv)
        return codes[len(calls) - 1], ''
    take_baseline = bench['take_baseline']
    monkeypatch.setitem(take_baseline.__globals__, 'hpcnet_on_testbed', baseline)
    if refused:
        with pytest.raises(SystemExit, match=rf'exit {codes[-1]}, take {taken} of 3'):
            take_baseline(None, 5, 3, ['-n', 'x'])
    else:
        take_baseline(None, 5, 3, ['-n', 'x'])
    assert calls == [['baseline', '--sessions', '5', '--write', '-n', 'x']] * taken


@pytest.mark.parametrize('phase, slow_jobs', [(0, [11, 14]), (1, [12, 15]), (2, [13])])
def test_the_slow_node_is_slow_for_whole_jobs_one_in_three(bench, phase, slow_jobs):
    '''The jobs of the check seen in squeue, from the block's start, are
    slow one in three from the phase's; a job of another test, or one
    listed before the block, is not counted.'''
    import subprocess
    import threading
    listings = iter(['7 rfm_hpcnet_p2p_old\n'] + [
        ''.join(f'{job} rfm_hpcnet_p2p_{job}\n' for job in range(11, last + 1))
        + '9 rfm_hpcnet_osu_other\n' for last in range(11, 16)])
    states, done = [], threading.Event()

    class Testbed:
        head = 'head'

        def run(self, node, argv, check=False):
            try:
                out = next(listings)
            except StopIteration:
                done.set()
                out = ''
            return subprocess.CompletedProcess(argv, 0, out, '')
    watcher = bench['EveryThirdAllocation'](Testbed(), CHECK, lambda: states.append('slow'),
                                            lambda: states.append('own'), phase)
    with watcher:
        assert done.wait(10)
    slowed = [job for job, state in zip(range(11, 16), states) if state == 'slow']
    assert slowed == slow_jobs
    assert (watcher.jobs, watcher.slowed, states[-1]) == (5, len(slow_jobs), 'own')
