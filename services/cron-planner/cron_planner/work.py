"""The fire loop's units of work: fires to start, slots to record as MISSED, and the
in-flight runs an overlap decision looks at. Plain values; no gRPC.

Placeholders. Work the planner has decided but will start later -- a catch-up run
waiting for its turn, a fire buffered behind a run in flight, a backfill being paced, a
due fire whose start is retried --
is recorded in the store at once as a MISSED row whose reason starts with ``pending:``
(see ``ListPendingFires`` in workflow_store_service.proto). Starting the slot turns the
placeholder into the run; deciding against it (an overlap skip, a pause) gives it its
final reason; and a planner that begins a term picks the placeholders up again, so work
decided by a leader that died is finished by the next one, never dropped silently.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from cronwave_core.domain.runs import Trigger, is_placeholder
from cronwave_core.domain.spec import Overlap

PENDING_CATCHUP = "pending:catchup"
PENDING_BUFFER = "pending:overlap_buffer"
PENDING_BACKFILL = "pending:backfill"
#: A due fire put off (its start failed and is retried, or it waits for its pace).
PENDING_RETRY = "pending:retry"
#: A fire the planner had decided on when its schedule was paused.
PAUSED = "paused"
#: A summary row for slots outside the catch-up window that were not listed one by one.
OUTSIDE_WINDOW_SUMMARY = "outside_catchup_window"


def iso(instant: datetime) -> str:
    """``instant`` in UTC, as ISO 8601 (how the loop's logs and reasons name a slot)."""
    return instant.astimezone(UTC).isoformat()


def pending_reason(trigger: Trigger) -> str:
    """The placeholder reason of a fire that waits for its turn."""
    if trigger is Trigger.BACKFILL:
        return PENDING_BACKFILL
    return PENDING_CATCHUP if trigger is Trigger.CATCHUP else PENDING_RETRY


@dataclass(frozen=True, slots=True)
class Missed:
    """A slot to record as MISSED (or a placeholder, when ``reason`` is pending)."""

    schedule_id: str
    fire_time: datetime
    reason: str
    trigger: Trigger = Trigger.SCHEDULED

    @property
    def placeholder(self) -> bool:
        """Whether the row stands for work still to start (a ``pending:`` reason)."""
        return is_placeholder(self.reason)


@dataclass(slots=True)
class Fire:
    """A run to start: ``schedule_id`` at its nominal ``fire_time``, at ``act_at`` or
    later, by ``deadline`` at the latest (else it is recorded MISSED). ``overlap``
    overrides the schedule's overlap policy (a backfill's choice); ``placeholder``
    says a pending row stands for it in the store; ``pace`` is the least time between
    the starts of the schedule's fires of this trigger."""

    schedule_id: str
    fire_time: datetime
    trigger: Trigger
    act_at: datetime
    deadline: datetime
    overlap: Overlap | None = None
    placeholder: bool = False
    attempts: int = 0
    # Paced fires (catch-up runs, backfills) of one schedule and trigger start at least
    # this far apart, however late the loop gets to them.
    pace: timedelta = timedelta(0)
    # Held back for a run lost in the queue (see loss_waits): its own run, started late,
    # is part of the recovery.
    waited_for_loss: bool = False

    def missed(self, reason: str) -> Missed:
        return Missed(self.schedule_id, self.fire_time, reason, self.trigger)


@dataclass(frozen=True, slots=True)
class InFlight:
    """A run in flight (PENDING, WAITING or RUNNING) of a schedule, as an overlap
    decision needs it."""

    run_id: str
    state: str  # "pending", "waiting" or "running"
    attempt: int  # the attempt token the store expects from whoever completes it
    fire_time: datetime
    recorded_at: datetime | None = None  # when the store recorded it (None: unknown)
    started_at: datetime | None = None  # when its current attempt was claimed (None: never)


@dataclass
class WorkQueue:
    """Fires by ``act_at`` (then by arrival). Not thread-safe: the fire loop owns it."""

    _heap: list[tuple[datetime, int, Fire]] = field(default_factory=list)
    _seq: itertools.count[int] = field(default_factory=itertools.count)

    def push(self, fire: Fire) -> None:
        heapq.heappush(self._heap, (fire.act_at, next(self._seq), fire))

    def peek(self) -> Fire | None:
        return self._heap[0][2] if self._heap else None

    def pop(self) -> Fire:
        return heapq.heappop(self._heap)[2]

    def clear(self) -> list[Fire]:
        fires = [entry[2] for entry in self._heap]
        self._heap.clear()
        return fires

    def __len__(self) -> int:
        return len(self._heap)
