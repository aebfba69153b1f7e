"""The workflow store's own spans: its database work within the hop of a run's
waterfall, the run each item of a batch names in the batch's span copies, and the run
span of a run the store itself ended with no worker to record it (``run_ended``)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager

from opentelemetry.trace import Span

from cronwave_core.telemetry import fanout
from cronwave_core.telemetry.run_span import record_run_span
from cronwave_core.telemetry.spans import hop_span
from cronwave_core.telemetry.tracing import tracing_enabled
from cronwave_core.telemetry.vocabulary import (
    ATTR_ATTEMPT,
    ATTR_FIRE_TIME,
    ATTR_JOB_TYPE,
    ATTR_QUEUE,
    ATTR_RUN_ID,
    ATTR_RUN_STATE,
    ATTR_SCHEDULE_ID,
    ATTR_TRIGGER,
    ATTR_WORKER_ID,
    Hop,
    Kind,
    run_attributes,
)
from workflow_store import convert
from workflow_store.records import RunRecord


def db_span(
    name: str, hop: Hop, run_id: str = "", schedule_id: str = "", fire_time: str = ""
) -> AbstractContextManager[Span]:
    """The span of an RPC's database work within its hop of the run's waterfall."""
    attrs = {}
    if run_id:
        attrs[ATTR_RUN_ID] = run_id
    if schedule_id:
        attrs[ATTR_SCHEDULE_ID] = schedule_id
    if fire_time:
        attrs[ATTR_FIRE_TIME] = fire_time
    return hop_span(f"workflow-store {name}", hop=hop, kind=Kind.DATABASE, attributes=attrs)


def mark_run(span: Span, run: RunRecord) -> None:
    span.set_attributes(
        {
            **run_attributes(run.run_id, run.schedule_id, convert.iso(run.fire_time)),
            ATTR_JOB_TYPE: run.job_type,
            ATTR_QUEUE: run.queue,
            ATTR_ATTEMPT: run.attempt,
        }
    )
    if run.worker_id:
        span.set_attribute(ATTR_WORKER_ID, run.worker_id)


def annotate_batch(messages: Sequence[object], runs: Sequence[RunRecord | None]) -> None:
    """Name each item's run in the copies of this batch's spans (``fanout``): a
    claim or completion names only the run id, the store knows the rest."""
    if not tracing_enabled():
        return
    annotations = []
    for message, run in zip(messages, runs, strict=True):
        traceparent = getattr(message, "traceparent", "")
        if run is not None and traceparent:
            attributes = run_attributes(run.run_id, run.schedule_id, run.fire_time.isoformat())
            annotations.append((traceparent, attributes))
    fanout.annotate_many(annotations)


def run_ended(run: RunRecord) -> None:
    """Record the run span of ``run``, which a call to the store ended (a run no worker
    held, cancelled): no worker's completion will (``run_span``). Its end is now, the
    change durable."""
    if not run.state.terminal or len(run.trace_id) != 32 or not tracing_enabled():
        return
    try:
        trace_id = int(run.trace_id, 16)
    except ValueError:
        return
    attributes = {
        **run_attributes(run.run_id, run.schedule_id, convert.iso(run.fire_time)),
        ATTR_JOB_TYPE: run.job_type,
        ATTR_ATTEMPT: run.attempt,
        ATTR_TRIGGER: run.trigger.value,
        ATTR_RUN_STATE: run.state.value.upper(),
    }
    record_run_span(trace_id, attributes)
