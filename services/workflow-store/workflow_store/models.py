"""The scheduler's tables. Alembic migrations in ``migrations/`` create them; a test
checks that the migration head and these models agree.

Instants are stored in UTC with microseconds; durations as whole microseconds.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class UTCDateTime(sa.TypeDecorator[datetime]):
    """An aware UTC datetime on every backend. SQLite has no zone support, so the
    value is stored as naive UTC and the zone is put back on the way out; a naive
    datetime is refused on the way in, since its meaning would be a guess."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime: cronwave stores aware UTC instants only")
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Micros(sa.TypeDecorator[timedelta]):
    """A duration stored as whole microseconds (exact, and comparable on every
    backend, unlike SQLite's emulated INTERVAL)."""

    impl = sa.BigInteger()
    cache_ok = True

    def process_bind_param(self, value: timedelta | None, dialect: Dialect) -> int | None:
        if value is None:
            return None
        return value // timedelta(microseconds=1)

    def process_result_value(self, value: int | None, dialect: Dialect) -> timedelta | None:
        if value is None:
            return None
        return timedelta(microseconds=int(value))


# SQLite only autoincrements an INTEGER PRIMARY KEY (the rowid alias).
BigSerial = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = sa.MetaData(naming_convention=NAMING)
    type_annotation_map: dict[Any, Any] = {
        datetime: UTCDateTime(),
        timedelta: Micros(),
        int: sa.BigInteger(),
        str: sa.String(),
    }


class Schedule(Base):
    """One schedule. Deleting is soft (``deleted``), so watchers see the deletion
    and a run's history keeps its schedule."""

    __tablename__ = "schedules"

    id: Mapped[str] = mapped_column(primary_key=True)
    spec: Mapped[dict[str, Any]] = mapped_column(sa.JSON())
    policy: Mapped[dict[str, Any]] = mapped_column(sa.JSON())
    job_type: Mapped[str]
    payload_json: Mapped[str] = mapped_column(sa.Text())
    paused: Mapped[bool] = mapped_column(default=False)
    pause_note: Mapped[str] = mapped_column(sa.Text(), default="")
    deleted: Mapped[bool] = mapped_column(default=False)
    # "apply:<manager>" when `cronwave apply` manages it; "" when made by hand.
    managed_by: Mapped[str] = mapped_column(default="", server_default="")
    # Its owners' key=value labels (cronwave_core.domain.labels), {} when it has none.
    labels: Mapped[dict[str, str]] = mapped_column(
        sa.JSON(), default=dict, server_default=sa.text("'{}'")
    )
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    # The store-wide revision of this schedule's last change; unique per change.
    revision: Mapped[int] = mapped_column(unique=True)


class StoreRevision(Base):
    """The store-wide change counter: a single row (id = 1), bumped by every schedule
    change while its row lock orders concurrent changes."""

    __tablename__ = "store_revision"

    id: Mapped[int] = mapped_column(sa.Integer(), primary_key=True, autoincrement=False)
    revision: Mapped[int]


