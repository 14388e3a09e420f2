"""hpcnet.longwork.forked: work over the host's cores in forked processes, the same
answers as in this process, errors raised where the caller waits, and no
lock of the progress line's thread held in a child."""
import os

import pytest

from hpcnet.longwork import forked, progress


def _square(x: int) -> int:
    return x * x


def test_map_in_order_gives_the_answers_of_one_process_in_order():
    items = list(range(50))
    assert forked.map_in_order(_square, items, per_worker=5, workers=2) == \
        [x * x for x in items]
    assert forked.map_in_order(_square, items, per_worker=5, workers=1) == \
        [x * x for x in items]


def test_map_in_order_sends_workers_positions_not_items():
    # Functions made here cannot be pickled: workers read them from the
    # memory they inherited at the fork.
    items = [lambda k=k: k + 1 for k in range(12)]
    assert forked.map_in_order(lambda f: f(), items, per_worker=2, workers=2) == \
        list(range(1, 13))


def test_beside_returns_what_its_function_returned():
    assert forked.Beside(_square, 7).result() == 49


def _fails(what: str):
    raise LookupError(what)


def test_beside_raises_what_its_function_raised():
    with pytest.raises(LookupError, match='no such session'):
        forked.Beside(_fails, 'no such session').result()


def test_beside_says_when_its_process_died():
    with pytest.raises(forked.ForkedError, match='exit code 3'):
        forked.Beside(os._exit, 3).result()


def _pending_in_child() -> int:
    return len(progress._PENDING)


def test_a_fork_inside_a_phase_leaves_the_progress_line_usable(monkeypatch):
    monkeypatch.setattr(progress, 'SAY_AFTER_S', 60.0)
    with progress.phase('judging') as done:
        (line,) = progress._PENDING
        # The child has no timer thread: it will say none of its parent's lines.
        assert forked.Beside(_pending_in_child).result() == 0
        assert not line.lock.locked()
        done.outcome = 'done'
    assert not progress._PENDING
