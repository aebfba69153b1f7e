"""What a planner asks of the store about its slots, beyond one run at a time.

- ``latest_fire_times``: where a new leader resumes each schedule -- the newest fire
  time of its SCHEDULED and CATCHUP runs (MISSED ones included) since the schedule was
  (re)created, and how many fire times it has had -- in one GROUP BY query per page,
  not one query per schedule. A planner bounds it by its own clock plus the furthest
  it records ahead, so a run recorded far ahead (a planner's clock that ran ahead, a
  stolen planner certificate) does not make the next term skip the slots before it.
- ``record_missed_slots``: many MISSED slots in one transaction. A slot is written
  only when it is one: a fire time (or DST-skipped slot) of its schedule's calendar,
  due by the store's clock (``Guards.missed_slot_ahead``; a placeholder may lie
  ``Guards.placeholder_ahead`` ahead), and without a run; a slot
  that already has a run is left as it is. A planner's certificate could otherwise
  mark the next fire times missed, and none would run. (The planner's summary of the
  slots outside the catch-up window, reason ``outside_catchup_window: ...``, lies
  between fire times by design: it only has to be due.)
- Placeholders: a MISSED row whose reason starts with ``pending:`` stands for work a
  planner decided but has not started yet (a paced catch-up run, a buffered overlap, a
  backfill). ``settle_all`` is what a second start of a slot does to the row that
  exists: it turns a placeholder into the run (and a BACKFILL start does so to any
  MISSED row: re-running missed slots is what a backfill is for); everything else is
  returned unchanged. A batch of starts does so in one transaction. A MISSED record
  of the slot (``record_missed_slots``) gives a placeholder its final reason.
  ``pending_fires`` lists the placeholders, so a new leader finishes the work of the
  term before it.
- ``create_schedules``: many schedules in one transaction, for bulk loads (the planner
  memory benchmark); the same rules as ``Schedules.create_schedule``.

These take the store as a ``SlotStore``: its transactions, clock and guards, and the
two steps they take of the store's parts in their own unit of work (the fencing check,
``Fencing.fence``; the schedules' revision, ``ScheduleChanges.bump``, which wakes the
watchers once it committed); no more of it. A revived run's audit row is
``audit_store.append_recorded``, as ``run_store``'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.exc import IntegrityError

from cronwave_core.domain.calendar import DST_GAP_SKIP, occurrences_after
from cronwave_core.domain.catchup import OUTSIDE_CATCHUP_WINDOW
from cronwave_core.domain.runs import PLACEHOLDER_PREFIX, is_placeholder
from cronwave_core.domain.spec import Spec
from cronwave_core.errors import (
    AlreadyExists,
    CronwaveError,
    FailedPrecondition,
    InvalidArgument,
    ScheduleNotFound,
)
from workflow_store import models as m
from workflow_store.audit_store import AUDITED_TRIGGERS, Actor, append_recorded
from workflow_store.convert import iso
from workflow_store.guards import Guards
from workflow_store.ids import new_run_id
from workflow_store.records import (
    DEFAULT_QUEUE,
    NewSchedule,
    Recorded,
    RecordRequest,
    RunRecord,
    RunState,
    Trigger,
)
from workflow_store.rows import _run
from workflow_store.store_core import Clock, _insert_events, _row_event
from workflow_store.stored_json import policy_to_dict, spec_from_dict, spec_to_dict
from workflow_store.unit_of_work import Transactions, UnitOfWork
from workflow_store.unknown_job_type import unknown_job_type

MAX_LATEST_PAGE = 10_000
MAX_MISSED_BATCH = 1_000
MAX_PENDING_PAGE = 10_000
_PLANNED = (Trigger.SCHEDULED.value, Trigger.CATCHUP.value)
_ROUNDS = 5  # a batch that lost a unique race is decided again on the winner's rows
#: The reason of the planner's one row for the slots outside the catch-up window past
#: the ones it lists (``cron_planner.planning``): its instant is no fire time.
SUMMARY_PREFIX = f"{OUTSIDE_CATCHUP_WINDOW}: "
_US = timedelta(microseconds=1)


class FenceChecks(Protocol):
    """A batch's fencing checks (``fencing.Fences``): lock the scopes once, check each
    item, save the newest token seen."""

    def lock(self, scopes: set[str]) -> None: ...
    def check(self, scope: str, token: int, schedule_id: str = "") -> CronwaveError | None: ...
    def save(self) -> None: ...


class Fence(Protocol):
    def fence(
        self,
        w: UnitOfWork,
        scope: str,
        token: int,
        now: datetime,
        schedule_ids: Iterable[str] = (),
    ) -> None:
        """Refuse a stale fencing token inside ``w`` (``fencing.Fencing``)."""
        ...

    def fences(self, w: UnitOfWork, now: datetime) -> FenceChecks:
        """The scopes' tokens, to lock once and check per item of a batch."""
        ...


