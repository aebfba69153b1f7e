"""The store's half of deadlines: judging slots whose deadline passed, in one
transaction per sweep, recording each breach once, and listing breaches.

A breach row is unique per (schedule, fire time): store replicas sweep alike, and
the one whose INSERT wins records it, counts it and notifies; the others find it
there. A breach of a slot with a run also appends the event ``deadline_breached`` to
the run's history. Judging is ``cronwave_core.domain.deadlines.judge``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from cronwave_core.domain.deadlines import NotifyFormat, SlotRun, judge
from cronwave_core.domain.runs import RunState, Trigger
from cronwave_core.errors import InvalidArgument
from workflow_store import models as m
from workflow_store.db import Database
from workflow_store.deadline_records import (
    QUEUED_HOLD,
    BreachRecord,
    DeliveryRecord,
    DeliveryStatus,
    SlotCheck,
)
from workflow_store.limits import LIMITS, Limits
from workflow_store.records import ScheduleRecord
from workflow_store.rows import _listed
from workflow_store.store_core import Clock, utc_now

#: A schedule's recorded runs judged in one sweep at most; the rest wait for the next.
MAX_RUNS_PER_CHECK = 1_000
DEFAULT_BREACH_LIMIT = 50
MAX_BREACH_LIMIT = 1_000
#: A recorded run stands for a slot of the calendar when a planner made it.
_PLANNED = (Trigger.SCHEDULED.value, Trigger.CATCHUP.value)
_BREACHES = cast(sa.Table, m.DeadlineBreach.__table__)
_CURSORS = cast(sa.Table, m.DeadlineCursor.__table__)


def _iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


class DeadlineStore:
    """The deadline tables (breaches, their deliveries, the sweep's cursors) over a
    ``Database``: what the sweep reads and writes (``deadline_sweep.DeadlineRecords``), and
    the breaches' listing. It takes no other part of the store."""

    def __init__(self, db: Database, clock: Clock = utc_now, limits: Limits = LIMITS) -> None:
        self.db = db
        self.clock = clock
        self.limits = limits

    def deadline_changes(self, after: int, limit: int) -> list[tuple[str, int, bool]]:
        """The schedules changed after revision ``after``, oldest change first: id,
        revision, and whether it is live with a deadline (a look at the stored policy's
        text, so the sweep reads whole rows only of those; a false yes is harmless)."""
        has = sa.and_(
            m.Schedule.deleted.is_(False),
            sa.cast(m.Schedule.policy, sa.Text).like('%"deadline"%'),
        )
        query = (
            sa.select(m.Schedule.id, m.Schedule.revision, has.label("has"))
            .where(m.Schedule.revision > after)
            .order_by(m.Schedule.revision)
            .limit(limit)
        )
        with self.db.read() as s:
            return [(r.id, int(r.revision), bool(r.has)) for r in s.execute(query)]

    def schedules_named(self, schedule_ids: Sequence[str]) -> dict[str, ScheduleRecord]:
        """The schedules of ``schedule_ids``, as listings show them."""
        if not schedule_ids:
            return {}
        with self.db.read() as s:
            rows = s.scalars(sa.select(m.Schedule).where(m.Schedule.id.in_(list(schedule_ids))))
            return {r.id: _listed(r, self.limits) for r in rows}

    def deadline_cursors(self, schedule_ids: Sequence[str]) -> dict[str, datetime]:
        """How far each schedule's slots were judged (schedules never judged are absent)."""
        if not schedule_ids:
            return {}
        with self.db.read() as s:
            rows = s.execute(
                sa.select(m.DeadlineCursor.schedule_id, m.DeadlineCursor.checked_through).where(
                    m.DeadlineCursor.schedule_id.in_(list(schedule_ids))
                )
            )
            return {r.schedule_id: r.checked_through for r in rows}

    def judge_slots(self, check: SlotCheck) -> tuple[list[BreachRecord], datetime]:
        """Judge the slots of ``check`` in one transaction: a breach is recorded (with
        a pending delivery per notifier) unless another sweep recorded it first, and
        the cursor moves. Returns the breaches this call recorded and the cursor it
        wrote: ``check.through``, or the last run judged when the range held more than
        ``MAX_RUNS_PER_CHECK`` runs."""
        now = self.clock()
        with self.db.write() as s:
            runs = s.execute(
                sa.select(
                    m.Run.run_id,
                    m.Run.fire_time,
                    m.Run.state,
                    m.Run.trigger,
                    m.Run.error,
                    m.Run.finished_at,
                    m.Run.started_at,
                    m.Run.claimed_at,
                    m.Run.attempt,
                )
                .where(
                    m.Run.schedule_id == check.schedule_id,
                    m.Run.fire_time > check.after,
                    m.Run.fire_time <= check.through,
                )
                .order_by(m.Run.fire_time)
                .limit(MAX_RUNS_PER_CHECK + 1)
            ).all()
            through = check.through
            if len(runs) > MAX_RUNS_PER_CHECK:
                runs = runs[:MAX_RUNS_PER_CHECK]
                through = runs[-1].fire_time
            by_time = {r.fire_time: r for r in runs}
            slots = {t for t in check.slots if t <= through}
            slots.update(r.fire_time for r in runs if r.trigger in _PLANNED)
            breaches = [
                b
                for t in sorted(slots)
                if (b := self._judge_one(s, check, t, by_time.get(t), now)) is not None
            ]
            self._move_cursor(s, check.schedule_id, through)
            return breaches, through

    def _judge_one(
        self, s: Session, check: SlotCheck, fire_time: datetime, run: Any, now: datetime
    ) -> BreachRecord | None:
        deadline_at = fire_time + check.deadline
        slot = (
            None
            if run is None
            else SlotRun(
                run_id=run.run_id,
                state=RunState(run.state),
                error=run.error,
                finished_at=run.finished_at,
                started_at=run.started_at,
                claimed_at=run.claimed_at,
                attempt=run.attempt,
            )
        )
        verdict = judge(slot, deadline_at)
        if verdict is None:
            return None
        insert: Any = postgresql.insert if self.db.dialect == "postgresql" else sqlite.insert
        inserted = s.execute(
            insert(_BREACHES)
            .values(
                schedule_id=check.schedule_id,
                fire_time=fire_time,
                deadline_at=deadline_at,
                reason=verdict.reason.value,
                cause=verdict.cause[:2000],
                run_id=run.run_id if run is not None else "",
                run_state=run.state if run is not None else "",
                detected_at=now,
            )
            .on_conflict_do_nothing(index_elements=["schedule_id", "fire_time"])
            .returning(_BREACHES.c.id)
        ).scalar()
        if inserted is None:
            return None  # another sweep (a replica) recorded it
        breach_id = int(inserted)
        if run is not None:
            detail = f"{verdict.reason.value}: {verdict.cause}" if verdict.cause else verdict.reason
            s.add(
                m.RunEvent(
                    run_id=run.run_id,
                    kind="deadline_breached",
                    at=now,
                    detail=f"{detail} (deadline {_iso(deadline_at)})"[:4000],
                    attempt=run.attempt,
                )
            )
        deliveries = []
        for url, fmt in check.notify:
            row = m.DeadlineDelivery(
                breach_id=breach_id,
                url=url,
                format=fmt.value,
                status=DeliveryStatus.PENDING.value,
                attempts=0,
                http_status=0,
                error="",
                updated_at=now,
                # An outbox row, held by this replica while its notifier has it
                # (``delivery_outbox``).
                claim_token=uuid.uuid4().hex,
                claimed_until=now + QUEUED_HOLD,
            )
            s.add(row)
            s.flush()
            deliveries.append(delivery_record(row))
        return BreachRecord(
            breach_id=breach_id,
            schedule_id=check.schedule_id,
            fire_time=fire_time,
            deadline_at=deadline_at,
            reason=verdict.reason.value,
            cause=verdict.cause,
            run_id=run.run_id if run is not None else "",
            run_state=RunState(run.state) if run is not None else None,
            detected_at=now,
            deliveries=tuple(deliveries),
        )

    def _move_cursor(self, s: Session, schedule_id: str, through: datetime) -> None:
        row = s.get(m.DeadlineCursor, schedule_id)
        if row is None:
            s.add(m.DeadlineCursor(schedule_id=schedule_id, checked_through=through))
        elif row.checked_through < through:
            row.checked_through = through

    def list_deadline_breaches(
        self, schedule_id: str = "", limit: int = 0, before_id: int = 0
    ) -> list[BreachRecord]:
        """Breaches newest first (by id), each with its deliveries."""
        if limit < 0 or limit > MAX_BREACH_LIMIT:
            raise InvalidArgument("limit", f"must be from 0 to {MAX_BREACH_LIMIT}, got {limit}")
        if before_id < 0:
            raise InvalidArgument("before_id", f"must not be negative, got {before_id}")
        query = sa.select(m.DeadlineBreach).order_by(m.DeadlineBreach.id.desc())
        if schedule_id:
            query = query.where(m.DeadlineBreach.schedule_id == schedule_id)
        if before_id:
            query = query.where(m.DeadlineBreach.id < before_id)
        with self.db.read() as s:
            rows = list(s.scalars(query.limit(limit or DEFAULT_BREACH_LIMIT)))
            deliveries: dict[int, list[DeliveryRecord]] = {}
            if rows:
                found = s.scalars(
                    sa.select(m.DeadlineDelivery)
                    .where(m.DeadlineDelivery.breach_id.in_([r.id for r in rows]))
                    .order_by(m.DeadlineDelivery.id)
                )
                for d in found:
                    deliveries.setdefault(d.breach_id, []).append(delivery_record(d))
            return [breach_record(r, tuple(deliveries.get(r.id, ()))) for r in rows]


def delivery_record(row: m.DeadlineDelivery) -> DeliveryRecord:
    return DeliveryRecord(
        delivery_id=row.id,
        url=row.url,
        format=NotifyFormat(row.format),
        status=DeliveryStatus(row.status),
        attempts=row.attempts,
        http_status=row.http_status,
        error=row.error,
        updated_at=row.updated_at,
        claim_token=row.claim_token,
    )


def breach_record(row: m.DeadlineBreach, deliveries: tuple[DeliveryRecord, ...]) -> BreachRecord:
    return BreachRecord(
        breach_id=row.id,
        schedule_id=row.schedule_id,
        fire_time=row.fire_time,
        deadline_at=row.deadline_at,
        reason=row.reason,
        cause=row.cause,
        run_id=row.run_id,
        run_state=RunState(row.run_state) if row.run_state else None,
        detected_at=row.detected_at,
        deliveries=deliveries,
    )
