"""The ``JobContext`` the worker gives a job body, in a thread of the worker or in a
job process: the run's fields, its checkpoint, the attempt's heartbeat, and the trace
id of the attempt's span, which the context's logger writes on every line."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from opentelemetry import trace

from cronwave import Checkpoint, JobContext
from cronwave._checkpoint import Report

#: A checkpoint as the worker passes it on: a JSON object.
CheckpointData = dict[str, Any]


def current_trace_id() -> str:
    """The trace id of the current span, in hex, or "" outside a trace."""
    span_context = trace.get_current_span().get_span_context()
    return format(span_context.trace_id, "032x") if span_context.is_valid else ""


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
    )