class Revisions(Protocol):
    def bump(self, w: UnitOfWork, count: int = 1) -> int:
        """The next store revision (the last of ``count``) in ``w``; the watchers of
        schedule changes are woken once it committed (``schedule_changes``)."""
        ...


class SlotStore(Protocol):
    """What the slot rules take of the store (``store.Store`` is one)."""

    @property
    def tx(self) -> Transactions: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def guards(self) -> Guards: ...
    @property
    def fencing(self) -> Fence: ...
    @property
    def changes(self) -> Revisions: ...


@dataclass(frozen=True)
class LatestFire:
    schedule_id: str
    fire_time: datetime
    fires: int


@dataclass(frozen=True)
class MissedSlot:
    schedule_id: str
    fire_time: datetime
    reason: str
    trigger: Trigger = Trigger.SCHEDULED


def latest_fire_times(
    store: SlotStore,
    schedule_ids: Sequence[str] = (),
    after: str = "",
    limit: int = 0,
    until: datetime | None = None,
) -> list[LatestFire]:
    """Per schedule (all, or those in ``schedule_ids``) with ids greater than ``after``,
    by id, at most ``limit`` (0 = the maximum): the newest planned fire time and the
    number of fire times handled, of those at or before ``until`` (None: all). DST-skipped
    slots are recorded as MISSED but are not fire times, so they move the newest instant
    without counting. ``until`` keeps a run recorded far ahead (by a planner whose clock
    ran ahead) from marking every slot before it handled: the next term fires them."""
    if limit < 0 or limit > MAX_LATEST_PAGE:
        raise InvalidArgument("limit", f"must be between 0 and {MAX_LATEST_PAGE}")
    limit = limit or MAX_LATEST_PAGE
    with store.tx.read() as s:
        if schedule_ids and store.tx.dialect == "postgresql":
            # Planned per schedule asked, by the runs' (schedule_id, fire_time) index, so
            # the cost follows the schedules asked, not the size of the runs table; its
            # estimate (rows per schedule times the schedules) would set off the JIT
            # compiler, which costs more than the query.
            s.execute(sa.text("SET LOCAL jit = off"))
            query = _latest_of_ids_postgres(list(schedule_ids), after, limit, until)
        else:
            query = _latest_query(schedule_ids, after, limit, until)
        return [LatestFire(sid, newest, int(count or 0)) for sid, newest, count in s.execute(query)]


def _fires() -> sa.ColumnElement[int]:
    run = m.Run
    skipped = sa.and_(run.state == RunState.MISSED.value, run.error == DST_GAP_SKIP)
    return sa.func.sum(sa.case((skipped, 0), else_=1))


def _handled(until: datetime | None) -> list[sa.ColumnElement[bool]]:
    """The runs that count as handled fire times: planned, since the schedule was
    created, and at or before ``until`` (None: no bound)."""
    run = m.Run
    handled = [run.trigger.in_(_PLANNED), run.fire_time >= m.Schedule.created_at]
    if until is not None:
        handled.append(run.fire_time <= until)
    return handled


