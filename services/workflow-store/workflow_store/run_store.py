"""Recording runs (one per schedule and fire time, fenced), reading them, and their
history."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from cronwave_core.errors import (
    CronwaveError,
    InvalidArgument,
    RunNotFound,
    ScheduleNotFound,
    SchedulePaused,
)
from cronwave_core.fields import require_run_id
from cronwave_core.security import identity
from workflow_store import models as m
from workflow_store import recent_runs, run_rules
from workflow_store.audit_store import AUDITED_TRIGGERS, Actor, append_recorded
from workflow_store.convert import iso
from workflow_store.fencing import Fencing
from workflow_store.ids import new_run_id
from workflow_store.job_types import JobTypes
from workflow_store.records import (
    DEFAULT_QUEUE,
    EventRequest,
    Recorded,
    RecordRequest,
    RunEventRecord,
    RunRecord,
    RunState,
)
from workflow_store.rows import (
    _get_run,
    _run,
    _run_event,
    _run_of,
)
from workflow_store.store_core import (
    _LIVE_SCHEDULES,
    _RUN_ATTEMPTS,
    _RUN_IDS,
    _RUNS,
    _RUNS_NAMED,
    DEFAULT_RUN_LIMIT,
    Clock,
    _check_batch,
    _event_values,
    _insert_events,
    _Lost,
    _only,
    _recordset,
    utc_now,
)
from workflow_store.unit_of_work import Transactions, UnitOfWork


class Runs:
    """Runs recorded and read, and their history of events. A recorded run is fenced
    (``Fencing``, in the record's unit of work) and queued as its job type says
    (``JobTypes``)."""

    def __init__(
        self,
        tx: Transactions,
        job_types: JobTypes,
        fencing: Fencing,
        clock: Clock = utc_now,
    ) -> None:
        self.tx = tx
        self.job_types = job_types
        self.fencing = fencing
        self.clock = clock
        insert: Any = postgresql.insert if tx.dialect == "postgresql" else sqlite.insert
        self._insert_run = insert(_RUNS).on_conflict_do_nothing(
            index_elements=["schedule_id", "fire_time"]
        )

    # -- recording runs ----------------------------------------------------------------

    def record(self, req: RecordRequest) -> Recorded:
        """Record the run of ``req.schedule_id`` at ``req.fire_time`` (state PENDING);
        when it already exists, return it with ``created=False``.

        Raises ``ScheduleNotFound`` and ``StaleFencingToken``; then nothing is written.
        """
        recorded: Recorded = _only(self.tx.rounds(lambda w: self._record_all(w, [req])))
        return recorded

    def record_runs(
        self, reqs: Sequence[RecordRequest], actor: Actor | None = None
    ) -> list[Recorded | CronwaveError]:
        """``record`` for every item of ``reqs`` in one transaction, as if recorded one
        after the other in that order: each item's answer, or in its place the
        ``ScheduleNotFound``, ``StaleFencingToken`` or paused schedule's refusal
        (``run_rules``) it was refused with (that item wrote nothing; the others are
        written). Raises ``InvalidArgument`` naming the item (``runs[3].schedule_id``)
        for a malformed one, and ``PermissionDenied`` for a manual run the caller
        records on nobody's behalf (``run_rules``); then nothing is written."""
        _check_batch("runs", reqs)
        for i, req in enumerate(reqs):
            if not req.schedule_id:
                raise InvalidArgument(f"runs[{i}].schedule_id", "required")
        run_rules.check_manual(reqs, identity.current())
        if not reqs:
            return []
        results: list[Recorded | CronwaveError] = self.tx.rounds(
            lambda w: self._record_all(w, reqs, actor)
        )
        return results

    def _record_all(
        self, w: UnitOfWork, reqs: Sequence[RecordRequest], actor: Actor | None = None
    ) -> list[Recorded | CronwaveError]:
        s = w.session
        now = self.clock()
        ids = sorted({req.schedule_id for req in reqs})
        schedules = {row.id: row for row in s.execute(_LIVE_SCHEDULES, {"ids": ids})}
        fences = self.fencing.fences(w, now)
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
            if schedule.paused and not run_rules.fires_while_paused(req.trigger):
                results[i] = SchedulePaused(req.schedule_id)
                continue
            if req.fencing_token > 0:
                stale = fences.check(req.fencing_scope, req.fencing_token, req.schedule_id)
                if stale is not None:
                    results[i] = stale
                    continue
            slot = (req.schedule_id, req.fire_time)
            if slot not in new:
                job = self.job_types.cached(w, schedule.job_type)
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
                detail = _recorded_detail(reqs[i])
                events.append(_event_values(new[slot], "recorded", detail, now))
                if reqs[i].enqueue:
                    events.append(_event_values(new[slot], "enqueued", new[slot]["queue"], now))
                if reqs[i].trigger in AUDITED_TRIGGERS:
                    append_recorded(s, actor, reqs[i], new[slot]["run_id"], self.clock())
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

    # -- reading runs ------------------------------------------------------------------

    def get_run(self, run_id: str) -> RunRecord:
        with self.tx.read() as s:
            return _run(_get_run(s, run_id))

    def get_runs(self, run_ids: Sequence[str]) -> list[RunRecord]:
        """The runs named, as they are now, in no particular order; a run the store does
        not have is left out."""
        _check_batch("run_ids", run_ids)
        ids = sorted({run_id for run_id in run_ids if run_id})
        if not ids:
            return []
        with self.tx.read() as s:
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
        with self.tx.read() as s:
            rows = s.scalars(query.limit(limit or DEFAULT_RUN_LIMIT))
            return [_run(r) for r in rows]

    def recent_runs(self, schedule_ids: Sequence[str], per_schedule: int) -> list[RunRecord]:
        """Each schedule's newest runs, lean (``workflow_store.recent_runs``)."""
        return recent_runs.recent_runs(self.tx.db, schedule_ids, per_schedule)

    def list_run_events(self, run_id: str) -> list[RunEventRecord]:
        """The run's history, oldest first."""
        with self.tx.read() as s:
            _get_run(s, run_id)
            query = sa.select(m.RunEvent).where(m.RunEvent.run_id == run_id)
            return [_run_event(e) for e in s.scalars(query.order_by(m.RunEvent.seq))]

    def append_run_events(
        self, events: Sequence[EventRequest]
    ) -> list[RunEventRecord | CronwaveError]:
        """Append every event in one transaction, in order: each item's event, or in its
        place the ``RunNotFound`` it was refused with. A ``started`` event of an attempt
        whose start is recorded already (by a heartbeat, a completion or an earlier
        item) is answered with that event and not written: one per attempt, whichever
        call's answer was lost. Raises ``InvalidArgument``
        naming the item (``events[2].kind``) for a malformed one; then nothing is
        written."""
        _check_batch("events", events)
        for i, event in enumerate(events):
            require_run_id(event.run_id, f"events[{i}].run_id")
            if not event.kind:
                raise InvalidArgument(f"events[{i}].kind", "required, e.g. enqueued")
        if not events:
            return []
        with self.tx.write() as w:
            return self._append_all(w.session, events)

    def _append_all(
        self, s: Session, events: Sequence[EventRequest]
    ) -> list[RunEventRecord | CronwaveError]:
        now = self.clock()
        ids = sorted({event.run_id for event in events if event.run_id})
        # An attempt's body began once: a start a heartbeat or a completion recorded
        # already (the worker appends one when it could not tell), or one earlier in
        # this batch, is answered with that event and not written again.
        starting = sorted({event.run_id for event in events if event.kind == STARTED})
        if starting:  # under the rows' locks, as a heartbeat recording a start holds them
            s.execute(_LOCK_STARTS, {"ids": starting})
        attempts = dict(s.execute(_RUN_ATTEMPTS, {"ids": ids}).tuples().all())
        # (run, attempt) -> its started event, or the index of this batch's answer
        first: dict[tuple[str, int], RunEventRecord | int] = dict(
            _started_events(s, starting) if starting else {}
        )
        answers: list[Any] = []  # a refusal, an event, a row to write, or an index
        rows: list[dict[str, Any]] = []
        written: list[int] = []
        for event in events:
            if event.run_id not in attempts:
                answers.append(RunNotFound(event.run_id))
                continue
            key = (event.run_id, attempts[event.run_id])
            if event.kind == STARTED and key in first:
                answers.append(first[key])
                continue
            if event.kind == STARTED:
                first[key] = len(answers)
            row = {"run_id": key[0], "kind": event.kind, "at": now, "detail": event.detail,
                   "attempt": key[1]}  # fmt: skip
            written.append(len(answers))
            rows.append(row)
            answers.append(row)
        for index, seq in zip(written, _insert_events(s, rows, returning=True), strict=True):
            answers[index] = RunEventRecord(seq=seq, **answers[index])
        return [answers[a] if isinstance(a, int) else a for a in answers]


#: The event of a job body's start: one per attempt.
STARTED = "started"
_LOCK_STARTS = (
    sa.select(_RUNS.c.run_id)
    .where(_RUNS.c.run_id.in_(sa.bindparam("ids", expanding=True)))
    .order_by(_RUNS.c.run_id)
    .with_for_update(key_share=True)
)


def _started_events(s: Session, run_ids: Sequence[str]) -> dict[tuple[str, int], RunEventRecord]:
    """The recorded start of each attempt of the runs named, the first if several."""
    query = (
        sa.select(m.RunEvent)
        .where(m.RunEvent.kind == STARTED, m.RunEvent.run_id.in_(run_ids))
        .order_by(m.RunEvent.seq.desc())
    )
    return {(e.run_id, e.attempt): _run_event(e) for e in s.scalars(query)}


def _new_run(schedule: Any, req: RecordRequest, queue: str, now: datetime) -> dict[str, Any]:
    """The row a recorded run starts as (``schedule``: its id, job type and payload,
    unless the request brings the run's own payload: a manual run's)."""
    return {
        "run_id": new_run_id(),
        "schedule_id": schedule.id,
        "fire_time": req.fire_time,
        "state": RunState.PENDING.value,
        "trigger": req.trigger.value,
        "job_type": schedule.job_type,
        "payload_json": req.payload_json or schedule.payload_json,
        "attempt": 0,
        "attempt_token": "",
        "fencing_token": req.fencing_token,
        "idempotency_key": req.idempotency_key or f"{schedule.id}@{iso(req.fire_time)}",
        "queue": req.queue or queue,
        "worker_id": "",
        "trace_id": req.trace_id,
        "created_at": now,
        "started_at": None,
        "claimed_at": None,
        "finished_at": None,
        "heartbeat_at": None,
        "error": "",
        "result_json": "",
        "checkpoint_json": "",
        # No message yet unless the caller queues one (``enqueue``): a claim waits for
        # the one the sweeper sends (``claim_rules``).
        "due_at": now if req.enqueue else None,
        "next_sweep_at": None,
        "requeues": 0,
    }


def _recorded_detail(req: RecordRequest) -> str:
    """The detail of a new run's first event, ``recorded``."""
    return f"trigger={req.trigger.value} fencing_token={req.fencing_token}"
