"""What the fire loop needs of the world, as ports: the lease (``Leadership``), the
dispatcher (``Dispatch``, handed ``Start``s), the store (``Ledger``) and the queue's
memory of its last loss (``QueueLoss``). The planner's app plugs the gRPC clients in
(``remote``); tests plug in-process fakes. No gRPC here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from cron_planner.work import InFlight, Missed, Trigger
from cronwave_core.errors import CronwaveError


class Leadership(Protocol):
    def token(self) -> int:
        """The fencing token while this planner leads, else 0."""
        ...

    def step_down(self, reason: str) -> None: ...


class Shards(Protocol):
    """The shards a sharded planner holds, for a term to re-base only what it gained."""

    def held(self) -> dict[int, int]:
        """Each shard held now, with its fencing token."""
        ...

    def shard(self, schedule_id: str) -> int: ...


@dataclass(frozen=True)
class Start:
    """One fire handed to the dispatcher; ``traceparent`` is its trace's context."""

    schedule_id: str
    fire_time: datetime
    trigger: Trigger = Trigger.SCHEDULED
    traceparent: str = ""


class Dispatch(Protocol):
    def start_runs(self, starts: Sequence[Start], token: int) -> list[str | CronwaveError]:
        """Start the runs of ``starts`` in one call: per start, its run id or the
        error it was refused with (``Unavailable``: retry; ``FailedPrecondition`` or
        another ``CronwaveError``: refused). Raises ``Unavailable`` when the call as
        a whole failed (nothing is known of any start) and another ``CronwaveError``
        when it was refused as a whole."""
        ...


class QueueLoss(Protocol):
    def lost_at(self, now: datetime) -> datetime | None:
        """When the queue last lost the messages it held, if lately; None when no
        recent loss is known."""
        ...

    def held_before(self, now: datetime) -> datetime | None:
        """By when a run must have been claimed to have been held through that loss
        (at most ``lost_at``); None when no recent loss is known."""
        ...


class Ledger(Protocol):
    """The store, as the fire loop needs it."""

    def record_missed(self, slots: Sequence[Missed], token: int) -> list[str]:
        """Record ``slots`` (MISSED rows and placeholders); the ids of schedules the
        store no longer has."""
        ...

    def latest_fire_times(
        self, schedule_ids: Sequence[str] | None = None, until: datetime | None = None
    ) -> dict[str, tuple[datetime, int]]:
        """Each schedule's (newest handled fire time, fire times handled), counting fire
        times at or before ``until`` alone (None: all): of every schedule, or of
        ``schedule_ids`` alone; a schedule without any is absent."""
        ...

    def pending_fires(self) -> list[Missed]: ...

    def in_flight(self, schedule_id: str) -> list[InFlight]: ...

    def in_flight_many(self, schedule_ids: Sequence[str]) -> dict[str, list[InFlight]]:
        """``in_flight`` of each of ``schedule_ids``, in one look-up."""
        ...

    def cancel_run(self, run: InFlight, reason: str) -> bool: ...