def _latest_query(
    schedule_ids: Sequence[str], after: str, limit: int, until: datetime | None
) -> sa.Select[str, datetime, int]:
    run, schedule = m.Run, m.Schedule
    query = (
        sa.select(run.schedule_id, sa.func.max(run.fire_time), _fires())
        .join(schedule, schedule.id == run.schedule_id)
        .where(*_handled(until))
        .group_by(run.schedule_id)
        .order_by(run.schedule_id)
        .limit(limit)
    )
    if after:
        query = query.where(run.schedule_id > after)
    if schedule_ids:
        query = query.where(run.schedule_id.in_(list(schedule_ids)))
    return query


def _latest_of_ids_postgres(
    schedule_ids: list[str], after: str, limit: int, until: datetime | None
) -> sa.Select[str, datetime, int]:
    run, schedule = m.Run, m.Schedule
    ids = sa.bindparam("ids", schedule_ids, type_=postgresql.ARRAY(sa.Text()))
    asked = sa.func.unnest(ids).table_valued("id").render_derived()
    per = (
        sa.select(sa.func.max(run.fire_time).label("newest"), _fires().label("fires"))
        .join(schedule, schedule.id == run.schedule_id)
        .where(run.schedule_id == asked.c.id, *_handled(until))
        .lateral("per")
    )
    query = (
        sa.select(asked.c.id, per.c.newest, per.c.fires)
        .select_from(asked)
        .join(per, sa.true())
        .where(per.c.newest.is_not(None))
        .order_by(asked.c.id)
        .limit(limit)
    )
    if after:
        query = query.where(asked.c.id > after)
    return query


def record_missed_slots(
    store: SlotStore,
    slots: Sequence[MissedSlot],
    token: int,
    scope: str,
    written_slots: list[MissedSlot] | None = None,
) -> tuple[int, list[str]]:
    """Record ``slots`` as MISSED in one transaction, fenced by ``token``. Returns the
    rows written (new ones, and placeholders given their reason) and the ids that name
    no live schedule (their slots are left out); a slot that has a run is left as it
    is. Raises ``StaleFencingToken``, ``FailedPrecondition`` for a slot that is not due
    yet (a placeholder: further ahead than ``Guards.placeholder_ahead``) and
    ``InvalidArgument`` for one that is no slot of its schedule's calendar (each
    naming ``slots[i].fire_time``); then nothing is written. ``written_slots``, when
    given, gets the slots whose row was written, once the transaction committed (for
    the metrics)."""
    if len(slots) > MAX_MISSED_BATCH:
        raise InvalidArgument("slots", f"at most {MAX_MISSED_BATCH} per call, got {len(slots)}")
    for i, slot in enumerate(slots):
        if not slot.schedule_id:
            raise InvalidArgument(f"slots[{i}].schedule_id", "required")
        if not slot.reason:
            raise InvalidArgument(f"slots[{i}].reason", "required: why the slot was missed")
    for _ in range(_ROUNDS):
        try:
            written, unknown, rows = _record_missed_slots(store, slots, token, scope)
        except IntegrityError:
            continue  # a concurrent writer recorded one of the slots first: decide again
        if written_slots is not None:
            written_slots.extend(rows)
        return written, unknown
    raise FailedPrecondition("slots: concurrent writers keep recording the same slots; retry")


