"""Deleting a schedule, and what becomes of its runs in flight.

A run in flight (PENDING, WAITING or RUNNING) of a deleted schedule would go on with no
schedule to answer for it, so a delete is refused while there is one, naming it;
``force`` cancels them instead, as ``CancelRun`` cancels (the attempt holding one is
refused at its next heartbeat or completion, and stops), in the deletion's own
transaction: either the schedule is deleted and those runs cancelled, or nothing
changed.

A deletion is a use of two parts in one unit of work: a schedule change
(``ScheduleChanges``: its revision, the watchers woken once it committed) and the
attempts' cancel (``Attempts.cancel``).
"""

from __future__ import annotations

import sqlalchemy as sa

from cronwave_core.domain.cancel import CancelRequest
from cronwave_core.domain.runs import IN_FLIGHT
from cronwave_core.errors import ScheduleBusy, ScheduleNotFound
from workflow_store import models as m
from workflow_store.attempt_store import Attempts
from workflow_store.audit_store import Actor, append
from workflow_store.records import RunRecord, ScheduleRecord
from workflow_store.rows import _schedule, lock_schedule
from workflow_store.schedule_changes import ScheduleChanges
from workflow_store.store_core import Clock, utc_now
from workflow_store.unit_of_work import Transactions, UnitOfWork

#: The error a forced deletion records on the runs it cancels.
DELETED_REASON = "schedule deleted"


class ScheduleDeletion:
    """Schedules deleted, their runs in flight refused or cancelled."""

    def __init__(
        self,
        tx: Transactions,
        changes: ScheduleChanges,
        attempts: Attempts,
        clock: Clock = utc_now,
    ) -> None:
        self.tx = tx
        self.changes = changes
        self.attempts = attempts
        self.clock = clock

    def delete_schedule(
        self, schedule_id: str, *, force: bool = False, actor: Actor | None = None
    ) -> tuple[ScheduleRecord, list[RunRecord]]:
        """Soft delete: the row stays (runs refer to it; watchers see the deletion).
        Returns the deleted schedule and the runs ``force`` cancelled. Raises
        ``ScheduleNotFound`` for an unknown or deleted schedule and, without
        ``force``, ``ScheduleBusy`` naming its runs in flight."""
        result: tuple[ScheduleRecord, list[RunRecord]] = self.tx.rounds(
            lambda w: self._delete(w, schedule_id, force, actor)
        )
        return result

    def _delete(
        self, w: UnitOfWork, schedule_id: str, force: bool, actor: Actor | None
    ) -> tuple[ScheduleRecord, list[RunRecord]]:
        s = w.session
        revision = self.changes.bump(w)
        row = lock_schedule(s, schedule_id)
        if row is None or row.deleted:
            raise ScheduleNotFound(schedule_id)
        query = (
            sa.select(m.Run.run_id, m.Run.state)
            .where(m.Run.schedule_id == schedule_id)
            .where(m.Run.state.in_(sorted(state.value for state in IN_FLIGHT)))
            .order_by(m.Run.fire_time, m.Run.run_id)
        )
        in_flight = [(str(run_id), str(state).upper()) for run_id, state in s.execute(query)]
        if in_flight and not force:
            raise ScheduleBusy(schedule_id, in_flight)
        cancelled = []
        for run_id, _ in in_flight:
            run, changed = self.attempts.cancel(w, CancelRequest(run_id, DELETED_REASON))
            if changed:
                cancelled.append(run)
        row.deleted = True
        row.updated_at = self.clock()
        row.revision = revision
        s.flush()
        changes = {
            "deleted": {"old": False, "new": True},
            "force": force,
            "cancelled_runs": [run.run_id for run in cancelled][:20],
            "cancelled_count": len(cancelled),
        }
        append(s, actor, "DeleteSchedule", changes, self.clock(), schedule_id=schedule_id)
        return _schedule(row), cancelled
