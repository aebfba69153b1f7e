"""The store's transactional logic: every public method is one transaction that either
applies completely or raises a ``CronwaveError`` and writes nothing.

Uniqueness and races are settled by the database: one run per (schedule, fire time)
is a unique constraint; a claim or completion is a conditional UPDATE whose row count
says who won; fencing tokens are read under the write lock of the same transaction
that inserts the run.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, cast

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from cronwave_core.errors import (
    CronwaveError,
    FailedPrecondition,
    InvalidArgument,
    RunNotFound,
    ScheduleExists,
    ScheduleNotFound,
    StaleAttempt,
    StaleFencingToken,
    UnissuedFencingToken,
)
from cronwave_core.spec import Policy, Spec
from workflow_store import models as m
from workflow_store.bulk import RecordSet
from workflow_store.convert import (
    iso,
    policy_from_dict,
    policy_to_dict,
    spec_from_dict,
    spec_to_dict,
)
from workflow_store.db import Database
from workflow_store.ids import new_attempt_token, new_run_id, same_token
from workflow_store.limits import LIMITS, Limits
from workflow_store.records import (
    COMPLETIONS,
    DEFAULT_HEARTBEAT_TIMEOUT,
    DEFAULT_QUEUE,
    MAX_BATCH,
    Claim,
    ClaimRequest,
    Completion,
    CompletionRequest,
    DeadLettered,
    DeadLetterRecord,
    DeadLetterRequest,
    EventRequest,
    JobTypeRecord,
    LostRuns,
    NewSchedule,
    Recorded,
    RecordRequest,
    RetrySettings,
    RunEventRecord,
    RunRecord,
    RunState,
    ScheduleRecord,
    StalledRun,
    StallReason,
    Trigger,
)
from workflow_store.validate import utf8_size

log = logging.getLogger("cronwave.store")

Clock = Callable[[], datetime]
DEFAULT_RUN_LIMIT = 50
DEFAULT_STALLED_LIMIT = 100
#: At most this many runs in one page of ``requeue_lost_runs``.
MAX_LOST_PAGE = 10_000
# A re-sent message waits at least this long before it is sent again, and at most 64
# times the sweeper's bound.
_MIN_RESEND = timedelta(seconds=1)
_MAX_RESEND_DOUBLINGS = 6
DEFAULT_DEAD_LETTER_LIMIT = 50
# A conditional UPDATE that loses a race is re-evaluated against the winner's result;
# more rounds than this means something keeps changing the row, which we report.
_MAX_ROUNDS = 5
#: How long a job type read from the database is used without reading it again: the
#: longest a change registered through another replica goes unseen here.
JOB_TYPE_TTL = timedelta(seconds=5)
_RUNS = cast(sa.Table, m.Run.__table__)
_EVENTS = cast(sa.Table, m.RunEvent.__table__)
_CLAIM_COLUMNS = (
    "state",
    "attempt",
    "attempt_token",
    "started_at",
    "heartbeat_at",
    "worker_id",
    "next_sweep_at",
    "requeues",
)
_COMPLETE_COLUMNS = ("state", "finished_at", "error", "result_json", "due_at")
T = TypeVar("T")


def _ids(name: str = "ids") -> sa.BindParameter[Any]:
    """A list parameter of an IN clause (a batch holds at most ``MAX_BATCH`` items, far
    below either backend's limit of bind parameters)."""
    return sa.bindparam(name, expanding=True)


# The statements of the hot paths, built once.
_LIVE_SCHEDULES = sa.select(m.Schedule.id, m.Schedule.job_type, m.Schedule.payload_json).where(
    m.Schedule.id.in_(_ids()), m.Schedule.deleted.is_(False)
)
_RUN_IDS = sa.select(_RUNS.c.run_id).where(_RUNS.c.run_id.in_(_ids()))
_RUNS_NAMED = sa.select(_RUNS).where(_RUNS.c.run_id.in_(_ids()))
_RUN_ATTEMPTS = sa.select(_RUNS.c.run_id, _RUNS.c.attempt).where(_RUNS.c.run_id.in_(_ids()))
# FOR NO KEY UPDATE: inserting a run event (its foreign key takes FOR KEY SHARE) does
# not wait for it, so an event batch and a claim batch cannot deadlock.
_LOCK_RUNS = (
    sa.select(_RUNS)
    .where(_RUNS.c.run_id.in_(_ids()))
    .order_by(_RUNS.c.run_id)
    .with_for_update(key_share=True)
)
_LOCK_FENCES = (
    sa.select(m.Fencing.scope, m.Fencing.token, m.Fencing.issued)
    .where(m.Fencing.scope.in_(_ids()))
    .order_by(m.Fencing.scope)
    .with_for_update()
)


def _update_of(columns: tuple[str, ...]) -> sa.Update:
    """UPDATE ``columns`` of one run if its state and attempt token are still the ones
    read (parameters ``w_*`` and ``v_<column>``)."""
    return (
        sa.update(_RUNS)
        .where(
            _RUNS.c.run_id == sa.bindparam("w_run_id"),
            _RUNS.c.state == sa.bindparam("w_state"),
            _RUNS.c.attempt_token == sa.bindparam("w_attempt_token"),
        )
        .values({name: sa.bindparam(f"v_{name}") for name in columns})
    )


_CLAIM_UPDATE = _update_of(_CLAIM_COLUMNS)
_COMPLETE_UPDATE = _update_of(_COMPLETE_COLUMNS)


def utc_now() -> datetime:
    return datetime.now(UTC)


class _Lost(Exception):
    """A conditional UPDATE matched no row: another transaction changed it first."""


class Store:
    """Schedules, job types, runs and fencing tokens over a ``Database``."""

    def __init__(self, db: Database, clock: Clock = utc_now, limits: Limits = LIMITS) -> None:
        self.db = db
        self.clock = clock
        self.limits = limits
        self._changes = threading.Condition()
        self._closing = threading.Event()
        self._latest_revision = 0
        # Job types by name, each with the monotonic instant it must be read again.
        self._job_types: dict[str, tuple[float, JobTypeRecord]] = {}
        self._job_lock = threading.Lock()
        self._job_generation = 0
        insert: Any = postgresql.insert if db.dialect == "postgresql" else sqlite.insert
        self._insert_run = insert(_RUNS).on_conflict_do_nothing(
            index_elements=["schedule_id", "fire_time"]
        )

    # -- schedules ---------------------------------------------------------------------

    def create_schedule(self, new: NewSchedule) -> ScheduleRecord:
        """Create ``new``; a deleted schedule of the same id is replaced.

        Raises ``InvalidArgument`` (job_type) for an unregistered job type and
        ``ScheduleExists`` when a live schedule has the id.
        """
        now = self.clock()
        try:
            with self.db.write() as s:
                revision = self._bump_revision(s)
                if s.get(m.JobType, new.job_type) is None:
                    names = s.scalars(sa.select(m.JobType.name).order_by(m.JobType.name)).all()
                    registered = ", ".join(names) if names else "none (register one first)"
                    what = f"unknown job type '{new.job_type}'" if new.job_type else "required"
                    raise InvalidArgument("job_type", f"{what}; registered: {registered}")
                row = s.get(m.Schedule, new.schedule_id)
                if row is not None and not row.deleted:
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
                row.deleted = False
                row.created_at = now
                row.updated_at = now
                row.revision = revision
                s.flush()
                record = _schedule(row)
        except IntegrityError as exc:
            # A concurrent create of the same id won the primary key.
            raise ScheduleExists(new.schedule_id) from exc
        self._changed(revision)
        return record

    def get_schedule(self, schedule_id: str) -> ScheduleRecord:
        with self.db.read() as s:
            return _schedule(_live_schedule(s, schedule_id))

    def list_schedules(
        self, limit: int = 0, include_deleted: bool = False, after: str = ""
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
            if limit:
                query = query.limit(limit)
            listed = [_listed(r, self.limits) for r in s.scalars(query)]
            return listed, int(revision or 0)

    def pause_schedule(self, schedule_id: str, note: str) -> ScheduleRecord:
        return self._change_schedule(schedule_id, paused=True, pause_note=note)

    def resume_schedule(self, schedule_id: str, note: str) -> ScheduleRecord:
        return self._change_schedule(schedule_id, paused=False, pause_note=note)

    def delete_schedule(self, schedule_id: str) -> ScheduleRecord:
        """Soft delete: the row stays (runs refer to it; watchers see the deletion)."""
        return self._change_schedule(schedule_id, deleted=True)

    def _change_schedule(self, schedule_id: str, **values: Any) -> ScheduleRecord:
        with self.db.write() as s:
            revision = self._bump_revision(s)
            row = _live_schedule(s, schedule_id)
            for name, value in values.items():
                setattr(row, name, value)
            row.updated_at = self.clock()
            row.revision = revision
            s.flush()
            record = _schedule(row)
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

    def register_job_type(self, job: JobTypeRecord) -> JobTypeRecord:
        """Create or replace the job type named ``job.name`` (already validated)."""
        now = self.clock()
        values = {
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
            "created_at": now,
            "updated_at": now,
        }
        with self.db.write() as s:
            insert: Any = postgresql.insert if self.db.dialect == "postgresql" else sqlite.insert
            stmt = insert(m.JobType).values(**values)
            changed = {k: v for k, v in values.items() if k not in ("name", "created_at")}
            s.execute(stmt.on_conflict_do_update(index_elements=["name"], set_=changed))
            row = s.get(m.JobType, job.name, populate_existing=True)
            assert row is not None
            record = _job_type(row)
        with self._job_lock:
            self._job_generation += 1
            self._job_types.pop(job.name, None)
        return record

    def list_job_types(self) -> list[JobTypeRecord]:
        with self.db.read() as s:
            return [_job_type(r) for r in s.scalars(sa.select(m.JobType).order_by(m.JobType.name))]

    # -- recording runs ----------------------------------------------------------------

    def record(self, req: RecordRequest) -> Recorded:
        """Record the run of ``req.schedule_id`` at ``req.fire_time`` (state PENDING, or
        MISSED when ``req.missed``); when it already exists, return it with
        ``created=False``.

        Raises ``ScheduleNotFound`` and ``StaleFencingToken``; then nothing is written.
        """
        recorded: Recorded = _only(self._rounds(lambda s: self._record_all(s, [req])))
        return recorded

    def record_runs(self, reqs: Sequence[RecordRequest]) -> list[Recorded | CronwaveError]:
        """``record`` for every item of ``reqs`` in one transaction, as if recorded one
        after the other in that order: each item's answer, or in its place the
        ``ScheduleNotFound`` or ``StaleFencingToken`` it was refused with (that item
        wrote nothing; the others are written). Raises ``InvalidArgument`` naming the
        item (``runs[3].schedule_id``) for a malformed one; then nothing is written."""
        _check_batch("runs", reqs)
        for i, req in enumerate(reqs):
            if not req.schedule_id:
                raise InvalidArgument(f"runs[{i}].schedule_id", "required")
        if not reqs:
            return []
        results: list[Recorded | CronwaveError] = self._rounds(lambda s: self._record_all(s, reqs))
        return results

    def _record_all(
        self, s: Session, reqs: Sequence[RecordRequest]
    ) -> list[Recorded | CronwaveError]:
        now = self.clock()
        ids = sorted({req.schedule_id for req in reqs})
        schedules = {row.id: row for row in s.execute(_LIVE_SCHEDULES, {"ids": ids})}
        fences = _Fences(s, now)
        fences.lock(
            {r.fencing_scope for r in reqs if r.fencing_token > 0 and r.schedule_id in schedules}
        )
        results: list[Recorded | CronwaveError | None] = [None] * len(reqs)
        new: dict[tuple[str, datetime], dict[str, Any]] = {}  # the run each slot would get
        first: dict[tuple[str, datetime], int] = {}  # the request that asked for it first
        for i, req in enumerate(reqs):
            schedule = schedules.get(req.schedule_id)
            if schedule is None:
                results[i] = ScheduleNotFound(req.schedule_id)
                continue
            if req.fencing_token > 0:
                stale = fences.check(req.fencing_scope, req.fencing_token)
                if stale is not None:
                    results[i] = stale
                    continue
            slot = (req.schedule_id, req.fire_time)
            if slot not in new:
                job = self._job(s, schedule.job_type)
                new[slot] = _new_run(schedule, req, job.queue if job else DEFAULT_QUEUE, now)
                first[slot] = i
        fences.save()
        inserted = self._insert_runs(s, list(new.values()))
        existing = self._runs_at(
            s, [slot for slot, v in new.items() if v["run_id"] not in inserted]
        )
        events = []
        for slot, i in first.items():
            if new[slot]["run_id"] in inserted:
                kind, detail = _recorded_event(reqs[i])
                events.append(_event_values(new[slot], kind, detail, now))
                if reqs[i].enqueue and not reqs[i].missed:
                    events.append(_event_values(new[slot], "enqueued", new[slot]["queue"], now))
        _insert_events(s, events)
        for i, req in enumerate(reqs):
            if results[i] is not None:
                continue
            slot = (req.schedule_id, req.fire_time)
            if new[slot]["run_id"] in inserted:
                results[i] = Recorded(_run_of(new[slot]), created=first[slot] == i)
            elif slot in existing:
                results[i] = Recorded(existing[slot], created=False)
            else:
                raise _Lost  # the slot's row is not visible yet: decide again
        return [r for r in results if r is not None]

    def _insert_runs(self, s: Session, rows: list[dict[str, Any]]) -> set[str]:
        """INSERT the runs whose slot is free; the run ids that went in."""
        if not rows:
            return set()
        # One order for every batch, so concurrent batches that share slots wait for
        # each other on the unique index instead of deadlocking.
        rows.sort(key=lambda v: (v["schedule_id"], v["fire_time"]))
        bulk = _recordset(s, _RUNS)
        if bulk is not None:
            inserted = bulk.insert(
                s,
                rows,
                list(rows[0]),
                suffix="ON CONFLICT (schedule_id, fire_time) DO NOTHING RETURNING run_id",
            )
            return set(inserted.scalars())
        if len(rows) == 1:
            return set(s.execute(self._insert_run.returning(_RUNS.c.run_id), rows[0]).scalars())
        # SQLite: an executemany with no RETURNING is the cheapest bulk INSERT for the
        # driver (one statement, prepared once); the run ids that went in are read back.
        s.execute(self._insert_run, rows)
        return set(s.scalars(_RUN_IDS, {"ids": [v["run_id"] for v in rows]}))

    def _runs_at(self, s: Session, slots: list[tuple[str, datetime]]) -> dict[Any, RunRecord]:
        """The runs of these (schedule, fire time) slots that exist."""
        if not slots:
            return {}
        query = sa.select(_RUNS).where(sa.tuple_(_RUNS.c.schedule_id, _RUNS.c.fire_time).in_(slots))
        return {(row.schedule_id, row.fire_time): _run_of(row._mapping) for row in s.execute(query)}

    def _fence(self, s: Session, scope: str, token: int, now: datetime) -> None:
        """Refuse ``token`` if the store never issued it for ``scope`` or it is older
        than the newest seen (``_Fences``); remember it if newer.
        Runs inside the caller's write transaction, under the scope's row lock
        (PostgreSQL) or the database write lock (SQLite)."""
        fences = _Fences(s, now)
        fences.lock({scope})
        stale = fences.check(scope, token)
        if stale is not None:
            raise stale
        fences.save()

    def fencing_token(self, scope: str) -> int:
        """The newest fencing token seen for ``scope`` (0 when none)."""
        with self.db.read() as s:
            token = s.scalar(sa.select(m.Fencing.token).where(m.Fencing.scope == scope))
            return int(token or 0)

    def issue_fencing_token(self, scope: str) -> int:
        """A new fencing token for ``scope``: one more than every token issued for it
        before, durable before it is returned. Leader-election calls it when it grants
        the scope's lease, so tokens strictly increase across Redis restarts and data
        loss with no floor to ask for; each call moves the counter by exactly one, so
        no caller can drive it to overflow."""
        return int(self._rounds(lambda s: self._issue(s, scope)))

    def _issue(self, s: Session, scope: str) -> int:
        insert: Any = postgresql.insert if self.db.dialect == "postgresql" else sqlite.insert
        stmt = insert(m.Fencing).values(scope=scope, token=0, issued=1, updated_at=self.clock())
        stmt = stmt.on_conflict_do_update(
            index_elements=["scope"],
            set_={"issued": m.Fencing.issued + 1, "updated_at": stmt.excluded.updated_at},
        ).returning(m.Fencing.issued)
        return int(s.execute(stmt).scalar_one())

    # -- reading runs ------------------------------------------------------------------

    def get_run(self, run_id: str) -> RunRecord:
        with self.db.read() as s:
            return _run(_get_run(s, run_id))

    def get_runs(self, run_ids: Sequence[str]) -> list[RunRecord]:
        """The runs named, as they are now, in no particular order; a run the store does
        not have is left out."""
        _check_batch("run_ids", run_ids)
        ids = sorted({run_id for run_id in run_ids if run_id})
        if not ids:
            return []
        with self.db.read() as s:
            return [_run_of(row._mapping) for row in s.execute(_RUNS_NAMED, {"ids": ids})]

    def list_runs(
        self,
        schedule_id: str = "",
        states: Iterable[RunState] = (),
        limit: int = 0,
        schedule_ids: Sequence[str] = (),
    ) -> list[RunRecord]:
        """Newest first (by fire time, then run id); ``limit`` 0 means 50. The runs of
        ``schedule_id``, or of any of ``schedule_ids`` (at most 1,000), or of all."""
        if limit < 0:
            raise InvalidArgument("limit", f"must not be negative (0 means {DEFAULT_RUN_LIMIT})")
        if schedule_id and schedule_ids:
            raise InvalidArgument("schedule_ids", "name schedules here or in schedule_id, not both")
        _check_batch("schedule_ids", schedule_ids)
        query = sa.select(m.Run).order_by(m.Run.fire_time.desc(), m.Run.run_id.desc())
        if schedule_id:
            query = query.where(m.Run.schedule_id == schedule_id)
        if schedule_ids:
            query = query.where(m.Run.schedule_id.in_(sorted(set(schedule_ids))))
        wanted = [state.value for state in states]
        if wanted:
            query = query.where(m.Run.state.in_(wanted))
        with self.db.read() as s:
            rows = s.scalars(query.limit(limit or DEFAULT_RUN_LIMIT))
            return [_run(r) for r in rows]

    def list_run_events(self, run_id: str) -> list[RunEventRecord]:
        """The run's history, oldest first."""
        with self.db.read() as s:
            _get_run(s, run_id)
            query = sa.select(m.RunEvent).where(m.RunEvent.run_id == run_id)
            return [_run_event(e) for e in s.scalars(query.order_by(m.RunEvent.seq))]

    def append_run_event(self, run_id: str, kind: str, detail: str) -> RunEventRecord:
        if not kind:
            raise InvalidArgument("kind", "required, e.g. enqueued")
        with self.db.write() as s:
            event: RunEventRecord = _only(self._append_all(s, [EventRequest(run_id, kind, detail)]))
            return event

    def append_run_events(
        self, events: Sequence[EventRequest]
    ) -> list[RunEventRecord | CronwaveError]:
        """Append every event in one transaction, in order: each item's event, or in its
        place the ``RunNotFound`` it was refused with. Raises ``InvalidArgument``
        naming the item (``events[2].kind``) for a malformed one; then nothing is
        written."""
        _check_batch("events", events)
        for i, event in enumerate(events):
            if not event.run_id:
                raise InvalidArgument(f"events[{i}].run_id", "required")
            if not event.kind:
                raise InvalidArgument(f"events[{i}].kind", "required, e.g. enqueued")
        if not events:
            return []
        with self.db.write() as s:
            return self._append_all(s, events)

    def _append_all(
        self, s: Session, events: Sequence[EventRequest]
    ) -> list[RunEventRecord | CronwaveError]:
        now = self.clock()
        ids = sorted({event.run_id for event in events if event.run_id})
        attempts = dict(s.execute(_RUN_ATTEMPTS, {"ids": ids}).tuples().all())
        rows = [
            {
                "run_id": event.run_id,
                "kind": event.kind,
                "at": now,
                "detail": event.detail,
                "attempt": attempts[event.run_id],
            }
            for event in events
            if event.run_id in attempts
        ]
        seqs = iter(_insert_events(s, rows, returning=True))
        results: list[RunEventRecord | CronwaveError] = []
        for event in events:
            if event.run_id not in attempts:
                results.append(RunNotFound(event.run_id))
                continue
            results.append(
                RunEventRecord(
                    seq=next(seqs),
                    run_id=event.run_id,
                    kind=event.kind,
                    at=now,
                    detail=event.detail,
                    attempt=attempts[event.run_id],
                )
            )
        return results

    # -- attempts ----------------------------------------------------------------------

    def claim_run(self, run_id: str, worker_id: str) -> Claim:
        """Start a new attempt of the run for ``worker_id`` unless it is terminal or a
        live attempt holds it (its heartbeat younger than the job's heartbeat timeout).
        Of concurrent claims exactly one wins."""
        if not worker_id:
            raise InvalidArgument("worker_id", "required: the claiming worker's id")
        claim: Claim = _only(
            self._rounds(lambda s: self._claim_all(s, [ClaimRequest(run_id, worker_id)]))
        )
        return claim

    def claim_runs(self, claims: Sequence[ClaimRequest]) -> list[Claim | CronwaveError]:
        """``claim_run`` for every item in one transaction, as if claimed one after the
        other in that order (a run claimed twice is claimed once): each item's claim,
        or in its place the ``RunNotFound`` it was refused with. Raises
        ``InvalidArgument`` naming the item (``claims[0].worker_id``) for a malformed
        one; then nothing is written."""
        _check_batch("claims", claims)
        for i, claim in enumerate(claims):
            if not claim.run_id:
                raise InvalidArgument(f"claims[{i}].run_id", "required")
            if not claim.worker_id:
                raise InvalidArgument(
                    f"claims[{i}].worker_id", "required: the claiming worker's id"
                )
        if not claims:
            return []
        results: list[Claim | CronwaveError] = self._rounds(lambda s: self._claim_all(s, claims))
        return results

    def _claim_all(self, s: Session, claims: Sequence[ClaimRequest]) -> list[Claim | CronwaveError]:
        now = self.clock()
        runs = _lock_runs(s, {claim.run_id for claim in claims})
        before: dict[str, tuple[str, str]] = {}
        events: list[dict[str, Any]] = []
        results: list[Claim | CronwaveError] = []
        for claim in claims:
            run = runs.get(claim.run_id)
            if run is None:
                results.append(RunNotFound(claim.run_id))
                continue
            if not self._claimable(s, run, now):
                results.append(Claim(_run_of(run), claimed=False, attempt_token=""))
                continue
            before.setdefault(run["run_id"], (run["state"], run["attempt_token"]))
            run.update(
                state=RunState.RUNNING.value,
                attempt=run["attempt"] + 1,
                attempt_token=new_attempt_token(),
                started_at=run["started_at"] or now,
                heartbeat_at=now,
                worker_id=claim.worker_id,
                next_sweep_at=None,
                requeues=0,
            )
            events.append(_event_values(run, "claimed", claim.worker_id, now))
            results.append(Claim(_run_of(run), claimed=True, attempt_token=run["attempt_token"]))
        _update_runs(s, _CLAIM_UPDATE, runs, before, _CLAIM_COLUMNS)
        _insert_events(s, events)
        return results

    def _claimable(self, s: Session, run: dict[str, Any], now: datetime) -> bool:
        """Whether a claim may start a new attempt: not terminal, not a retry whose
        delay has not passed (an early duplicate message), not held by a live attempt."""
        state = RunState(run["state"])
        if state.terminal:
            return False
        if state is RunState.PENDING and run["due_at"] is not None and run["due_at"] > now:
            return False
        if state is RunState.RUNNING:
            alive_since = run["heartbeat_at"] or run["started_at"]
            if alive_since is not None and now - alive_since < self._heartbeat_timeout(
                s, run["job_type"]
            ):
                return False
        return True

    def heartbeat(self, run_id: str, attempt_token: str, checkpoint_json: str) -> datetime:
        """Prove the attempt is alive; returns the deadline of its next heartbeat.
        Raises ``StaleAttempt`` for a superseded attempt, ``FailedPrecondition`` when
        the run is not running."""
        return self._rounds(lambda s: self._heartbeat(s, run_id, attempt_token, checkpoint_json))

    def _heartbeat(self, s: Session, run_id: str, token: str, checkpoint: str) -> datetime:
        now = self.clock()
        row = _get_run(s, run_id)
        state = RunState(row.state)
        if not same_token(token, row.attempt_token):
            raise StaleAttempt(run_id)
        if state.terminal:
            raise FailedPrecondition(
                f"run is already {state.value}: run '{run_id}' has finished; stop working on it"
            )
        if state is not RunState.RUNNING:
            raise FailedPrecondition(
                f"run is {state.value}: run '{run_id}' has no running attempt; claim it first"
            )
        values: dict[str, Any] = {"heartbeat_at": now}
        if checkpoint:
            values["checkpoint_json"] = checkpoint
        self._conditional_update(s, row, **values)
        return now + self._heartbeat_timeout(s, row.job_type)

    def complete_run(
        self,
        run_id: str,
        attempt_token: str,
        state: RunState,
        error: str = "",
        result_json: str = "",
        retry_after: timedelta = timedelta(0),
        body_started_at: datetime | None = None,
    ) -> Completion:
        """Finish the run in ``state``. A run that is already terminal is returned
        unchanged (``changed=False``): a repeated completion changes nothing. A FAILED
        completion with ``retry_after`` > 0 puts the run back to PENDING instead. With
        ``body_started_at``, a completion that changes the run also records the run
        event ``started`` (when the job body began, and its fire lateness)."""
        req = CompletionRequest(
            run_id, attempt_token, state, error, result_json, retry_after, body_started_at
        )
        _check_completion(req, "")
        completion: Completion = _only(self._rounds(lambda s: self._complete_all(s, [req])))
        return completion

    def complete_runs(
        self, completions: Sequence[CompletionRequest]
    ) -> list[Completion | CronwaveError]:
        """``complete_run`` for every item in one transaction, as if completed one after
        the other in that order (a repeated completion changes nothing): each item's
        completion, or in its place the ``RunNotFound`` or ``StaleAttempt`` it was
        refused with. Raises ``InvalidArgument`` naming the item
        (``completions[1].state``) for a malformed one; then nothing is written."""
        _check_batch("completions", completions)
        for i, req in enumerate(completions):
            if not req.run_id:
                raise InvalidArgument(f"completions[{i}].run_id", "required")
            _check_completion(req, f"completions[{i}].")
        if not completions:
            return []
        results: list[Completion | CronwaveError] = self._rounds(
            lambda s: self._complete_all(s, completions)
        )
        return results

    def _complete_all(
        self, s: Session, completions: Sequence[CompletionRequest]
    ) -> list[Completion | CronwaveError]:
        runs = _lock_runs(s, {req.run_id for req in completions})
        # Stamped once the rows are locked: a run stays in flight to every reader until
        # this commits, so its finished_at must not predate a wait for the lock.
        now = self.clock()
        before: dict[str, tuple[str, str]] = {}
        events: list[dict[str, Any]] = []
        results: list[Completion | CronwaveError] = []
        for req in completions:
            run = runs.get(req.run_id)
            if run is None:
                results.append(RunNotFound(req.run_id))
                continue
            if RunState(run["state"]).terminal:
                results.append(Completion(_run_of(run), changed=False))
                continue
            if not same_token(req.attempt_token, run["attempt_token"]):
                results.append(StaleAttempt(req.run_id))
                continue
            before.setdefault(run["run_id"], (run["state"], run["attempt_token"]))
            if req.body_started_at is not None:
                detail = _body_started(req.body_started_at, run["fire_time"])
                events.append(_event_values(run, "started", detail, now))
            if req.retry_after > timedelta(0):
                run.update(
                    state=RunState.PENDING.value,
                    error=req.error,
                    result_json=req.result_json,
                    due_at=now + req.retry_after,
                )
                detail = f"retry_after={req.retry_after.total_seconds():g}s"
                if req.error:
                    detail = f"{detail} error={req.error}"
                events.append(_event_values(run, "retry_scheduled", detail, now))
            else:
                run.update(
                    state=req.state.value,
                    finished_at=now,
                    error=req.error,
                    result_json=req.result_json,
                )
                events.append(_event_values(run, req.state.value, req.error, now))
            results.append(Completion(_run_of(run), changed=True))
        _update_runs(s, _COMPLETE_UPDATE, runs, before, _COMPLETE_COLUMNS)
        _insert_events(s, events)
        return results

    def release_run(
        self, run_id: str, attempt_token: str, checkpoint_json: str, reason: str
    ) -> tuple[RunRecord, bool]:
        """Hand the current attempt back: RUNNING -> PENDING, due now, with the event
        "released" (detail ``reason``) and ``checkpoint_json`` kept when given, so the
        next claim resumes the run at once rather than after a heartbeat lapse. The
        attempt's token stops being valid: a later write from it is refused. A run
        already terminal is returned unchanged (``False``). Raises ``StaleAttempt``
        for any token but the current attempt's, ``FailedPrecondition`` when the run
        is not running."""
        return self._rounds(
            lambda s: self._release(s, run_id, attempt_token, checkpoint_json, reason)
        )

    def _release(
        self, s: Session, run_id: str, token: str, checkpoint: str, reason: str
    ) -> tuple[RunRecord, bool]:
        now = self.clock()
        row = _get_run(s, run_id)
        state = RunState(row.state)
        if state.terminal:
            return _run(row), False
        if not same_token(token, row.attempt_token):
            raise StaleAttempt(run_id)
        if state is not RunState.RUNNING:
            raise FailedPrecondition(
                f"run is {state.value}: run '{run_id}' has no running attempt to release"
            )
        values: dict[str, Any] = {
            "state": RunState.PENDING.value,
            "attempt_token": new_attempt_token(),  # nobody holds it: the old one is void
            "due_at": now,
            "heartbeat_at": None,
            "next_sweep_at": None,
        }
        if checkpoint:
            values["checkpoint_json"] = checkpoint
        self._conditional_update(s, row, **values)
        _event(s, row, "released", now, reason[:200])
        return _run(row), True

    def cancel_run(self, run_id: str, reason: str) -> tuple[RunRecord, bool]:
        """Cancel a run that has not finished, whichever attempt holds it (an overlap
        policy, an operator): state CANCELLED with ``reason`` as its error. The
        attempt that held it is refused at its next heartbeat or completion, and so
        stops. A run already terminal is returned unchanged (``False``)."""
        return self._rounds(lambda s: self._cancel(s, run_id, reason))

    def _cancel(self, s: Session, run_id: str, reason: str) -> tuple[RunRecord, bool]:
        now = self.clock()
        row = _get_run(s, run_id)
        if RunState(row.state).terminal:
            return _run(row), False
        self._conditional_update(
            s, row, state=RunState.CANCELLED.value, finished_at=now, error=reason
        )
        _event(s, row, RunState.CANCELLED.value, now, reason)
        return _run(row), True

    def _heartbeat_timeout(self, s: Session, job_type: str) -> timedelta:
        job = self._job(s, job_type)
        return job.heartbeat_timeout if job else DEFAULT_HEARTBEAT_TIMEOUT

    def _job(self, s: Session, name: str) -> JobTypeRecord | None:
        """The job type ``name`` (None when unknown), from the in-process cache when
        fresh. A change registered through this process is seen at once; one
        registered through another replica within ``JOB_TYPE_TTL``."""
        cached = self._job_types.get(name)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        generation = self._job_generation
        row = s.get(m.JobType, name)
        if row is None:
            return None
        record = _job_type(row)
        with self._job_lock:
            # A registration that committed while we read may be newer than our row.
            if generation == self._job_generation:
                self._job_types[name] = (time.monotonic() + JOB_TYPE_TTL.total_seconds(), record)
        return record

    def _conditional_update(self, s: Session, row: m.Run, **values: Any) -> None:
        """UPDATE the run only if its state and attempt token are still what ``row``
        says; otherwise raise ``_Lost`` (the caller's transaction rolls back). ``row``
        then holds the new values, as the database does, with no read."""
        result: Any = s.execute(
            sa.update(m.Run)
            .where(
                m.Run.run_id == row.run_id,
                m.Run.state == row.state,
                m.Run.attempt_token == row.attempt_token,
            )
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        if result.rowcount != 1:
            raise _Lost
        for name, value in values.items():
            set_committed_value(row, name, value)

    def _rounds(self, work: Callable[[Session], Any]) -> Any:
        """Run ``work`` in a write transaction, again from the start when it lost a
        race, so it decides on the winner's result."""
        for _ in range(_MAX_ROUNDS):
            try:
                with self.db.write() as s:
                    return work(s)
            except _Lost:
                continue
        raise FailedPrecondition("run_id: the run keeps changing under concurrent writers; retry")

    # -- stalled runs and dead letters -----------------------------------------------

    def requeue_stalled_runs(self, pending_for: timedelta, limit: int = 0) -> list[StalledRun]:
        """The runs that need a new message, each marked requeued (a "requeued" event,
        and ``next_sweep_at``) in this one transaction, so concurrent sweepers split them.

        PENDING runs qualify when their message is overdue: due and fired more than
        ``pending_for`` ago (a retry counts from the end of its delay), or replayed and
        never sent. RUNNING runs qualify when their heartbeat is older than their job
        type's heartbeat timeout. A run re-sent and still not claimed qualifies again
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
        limit = limit or DEFAULT_STALLED_LIMIT
        now = self.clock()
        cut = now - pending_for
        stalled: list[StalledRun] = []
        with self.db.write() as s:
            never_sent = sa.and_(
                m.Run.next_sweep_at.is_(None),
                sa.or_(
                    m.Run.due_at.is_(None),
                    sa.and_(m.Run.due_at < cut, m.Run.fire_time < cut),
                ),
            )
            pending = s.scalars(
                sa.select(m.Run)
                .where(
                    m.Run.state == RunState.PENDING.value,
                    sa.or_(never_sent, m.Run.next_sweep_at < now),
                )
                .order_by(
                    sa.nulls_first(sa.func.coalesce(m.Run.next_sweep_at, m.Run.due_at).asc()),
                    m.Run.run_id,
                )
                .limit(limit)
                .with_for_update(skip_locked=True)
            ).all()
            for row in pending:
                reason = StallReason.NOT_PICKED_UP
                if row.due_at is None and row.next_sweep_at is None:
                    reason = StallReason.REPLAYED
                stalled.append(self._requeued(s, row, reason, now, pending_for, reason.value))
            if len(stalled) < limit:
                stalled.extend(self._lapsed(s, now, pending_for, limit - len(stalled)))
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
        ``lost_at`` is not looked at: its message went to the queue as it is now. RUNNING
        runs need no message (their worker holds them; a dead worker's heartbeat lapses).
        A run whose message survived gets a second one, which its claim refuses.
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
                query.order_by(m.Run.run_id).limit(limit).with_for_update(skip_locked=True)
            ).all()
            for row in rows:
                if row.due_at is not None and row.due_at > now:
                    row.next_sweep_at = row.due_at
                    s.flush()
                    continue
                reason = StallReason.QUEUE_LOST
                runs.append(self._requeued(s, row, reason, now, pending_for, reason.value))
        next_after = rows[-1].run_id if len(rows) == limit else ""
        return LostRuns(runs, next_after)

    def _lapsed(
        self, s: Session, now: datetime, pending_for: timedelta, limit: int
    ) -> list[StalledRun]:
        timeouts = dict(s.execute(sa.select(m.JobType.name, m.JobType.heartbeat_timeout)).all())
        shortest = min(timeouts.values(), default=DEFAULT_HEARTBEAT_TIMEOUT)
        shortest = min(shortest, DEFAULT_HEARTBEAT_TIMEOUT)
        alive_since = sa.func.coalesce(m.Run.heartbeat_at, m.Run.started_at)
        # Candidates only: each run's own timeout is applied below.
        candidates = s.scalars(
            sa.select(m.Run)
            .where(
                m.Run.state == RunState.RUNNING.value,
                alive_since < now - shortest,
                sa.or_(m.Run.next_sweep_at.is_(None), m.Run.next_sweep_at < now),
            )
            .order_by(alive_since, m.Run.run_id)
            .limit(limit * 4)
            .with_for_update(skip_locked=True)
        ).all()
        found: list[StalledRun] = []
        for row in candidates:
            last = row.heartbeat_at or row.started_at
            timeout = timeouts.get(row.job_type, DEFAULT_HEARTBEAT_TIMEOUT)
            if last is None or now - last < timeout:
                continue
            detail = (
                f"{StallReason.HEARTBEAT_LAPSED.value}: no heartbeat from {row.worker_id} "
                f"since {iso(last)} (timeout {timeout.total_seconds():g}s)"
            )
            found.append(
                self._requeued(s, row, StallReason.HEARTBEAT_LAPSED, now, pending_for, detail)
            )
            if len(found) >= limit:
                break
        return found

    def _requeued(
        self,
        s: Session,
        row: m.Run,
        reason: StallReason,
        now: datetime,
        pending_for: timedelta,
        detail: str,
    ) -> StalledRun:
        wait = max(pending_for, _MIN_RESEND) * 2 ** min(row.requeues, _MAX_RESEND_DOUBLINGS)
        row.next_sweep_at = now + wait
        row.requeues += 1
        s.flush()
        _event(s, row, "requeued", now, detail)
        return StalledRun(_run(row), reason)

    def dead_letter(self, req: DeadLetterRequest) -> DeadLettered:
        """Put the run on the dead-letter list (state DEAD_LETTERED) with ``req.reason``
        and ``req.error``; a message naming no known run is listed on its own.

        An attempt that gives up passes its token (``StaleAttempt`` if superseded); a
        message refused before any claim passes 0 and only dead-letters a PENDING run.
        A terminal run, or one a live attempt holds, is left alone (``changed=False``).
        """
        return self._rounds(lambda s: self._dead_letter(s, req))

    def _dead_letter(self, s: Session, req: DeadLetterRequest) -> DeadLettered:
        now = self.clock()
        row = s.get(m.Run, req.run_id, populate_existing=True) if req.run_id else None
        if row is None:
            letter = _new_letter(
                s, req, now, error=req.error, job_type="", attempt=0, queue=req.queue
            )
            return DeadLettered(letter, None, changed=True)
        state = RunState(row.state)
        if state.terminal:
            return DeadLettered(None, _run(row), changed=False)
        if req.attempt_token:
            if not same_token(req.attempt_token, row.attempt_token):
                raise StaleAttempt(row.run_id)
            if state is not RunState.RUNNING:
                raise FailedPrecondition(
                    f"run is {state.value}: run '{row.run_id}' has no running attempt to "
                    "give up; pass no attempt_token for a message refused before its claim"
                )
        elif state is RunState.RUNNING:
            return DeadLettered(None, _run(row), changed=False)
        error = req.error or row.error
        self._conditional_update(
            s, row, state=RunState.DEAD_LETTERED.value, finished_at=now, error=error
        )
        letter = _new_letter(
            s,
            req,
            now,
            error=error,
            job_type=row.job_type,
            attempt=row.attempt,
            queue=req.queue or row.queue,
        )
        _event(
            s, row, "dead_lettered", now, f"{req.reason.value}: {error}" if error else req.reason
        )
        return DeadLettered(letter, _run(row), changed=True)

    def list_dead_letters(
        self, limit: int = 0, include_replayed: bool = False
    ) -> list[DeadLetterRecord]:
        """Newest first; ``limit`` 0 means 50; replayed entries only when asked."""
        if limit < 0:
            raise InvalidArgument(
                "limit", f"must not be negative (0 means {DEFAULT_DEAD_LETTER_LIMIT})"
            )
        query = sa.select(m.DeadLetter).order_by(m.DeadLetter.id.desc())
        if not include_replayed:
            query = query.where(m.DeadLetter.replayed_at.is_(None))
        with self.db.read() as s:
            rows = s.scalars(query.limit(limit or DEFAULT_DEAD_LETTER_LIMIT))
            return [_dead_letter_record(r) for r in rows]

    def replay_dead_letter(self, run_id: str) -> RunRecord:
        """A DEAD_LETTERED run becomes PENDING with no message (the sweeper sends one);
        its next claim is a new attempt with a fresh retry budget. Raises
        ``FailedPrecondition`` for a run in any other state."""
        return self._rounds(lambda s: self._replay(s, run_id))

    def _replay(self, s: Session, run_id: str) -> RunRecord:
        now = self.clock()
        row = _get_run(s, run_id)
        if row.state != RunState.DEAD_LETTERED.value:
            raise FailedPrecondition(
                f"run is {row.state}: run '{run_id}' is not dead-lettered; only runs on "
                "the dead-letter list (`cronwave dlq list`) can be replayed"
            )
        self._conditional_update(
            s,
            row,
            state=RunState.PENDING.value,
            finished_at=None,
            due_at=None,
            next_sweep_at=None,
            requeues=0,
        )
        s.execute(
            sa.update(m.DeadLetter)
            .where(m.DeadLetter.run_id == run_id, m.DeadLetter.replayed_at.is_(None))
            .values(replayed_at=now)
        )
        _event(s, row, "replayed", now, "")
        return _run(row)


def _new_letter(
    s: Session,
    req: DeadLetterRequest,
    now: datetime,
    *,
    error: str,
    job_type: str,
    attempt: int,
    queue: str,
) -> DeadLetterRecord:
    row = m.DeadLetter(
        run_id=req.run_id,
        reason=req.reason.value,
        error=error,
        queue=queue,
        job_type=job_type,
        attempt=attempt,
        message_json=req.message_json,
        created_at=now,
        replayed_at=None,
    )
    s.add(row)
    s.flush()
    return _dead_letter_record(row)


def _dead_letter_record(row: m.DeadLetter) -> DeadLetterRecord:
    return DeadLetterRecord(
        id=row.id,
        run_id=row.run_id,
        reason=row.reason,
        error=row.error,
        queue=row.queue,
        job_type=row.job_type,
        attempt=row.attempt,
        message_json=row.message_json,
        created_at=row.created_at,
        replayed_at=row.replayed_at,
    )


# -- batches -----------------------------------------------------------------------------


def _only(results: Sequence[T | CronwaveError]) -> T:
    """The answer of a batch of one; its refusal raised."""
    (result,) = results
    if isinstance(result, CronwaveError):
        raise result
    return result


def _check_batch(field: str, items: Sized) -> None:
    if len(items) > MAX_BATCH:
        raise InvalidArgument(field, f"at most {MAX_BATCH} per call, got {len(items)}")


def _check_completion(req: CompletionRequest, prefix: str) -> None:
    if req.state not in COMPLETIONS:
        raise InvalidArgument(
            f"{prefix}state", "must be one of succeeded, failed, timed_out or cancelled"
        )
    if req.retry_after < timedelta(0):
        raise InvalidArgument(f"{prefix}retry_after", "must not be negative")
    if req.retry_after > timedelta(0) and req.state is not RunState.FAILED:
        raise InvalidArgument(f"{prefix}retry_after", "only a FAILED completion can be retried")


class _Fences:
    """The fencing tokens of each scope a transaction writes under: read once under
    the scopes' row locks (PostgreSQL; SQLite holds the database write lock), checked
    per write in memory, and the newest seen saved once when a newer one was taken.

    A write's token must have been issued by this store (``issue_fencing_token``,
    which leader-election calls when it grants a lease) and not be older than the
    newest seen: ``newest seen <= token <= newest issued``. So no caller can make up
    a token, push the newest seen past what was issued (which would fence out every
    future leader), or name a scope no lease was ever granted for to skip the fence.
    """

    def __init__(self, s: Session, now: datetime) -> None:
        self.s = s
        self.now = now
        self.newest: dict[str, int] = {}
        self.stored: dict[str, int] = {}
        self.issued: dict[str, int] = {}

    def lock(self, scopes: set[str]) -> None:
        if not scopes:
            return
        ordered = sorted(scopes)  # one lock order for every transaction
        rows = self.s.execute(_LOCK_FENCES, {"ids": ordered}).tuples()
        for scope, token, issued in rows:
            self.stored[scope] = int(token)
            self.issued[scope] = int(issued)
        self.newest = dict(self.stored)

    def check(self, scope: str, token: int) -> CronwaveError | None:
        """Refuse ``token`` if the store never issued it for ``scope``, or if it is
        older than the newest seen (stored or accepted earlier in this transaction);
        otherwise it is the newest."""
        issued = self.issued.get(scope, 0)
        if token > issued:
            return UnissuedFencingToken(scope, token, scope_known=issued > 0)
        newest = self.newest[scope]
        if token < newest:
            return StaleFencingToken(scope, token, newest)
        self.newest[scope] = token
        return None

    def save(self) -> None:
        for scope, token in self.newest.items():
            if token > self.stored[scope]:
                self.s.execute(
                    sa.update(m.Fencing)
                    .where(m.Fencing.scope == scope)
                    .values(token=token, updated_at=self.now)
                )


def _lock_runs(s: Session, run_ids: set[str]) -> dict[str, dict[str, Any]]:
    """The runs named (those that exist), read under their row locks in run id order
    (PostgreSQL; SQLite holds the database write lock)."""
    ids = sorted(run_id for run_id in run_ids if run_id)
    return {row.run_id: dict(row._mapping) for row in s.execute(_LOCK_RUNS, {"ids": ids})}


def _update_runs(
    s: Session,
    stmt: sa.Update,
    runs: dict[str, dict[str, Any]],
    before: dict[str, tuple[str, str]],
    columns: tuple[str, ...],
) -> None:
    """Write ``columns`` of every run in ``before`` with ``stmt`` (``_update_of``), each
    only if its state and attempt token are still as read; otherwise raise ``_Lost``."""
    if not before:
        return
    params = [
        {
            "w_run_id": run_id,
            "w_state": state,
            "w_attempt_token": token,
            **{f"v_{name}": runs[run_id][name] for name in columns},
        }
        for run_id, (state, token) in before.items()
    ]
    bulk = _recordset(s, _RUNS) if len(params) > 1 else None
    if bulk is not None:
        updated = bulk.update(s, params, ("run_id", "state", "attempt_token"), columns)
    else:
        result: Any = s.execute(stmt, params[0] if len(params) == 1 else params)
        updated = result.rowcount
    if updated != len(params):
        raise _Lost


def _insert_events(s: Session, rows: list[dict[str, Any]], returning: bool = False) -> list[int]:
    """INSERT the run events in order; their sequence numbers when ``returning``."""
    if not rows:
        return []
    if not returning:
        bulk = _recordset(s, _EVENTS) if len(rows) > 1 else None
        if bulk is not None:
            bulk.insert(s, rows, _EVENT_COLUMNS)
        else:
            s.execute(sa.insert(_EVENTS), rows)
        return []
    stmt = sa.insert(_EVENTS).returning(_EVENTS.c.seq, sort_by_parameter_order=True)
    return [int(seq) for seq in s.execute(stmt, rows).scalars()]


_EVENT_COLUMNS = ("run_id", "kind", "at", "detail", "attempt")  # what _event_values gives
_RECORDSETS: dict[str, RecordSet] = {}


def _recordset(s: Session, table: sa.Table) -> RecordSet | None:
    """The one-statement batches of ``table`` on PostgreSQL; None on SQLite."""
    dialect = s.get_bind().dialect
    if dialect.name != "postgresql":
        return None
    bulk = _RECORDSETS.get(table.name)
    if bulk is None:
        bulk = _RECORDSETS.setdefault(table.name, RecordSet(table, dialect))
    return bulk


def _event_values(run: Mapping[str, Any], kind: str, detail: str, at: datetime) -> dict[str, Any]:
    return {
        "run_id": run["run_id"],
        "kind": kind,
        "at": at,
        "detail": detail,
        "attempt": run["attempt"],
    }


def _new_run(schedule: Any, req: RecordRequest, queue: str, now: datetime) -> dict[str, Any]:
    """The row a recorded run starts as (``schedule``: its id, job type and payload)."""
    missed = req.missed
    return {
        "run_id": new_run_id(),
        "schedule_id": schedule.id,
        "fire_time": req.fire_time,
        "state": (RunState.MISSED if missed else RunState.PENDING).value,
        "trigger": req.trigger.value,
        "job_type": schedule.job_type,
        "payload_json": schedule.payload_json,
        "attempt": 0,
        "attempt_token": "",
        "fencing_token": req.fencing_token,
        "idempotency_key": req.idempotency_key or f"{schedule.id}@{iso(req.fire_time)}",
        "queue": req.queue or queue,
        "worker_id": "",
        "trace_id": req.trace_id,
        "created_at": now,
        "started_at": None,
        "finished_at": now if missed else None,
        "heartbeat_at": None,
        "error": req.reason if missed else "",
        "result_json": "",
        "checkpoint_json": "",
        "due_at": None if missed else now,
        "next_sweep_at": None,
        "requeues": 0,
    }


def _recorded_event(req: RecordRequest) -> tuple[str, str]:
    """The kind and detail of a new run's first event."""
    if req.missed:
        return "missed", req.reason
    return "recorded", f"trigger={req.trigger.value} fencing_token={req.fencing_token}"


def _body_started(body_started_at: datetime, fire_time: datetime) -> str:
    """The detail of the run event ``started``: when the job body began, and its fire
    lateness in milliseconds (both to the microsecond)."""
    lateness_us = (body_started_at - fire_time) // timedelta(microseconds=1)
    return (
        f"body_started_at={body_started_at.astimezone(UTC).isoformat(timespec='microseconds')} "
        f"lateness_ms={lateness_us / 1000:.3f}"
    )


# -- rows -> records ---------------------------------------------------------------------


def _live_schedule(s: Session, schedule_id: str) -> m.Schedule:
    row = s.get(m.Schedule, schedule_id) if schedule_id else None
    if row is None or row.deleted:
        raise ScheduleNotFound(schedule_id)
    return row


def _get_run(s: Session, run_id: str) -> m.Run:
    row = s.get(m.Run, run_id, populate_existing=True) if run_id else None
    if row is None:
        raise RunNotFound(run_id)
    return row


def _event(s: Session, run: m.Run, kind: str, at: datetime, detail: str) -> RunEventRecord:
    row = m.RunEvent(run_id=run.run_id, kind=kind, at=at, detail=detail, attempt=run.attempt)
    s.add(row)
    s.flush()
    return _run_event(row)


def _schedule(row: m.Schedule) -> ScheduleRecord:
    return ScheduleRecord(
        schedule_id=row.id,
        spec=spec_from_dict(row.spec),
        policy=policy_from_dict(row.policy),
        job_type=row.job_type,
        payload_json=row.payload_json,
        paused=row.paused,
        pause_note=row.pause_note,
        deleted=row.deleted,
        created_at=row.created_at,
        updated_at=row.updated_at,
        revision=row.revision,
    )


def _listed(row: m.Schedule, limits: Limits) -> ScheduleRecord:
    """``row`` as a listing shows it. A payload over ``limits.payload_bytes`` (a row
    written before the limit, or by hand) is left out; a row whose stored spec or
    policy this version cannot read is listed by its identity alone. Either way
    ``withheld`` says why, and the planner leaves the schedule out."""
    size = utf8_size(row.payload_json)
    try:
        spec, policy = spec_from_dict(row.spec), policy_from_dict(row.policy)
    except Exception as exc:  # a row that cannot be read must not fail the whole listing
        log.error(
            "schedule '%s' (revision %d) is listed without its content: its stored spec "
            "or policy cannot be read (%s)",
            row.id,
            row.revision,
            type(exc).__name__,
        )
        return _identity(row, "spec: the stored spec or policy cannot be read")
    withheld, payload = "", row.payload_json
    if size > limits.payload_bytes:
        withheld = f"payload_json: {size} bytes, over the limit of {limits.payload_bytes}"
        payload = ""
    return ScheduleRecord(
        schedule_id=row.id,
        spec=spec,
        policy=policy,
        job_type=row.job_type,
        payload_json=payload,
        paused=row.paused,
        pause_note=row.pause_note,
        deleted=row.deleted,
        created_at=row.created_at,
        updated_at=row.updated_at,
        revision=row.revision,
        withheld=withheld,
    )


def _identity(row: m.Schedule, withheld: str) -> ScheduleRecord:
    return ScheduleRecord(
        schedule_id=row.id,
        spec=Spec(),
        policy=Policy(),
        job_type=row.job_type,
        payload_json="",
        paused=row.paused,
        pause_note="",
        deleted=row.deleted,
        created_at=row.created_at,
        updated_at=row.updated_at,
        revision=row.revision,
        withheld=withheld,
        identity_only=True,
    )


def _job_type(row: m.JobType) -> JobTypeRecord:
    return JobTypeRecord(
        name=row.name,
        duration_limit=row.duration_limit,
        heartbeat_timeout=row.heartbeat_timeout,
        retry=RetrySettings(
            initial_interval=row.retry_initial_interval,
            backoff_coefficient=row.retry_backoff_coefficient,
            maximum_interval=row.retry_maximum_interval,
            maximum_attempts=row.retry_maximum_attempts,
            non_retryable_errors=tuple(row.retry_non_retryable_errors),
        ),
        queue=row.queue,
        priority=row.priority,
        financial=row.financial,
    )


def _run(row: m.Run) -> RunRecord:
    return RunRecord(
        run_id=row.run_id,
        schedule_id=row.schedule_id,
        fire_time=row.fire_time,
        state=RunState(row.state),
        trigger=Trigger(row.trigger),
        job_type=row.job_type,
        payload_json=row.payload_json,
        attempt=row.attempt,
        attempt_token=row.attempt_token,
        fencing_token=row.fencing_token,
        idempotency_key=row.idempotency_key,
        queue=row.queue,
        worker_id=row.worker_id,
        trace_id=row.trace_id,
        created_at=row.created_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        heartbeat_at=row.heartbeat_at,
        error=row.error,
        result_json=row.result_json,
        checkpoint_json=row.checkpoint_json,
        due_at=row.due_at,
    )


def _run_of(values: Mapping[Any, Any]) -> RunRecord:
    """A run from its column values (a row read with Core, or one about to be written)."""
    return RunRecord(
        run_id=values["run_id"],
        schedule_id=values["schedule_id"],
        fire_time=values["fire_time"],
        state=RunState(values["state"]),
        trigger=Trigger(values["trigger"]),
        job_type=values["job_type"],
        payload_json=values["payload_json"],
        attempt=values["attempt"],
        attempt_token=values["attempt_token"],
        fencing_token=values["fencing_token"],
        idempotency_key=values["idempotency_key"],
        queue=values["queue"],
        worker_id=values["worker_id"],
        trace_id=values["trace_id"],
        created_at=values["created_at"],
        started_at=values["started_at"],
        finished_at=values["finished_at"],
        heartbeat_at=values["heartbeat_at"],
        error=values["error"],
        result_json=values["result_json"],
        checkpoint_json=values["checkpoint_json"],
        due_at=values["due_at"],
    )


def _run_event(row: m.RunEvent) -> RunEventRecord:
    return RunEventRecord(
        seq=row.seq,
        run_id=row.run_id,
        kind=row.kind,
        at=row.at,
        detail=row.detail,
        attempt=row.attempt,
    )
