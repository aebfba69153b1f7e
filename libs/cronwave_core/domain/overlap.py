"""Overlap decisions: what to do with a fire while the schedule's earlier runs are
still in flight.

A run is in flight while it is PENDING, WAITING or RUNNING; SUCCEEDED, FAILED,
TIMED_OUT, MISSED, CANCELLED and DEAD_LETTERED runs are over and never block. States
are accepted as the domain name (``"running"``) or the proto enum name
(``"RUN_STATE_RUNNING"``), in any case.

| policy        | nothing in flight | something in flight                                  |
|---------------|-------------------|------------------------------------------------------|
| SKIP          | start             | skip: record MISSED, reason ``overlap_skip``         |
| BUFFER_ONE    | start             | buffer, unless one is buffered already: then skip,   |
|               |                   | reason ``overlap_buffer_full``                       |
| BUFFER_ALL    | start             | buffer                                               |
| CANCEL_OTHER  | start             | cancel every in-flight run, then start               |
| ALLOW_ALL     | start             | start                                                |

A buffered fire keeps its nominal fire time; ``next_from_buffer`` says when the
oldest one may start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import assert_never

from cronwave_core.domain.runs import IN_FLIGHT
from cronwave_core.domain.spec import Overlap

OVERLAP_SKIP = "overlap_skip"
OVERLAP_BUFFER_FULL = "overlap_buffer_full"

IN_FLIGHT_STATES = frozenset(state.value for state in IN_FLIGHT)


class OverlapAction(StrEnum):
    START = "start"
    SKIP = "skip"
    BUFFER = "buffer"
    CANCEL_OTHER = "cancel_other"


@dataclass(frozen=True)
class RunView:
    """What the decision needs to know of one of the schedule's runs."""

    run_id: str
    state: str


@dataclass(frozen=True)
class OverlapDecision:
    """``action``; ``reason`` when the fire is recorded as MISSED (SKIP); the runs to
    cancel before starting (CANCEL_OTHER)."""

    action: OverlapAction
    reason: str = ""
    cancel: tuple[str, ...] = ()


def in_flight(runs: Sequence[RunView]) -> tuple[str, ...]:
    """The ids of the runs that are PENDING, WAITING or RUNNING, in the given order."""
    return tuple(r.run_id for r in runs if _normal(r.state) in IN_FLIGHT_STATES)


def decide_overlap(policy: Overlap, runs: Sequence[RunView], buffered: int = 0) -> OverlapDecision:
    """Decide one fire of a schedule whose runs are ``runs`` and which already has
    ``buffered`` fires waiting (see the module docstring).

    Every policy has its own case: a policy added to ``Overlap`` and not here fails the
    type check (``assert_never``), not a run."""
    active = in_flight(runs)
    if not active:
        return OverlapDecision(OverlapAction.START)
    match policy:
        case Overlap.ALLOW_ALL:
            return OverlapDecision(OverlapAction.START)
        case Overlap.SKIP:
            return OverlapDecision(OverlapAction.SKIP, OVERLAP_SKIP)
        case Overlap.BUFFER_ONE:
            if buffered >= 1:
                return OverlapDecision(OverlapAction.SKIP, OVERLAP_BUFFER_FULL)
            return OverlapDecision(OverlapAction.BUFFER)
        case Overlap.BUFFER_ALL:
            return OverlapDecision(OverlapAction.BUFFER)
        case Overlap.CANCEL_OTHER:
            return OverlapDecision(OverlapAction.CANCEL_OTHER, cancel=active)
        case _:
            assert_never(policy)


def next_from_buffer(runs: Sequence[RunView], buffered: Sequence[datetime]) -> datetime | None:
    """The buffered fire time to start now: the oldest, once nothing is in flight;
    else ``None``."""
    if not buffered or in_flight(runs):
        return None
    return min(buffered)


def _normal(state: str) -> str:
    return state.lower().removeprefix("run_state_")