def _record_missed_slots(
    store: SlotStore, slots: Sequence[MissedSlot], token: int, scope: str
) -> tuple[int, list[str], list[MissedSlot]]:
    now = store.clock()
    written = 0
    rows: list[MissedSlot] = []
    unknown: list[str] = []
    with store.tx.write() as w:
        s = w.session
        ids = sorted({slot.schedule_id for slot in slots})
        if token > 0:
            store.fencing.fence(w, scope, token, now, ids)
        schedules = {
            row.id: row
            for row in s.scalars(
                sa.select(m.Schedule).where(m.Schedule.id.in_(ids), m.Schedule.deleted.is_(False))
            )
        }
        unknown = [sid for sid in ids if sid not in schedules]
        wanted = [(i, slot) for i, slot in enumerate(slots) if slot.schedule_id in schedules]
        existing: dict[tuple[str, datetime], m.Run] = {}
        if wanted:
            pairs = list({(slot.schedule_id, slot.fire_time) for _, slot in wanted})
            for row in s.scalars(
                sa.select(m.Run).where(sa.tuple_(m.Run.schedule_id, m.Run.fire_time).in_(pairs))
            ):
                existing[(row.schedule_id, row.fire_time)] = row
        _check_slots(store, schedules, existing, wanted, now)
        jobs = {job.name: job for job in s.scalars(sa.select(m.JobType))}
        events: list[dict[str, Any]] = []
        for _, slot in wanted:
            key = (slot.schedule_id, slot.fire_time)
            found = existing.get(key)
            if found is not None:
                if found.state == RunState.MISSED.value and _takes_reason(found.error, slot.reason):
                    found.error = slot.reason
                    found.fencing_token = max(found.fencing_token, token)
                    events.append(_row_event(found, "missed", slot.reason, now))
                    written += 1
                    rows.append(slot)
                continue
            schedule = schedules[slot.schedule_id]
            job = jobs.get(schedule.job_type)
            new = _missed_row(schedule, slot, token, job.queue if job else DEFAULT_QUEUE, now)
            s.add(new)
            events.append(_row_event(new, "missed", slot.reason, now))
            existing[key] = new
            written += 1
            rows.append(slot)
        s.flush()  # the rows, in one batch, before their events
        _insert_events(s, events)
    return written, unknown, rows


def _check_slots(
    store: SlotStore,
    schedules: dict[str, m.Schedule],
    existing: dict[tuple[str, datetime], m.Run],
    wanted: Sequence[tuple[int, MissedSlot]],
    now: datetime,
) -> None:
    """Refuse the batch for its first slot that would be written but is not due, or is
    no slot of its schedule's calendar. A placeholder's slot was checked when it was
    written; a slot with a run is left as it is, so neither is checked again for being
    a slot (the schedule may have changed since)."""
    latest = now + store.guards.missed_slot_ahead
    latest_placeholder = now + store.guards.placeholder_ahead
    specs: dict[str, Spec] = {}
    for i, slot in wanted:
        found = existing.get((slot.schedule_id, slot.fire_time))
        if found is not None and found.state != RunState.MISSED.value:
            continue
        if found is not None and not _takes_reason(found.error, slot.reason):
            continue
        field = f"slots[{i}].fire_time"
        if is_placeholder(slot.reason):
            if slot.fire_time > latest_placeholder:
                ahead = int(store.guards.placeholder_ahead.total_seconds())
                raise FailedPrecondition(
                    f"{field}: {iso(slot.fire_time)} is too far ahead for a placeholder "
                    f"(the store's clock reads {iso(now)}); a placeholder may lie at most "
                    f"{ahead} s ahead of it"
                )
        elif slot.fire_time > latest:
            raise FailedPrecondition(
                f"{field}: {iso(slot.fire_time)} is not due yet (the store's clock reads "
                f"{iso(now)}); a slot is recorded MISSED only once its fire time has passed"
            )
        if found is not None or slot.reason.startswith(SUMMARY_PREFIX):
            continue
        sid = slot.schedule_id
        if sid not in specs:
            specs[sid] = spec_from_dict(schedules[sid].spec)
        if not _is_slot(specs[sid], slot.fire_time):
            raise InvalidArgument(
                field,
                f"{iso(slot.fire_time)} is no fire time of schedule '{sid}': only a slot "
                "of its calendar can be missed (`cronwave schedule describe` lists them)",
            )


def _is_slot(spec: Spec, at: datetime) -> bool:
    """Whether ``at`` is a fire time of ``spec``, or a slot its DST policy skipped."""
    first = next(occurrences_after(spec, at - _US), None)
    return first is not None and first.at == at


def _takes_reason(current: str, new: str) -> bool:
    """A placeholder takes a final reason (or a newer placeholder reason); a final
    reason is never overwritten."""
    return is_placeholder(current) and current != new


