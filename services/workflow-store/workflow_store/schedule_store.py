"""Schedules: created, changed, read, listed and watched (job types are ``job_types``; a
deletion, which cancels runs, is ``schedule_deletion``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from cronwave_core.errors import (
    InvalidArgument,
    ScheduleExists,
    ScheduleNotFound,
)
from workflow_store import models as m
from workflow_store.audit_store import Actor, append, change, schedule_changes
from workflow_store.job_types import JobTypes
from workflow_store.limits import LIMITS, Limits
from workflow_store.records import (
    NewSchedule,
    ScheduleRecord,
)
from workflow_store.rows import (
    _listed,
    _live_schedule,
    _schedule,
    lock_schedule,
)
from workflow_store.schedule_changes import ScheduleChanges
from workflow_store.store_core import Clock, utc_now
from workflow_store.stored_json import policy_to_dict, spec_to_dict
from workflow_store.unit_of_work import Transactions


class _Existing(Exception):  # control flow: never leaves this module
    """Ends a create's transaction (rolled back) when ``if_absent`` finds the id live."""

    def __init__(self, record: ScheduleRecord) -> None:
        super().__init__(record.schedule_id)
        self.record = record


class Schedules:
    """Schedules, each change under a new store revision (``ScheduleChanges``), which
    is how watchers learn of it. A schedule names a registered job type (``JobTypes``)."""

    def __init__(
        self,
        tx: Transactions,
        job_types: JobTypes,
        changes: ScheduleChanges,
        clock: Clock = utc_now,
        limits: Limits = LIMITS,
    ) -> None:
        self.tx = tx
        self.job_types = job_types
        self.changes = changes
        self.clock = clock
        self.limits = limits

    def create_schedule(self, new: NewSchedule) -> ScheduleRecord:
        """Create ``new``; a deleted schedule of the same id is replaced.

        Raises ``InvalidArgument`` (job_type) for an unregistered job type and
        ``ScheduleExists`` when a live schedule has the id.
        """
        return self.create_schedule_if(new, if_absent=False)[1]

    def create_schedule_if(
        self, new: NewSchedule, *, if_absent: bool, actor: Actor | None = None
    ) -> tuple[bool, ScheduleRecord]:
        """``create_schedule``, saying whether it created the schedule. With
        ``if_absent``, a live schedule of the id is returned unchanged (False) instead
        of ``ScheduleExists``; ``new`` is checked (its job type too) all the same."""
        now = self.clock()
        try:
            with self.tx.write() as w:
                s = w.session
                revision = self.changes.bump(w)
                self.job_types.require(w, new.job_type)
                row = s.get(m.Schedule, new.schedule_id)
                if row is not None and not row.deleted:
                    if if_absent:
                        # Rolled back: the revision bump above is not kept.
                        raise _Existing(_schedule(row))
                    raise ScheduleExists(new.schedule_id)
                if row is None:
                    row = m.Schedule(id=new.schedule_id)
                    s.add(row)
                row.spec = spec_to_dict(new.spec)
                row.policy = policy_to_dict(new.policy)
                row.job_type = new.job_type
                row.payload_json = new.payload_json
                row.paused = new.paused
                row.pause_note = new.pause_note if new.paused else ""
                row.managed_by = new.managed_by
                row.labels = dict(new.labels)
                row.deleted = False
                row.created_at = now
                row.updated_at = now
                row.revision = revision
                s.flush()
                record = _schedule(row)
                append(
                    s,
                    actor,
                    "CreateSchedule",
                    schedule_changes({}, _stored_values(new)),
                    self.clock(),
                    schedule_id=new.schedule_id,
                )
        except _Existing as existing:
            return False, existing.record
        except IntegrityError as exc:
            # A concurrent create of the same id won the primary key.
            if if_absent:
                return False, self.get_schedule(new.schedule_id)
            raise ScheduleExists(new.schedule_id) from exc
        return True, record

    def update_schedule(
        self,
        schedule_id: str,
        revise: Callable[[ScheduleRecord], NewSchedule],
        actor: Actor | None = None,
    ) -> tuple[ScheduleRecord, bool]:
        """Change a live schedule to ``revise(current)`` in one transaction, under the
        row's lock, so two updates never lose each other's fields; ``revise`` validates
        (raising ``InvalidArgument``, and nothing is written). The job type must be
        registered, as for a create. An update that changes nothing writes nothing and
        returns False; any other bumps the schedule's revision, which is how the
        planner (through WatchSchedules) learns of it. Raises ``ScheduleNotFound`` for
        an unknown or deleted schedule."""
        with self.tx.write() as w:
            s = w.session
            row = lock_schedule(s, schedule_id)
            if row is None or row.deleted:
                raise ScheduleNotFound(schedule_id)
            current = _schedule(row)
            new = revise(current)
            values = _stored_values(new)
            old = {name: getattr(row, name) for name in values}
            if old == values:
                return current, False
            if new.job_type != current.job_type:
                self.job_types.require(w, new.job_type)
            revision = self.changes.bump(w)
            for name, value in values.items():
                setattr(row, name, value)
            row.updated_at = self.clock()
            row.revision = revision
            s.flush()
            record = _schedule(row)
            changes = schedule_changes(old, values)
            append(s, actor, "UpdateSchedule", changes, self.clock(), schedule_id=schedule_id)
        return record, True

    def get_schedule(self, schedule_id: str) -> ScheduleRecord:
        with self.tx.read() as s:
            return _schedule(_live_schedule(s, schedule_id))

    def list_schedules(
        self,
        limit: int = 0,
        include_deleted: bool = False,
        after: str = "",
        keep: Callable[[str], bool] | None = None,
    ) -> tuple[list[ScheduleRecord], int]:
        """Schedules by id (all when ``limit`` is 0; only ids greater than ``after``, for
        paging) and the store revision they reflect.

        Every row is listed, as ``_listed`` shows it: a row this store cannot list whole
        (a payload over the limit, a stored spec it cannot read) comes without the part
        left out and says why in ``withheld``, so one bad row never fails a listing."""
        if limit < 0:
            raise InvalidArgument("limit", "must not be negative (0 means all)")
        with self.tx.read() as s:
            # The revision is read first: under READ COMMITTED the list may then hold
            # newer changes than it says, which a watch from it re-sends, never misses.
            revision = s.scalar(sa.select(m.StoreRevision.revision).where(m.StoreRevision.id == 1))
            query = sa.select(m.Schedule).order_by(m.Schedule.id)
            if not include_deleted:
                query = query.where(m.Schedule.deleted.is_(False))
            if after:
                query = query.where(m.Schedule.id > after)
            if keep is not None:
                ids = _kept_ids(s, keep, limit, include_deleted, after)
                query = sa.select(m.Schedule).where(m.Schedule.id.in_(ids)).order_by(m.Schedule.id)
            elif limit:
                query = query.limit(limit)
            listed = [_listed(r, self.limits) for r in s.scalars(query)]
            return listed, int(revision or 0)

    def pause_schedule(
        self, schedule_id: str, note: str, actor: Actor | None = None
    ) -> ScheduleRecord:
        return self._change_schedule(
            schedule_id, "PauseSchedule", actor, paused=True, pause_note=note
        )

    def resume_schedule(
        self, schedule_id: str, note: str, actor: Actor | None = None
    ) -> ScheduleRecord:
        return self._change_schedule(
            schedule_id, "ResumeSchedule", actor, paused=False, pause_note=note
        )

    def _change_schedule(
        self, schedule_id: str, rpc: str, actor: Actor | None, **values: Any
    ) -> ScheduleRecord:
        with self.tx.write() as w:
            s = w.session
            revision = self.changes.bump(w)
            row = _live_schedule(s, schedule_id)
            old = {name: getattr(row, name) for name in values}
            for name, value in values.items():
                setattr(row, name, value)
            row.updated_at = self.clock()
            row.revision = revision
            s.flush()
            record = _schedule(row)
            # A pause of a paused schedule is still a request made: its row says so.
            changes = schedule_changes(old, values) or {
                "paused": change(old["paused"], values["paused"])
            }
            append(s, actor, rpc, changes, self.clock(), schedule_id=schedule_id)
        return record

    def schedules_since(self, revision: int, limit: int = 500) -> list[ScheduleRecord]:
        """Schedules (deleted ones too) changed after ``revision``, oldest change first,
        as listings show them (``_listed``)."""
        with self.tx.read() as s:
            query = (
                sa.select(m.Schedule)
                .where(m.Schedule.revision > revision)
                .order_by(m.Schedule.revision)
                .limit(limit)
            )
            return [_listed(r, self.limits) for r in s.scalars(query)]

    def watch(
        self, since: int, active: Callable[[], bool], poll: timedelta = timedelta(seconds=0.5)
    ) -> Iterator[ScheduleRecord]:
        """Every schedule changed after ``since``, then each new change, until ``active()``
        is false. Changes this process writes arrive at once; changes written by another
        replica arrive within ``poll``."""
        last = since
        while active() and not self.changes.closing:
            batch = self.schedules_since(last)
            for record in batch:
                yield record
                last = record.revision
            if not batch:
                self.changes.wait_for_change(last, poll)


