"""Job types: registered (and changed, by whom may: ``job_type_changes``), listed, and
read inside other parts' transactions through one cache per store process."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from cronwave_core.security import identity
from workflow_store import models as m
from workflow_store.audit_store import Actor, append
from workflow_store.job_type_changes import check_change
from workflow_store.records import DEFAULT_HEARTBEAT_TIMEOUT, JobTypeRecord
from workflow_store.rows import _job_type
from workflow_store.store_core import Clock, utc_now
from workflow_store.unit_of_work import Transactions, UnitOfWork
from workflow_store.unknown_job_type import unknown_job_type

#: How long a job type read from the database is used without reading it again: the
#: longest a change registered through another replica goes unseen here.
JOB_TYPE_TTL = timedelta(seconds=5)


class JobTypes:
    """The job types, and those read recently: the runs (a new run's queue) and the
    attempts (a job's heartbeat timeout) read them through this one cache, inside their
    own unit of work. A change registered through this process is seen at once; one
    registered through another replica within ``JOB_TYPE_TTL``."""

    def __init__(self, tx: Transactions, clock: Clock = utc_now) -> None:
        self.tx = tx
        self.clock = clock
        # Job types by name, each with the monotonic instant it must be read again.
        self._cache: dict[str, tuple[float, JobTypeRecord]] = {}
        self._lock = threading.Lock()
        self._generation = 0

    def register_job_type(self, job: JobTypeRecord, actor: Actor | None = None) -> JobTypeRecord:
        """Create the job type named ``job.name`` (already validated), or register it
        again: identical values change nothing (no write, no audit row); changed ones
        replace it only when the caller may change a job type (``job_type_changes``:
        an admin, not a worker's certificate), else ``PermissionDenied`` naming the
        first field changed, and nothing is written."""
        now = self.clock()
        values = _job_type_values(job)
        with self.tx.write() as w:
            s = w.session
            row = s.get(m.JobType, job.name, with_for_update=True, populate_existing=True)
            if row is None:
                insert: Any = (
                    postgresql.insert if self.tx.dialect == "postgresql" else sqlite.insert
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
        with self._lock:
            self._generation += 1
            self._cache.pop(record.name, None)
        return record

    def list_job_types(self) -> list[JobTypeRecord]:
        with self.tx.read() as s:
            return [_job_type(r) for r in s.scalars(sa.select(m.JobType).order_by(m.JobType.name))]

    # -- in another part's unit of work -------------------------------------------------

    def cached(self, w: UnitOfWork, name: str) -> JobTypeRecord | None:
        """The job type ``name`` (None when unknown), from the cache when fresh, else
        read in ``w``."""
        cached = self._cache.get(name)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        generation = self._generation
        row = w.session.get(m.JobType, name)
        if row is None:
            return None
        record = _job_type(row)
        with self._lock:
            # A registration that committed while we read may be newer than our row.
            if generation == self._generation:
                self._cache[name] = (time.monotonic() + JOB_TYPE_TTL.total_seconds(), record)
        return record

    def heartbeat_timeout(self, w: UnitOfWork, name: str) -> timedelta:
        """How long an attempt of job type ``name`` lives without a heartbeat (the
        default for a job type the store does not know)."""
        job = self.cached(w, name)
        return job.heartbeat_timeout if job else DEFAULT_HEARTBEAT_TIMEOUT

    def require(self, w: UnitOfWork, name: str) -> None:
        """Refuse (``InvalidArgument`` naming job_type, and the names registered) a job
        type that is not registered, read in ``w`` as it is now (not from the cache): a
        schedule names only a job type that exists."""
        s = w.session
        if s.get(m.JobType, name) is None:
            names = s.scalars(sa.select(m.JobType.name).order_by(m.JobType.name)).all()
            raise unknown_job_type(name, names)


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
