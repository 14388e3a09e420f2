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