def _missed_row(
    schedule: m.Schedule, slot: MissedSlot, token: int, queue: str, now: datetime
) -> m.Run:
    return m.Run(
        run_id=new_run_id(),
        schedule_id=schedule.id,
        fire_time=slot.fire_time,
        state=RunState.MISSED.value,
        trigger=slot.trigger.value,
        job_type=schedule.job_type,
        payload_json=schedule.payload_json,
        attempt=0,
        attempt_token="",
        fencing_token=token,
        idempotency_key=f"{schedule.id}@{iso(slot.fire_time)}",
        queue=queue,
        worker_id="",
        trace_id="",
        created_at=now,
        started_at=None,
        finished_at=now,
        heartbeat_at=None,
        error=slot.reason,
        result_json="",
        checkpoint_json="",
    )


def pending_fires(store: SlotStore, after_run_id: str = "", limit: int = 0) -> list[RunRecord]:
    """Placeholder rows (MISSED, reason ``pending:...``) of live schedules, by run id."""
    if limit < 0 or limit > MAX_PENDING_PAGE:
        raise InvalidArgument("limit", f"must be between 0 and {MAX_PENDING_PAGE}")
    query = (
        sa.select(m.Run)
        .join(m.Schedule, m.Schedule.id == m.Run.schedule_id)
        .where(
            m.Run.state == RunState.MISSED.value,
            m.Run.error.startswith(PLACEHOLDER_PREFIX, autoescape=True),
            m.Schedule.deleted.is_(False),
        )
        .order_by(m.Run.run_id)
        .limit(limit or 1000)
    )
    if after_run_id:
        query = query.where(m.Run.run_id > after_run_id)
    with store.tx.read() as s:
        return [_run(row) for row in s.scalars(query)]


def settle_all(
    store: SlotStore,
    reqs: Sequence[RecordRequest],
    results: Sequence[Recorded | CronwaveError],
    actor: Actor | None = None,
) -> list[Recorded | CronwaveError]:
    """What a second start of a slot does to the row that exists (see the module
    docstring), for a batch of records (``results``: what recording ``reqs`` gave);
    ``created`` is true only when a start revived the row. Every placeholder among
    them is revived in one transaction, each item's refusal its own (a schedule gone,
    a stale fencing token), so catching up costs the store one round of statements
    per batch, not a transaction per run."""
    out = list(results)
    wanted = [  # (item, the row its slot already had)
        (i, r.run)
        for i, r in enumerate(results)
        if isinstance(r, Recorded) and not r.created and _revivable(reqs[i], r.run)
    ]
    if not wanted:
        return out
    now = store.clock()
    gone: list[tuple[int, RunRecord]] = []
    with store.tx.write() as w:
        s = w.session
        ids = sorted({reqs[i].schedule_id for i, _ in wanted})
        schedules = {
            row.id: row
            for row in s.scalars(
                sa.select(m.Schedule).where(m.Schedule.id.in_(ids), m.Schedule.deleted.is_(False))
            )
        }
        fences = store.fencing.fences(w, now)
        fences.lock({reqs[i].fencing_scope for i, _ in wanted if reqs[i].fencing_token > 0})
        run_ids = sorted({existing.run_id for _, existing in wanted})
        rows = {  # locked in one order, so concurrent batches wait rather than deadlock
            row.run_id: row
            for row in s.scalars(
                sa.select(m.Run)
                .where(m.Run.run_id.in_(run_ids), m.Run.state == RunState.MISSED.value)
                .order_by(m.Run.run_id)
                .with_for_update(key_share=True)
                .execution_options(populate_existing=True)
            )
        }
        jobs: dict[str, m.JobType | None] = {}
        events: list[dict[str, Any]] = []
        revived: dict[str, RunRecord] = {}
        for i, existing in wanted:
            req = reqs[i]
            schedule = schedules.get(req.schedule_id)
            if schedule is None:
                out[i] = ScheduleNotFound(req.schedule_id)
                continue
            if req.fencing_token > 0:
                stale = fences.check(req.fencing_scope, req.fencing_token, req.schedule_id)
                if stale is not None:
                    out[i] = stale
                    continue
            if existing.run_id in revived:  # a second start of the slot in this batch
                out[i] = Recorded(revived[existing.run_id], created=False)
                continue
            row = rows.get(existing.run_id)
            if row is None or row.error != existing.error:
                gone.append((i, existing))  # no longer the row that was read: as it is now
                continue
            if schedule.job_type not in jobs:
                jobs[schedule.job_type] = s.get(m.JobType, schedule.job_type)
            job = jobs[schedule.job_type]
            row.state = RunState.PENDING.value
            row.trigger = req.trigger.value
            row.job_type = schedule.job_type
            row.payload_json = schedule.payload_json
            row.fencing_token = req.fencing_token
            row.queue = req.queue or (job.queue if job else DEFAULT_QUEUE)
            row.trace_id = req.trace_id
            row.finished_at = None
            row.error = ""
            row.due_at = now if req.enqueue else None  # as a new run's (run_store)
            detail = (
                f"trigger={req.trigger.value} fencing_token={req.fencing_token} "
                f"(was MISSED: {existing.error})"
            )
            events.append(_row_event(row, "recorded", detail, now))
            if req.enqueue:
                events.append(_row_event(row, "enqueued", row.queue, now))
            if req.trigger in AUDITED_TRIGGERS:
                append_recorded(s, actor, req, row.run_id, store.clock())
            revived[row.run_id] = _run(row)
            out[i] = Recorded(revived[row.run_id], created=True)
        fences.save()
        s.flush()
        _insert_events(s, events)
    for i, existing in gone:
        out[i] = Recorded(_current(store, existing), created=False)
    return out


