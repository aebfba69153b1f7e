"""Schedules (with their change stream) and job types."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from cronwave_core.errors import (
    InvalidArgument,
    ScheduleExists,
    ScheduleNotFound,
)
from cronwave_core.security import identity
from workflow_store import models as m
from workflow_store.audit_store import Actor, append, change, schedule_changes
from workflow_store.job_type_changes import check_change
from workflow_store.records import (
    JobTypeRecord,
    NewSchedule,
    ScheduleRecord,
)
from workflow_store.rows import (
    _job_type,
    _listed,
    _live_schedule,
    _schedule,
)
from workflow_store.store_core import StoreCore
from workflow_store.stored_json import policy_to_dict, spec_to_dict
from workflow_store.unknown_job_type import unknown_job_type


class _Existing(Exception):  # control flow: never leaves this module
    """Ends a create's transaction (rolled back) when ``if_absent`` finds the id live."""

    def __init__(self, record: ScheduleRecord) -> None:
        super().__init__(record.schedule_id)
        self.record = record


class ScheduleStore(StoreCore):
    """Schedules, their revisions and change stream, and job types."""

    # -- schedules ---------------------------------------------------------------------

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
            with self.db.write() as s:
                revision = self._bump_revision(s)
                self._check_job_type(s, new.job_type)
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
        self._changed(revision)
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
        with self.db.write() as s:
            row = s.get(m.Schedule, schedule_id, with_for_update=True) if schedule_id else None
            if row is None or row.deleted:
                raise ScheduleNotFound(schedule_id)
            current = _schedule(row)
            new = revise(current)
            values = _stored_values(new)
            old = {name: getattr(row, name) for name in values}
            if old == values:
                return current, False
            if new.job_type != current.job_type:
                self._check_job_type(s, new.job_type)
            revision = self._bump_revision(s)
            for name, value in values.items():
                setattr(row, name, value)
            row.updated_at = self.clock()
            row.revision = revision
            s.flush()
            record = _schedule(row)
            changes = schedule_changes(old, values)
            append(s, actor, "UpdateSchedule", changes, self.clock(), schedule_id=schedule_id)
        self._changed(revision)
        return record, True

    def _check_job_type(self, s: Session, job_type: str) -> None:
        if s.get(m.JobType, job_type) is None:
            names = s.scalars(sa.select(m.JobType.name).order_by(m.JobType.name)).all()
            raise unknown_job_type(job_type, names)

    def get_schedule(self, schedule_id: str) -> ScheduleRecord:
        with self.db.read() as s:
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
        with self.db.read() as s:
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
        with self.db.write() as s:
            revision = self._bump_revision(s)
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
        self._changed(revision)
        return record

    def schedules_since(self, revision: int, limit: int = 500) -> list[ScheduleRecord]:
        """Schedules (deleted ones too) changed after ``revision``, oldest change first,
        as listings show them (``_listed``)."""
        with self.db.read() as s:
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
        while active() and not self._closing.is_set():
            batch = self.schedules_since(last)
            for record in batch:
                yield record
                last = record.revision
            if not batch:
                self.wait_for_change(last, poll)

    def wait_for_change(self, after: int, timeout: timedelta) -> None:
        """Block until this process commits a schedule change newer than ``after``, a
        ``wake_watchers`` call, or ``timeout``."""
        with self._changes:
            if self._latest_revision <= after:
                self._changes.wait(timeout.total_seconds())

    def wake_watchers(self) -> None:
        with self._changes:
            self._changes.notify_all()

    def close_watchers(self) -> None:
        """End every watch stream: the process is stopping. Watchers reconnect to
        another replica (or to this one when it is back) from their last revision."""
        self._closing.set()
        self.wake_watchers()

    def _changed(self, revision: int) -> None:
        with self._changes:
            self._latest_revision = max(self._latest_revision, revision)
            self._changes.notify_all()

    def _bump_revision(self, s: Session) -> int:
        """The next store revision. The counter row stays locked until commit, so
        revisions become visible in the order they were handed out."""
        query = (
            sa.update(m.StoreRevision)
            .where(m.StoreRevision.id == 1)
            .values(revision=m.StoreRevision.revision + 1)
            .returning(m.StoreRevision.revision)
        )
        return int(s.execute(query).scalar_one())

    # -- job types ---------------------------------------------------------------------

    def register_job_type(self, job: JobTypeRecord, actor: Actor | None = None) -> JobTypeRecord:
        """Create the job type named ``job.name`` (already validated), or register it
        again: identical values change nothing (no write, no audit row); changed ones
        replace it only when the caller may change a job type (``job_type_changes``:
        an admin, not a worker's certificate), else ``PermissionDenied`` naming the
        first field changed, and nothing is written."""
        now = self.clock()
        values = _job_type_values(job)
        with self.db.write() as s:
            row = s.get(m.JobType, job.name, with_for_update=True, populate_existing=True)
            if row is None:
                insert: Any = (
                    postgresql.insert if self.db.dialect == "postgresql" else sqlite.insert
                )
                stmt = insert(m.JobType).values(**values, created_at=now, updated_at=now)
                stmt = stmt.on_conflict_do_nothing(index_elements=["name"])
                created = s.execute(stmt.returning(m.JobType.name)).scalar_one_or_none()
                row = s.get(m.JobType, job.name, with_for_update=True, populate_existing=True)
                assert row is not None
                if created is not None:
                    append(s, actor, "RegisterJobType", values, self.clock())
                    return self._registered(row)
            current = _job_type(row)
            check_change(current, job, identity.current())
            if current == job:
                return current
            for name, value in values.items():
                setattr(row, name, value)
            row.updated_at = now
            s.flush()
            append(s, actor, "RegisterJobType", values, self.clock())
            return self._registered(row)

    def _registered(self, row: m.JobType) -> JobTypeRecord:
        """The job type as written, and this replica's cache of it forgotten."""
        record = _job_type(row)
        with self._job_lock:
            self._job_generation += 1
            self._job_types.pop(record.name, None)
        return record

    def list_job_types(self) -> list[JobTypeRecord]:
        with self.db.read() as s:
            return [_job_type(r) for r in s.scalars(sa.select(m.JobType).order_by(m.JobType.name))]


def _job_type_values(job: JobTypeRecord) -> dict[str, Any]:
    """What a job type's row stores of ``job``, by column (its name first)."""
    return {
        "name": job.name,
        "duration_limit": job.duration_limit,
        "heartbeat_timeout": job.heartbeat_timeout,
        "retry_initial_interval": job.retry.initial_interval,
        "retry_backoff_coefficient": job.retry.backoff_coefficient,
        "retry_maximum_interval": job.retry.maximum_interval,
        "retry_maximum_attempts": job.retry.maximum_attempts,
        "retry_non_retryable_errors": list(job.retry.non_retryable_errors),
        "queue": job.queue,
        "priority": job.priority,
        "financial": job.financial,
    }


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
