"""Overlap decisions for every policy, with and without runs in flight."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cronwave_core.domain.overlap import (
    OVERLAP_BUFFER_FULL,
    OVERLAP_SKIP,
    OverlapAction,
    OverlapDecision,
    RunView,
    decide_overlap,
    in_flight,
    next_from_buffer,
)
from cronwave_core.domain.spec import Overlap

FINISHED = [RunView("r1", "succeeded"), RunView("r2", "RUN_STATE_FAILED"), RunView("r3", "missed")]
BUSY = [
    *FINISHED,
    RunView("r4", "RUN_STATE_RUNNING"),
    RunView("r5", "pending"),
    RunView("r6", "WAITING"),
]


@pytest.mark.parametrize("policy", list(Overlap))
def test_nothing_in_flight_always_starts(policy: Overlap) -> None:
    assert decide_overlap(policy, FINISHED) == OverlapDecision(OverlapAction.START)
    assert decide_overlap(policy, []) == OverlapDecision(OverlapAction.START)


@pytest.mark.parametrize(
    ("policy", "buffered", "decision"),
    [
        (Overlap.SKIP, 0, OverlapDecision(OverlapAction.SKIP, OVERLAP_SKIP)),
        (Overlap.BUFFER_ONE, 0, OverlapDecision(OverlapAction.BUFFER)),
        (Overlap.BUFFER_ONE, 1, OverlapDecision(OverlapAction.SKIP, OVERLAP_BUFFER_FULL)),
        (Overlap.BUFFER_ALL, 0, OverlapDecision(OverlapAction.BUFFER)),
        (Overlap.BUFFER_ALL, 7, OverlapDecision(OverlapAction.BUFFER)),
        (
            Overlap.CANCEL_OTHER,
            0,
            OverlapDecision(OverlapAction.CANCEL_OTHER, cancel=("r4", "r5", "r6")),
        ),
        (Overlap.ALLOW_ALL, 3, OverlapDecision(OverlapAction.START)),
    ],
)
def test_runs_in_flight_decide_by_policy(
    policy: Overlap, buffered: int, decision: OverlapDecision
) -> None:
    assert decide_overlap(policy, BUSY, buffered) == decision


def test_only_pending_waiting_and_running_are_in_flight() -> None:
    # A run claimed ahead of its fire time (WAITING) blocks an overlapping fire as a
    # running one does
    assert in_flight(BUSY) == ("r4", "r5", "r6")
    assert in_flight([RunView("w", "RUN_STATE_WAITING")]) == ("w",)


def test_the_oldest_buffered_fire_starts_once_nothing_is_in_flight() -> None:
    buffered = [datetime(2024, 1, 1, 0, 10, tzinfo=UTC), datetime(2024, 1, 1, 0, 5, tzinfo=UTC)]
    assert next_from_buffer(BUSY, buffered) is None
    assert next_from_buffer(FINISHED, buffered) == datetime(2024, 1, 1, 0, 5, tzinfo=UTC)
    assert next_from_buffer(FINISHED, []) is None
