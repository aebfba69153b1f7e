"""The workflow store's own spans: its database work within the hop of a run's
waterfall, and the run each item of a batch names in the batch's span copies."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager

from opentelemetry.trace import Span

from cronwave_core.telemetry import fanout
from cronwave_core.telemetry.spans import hop_span
from cronwave_core.telemetry.tracing import tracing_enabled
from cronwave_core.telemetry.vocabulary import (
    ATTR_ATTEMPT,
    ATTR_FIRE_TIME,
    ATTR_JOB_TYPE,
    ATTR_QUEUE,
    ATTR_RUN_ID,
    ATTR_SCHEDULE_ID,
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