def _revivable(req: RecordRequest, existing: RunRecord) -> bool:
    """A start revives a placeholder; a BACKFILL start, any MISSED row."""
    return existing.state is RunState.MISSED and (
        req.trigger is Trigger.BACKFILL or is_placeholder(existing.error)
    )


def _current(store: SlotStore, existing: RunRecord) -> RunRecord:
    with store.tx.read() as s:
        row = s.get(m.Run, existing.run_id, populate_existing=True)
        return _run(row) if row is not None else existing


def create_schedules(store: SlotStore, news: Iterable[NewSchedule], chunk: int = 5_000) -> int:
    """Create every schedule of ``news`` (already validated) in one transaction, each
    with its own revision, as ``Schedules.create_schedule`` would; returns how many. The
    revision counter is bumped once for all of them and the rows go in by multi-row
    INSERTs. Raises ``InvalidArgument`` (job_type) or ``AlreadyExists``; then nothing
    is written."""
    batch = list(news)
    if not batch:
        return 0
    now = store.clock()
    try:
        with store.tx.write() as w:
            s = w.session
            jobs = set(s.scalars(sa.select(m.JobType.name)))
            for new in batch:
                if new.job_type not in jobs:
                    raise unknown_job_type(new.job_type)
            last = store.changes.bump(w, len(batch))  # the watchers woken once committed
            first = last - len(batch) + 1
            for i in range(0, len(batch), chunk):
                rows = [
                    {
                        "id": new.schedule_id,
                        "spec": spec_to_dict(new.spec),
                        "policy": policy_to_dict(new.policy),
                        "job_type": new.job_type,
                        "payload_json": new.payload_json,
                        "paused": new.paused,
                        "pause_note": new.pause_note if new.paused else "",
                        "labels": dict(new.labels),
                        "deleted": False,
                        "created_at": now,
                        "updated_at": now,
                        "revision": first + i + j,
                    }
                    for j, new in enumerate(batch[i : i + chunk])
                ]
                s.execute(sa.insert(m.Schedule), rows)
    except IntegrityError as exc:
        raise AlreadyExists(
            "schedule_id: a schedule of the batch already exists; nothing was created"
        ) from exc
    return len(batch)