class JobType(Base):
    __tablename__ = "job_types"

    name: Mapped[str] = mapped_column(primary_key=True)
    duration_limit: Mapped[timedelta]
    heartbeat_timeout: Mapped[timedelta]
    retry_initial_interval: Mapped[timedelta]
    retry_backoff_coefficient: Mapped[float] = mapped_column(sa.Float())
    retry_maximum_interval: Mapped[timedelta]
    retry_maximum_attempts: Mapped[int] = mapped_column(sa.Integer())
    retry_non_retryable_errors: Mapped[list[str]] = mapped_column(sa.JSON())
    queue: Mapped[str]
    priority: Mapped[int] = mapped_column(sa.Integer())
    financial: Mapped[bool]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class Run(Base):
    """One run of a schedule. The database, not the code, guarantees one run per
    (schedule, fire time): concurrent recorders race on the unique constraint."""

    __tablename__ = "runs"
    __table_args__ = (
        sa.UniqueConstraint("schedule_id", "fire_time"),
        sa.Index("ix_runs_fire_time_run_id", "fire_time", "run_id"),
    )

    run_id: Mapped[str] = mapped_column(primary_key=True)
    schedule_id: Mapped[str] = mapped_column(sa.ForeignKey("schedules.id"))
    fire_time: Mapped[datetime]
    state: Mapped[str] = mapped_column(index=True)
    trigger: Mapped[str]
    job_type: Mapped[str]
    payload_json: Mapped[str] = mapped_column(sa.Text())
    attempt: Mapped[int] = mapped_column(sa.Integer())
    # 32 random hex digits, new at every claim; empty until the first claim. Never
    # returned by a read: only the attempt that claimed the run knows it.
    attempt_token: Mapped[str]
    # The key the worker sent with the claim that started the current attempt (NULL:
    # none given). A claim asked again with it, by the same worker, is answered with
    # that attempt while the run waits under it (the first answer may have been lost).
    # Never returned by a read, as the token is not.
    claim_key: Mapped[str | None] = mapped_column(sa.String(64), nullable=True)
    fencing_token: Mapped[int]
    idempotency_key: Mapped[str]
    queue: Mapped[str]
    worker_id: Mapped[str]
    trace_id: Mapped[str]
    created_at: Mapped[datetime]
    # When the job body first began (reported by the worker); NULL until it has.
    started_at: Mapped[datetime | None]
    # When the current attempt claimed the run; NULL until a worker has.
    claimed_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    heartbeat_at: Mapped[datetime | None]
    error: Mapped[str] = mapped_column(sa.Text())
    result_json: Mapped[str] = mapped_column(sa.Text())
    checkpoint_json: Mapped[str] = mapped_column(sa.Text())
    # When the run became (or becomes) due for a worker: recorded, or the end of a retry
    # delay. NULL: no message exists yet (a replayed run).
    due_at: Mapped[datetime | None]
    # Set when the sweeper re-sent the run's message: when it may send one again (the
    # wait doubles with each re-send, so a backlog is not flooded). A claim clears it.
    next_sweep_at: Mapped[datetime | None]
    requeues: Mapped[int] = mapped_column(sa.Integer(), server_default=sa.text("0"), default=0)
    # Set while a cancel with a grace waits for the running body to stop: when the
    # worker stops it. Whatever the attempt reports then ends the run CANCELLED.
    cancel_deadline: Mapped[datetime | None]
    cancel_reason: Mapped[str] = mapped_column(sa.Text(), server_default=sa.text("''"), default="")
    # How far the job body said it got (JobContext.progress): done of total (NULL: not
    # known) unit, at; progress_done NULL until it said.
    progress_done: Mapped[int | None]
    progress_total: Mapped[int | None]
    progress_unit: Mapped[str] = mapped_column(sa.Text(), server_default=sa.text("''"), default="")
    progress_at: Mapped[datetime | None]


