"""hpcnet.acceptance.binseg finds the breakpoints ruptures' Binseg with the
L1 cost finds, on recorded series: every numeric column of the recorded OSU
and IMB outputs (tests/data/samples; their printed figures repeat, so places
tie), and every series of the recorded twelve-session testbed history
(tests/data/history), each in log and raw form, at every number of
breakpoints that fits."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import ruptures

from hpcnet.acceptance import binseg, history

DATA = Path(__file__).resolve().parent / 'data'
_ROW = re.compile(r'\s*\d[\d.]*(\s+\d[\d.]*)+\s*')


def _columns(path: Path) -> list:
    """Each numeric column of the table rows of a benchmark's output."""
    rows = [[float(x) for x in line.split()] for line in path.read_text().splitlines()
            if _ROW.fullmatch(line)]
    by_width: dict = {}
    for row in rows:
        by_width.setdefault(len(row), []).append(row)
    return [list(column) for table in by_width.values() for column in zip(*table)]


def _recorded() -> list:
    outputs = [c for path in sorted((DATA / 'samples').glob('*.txt')) for c in _columns(path)]
    reports = json.loads((DATA / 'history' / 'testbed-12-sessions.json').read_text())
    _, series = history.series_of(reports)
    found = [s for s in outputs + [s.values for s in series] if len(s) >= 8]
    return [np.log(s) if min(s) > 0 else np.asarray(s, dtype=float) for s in found] \
        + [np.asarray(s, dtype=float) for s in found]


RECORDED = _recorded()


def test_the_recorded_series_have_ties_and_history():
    assert len(RECORDED) > 40
    assert sum(len(set(s)) < len(s) for s in RECORDED) > 10


@pytest.mark.parametrize('min_size', [2, 4])
def test_breakpoints_are_ruptures_binseg_l1(min_size):
    for signal in RECORDED:
        reference = ruptures.Binseg(model='l1', min_size=min_size, jump=1).fit(
            signal.reshape(-1, 1))
        for n_bkps in range(1, len(signal) // min_size):
            assert binseg.binseg_l1(signal, min_size, n_bkps) == \
                reference.predict(n_bkps=n_bkps), (list(signal), n_bkps)


def test_a_constant_series_splits_where_ruptures_does():
    signal = np.zeros(20)
    reference = ruptures.Binseg(model='l1', min_size=4, jump=1).fit(signal.reshape(-1, 1))
    assert binseg.binseg_l1(signal, 4, 3) == reference.predict(n_bkps=3)
