"""Backfill: run a schedule's fire times over a past range, on request.

The range is ``start <= t < end`` (start inclusive, end exclusive, so ``[a, b)`` and
``[b, c)`` never share a fire time), with the schedule's own bounds, exclusions and
DST policy applied (``cronwave_core.domain.backfill``). ``end`` must not lie after now: the
planner fires future slots itself. At most 10,000 fire times per request.

A dry run lists the fire times and runs nothing; any replica answers it. A real
backfill is the leader's alone (a follower answers FAILED_PRECONDITION naming the
holder of the lease): it records a placeholder for every fire time at once -- so a new
leader finishes a backfill the old one could not -- and hands the fires to the fire
loop, which starts them with trigger BACKFILL at ``rate_per_second`` through the
schedule's overlap policy (or the request's). A fire time that already has a run keeps
it (the store returns it, nothing runs twice); one recorded MISSED is run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from cron_planner.clock import Clock
from cron_planner.schedule_index import ScheduleIndex
from cron_planner.work import PENDING_BACKFILL, Fire, Missed, Trigger
from cronwave_core.domain.backfill import plan_backfill
from cronwave_core.domain.spec import Overlap
from cronwave_core.errors import (
    FailedPrecondition,
    InvalidArgument,
    ScheduleNotFound,
    Unavailable,
)

MAX_FIRES = 10_000
DEFAULT_RATE = 10.0
MAX_RATE = 100.0


@dataclass(frozen=True)
class BackfillRequest:
    schedule_id: str
    start: datetime | None
    end: datetime | None
    dry_run: bool = False
    rate_per_second: float = 0.0  # 0 = DEFAULT_RATE
    overlap: Overlap | None = None  # None = the schedule's policy


@dataclass(frozen=True)
class BackfillResult:
    fire_times: tuple[datetime, ...]
    dst_skipped: tuple[datetime, ...]
    dry_run: bool
    finishes_at: datetime | None  # when the last start is due (None for a dry run)


class _Token(Protocol):
    def token(self) -> int: ...


class _Recorder(Protocol):
    def record_missed(self, slots: Sequence[Missed], token: int) -> list[str]: ...


class Backfiller:
    def __init__(
        self,
        index: ScheduleIndex,
        clock: Clock,
        leadership: _Token,
        holder: Callable[[], str],
        ledger: _Recorder,
        submit: Callable[[Sequence[Fire]], None],
        *,
        loaded: Callable[[str], bool] = lambda _schedule_id: True,
        give_up_after: timedelta = timedelta(seconds=60),
        max_fires: int = MAX_FIRES,
        holds: Callable[[str], bool] = lambda _schedule_id: True,
    ) -> None:
        """``loaded``: whether the index holds a schedule's shard (it may be listing
        others meanwhile: a warm standby's); ``max_fires``: the most fire times one
        backfill covers (``CRONWAVE_MAX_BACKFILL_SLOTS``); ``holds``: whether this
        planner holds a schedule's shard (sharded planning; a backfill goes to the
        shard's holder)."""
        self._index = index
        self._clock = clock
        self._leadership = leadership
        self._holder = holder
        self._ledger = ledger
        self._submit = submit
        self._loaded = loaded
        self._give_up_after = give_up_after
        self._max_fires = max_fires
        self._holds = holds

    def backfill(self, req: BackfillRequest) -> BackfillResult:
        """Plan (and unless ``dry_run``, queue) the backfill ``req`` asks for. Raises
        ``InvalidArgument`` naming the field, ``ScheduleNotFound``,
        ``FailedPrecondition`` (paused; not the leader) and ``Unavailable``."""
        if not req.schedule_id:
            raise InvalidArgument("schedule_id", "required")
        if not self._holds(req.schedule_id):
            raise FailedPrecondition(
                f"schedule_id: '{req.schedule_id}' is in a shard this planner does not hold; "
                "send the backfill to the planner that holds its shard"
            )
        if req.start is None:
            raise InvalidArgument("start", "required: the first instant of the range (inclusive)")
        if req.end is None:
            raise InvalidArgument("end", "required: the end of the range (exclusive)")
        rate = req.rate_per_second or DEFAULT_RATE
        if not 0 < rate <= MAX_RATE:
            raise InvalidArgument(
                "rate_per_second", f"must be in (0, {MAX_RATE:g}] runs per second, got {rate:g}"
            )
        if not self._loaded(req.schedule_id):
            raise Unavailable("this planner has not loaded the schedules yet; retry shortly")
        schedule = self._index.get(req.schedule_id)
        if schedule is None:
            raise ScheduleNotFound(req.schedule_id)
        now = self._clock.now()
        if req.end > now:
            raise InvalidArgument(
                "end",
                f"must not be after now ({now.astimezone(UTC).isoformat()}): a backfill runs "
                "past fire times; the planner fires the future ones itself",
            )
        most = self._max_fires
        plan = plan_backfill(schedule.spec, req.start, req.end, limit=most)
        if plan.truncated:
            assert plan.resume_at is not None
            raise InvalidArgument(
                "end",
                f"the range holds more than {most} fire times, the limit of one backfill "
                f"(CRONWAVE_MAX_BACKFILL_SLOTS); backfill up to "
                f"{plan.resume_at.isoformat()} first, then from there",
            )
        skipped = tuple(occ.at for occ in plan.skipped)
        if req.dry_run:
            return BackfillResult(plan.fire_times, skipped, True, None)
        if schedule.paused:
            raise FailedPrecondition(
                f"schedule_id: '{req.schedule_id}' is paused; resume it first (a paused "
                "schedule's fires are recorded MISSED, reason paused)"
            )
        token = self._leadership.token()
        if not token:
            holder = self._holder() or "nobody holds the lease right now; retry shortly"
            raise FailedPrecondition(f"not the leader; ask {holder}")
        gap = timedelta(seconds=1 / rate)
        fires = []
        for i, fire_time in enumerate(plan.fire_times):
            act_at = now + gap * i
            fire = Fire(
                req.schedule_id,
                fire_time,
                Trigger.BACKFILL,
                act_at,
                act_at + self._give_up_after,
                overlap=req.overlap,
                placeholder=True,
                pace=gap,
            )
            fires.append(fire)
        # Durable before it is acknowledged: a successor resumes what is recorded.
        self._ledger.record_missed([f.missed(PENDING_BACKFILL) for f in fires], token)
        self._submit(fires)
        finishes = now + gap * max(0, len(fires) - 1) if fires else now
        return BackfillResult(plan.fire_times, skipped, False, finishes)