class RunEvent(Base):
    """Append-only history of a run; ``seq`` orders it."""

    __tablename__ = "run_events"

    seq: Mapped[int] = mapped_column(BigSerial, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(sa.ForeignKey("runs.run_id"), index=True)
    kind: Mapped[str]
    at: Mapped[datetime]
    detail: Mapped[str] = mapped_column(sa.Text())
    attempt: Mapped[int] = mapped_column(sa.Integer())


class Fencing(Base):
    """Per lease scope: the newest fencing token issued (``IssueFencingToken``, called
    by leader-election when it grants the lease) and the newest seen on a write. A
    write's token must lie in [token, issued]; a scope without a row was never
    issued a token, and its writes are refused."""

    __tablename__ = "fencing"

    scope: Mapped[str] = mapped_column(primary_key=True)
    token: Mapped[int]
    issued: Mapped[int] = mapped_column(server_default=sa.text("0"), default=0)
    updated_at: Mapped[datetime]


class DeadLetter(Base):
    """A run that gave up (its retries exhausted) or a poison message. ``run_id`` is
    empty when the message named no run; it is not a foreign key, since a poison
    message may name a run the store never had."""

    __tablename__ = "dead_letters"

    id: Mapped[int] = mapped_column(BigSerial, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(index=True)
    reason: Mapped[str]
    error: Mapped[str] = mapped_column(sa.Text())
    queue: Mapped[str]
    job_type: Mapped[str]
    attempt: Mapped[int] = mapped_column(sa.Integer())
    message_json: Mapped[str] = mapped_column(sa.Text())
    created_at: Mapped[datetime]
    replayed_at: Mapped[datetime | None]


class DeadlineBreach(Base):
    """A slot that had not SUCCEEDED by its schedule's deadline, recorded once per
    (schedule, fire time) by the deadline sweep (``deadline_store``). ``run_id`` is
    empty when no run was recorded for the slot (the planner was down), so it is not
    a foreign key."""

    __tablename__ = "deadline_breaches"
    __table_args__ = (
        sa.UniqueConstraint("schedule_id", "fire_time"),
        sa.Index("ix_deadline_breaches_schedule_id_id", "schedule_id", "id"),
    )

    id: Mapped[int] = mapped_column(BigSerial, primary_key=True, autoincrement=True)
    schedule_id: Mapped[str] = mapped_column(sa.ForeignKey("schedules.id"))
    fire_time: Mapped[datetime]
    deadline_at: Mapped[datetime]
    reason: Mapped[str]
    cause: Mapped[str] = mapped_column(sa.Text())
    run_id: Mapped[str]
    run_state: Mapped[str]
    detected_at: Mapped[datetime]


class DeadlineDelivery(Base):
    """One breach's notification to one webhook: pending until delivered or given up.
    An outbox row: a pending one is held by the replica whose ``claim_token`` it bears
    until ``claimed_until``, and its next POST is due at ``next_attempt_at`` (None: at
    once); a lapsed claim is any replica's to resume (``delivery_relay``)."""

    __tablename__ = "deadline_deliveries"

    id: Mapped[int] = mapped_column(BigSerial, primary_key=True, autoincrement=True)
    breach_id: Mapped[int] = mapped_column(sa.ForeignKey("deadline_breaches.id"), index=True)
    url: Mapped[str] = mapped_column(sa.Text())
    format: Mapped[str]
    status: Mapped[str] = mapped_column(index=True)
    attempts: Mapped[int] = mapped_column(sa.Integer())
    http_status: Mapped[int] = mapped_column(sa.Integer())
    error: Mapped[str] = mapped_column(sa.Text())
    updated_at: Mapped[datetime]
    next_attempt_at: Mapped[datetime | None]
    claim_token: Mapped[str] = mapped_column(server_default=sa.text("''"), default="")
    claimed_until: Mapped[datetime | None]


class DeadlineCursor(Base):
    """Per schedule with a deadline: every slot up to ``checked_through`` was judged."""

    __tablename__ = "deadline_cursors"

    schedule_id: Mapped[str] = mapped_column(sa.ForeignKey("schedules.id"), primary_key=True)
    checked_through: Mapped[datetime]


class ApiKey(Base):
    """An API key (``cronwave_core.security.keys``): only the SHA-256 of its secret is
    kept. A revoked key keeps its row, so the audit trail's names stay resolvable."""

    __tablename__ = "api_keys"

    key_id: Mapped[str] = mapped_column(primary_key=True)
    name: Mapped[str]
    role: Mapped[str]
    secret_hash: Mapped[str]
    created_at: Mapped[datetime]
    created_by: Mapped[str]
    revoked_at: Mapped[datetime | None]


class AuditEvent(Base):
    """One mutation a caller asked for, appended in the transaction of the change
    itself: who (``actor``, an identity's audit name), what (``rpc`` and ``changes``,
    a JSON object of the fields changed, with sizes instead of payloads), when, from
    where (``peer``, gRPC's peer string). Never updated or deleted by the store."""

    __tablename__ = "audit_events"

    id: Mapped[int] = mapped_column(BigSerial, primary_key=True, autoincrement=True)
    at: Mapped[datetime]
    actor: Mapped[str]
    peer: Mapped[str]
    rpc: Mapped[str]
    schedule_id: Mapped[str] = mapped_column(index=True)
    run_id: Mapped[str]
    changes: Mapped[str] = mapped_column(sa.Text())
