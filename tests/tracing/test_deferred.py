"""The head decision written into a run's trace id (``run_span``), and the spans of a
run not sampled held back in the process until its outcome decides
(``telemetry.deferred``): with the SDK's own processors and exporter."""

from __future__ import annotations

import json
import time

from opentelemetry import trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

from cronwave_core.telemetry import fanout, span_wire
from cronwave_core.telemetry.deferred import RECORD_UNSAMPLED_RUNS, DeferredSpans
from cronwave_core.telemetry.lean import LeanTracerProvider
from cronwave_core.telemetry.run_span import (
    decide_run_trace_id,
    run_context,
    run_sampled,
    run_start_ns,
)

DRAWS = 10_000


def _provider(
    deferred: DeferredSpans | None, sampler: object = RECORD_UNSAMPLED_RUNS
) -> tuple[LeanTracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = LeanTracerProvider(sampler=sampler)
    export = SimpleSpanProcessor(exporter)
    provider.add_span_processor(export)
    if deferred is not None:
        deferred.export = export
        provider.add_span_processor(deferred)
    return provider, exporter


def _spans_under(provider: LeanTracerProvider, trace_id: int, names: list[str]) -> None:
    tracer = provider.get_tracer("test")
    for name in names:
        with tracer.start_as_current_span(name, context=run_context(trace_id)):
            pass


def test_a_ratio_samples_its_share_of_runs_and_the_id_keeps_the_start() -> None:
    start = time.time_ns()
    for ratio, low, high in (
        (0.0, 0, 0),
        (0.01, 50, 160),
        (0.5, 4_700, 5_300),
        (1.0, DRAWS, DRAWS),
    ):
        ids = [decide_run_trace_id(start, ratio) for _ in range(DRAWS)]
        sampled = sum(run_sampled(t) for t in ids)
        assert low <= sampled <= high, (ratio, sampled)
        assert {run_start_ns(t) for t in ids} == {start}


def test_a_run_not_sampled_is_held_and_kept_whole_as_sampled() -> None:
    deferred = DeferredSpans()
    provider, exporter = _provider(deferred)
    trace_id = decide_run_trace_id(time.time_ns(), 0.0)

    _spans_under(provider, trace_id, ["worker.pickup", "worker.execute"])

    assert exporter.get_finished_spans() == ()
    assert deferred.held(trace_id) == 2
    assert deferred.keep(trace_id) == 2
    kept = exporter.get_finished_spans()
    assert sorted(s.name for s in kept) == ["worker.execute", "worker.pickup"]
    assert all(s.context.trace_id == trace_id and s.context.trace_flags.sampled for s in kept)
    assert deferred.held(trace_id) == 0


def test_a_run_not_sampled_that_is_dropped_leaves_nothing() -> None:
    deferred = DeferredSpans()
    provider, exporter = _provider(deferred)
    trace_id = decide_run_trace_id(time.time_ns(), 0.0)
    _spans_under(provider, trace_id, ["worker.execute"])

    deferred.drop(trace_id)

    assert deferred.keep(trace_id) == 0
    assert exporter.get_finished_spans() == ()


def test_a_sampled_run_goes_straight_to_export_and_is_not_held() -> None:
    deferred = DeferredSpans()
    provider, exporter = _provider(deferred)
    trace_id = decide_run_trace_id(time.time_ns(), 1.0)

    _spans_under(provider, trace_id, ["worker.execute"])

    assert [s.name for s in exporter.get_finished_spans()] == ["worker.execute"]
    assert deferred.held(trace_id) == 0


def test_a_process_that_holds_nothing_records_nothing_of_a_run_not_sampled() -> None:
    # the planner, the dispatcher, the store: the SDK's default sampler (ParentBased)
    provider, exporter = _provider(None, sampler=None)
    trace_id = decide_run_trace_id(time.time_ns(), 0.0)
    tracer = provider.get_tracer("test")

    with tracer.start_as_current_span("dispatch", context=run_context(trace_id)) as span:
        recording = span.is_recording()

    assert not recording
    assert exporter.get_finished_spans() == ()


def test_a_holding_process_records_nothing_of_a_batch_that_carried_no_sampled_run() -> None:
    deferred = DeferredSpans()
    provider, exporter = _provider(deferred)
    item = fanout.Item(decide_run_trace_id(time.time_ns(), 0.0), 7)
    tracer = provider.get_tracer("cronwave.batch")

    context = fanout.unsampled_context()
    with tracer.start_as_current_span("worker.complete_runs", context=context) as span:
        fanout.register([item], span.get_span_context().trace_id)
        recording = span.is_recording()

    assert not recording
    assert exporter.get_finished_spans() == ()


def test_the_held_spans_are_bounded_the_oldest_run_going_first() -> None:
    deferred = DeferredSpans(max_spans=3)
    provider, _ = _provider(deferred)
    first, second = (decide_run_trace_id(time.time_ns(), 0.0) for _ in range(2))

    _spans_under(provider, first, ["a", "b"])
    _spans_under(provider, second, ["c", "d"])

    assert (deferred.held(first), deferred.held(second)) == (0, 2)


def test_a_run_s_own_spans_are_bounded_too_keeping_its_first() -> None:
    deferred = DeferredSpans(max_spans=100, max_run_spans=2)
    provider, exporter = _provider(deferred)
    trace_id = decide_run_trace_id(time.time_ns(), 0.0)

    _spans_under(provider, trace_id, ["a", "b", "c"])

    assert deferred.keep(trace_id) == 2
    assert sorted(s.name for s in exporter.get_finished_spans()) == ["a", "b"]


def test_a_batch_copies_only_into_sampled_runs_and_one_of_none_is_not_sampled() -> None:
    sampled = fanout.Item(decide_run_trace_id(time.time_ns(), 1.0), 7)
    left_out = fanout.Item(decide_run_trace_id(time.time_ns(), 0.0), 8)
    assert sampled.traceparent().endswith("-01") and left_out.traceparent().endswith("-00")
    record = fanout.batch_record(1, [sampled, left_out])
    assert [item[0] for item in record["items"]] == [f"{sampled.trace_id:032x}"]

    provider, exporter = _provider(None, sampler=None)
    with provider.get_tracer("test").start_as_current_span("batch call") as span:
        pass
    registry = fanout.Registry()
    registry.add(span.get_span_context().trace_id, [sampled, left_out])
    copies = fanout.expand(exporter.get_finished_spans(), registry)
    assert [c.context.trace_id for c in copies] == [sampled.trace_id]


def test_spans_a_job_process_held_are_handed_over_as_json_and_kept_whole() -> None:
    # Given a job process's spans of a run not sampled: the body's, and the job's own
    # beneath it, all beneath the worker's execute span (the hand-over's context)
    trace_id = decide_run_trace_id(time.time_ns(), 0.0)
    job_deferred = DeferredSpans()
    job_provider, job_exporter = _provider(job_deferred)
    tracer = job_provider.get_tracer("job")
    execute = SpanContext(trace_id, 0xE7, True, TraceFlags(TraceFlags.DEFAULT))
    with tracer.start_as_current_span(
        "job.body", context=trace.set_span_in_context(NonRecordingSpan(execute))
    ) as body:
        body.set_attribute("cronwave.hop", "execute")
        with tracer.start_as_current_span("billing.invoices", kind=SpanKind.CLIENT) as own:
            own.set_attributes({"rows": 3, "ratio": float("nan"), "tables": ("a", "b")})
            own.add_event("batch", {"n": 1})
            own.set_status(Status(StatusCode.ERROR, "card declined"))

    # When it hands them over as JSON, and the worker holds them and keeps the run
    handed = json.loads(json.dumps(span_wire.encode(job_deferred.take(trace_id))))
    worker_deferred = DeferredSpans()
    _, exporter = _provider(worker_deferred)
    for span in span_wire.decode(trace_id, handed):
        worker_deferred.on_end(span)
    kept = worker_deferred.keep(trace_id)

    # Then the worker exports them, sampled, as they were recorded; the job process
    # exported nothing itself
    assert job_exporter.get_finished_spans() == ()
    assert kept == 2
    spans = {s.name: s for s in exporter.get_finished_spans()}
    body_span, own_span = spans["job.body"], spans["billing.invoices"]
    assert body_span.parent.span_id == 0xE7 and body_span.parent.is_remote
    assert own_span.parent.span_id == body_span.context.span_id
    assert all(
        s.context.trace_id == trace_id and s.context.trace_flags.sampled for s in spans.values()
    )
    assert own_span.kind is SpanKind.CLIENT
    assert own_span.status.status_code is StatusCode.ERROR
    assert own_span.status.description == "card declined"
    assert dict(own_span.attributes) == {"rows": 3, "ratio": "nan", "tables": ("a", "b")}
    assert [(e.name, dict(e.attributes)) for e in own_span.events] == [("batch", {"n": 1})]
    assert own_span.start_time <= own_span.end_time
    assert body_span.attributes["cronwave.hop"] == "execute"


def test_what_is_not_a_handed_span_is_left_out() -> None:
    trace_id = decide_run_trace_id(time.time_ns(), 0.0)
    assert span_wire.decode(trace_id, {"spans": []}) == []
    assert span_wire.decode(trace_id, [{"name": "no ids"}, "text"]) == []
