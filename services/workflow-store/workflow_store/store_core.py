"""What every part of the store (``store.Store``) shares: its statements and constants,
the ``StoreCore`` base with the database, the clock and the job-type cache, the retry
of a transaction that lost a race, and the helpers of batch writes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence, Sized
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, cast

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from cronwave_core.errors import (
    CronwaveError,
    FailedPrecondition,
    InvalidArgument,
)
from workflow_store import models as m
from workflow_store.bulk import RecordSet
from workflow_store.db import Database
from workflow_store.guards import GUARDS, Guards
from workflow_store.limits import LIMITS, Limits
from workflow_store.records import (
    DEFAULT_HEARTBEAT_TIMEOUT,
    MAX_BATCH,
    JobTypeRecord,
)
from workflow_store.rows import _job_type

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
    "claim_key",
    "claimed_at",
    "heartbeat_at",
    "worker_id",
    "next_sweep_at",
    "requeues",
)
_COMPLETE_COLUMNS = (
    "state",
    "started_at",
    "finished_at",
    "error",
    "result_json",
    "due_at",
    "cancel_deadline",
)
T = TypeVar("T")


def _ids(name: str = "ids") -> sa.BindParameter[Any]:
    """A list parameter of an IN clause (a batch holds at most ``MAX_BATCH`` items, far
    below either backend's limit of bind parameters)."""
    return sa.bindparam(name, expanding=True)


# The statements of the hot paths, built once.
_LIVE_SCHEDULES = sa.select(
    m.Schedule.id, m.Schedule.job_type, m.Schedule.payload_json, m.Schedule.paused
).where(m.Schedule.id.in_(_ids()), m.Schedule.deleted.is_(False))
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


class StoreCore:
    """What every part of the store shares: the database, the clock, the limits, the
    guards on a caller's word, the job types read recently, and the retry of a
    transaction that lost a race."""

    def __init__(
        self,
        db: Database,
        clock: Clock = utc_now,
        limits: Limits = LIMITS,
        guards: Guards = GUARDS,
    ) -> None:
        self.db = db
        self.clock = clock
        self.limits = limits
        self.guards = guards
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
        """``conditional_update``."""
        conditional_update(s, row, **values)

    def _rounds(self, work: Callable[[Session], Any]) -> Any:
        """``rounds`` over this store's database."""
        return rounds(self.db, work)


def conditional_update(s: Session, row: m.Run, **values: Any) -> None:
    """UPDATE the run only if its state and attempt token are still what ``row`` says;
    otherwise raise ``_Lost`` (the caller's transaction rolls back, and ``rounds``
    runs it again). ``row`` then holds the new values, as the database does, with no
    read."""
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


def rounds(db: Database, work: Callable[[Session], Any]) -> Any:
    """Run ``work`` in a write transaction of ``db``, again from the start when it lost
    a race, so it decides on the winner's result."""
    for _ in range(_MAX_ROUNDS):
        try:
            with db.write() as s:
                return work(s)
        except _Lost:
            continue
    raise FailedPrecondition("run_id: the run keeps changing under concurrent writers; retry")


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
