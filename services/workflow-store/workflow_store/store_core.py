"""What the store's repositories share: the statements of the hot paths and the
constants, the conditional update of a run, the retry of a transaction that lost a race
over the database alone (``rounds``), and the helpers of batch writes. No class: each
repository takes what it uses in its constructor (``store.Store`` builds them).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence, Sized
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, cast

import sqlalchemy as sa
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from cronwave_core.errors import (
    CronwaveError,
    InvalidArgument,
)
from workflow_store import models as m
from workflow_store.bulk import RecordSet
from workflow_store.db import Database
from workflow_store.records import MAX_BATCH
from workflow_store.unit_of_work import Lost as _Lost
from workflow_store.unit_of_work import Transactions

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
    a race, so it decides on the winner's result (``Transactions.rounds``, for a
    repository over the database alone)."""
    return Transactions(db).rounds(lambda w: work(w.session))


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


def _row_event(row: m.Run, kind: str, detail: str, at: datetime) -> dict[str, Any]:
    """``_event_values`` of a run's ORM row, for ``_insert_events`` (a batch's events
    in one statement, where ``rows._event`` flushes each)."""
    return _event_values({"run_id": row.run_id, "attempt": row.attempt}, kind, detail, at)
