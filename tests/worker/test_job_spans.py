"""A job process's spans of a run not sampled (``worker.job_spans``): held, handed to
the worker with the body's outcome, or exported by the process when the worker stops
the body; a sampled run's are never held."""

from __future__ import annotations

import time

from opentelemetry import trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext

from cronwave_core.telemetry.deferred import RECORD_UNSAMPLED_RUNS, DeferredSpans
from cronwave_core.telemetry.lean import LeanTracerProvider
from cronwave_core.telemetry.propagation import extracted_context, inject_context
from cronwave_core.telemetry.run_span import decide_run_trace_id, run_flags
from worker.job_spans import HeldSpans


def _job_process() -> tuple[LeanTracerProvider, HeldSpans, InMemorySpanExporter]:
    deferred = DeferredSpans()
    exporter = InMemorySpanExporter()
    provider = LeanTracerProvider(sampler=RECORD_UNSAMPLED_RUNS)
    deferred.export = SimpleSpanProcessor(exporter)
    provider.add_span_processor(deferred.export)
    provider.add_span_processor(deferred)
    return provider, HeldSpans(deferred), exporter


def _hand_over(ratio: float, trace_id: int = 0, execute_id: int = 0xE7) -> dict[str, str]:
    """The trace context a worker's execute span hands a job process."""
    trace_id = trace_id or decide_run_trace_id(time.time_ns(), ratio)
    execute = SpanContext(trace_id, execute_id, False, run_flags(trace_id))
    with trace.use_span(NonRecordingSpan(execute)):
        return inject_context()


def _body(provider: LeanTracerProvider, carrier: dict[str, str]) -> None:
    tracer = provider.get_tracer("job")
    with (
        extracted_context(carrier),
        tracer.start_as_current_span("job.body"),
        tracer.start_as_current_span("billing.invoices"),
    ):
        pass


def test_a_run_not_sampled_hands_its_body_s_spans_over_once_with_its_outcome() -> None:
    provider, held, exporter = _job_process()
    carrier = _hand_over(0.0)

    _body(provider, carrier)
    first = held.outcome(carrier)
    again = held.outcome(carrier)  # its result could not be sent: its error is

    assert sorted(s["name"] for s in first["spans"]) == ["billing.invoices", "job.body"]
    assert again == first
    assert exporter.get_finished_spans() == ()


def test_each_attempt_of_a_run_hands_over_its_own_spans() -> None:
    # Given two attempts of one run (one trace) in the same job process
    provider, held, _ = _job_process()
    first = _hand_over(0.0, execute_id=0xA1)
    trace_id = int(first["traceparent"].split("-")[1], 16)
    second = _hand_over(0.0, trace_id, execute_id=0xA2)

    _body(provider, first)
    handed_first = held.outcome(first)
    _body(provider, second)
    handed_second = held.outcome(second)

    # Then each outcome carries its own attempt's spans, once
    assert len(handed_first["spans"]) == len(handed_second["spans"]) == 2
    ids = {s["id"] for s in handed_first["spans"]} | {s["id"] for s in handed_second["spans"]}
    assert len(ids) == 4
    bodies = [s for s in handed_first["spans"] + handed_second["spans"] if s["name"] == "job.body"]
    assert sorted(s["parent"] for s in bodies) == [0xA1, 0xA2]


def test_a_body_its_worker_stopped_is_exported_by_its_job_process() -> None:
    provider, held, exporter = _job_process()
    carrier = _hand_over(0.0)

    _body(provider, carrier)
    held.keep(carrier)

    exported = exporter.get_finished_spans()
    assert sorted(s.name for s in exported) == ["billing.invoices", "job.body"]
    assert all(s.context.trace_flags.sampled for s in exported)
    assert held.outcome(carrier) == {}


def test_a_sampled_run_s_spans_are_exported_as_they_end_and_not_handed_over() -> None:
    provider, held, exporter = _job_process()
    carrier = _hand_over(1.0)

    _body(provider, carrier)

    assert held.outcome(carrier) == {}
    assert len(exporter.get_finished_spans()) == 2


def test_a_process_with_tracing_off_holds_nothing() -> None:
    assert HeldSpans(None).outcome(_hand_over(0.0)) == {}
