"""Database rows as the store's records, and the row look-ups every part shares."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from cronwave_core.domain.labels import Labels
from cronwave_core.domain.progress import Progress
from cronwave_core.domain.spec import Policy, Spec
from cronwave_core.errors import (
    InvalidArgument,
    RunNotFound,
    ScheduleNotFound,
)
from cronwave_core.limits import utf8_size
from workflow_store import models as m
from workflow_store.limits import Limits
from workflow_store.records import (
    JobTypeRecord,
    RetrySettings,
    RunEventRecord,
    RunRecord,
    RunState,
    ScheduleRecord,
    Trigger,
)
from workflow_store.stored_json import policy_from_dict, spec_from_dict

log = logging.getLogger("cronwave.store")


def lock_schedule(s: Session, schedule_id: str) -> m.Schedule | None:
    """The schedule row, if any, locked for a change of its own columns: FOR NO KEY
    UPDATE on PostgreSQL, not FOR UPDATE. A run's row checks its foreign key to the
    schedule with FOR KEY SHARE, which FOR UPDATE would block: then a transaction that
    holds a run and writes it again (a heartbeat with progress) waits for a deletion
    that waits for that run, and PostgreSQL breaks the deadlock by failing one."""
    if not schedule_id:
        return None
    return s.get(m.Schedule, schedule_id, with_for_update={"key_share": True})


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
        managed_by=row.managed_by,
        labels=_labels(row),
    )


def _labels(row: m.Schedule) -> Labels:
    """The row's labels as a value (a NULL from a row written by hand: none)."""
    return tuple(sorted((row.labels or {}).items()))


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
        managed_by=row.managed_by,
        labels=_labels(row),
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
        managed_by=row.managed_by,
        labels=_labels(row),
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
        claimed_at=row.claimed_at,
        cancel_deadline=row.cancel_deadline,
        cancel_reason=row.cancel_reason or "",
        progress=progress_of(
            row.progress_done, row.progress_total, row.progress_unit, row.progress_at
        ),
    )


def progress_of(
    done: int | None, total: int | None, unit: str | None, at: datetime | None
) -> Progress | None:
    """A run's stored progress (None: its body never reported any). A stored value
    this version cannot take (a row written by hand) is left out, never failing a read."""
    if done is None:
        return None
    try:
        return Progress(int(done), None if total is None else int(total), unit or "", at)
    except InvalidArgument:
        return None


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
        claimed_at=values.get("claimed_at"),
        cancel_deadline=values.get("cancel_deadline"),
        cancel_reason=values.get("cancel_reason") or "",
        progress=progress_of(
            values.get("progress_done"),
            values.get("progress_total"),
            values.get("progress_unit"),
            values.get("progress_at"),
        ),
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
