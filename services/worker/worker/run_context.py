"""The ``JobContext`` the worker gives a job body, in a thread of the worker or in a
job process: the run's fields, its checkpoint, the attempt's heartbeat, and the trace
id of the attempt's span, which the context's logger writes on every line."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span

from cronwave import Checkpoint, JobContext
from cronwave._checkpoint import Report
from cronwave_core.domain.progress import Progress
from cronwave_core.telemetry.spans import hop_span
from cronwave_core.telemetry.vocabulary import (
    ATTR_ATTEMPT,
    ATTR_JOB_TYPE,
    Hop,
    Kind,
    run_attributes,
)

#: The span of a job's body, from its first statement to its return.
BODY_SPAN = "job.body"

#: A checkpoint as the worker passes it on: a JSON object.
CheckpointData = dict[str, Any]


def current_trace_id() -> str:
    """The trace id of the current span, in hex, or "" outside a trace."""
    span_context = trace.get_current_span().get_span_context()
    return format(span_context.trace_id, "032x") if span_context.is_valid else ""


def progress_message(progress: Progress) -> dict[str, Any]:
    """``progress`` as a job process writes it to its worker (JSON)."""
    at = progress.at.isoformat() if progress.at is not None else None
    return {"done": progress.done, "total": progress.total, "unit": progress.unit, "at": at}


def progress_from_message(message: Mapping[str, Any]) -> Progress:
    """The progress a job process wrote (``progress_message``); ``InvalidArgument``
    for one that is malformed."""
    at = message.get("at")
    return Progress(
        message.get("done"),  # type: ignore[arg-type]  # Progress checks the types
        message.get("total"),
        message.get("unit") or "",
        datetime.fromisoformat(at) if isinstance(at, str) else None,
    )


def job_context(
    *,
    run_id: str,
    schedule_id: str,
    fire_time: datetime,
    attempt: int,
    payload: Mapping[str, Any],
    checkpoint: Mapping[str, Any],
    checkpoint_bytes: int,
    job_type: str,
    on_heartbeat: Report,
    is_cancelled: Callable[[], bool],
    on_progress: Callable[[Progress], None],
) -> JobContext:
    """The context of one attempt; call it inside the attempt's trace context. Its
    checkpoint refuses a save of more than ``checkpoint_bytes`` of JSON."""
    return JobContext(
        run_id=run_id,
        schedule_id=schedule_id,
        fire_time=fire_time,
        attempt=attempt,
        payload=dict(payload),
        checkpoint=Checkpoint(checkpoint, limit_bytes=checkpoint_bytes),
        job_type=job_type,
        trace_id=current_trace_id(),
        on_heartbeat=on_heartbeat,
        is_cancelled=is_cancelled,
        on_progress=on_progress,
    )


def body_span(ctx: JobContext, started_ns: int) -> AbstractContextManager[Span]:
    """The span of the body ``ctx`` is given to, from ``started_ns`` (the body's
    start, as its attempt reports it): the job's own code, in ``execute``'s time; the
    job's own spans sit beneath it, and its time before the first of them (its
    imports, its connections) is this span's own."""
    attributes = {
        **run_attributes(ctx.run_id, ctx.schedule_id, ctx.fire_time.isoformat()),
        ATTR_JOB_TYPE: ctx.job_type,
        ATTR_ATTEMPT: ctx.attempt,
    }
    return hop_span(BODY_SPAN, Hop.EXECUTE, Kind.APP, attributes, start_time=started_ns)
