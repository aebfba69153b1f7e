"""Accounting for a schedule's slots with its runs: each nominal fire time must have
exactly one run, or a MISSED record, and no job body may have started twice. The
failover drill audits its one schedule so (``failover``); the fault matrix builds its
window audits on it (``slot_audit``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from cronwave_proto.v1 import common_pb2

from cronwave_core.convert import ts_to_dt
from cronwave_core.domain.runs import is_placeholder as is_placeholder_reason

TERMINAL = {
    common_pb2.RUN_STATE_SUCCEEDED,
    common_pb2.RUN_STATE_FAILED,
    common_pb2.RUN_STATE_TIMED_OUT,
    common_pb2.RUN_STATE_MISSED,
    common_pb2.RUN_STATE_CANCELLED,
    common_pb2.RUN_STATE_DEAD_LETTERED,
}
PLANNED = {common_pb2.TRIGGER_KIND_SCHEDULED, common_pb2.TRIGGER_KIND_CATCHUP}


@dataclass(frozen=True)
class Audit:
    """Every nominal slot of a window, accounted for."""

    slots: int  # nominal fire times in the window
    fired: int  # slots with a started (non-MISSED) run
    recorded_missed: int  # slots with a MISSED record
    missed: int  # slots with neither: a fire lost
    duplicate_runs: int  # runs beyond the first of a slot (the store's constraint forbids)
    executed_twice: int  # runs whose job body started more than once (attempt > 1)
    unfinished: int  # runs of the window not yet terminal
    tokens_in_order: bool  # fencing tokens never go down as fire times go up
    max_lateness_s: float  # of fired slots: the store's acceptance minus the fire time

    @property
    def clean(self) -> bool:
        return not (self.missed or self.duplicate_runs or self.executed_twice)


def audit(runs: Iterable[common_pb2.Run], slots: Sequence[datetime]) -> Audit:
    """Account for each of ``slots`` with the planned runs among ``runs``."""
    by_slot: dict[datetime, list[common_pb2.Run]] = {}
    for run in runs:
        if run.trigger in PLANNED:
            by_slot.setdefault(ts_to_dt(run.fire_time), []).append(run)
    fired = recorded = missed = duplicates = twice = unfinished = 0
    lateness = 0.0
    tokens: list[int] = []
    for slot in slots:
        found = by_slot.get(slot, [])
        if not found:
            missed += 1
            continue
        duplicates += len(found) - 1
        run = found[0]
        tokens.append(run.fencing_token)
        unfinished += sum(1 for r in found if r.state not in TERMINAL or is_placeholder(r))
        twice += sum(1 for r in found if r.attempt > 1)
        if run.state == common_pb2.RUN_STATE_MISSED:
            recorded += not is_placeholder(run)
            continue
        fired += 1
        lateness = max(lateness, (ts_to_dt(run.created_at) - slot).total_seconds())
    return Audit(
        slots=len(slots),
        fired=fired,
        recorded_missed=recorded,
        missed=missed,
        duplicate_runs=duplicates,
        executed_twice=twice,
        unfinished=unfinished,
        tokens_in_order=all(a <= b for a, b in itertools.pairwise(tokens)),
        max_lateness_s=round(lateness, 3),
    )


def is_placeholder(run: common_pb2.Run) -> bool:
    """A MISSED row standing for a start decided but not made yet (work in progress)."""
    return run.state == common_pb2.RUN_STATE_MISSED and is_placeholder_reason(run.error)