def _stored_values(new: NewSchedule) -> dict[str, Any]:
    """What a schedule's row stores of ``new``, by column."""
    return {
        "spec": spec_to_dict(new.spec),
        "policy": policy_to_dict(new.policy),
        "job_type": new.job_type,
        "payload_json": new.payload_json,
        "paused": new.paused,
        "pause_note": new.pause_note if new.paused else "",
        "managed_by": new.managed_by,
        "labels": dict(new.labels),
    }


#: Ids read per statement while looking for the schedules a filter keeps.
_ID_SCAN = 5_000


def _kept_ids(
    s: Session, keep: Callable[[str], bool], limit: int, include_deleted: bool, after: str
) -> list[str]:
    """The first ``limit`` ids after ``after`` that ``keep`` keeps (all when 0): ids
    alone are scanned (the primary key's index), so rows left out are never loaded."""
    kept: list[str] = []
    while not limit or len(kept) < limit:
        query = sa.select(m.Schedule.id).order_by(m.Schedule.id).limit(_ID_SCAN)
        if not include_deleted:
            query = query.where(m.Schedule.deleted.is_(False))
        if after:
            query = query.where(m.Schedule.id > after)
        ids = list(s.scalars(query))
        kept.extend(i for i in ids if keep(i))
        if len(ids) < _ID_SCAN:
            break
        after = ids[-1]
    return kept[:limit] if limit else kept
