"""hpcnet.acceptance.history.binseg finds the breakpoints ruptures' Binseg with the
L1 cost finds, on recorded series: every numeric column of the recorded OSU
and IMB outputs (tests/data/samples; their printed figures repeat, so places
tie), and every series of the recorded twelve-session testbed history
(tests/data/history), each in log and raw form, and crafted series (a year
of nights with a step, a drift and outliers; levels that tie exactly;
counts; figures whose rounding is far below their size), at every number of
breakpoints that fits."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import ruptures

from hpcnet.acceptance.history import binseg, stored_series
from hpcnet.acceptance.references.spread import median_of

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
    _, series = stored_series.series_of(reports)
    found = [s for s in outputs + [s.values for s in series] if len(s) >= 8]
    return [np.log(s) if min(s) > 0 else np.asarray(s, dtype=float) for s in found] \
        + [np.asarray(s, dtype=float) for s in found]


RECORDED = _recorded()


def _crafted() -> list:
    """Series whose breakpoints a wrong rule would move: ties of gain decided
    by the last place, levels equal by construction, values that round."""
    rng = np.random.default_rng(34)
    year = 1000 * np.exp(0.01 * rng.standard_normal(365))
    year[300:] *= 0.92
    year *= np.linspace(1, 1.05, 365)
    year[[99, 199, 249]] *= 0.6
    return [np.log(year), np.round(year, 0),
            np.array([1.0] * 4 + [5.0] * 4 + [1.0] * 4 + [5.0] * 4),
            np.array([1.0] * 4 + [2.0] * 4 + [3.0] * 4 + [2.0] * 5),
            rng.choice([0.0, 0.0, 0.0, 1.0, 2.0], 61),
            1e12 + rng.choice([0.0, 1e-3, 2e-3], 40),
            np.log(np.round(100 * np.exp(0.01 * rng.standard_normal(45)), 0))]


CRAFTED = _crafted()


def test_the_recorded_series_have_ties_and_history():
    assert len(RECORDED) > 40
    assert sum(len(set(s)) < len(s) for s in RECORDED) > 10


def _gains(signal: np.ndarray, min_size: int) -> list:
    """ruptures' CostL1 gain of every place of the whole series."""
    cost = ruptures.costs.CostL1().fit(signal.reshape(-1, 1))
    n = len(signal)
    return [cost.error(0, n) - cost.error(0, b) - cost.error(b, n)
            for b in range(min_size, n - min_size + 1)]


def test_the_series_hold_places_that_tie():
    """Some series' best gain is reached at two places: where Binseg takes
    the last, a search that took the first would split elsewhere."""
    assert any(sorted(_gains(s, 4))[-2:] == [max(_gains(s, 4))] * 2
               for s in RECORDED + CRAFTED if len(s) >= 8)


@pytest.mark.parametrize('min_size', [2, 4])
def test_breakpoints_are_ruptures_binseg_l1(min_size):
    for signal in RECORDED + CRAFTED:
        reference = ruptures.Binseg(model='l1', min_size=min_size, jump=1).fit(
            signal.reshape(-1, 1))
        most = len(signal) // min_size - 1
        # Every count of a short series; of a year, one in ten and the most
        # (the count levels asks for).
        for n_bkps in sorted({*range(1, most + 1, 1 if most < 40 else 10), most}):
            assert binseg.binseg_l1(signal, min_size, n_bkps) == \
                reference.predict(n_bkps=n_bkps), (list(signal), n_bkps)


def test_a_constant_series_splits_where_ruptures_does():
    signal = np.zeros(20)
    reference = ruptures.Binseg(model='l1', min_size=4, jump=1).fit(signal.reshape(-1, 1))
    assert binseg.binseg_l1(signal, 4, 3) == reference.predict(n_bkps=3)


def test_segment_costs_and_medians_are_rupturess_and_numpys_to_the_last_bit():
    """The cost binseg decides near-ties by is ruptures' CostL1 of the
    segment, and spread.median_of np.median: equal, not close, on every
    recorded series and every segment of at least 2 values of its first 40."""
    checked = 0
    for values in RECORDED:
        signal = np.asarray(values, dtype=float)
        mine, theirs = binseg._Segmenter(signal, 2), ruptures.costs.CostL1().fit(signal)
        for start in range(min(len(signal), 40)):
            for end in range(start + 2, min(len(signal), 40) + 1):
                assert mine.error(start, end) == theirs.error(start, end), (start, end)
                assert median_of(signal[start:end]) == float(np.median(signal[start:end]))
                checked += 1
    assert checked > 1000


def test_the_running_prefix_costs_are_the_l1_costs_within_far_less_than_tie():
    """The fast costs binseg ranks places by are each prefix's L1 cost, up to
    rounding far below TIE (the margin within which ruptures' own figures
    decide), on every recorded series."""
    for values in RECORDED:
        deviations = values - np.median(values)
        costs = binseg._prefix_costs(deviations)
        exact = ruptures.costs.CostL1().fit(deviations)
        scale = max(float(np.abs(deviations).sum()), 1e-300)
        for k in range(2, len(values) + 1):
            assert abs(costs[k - 1] - exact.error(0, k)) <= binseg.TIE * scale / 1000
