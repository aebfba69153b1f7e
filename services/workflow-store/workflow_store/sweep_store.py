"""Runs that need a new message: stalled (never picked up, replayed, heartbeat lapsed)
and lost with the queue. ``Requeues`` is a repository ``Store`` holds (``Store.requeues``),
over the database and the clock alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from cronwave_core.domain.runs import HELD
from cronwave_core.errors import InvalidArgument
from workflow_store import models as m
from workflow_store.convert import iso
from workflow_store.db import Database
from workflow_store.records import (
    DEFAULT_HEARTBEAT_TIMEOUT,
    LostRuns,
    RunState,
    StalledRun,
    StallReason,
)
from workflow_store.rows import (
    _event,
    _run,
)
from workflow_store.store_core import (
    _MAX_RESEND_DOUBLINGS,
    _MIN_RESEND,
    DEFAULT_STALLED_LIMIT,
    MAX_LOST_PAGE,
    Clock,
    _insert_events,
    _row_event,
    utc_now,
)


class Requeues:
    """The runs whose message must be sent again."""

    def __init__(self, db: Database, clock: Clock = utc_now) -> None:
        self.db = db
        self.clock = clock

    # -- stalled and lost runs ---------------------------------------------------------

    def requeue_stalled_runs(
        self,
        pending_for: timedelta,
        limit: int = 0,
        queue_waits: Mapping[str, timedelta] | None = None,
    ) -> list[StalledRun]:
        """The runs that need a new message, each marked requeued (a "requeued" event,
        and ``next_sweep_at``) in this one transaction, so concurrent sweepers split them.

        PENDING runs qualify when their message is overdue: due and fired more than
        ``pending_for`` ago (a retry counts from the end of its delay), or replayed and
        never sent. ``queue_waits``: per queue, how long the oldest message still on it
        has waited; that queue's runs are overdue only ``pending_for`` past that wait
        and re-sent again only that much after their next re-send, since a message
        younger than the queue's backlog is still in it. Without it, a backlog longer
        than ``pending_for`` had every run in it re-sent, and the duplicates made the
        backlog longer still. WAITING and RUNNING runs qualify when their heartbeat is older than
        their job type's heartbeat timeout. A run re-sent and still not claimed qualifies again
        after ``pending_for``, then twice that, and so on (up to 64 times): a long
        backlog is re-sent a few times, not once per tick. The caller must enqueue the
        message of each run returned.
        """
        if pending_for < timedelta(0):
            raise InvalidArgument("pending_for", "must not be negative")
        if limit < 0:
            raise InvalidArgument(
                "limit", f"must not be negative (0 means {DEFAULT_STALLED_LIMIT})"
            )
        waits = _checked_waits(queue_waits or {})
        limit = limit or DEFAULT_STALLED_LIMIT
        now = self.clock()
        overdue = _pending_overdue(now, pending_for, waits)
        stalled: list[StalledRun] = []
        with self.db.read() as s:  # most sweeps find nothing: no write transaction then
            shortest = _shortest([s.scalar(sa.select(sa.func.min(m.JobType.heartbeat_timeout)))])
            due = s.execute(
                sa.select(
                    sa.exists().where(overdue),
                    sa.exists().where(_lapse_candidates(now, shortest)),
                )
            ).one()
            if not any(due):
                return stalled
        events: list[dict[str, Any]] = []  # the "requeued" events, written together
        with self.db.write() as s:
            pending = s.scalars(
                sa.select(m.Run)
                .where(overdue)
                .order_by(
                    sa.nulls_first(sa.func.coalesce(m.Run.next_sweep_at, m.Run.due_at).asc()),
                    m.Run.run_id,
                )
                .limit(limit)
                .with_for_update(skip_locked=True, key_share=True)
            ).all()
            for row in pending:
                reason = StallReason.NOT_PICKED_UP
                # No message yet: replayed (it was claimed before), or recorded without one.
                if row.due_at is None and row.next_sweep_at is None and row.attempt > 0:
                    reason = StallReason.REPLAYED
                stalled.append(self._requeued(events, row, reason, now, pending_for, reason.value))
            if len(stalled) < limit:
                stalled.extend(self._lapsed(s, events, now, pending_for, limit - len(stalled)))
            _write(s, events)
        return stalled

    def requeue_lost_runs(
        self, lost_at: datetime, pending_for: timedelta, after_run_id: str = "", limit: int = 0
    ) -> LostRuns:
        """The runs whose message went down with the queue, which lost every message it
        held at ``lost_at``: the PENDING runs recorded before then, at most ``limit`` of
        them after ``after_run_id`` in run-id order, each dealt with in this one
        transaction whatever its resend schedule.

        A due run is returned, marked requeued (reason ``queue_lost``, its next re-send
        ``pending_for`` away, as ``requeue_stalled_runs`` marks one): the caller must
        enqueue its message. A retry whose delay has not passed gets no message now (a
        claim would refuse it): its next re-send is set to the end of the delay, so
        ``requeue_stalled_runs`` hands it out once it is due. A run recorded after
        ``lost_at`` is not looked at: its message went to the queue as it is now.
        WAITING and RUNNING runs need no message (their worker holds them; a dead
        worker's heartbeat lapses). A run whose message survived gets a second one,
        which its claim refuses.
        """
        if lost_at.tzinfo is None:
            raise InvalidArgument("lost_at", "must be timezone-aware (UTC)")
        if pending_for < timedelta(0):
            raise InvalidArgument("pending_for", "must not be negative")
        if not 0 <= limit <= MAX_LOST_PAGE:
            raise InvalidArgument(
                "limit", f"must be between 0 and {MAX_LOST_PAGE} (0 means {DEFAULT_STALLED_LIMIT})"
            )
        limit = limit or DEFAULT_STALLED_LIMIT
        now = self.clock()
        runs: list[StalledRun] = []
        with self.db.write() as s:
            query = sa.select(m.Run).where(
                m.Run.state == RunState.PENDING.value, m.Run.created_at < lost_at
            )
            if after_run_id:
                query = query.where(m.Run.run_id > after_run_id)
            rows = s.scalars(
                query.order_by(m.Run.run_id)
                .limit(limit)
                .with_for_update(skip_locked=True, key_share=True)
            ).all()
            events: list[dict[str, Any]] = []
            for row in rows:
                if row.due_at is not None and row.due_at > now:
                    row.next_sweep_at = row.due_at
                    continue
                reason = StallReason.QUEUE_LOST
                runs.append(self._requeued(events, row, reason, now, pending_for, reason.value))
            _write(s, events)
        next_after = rows[-1].run_id if len(rows) == limit else ""
        return LostRuns(runs, next_after)

    def _lapsed(
        self,
        s: Session,
        events: list[dict[str, Any]],
        now: datetime,
        pending_for: timedelta,
        limit: int,
    ) -> list[StalledRun]:
        timeouts = dict(s.execute(sa.select(m.JobType.name, m.JobType.heartbeat_timeout)).all())
        shortest = _shortest(timeouts.values())
        # Candidates only: each run's own timeout is applied below.
        candidates = s.scalars(
            sa.select(m.Run)
            .where(_lapse_candidates(now, shortest))
            .order_by(_ALIVE_SINCE, m.Run.run_id)
            .limit(limit * 4)
            .with_for_update(skip_locked=True, key_share=True)
        ).all()
        found: list[StalledRun] = []
        for row in candidates:
            last = row.heartbeat_at or row.claimed_at
            timeout = timeouts.get(row.job_type, DEFAULT_HEARTBEAT_TIMEOUT)
            if last is None or now - last < timeout:
                continue
            if row.cancel_deadline is not None:  # its worker died while it was cancelling
                _cancel_lapsed(s, row, now, last)
                continue
            detail = (
                f"{StallReason.HEARTBEAT_LAPSED.value}: no heartbeat from {row.worker_id} "
                f"since {iso(last)} (timeout {timeout.total_seconds():g}s)"
            )
            found.append(
                self._requeued(events, row, StallReason.HEARTBEAT_LAPSED, now, pending_for, detail)
            )
            if len(found) >= limit:
                break
        return found

    def _requeued(
        self,
        events: list[dict[str, Any]],
        row: m.Run,
        reason: StallReason,
        now: datetime,
        pending_for: timedelta,
        detail: str,
    ) -> StalledRun:
        wait = max(pending_for, _MIN_RESEND) * 2 ** min(row.requeues, _MAX_RESEND_DOUBLINGS)
        row.next_sweep_at = now + wait
        row.requeues += 1
        events.append(_row_event(row, "requeued", detail, now))
        return StalledRun(_run(row), reason)


def _write(s: Session, events: list[dict[str, Any]]) -> None:
    """The rows changed, then their events, each in one batch."""
    s.flush()
    _insert_events(s, events)


_ALIVE_SINCE = sa.func.coalesce(m.Run.heartbeat_at, m.Run.claimed_at)


#: At most this many queues' waits in one sweep.
MAX_QUEUE_WAITS = 1000


def check_wait_count(count: int) -> None:
    """Refuse a sweep naming more than ``MAX_QUEUE_WAITS`` queues, before any is read."""
    if count > MAX_QUEUE_WAITS:
        raise InvalidArgument("queue_waits", f"at most {MAX_QUEUE_WAITS} queues, got {count}")


def _checked_waits(waits: Mapping[str, timedelta]) -> dict[str, timedelta]:
    check_wait_count(len(waits))
    for queue, wait in waits.items():
        if wait < timedelta(0):
            raise InvalidArgument(f"queue_waits[{queue!r}]", "must not be negative")
    return dict(waits)


def _pending_overdue(
    now: datetime, pending_for: timedelta, waits: Mapping[str, timedelta]
) -> sa.ColumnElement[bool]:
    """PENDING runs whose message is overdue (``requeue_stalled_runs``): for a run of
    a queue in ``waits``, its instants move back by that queue's wait."""
    cut = _per_queue(now - pending_for, waits)
    resend = _per_queue(now, waits)
    never_sent = sa.and_(
        m.Run.next_sweep_at.is_(None),
        sa.or_(m.Run.due_at.is_(None), sa.and_(m.Run.due_at < cut, m.Run.fire_time < cut)),
    )
    return sa.and_(
        m.Run.state == RunState.PENDING.value, sa.or_(never_sent, m.Run.next_sweep_at < resend)
    )


def _per_queue(at: datetime, waits: Mapping[str, timedelta]) -> sa.ColumnElement[datetime]:
    """``at``, less the wait of the run's queue (``at`` for a queue not in ``waits``)."""
    instant = m.Run.due_at.type
    if not waits:
        return sa.literal(at, instant)
    return sa.case(
        {queue: sa.literal(at - wait, instant) for queue, wait in sorted(waits.items())},
        value=m.Run.queue,
        else_=sa.literal(at, instant),
    )


def _lapse_candidates(now: datetime, shortest: timedelta) -> sa.ColumnElement[bool]:
    """Held runs silent longer than the shortest heartbeat timeout, not re-sent lately:
    each is then held to its own job type's timeout."""
    return sa.and_(
        m.Run.state.in_(sorted(state.value for state in HELD)),
        now - shortest > _ALIVE_SINCE,
        sa.or_(m.Run.next_sweep_at.is_(None), m.Run.next_sweep_at < now),
    )


def _shortest(timeouts: Iterable[timedelta | None]) -> timedelta:
    """The shortest of the job types' heartbeat timeouts, or the default when shorter
    (no job type: the default)."""
    return min([*(t for t in timeouts if t is not None), DEFAULT_HEARTBEAT_TIMEOUT])


def _cancel_lapsed(s: Session, row: m.Run, now: datetime, last: datetime) -> None:
    """A cancel-requested run whose attempt stopped heartbeating ends CANCELLED, never
    re-sent: no attempt is left to finish it."""
    row.state = RunState.CANCELLED.value
    row.finished_at = now
    row.error = row.cancel_reason
    s.flush()
    detail = f"{row.cancel_reason} (no heartbeat from {row.worker_id} since {iso(last)})"
    _event(s, row, RunState.CANCELLED.value, now, detail[:1000])
