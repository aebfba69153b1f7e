"""tests.conftest.long_tests_first: the shares pytest-xdist's worksteal scheduler first
hands out each begin with a long test."""

from __future__ import annotations

import pytest

from tests.conftest import long_tests_first


def _worksteal_shares(pending: list[int], workers: int) -> list[list[int]]:
    # What WorkStealingScheduling.check_schedule sends first: of the tests still
    # unsent, an even share to each idle worker in turn.
    shares = []
    for worker in range(workers):
        count = len(pending) // (workers - worker)
        shares.append(pending[:count])
        del pending[:count]
    return shares


@pytest.mark.parametrize("workers", [2, 3, 4, 6, 8])
@pytest.mark.parametrize("count", [7, 20, 799])
def test_each_share_starts_with_a_long_test_and_nothing_is_lost(workers: int, count: int):
    items = list(range(count))
    long = {count // 3, count // 2, count - 1}
    ordered = long_tests_first(items, lambda i: i in long, workers)
    assert sorted(ordered) == items
    shares = _worksteal_shares(list(ordered), workers)
    starts = [share[0] for share in shares if share and share[0] in long]
    assert len(starts) == min(len(long), workers)
    rest = [i for i in ordered if i not in long]
    assert rest == sorted(rest)  # the others keep their order


def test_one_worker_runs_the_long_tests_first():
    assert long_tests_first([1, 2, 3, 4], lambda i: i in (3, 4), 1) == [3, 4, 1, 2]
