"""OTLP to a real collector: with ``OTEL_EXPORTER_OTLP_ENDPOINT`` every service sends
its spans with the SDK's OTLP exporter (gRPC or HTTP, ``OTEL_EXPORTER_OTLP_PROTOCOL``)
to a receiver written here, and a run's trace arrives whole; a span is never waited
for, and one dropped because the export queue is full is counted."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from cronwave_core.settings import TelemetrySettings
from cronwave_core.telemetry.export_metrics import DROPPED, CountingBatchSpanProcessor
from cronwave_core.telemetry.run_span import run_span_id
from cronwave_core.telemetry.tracing import otlp_exporter
from cronwave_core.telemetry.vocabulary import ATTR_HOP, ATTR_KIND
from tests.harness.clients import client_for
from tests.helpers import eventually
from tests.tracing.otlp_receiver import GrpcReceiver, HttpReceiver, Received
from tests.tracing.support import QUIET, scheduled_tick

#: The services a scheduled run's trace crosses.
RUN_SERVICES = {"cron-planner", "dispatcher", "workflow-store", "worker"}


def _whole(spans: list[Received], trace_id: str) -> list[Received] | None:
    """The trace, once its run span and every span's parent have arrived."""
    trace = [s for s in spans if s.trace_id == trace_id]
    ids = {s.span_id for s in trace}
    root = f"{run_span_id(int(trace_id, 16)):016x}"
    if root not in ids or any(s.parent_span_id not in ids for s in trace if s.span_id != root):
        return None
    return trace


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_a_scheduled_run_arrives_whole_at_an_otlp_receiver(make_suite, protocol: str) -> None:
    # Given a suite whose services send their spans to an OTLP receiver
    receiver = GrpcReceiver() if protocol == "grpc" else HttpReceiver()
    try:
        env = {
            **QUIET,
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
        }
        suite = make_suite(env=env)

        # When the planner fires a run
        run_id = scheduled_tick(suite)
        with client_for(suite) as client:
            trace_id = client.get_run(run_id).trace_id

        # Then its trace arrives whole: the run span and every span's parent
        trace = eventually(
            lambda: _whole(receiver.spans(), trace_id), timeout=30, what="the whole trace"
        )
        suite.stop()  # before the receiver: a service's last export goes to it
    finally:
        receiver.stop()
    (root,) = [s for s in trace if not s.parent_span_id]
    assert root.name == "cronwave.run" and root.attributes["cronwave.run_id"] == run_id
    # from every service it crossed, each named by its resource's service.name
    assert {s.service for s in trace} >= RUN_SERVICES
    assert all(s.service for s in trace)
    # every span of it placed
    assert all(s.attributes.get(ATTR_HOP) and s.attributes.get(ATTR_KIND) for s in trace)
    # and the run span covers it
    assert root.start_ns <= min(s.start_ns for s in trace)
    assert root.end_ns >= max(s.end_ns for s in trace)


class _Stuck(SpanExporter):
    """An exporter whose export waits until released (a collector that is away)."""

    def __init__(self) -> None:
        self.called = threading.Event()
        self.release = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.called.set()
        self.release.wait(30)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.set()


def test_a_full_export_queue_drops_spans_without_waiting_and_counts_them() -> None:
    # Given a batch processor of 4 spans whose exporter is stuck on its first batch
    exporter = _Stuck()
    processor = CountingBatchSpanProcessor(
        exporter, max_queue_size=4, max_export_batch_size=4, schedule_delay_millis=60_000
    )
    assert processor.counts_drops
    provider = TracerProvider(resource=Resource.create({"service.name": "probe"}))
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("probe")
    dropped = DROPPED.labels("queue_full")
    try:
        for _ in range(4):
            tracer.start_span("first").end()
        assert exporter.called.wait(10), "the first batch was not handed to the exporter"
        before = dropped._value.get()

        # When more spans end than the queue holds
        began = time.monotonic()
        for _ in range(4 + 3):
            tracer.start_span("later").end()
        took = time.monotonic() - began

        # Then the ones that did not fit are counted, and no span waited for them
        assert dropped._value.get() - before == 3
        assert took < 1.0, took
    finally:
        exporter.release.set()
        provider.shutdown()


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_the_sdk_exporter_of_the_protocol_delivers_to_its_receiver(protocol: str) -> None:
    # Given the exporter init_tracing picks for the protocol, and a receiver of it
    receiver = GrpcReceiver() if protocol == "grpc" else HttpReceiver()
    settings = TelemetrySettings.from_env(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol}
    )
    assert settings.otlp_endpoint == receiver.endpoint
    exporter = otlp_exporter(settings.otlp_endpoint, settings)
    provider = TracerProvider(resource=Resource.create({"service.name": "probe"}))
    provider.add_span_processor(
        CountingBatchSpanProcessor(exporter, max_queue_size=16, max_export_batch_size=4)
    )
    try:
        # When a span ends and the provider flushes
        provider.get_tracer("probe").start_span("one", attributes={"n": 1}).end()
        assert provider.force_flush(10_000)
        # Then the receiver has it, from service probe
        (got,) = eventually(receiver.spans, timeout=10, what="the span received")
    finally:
        provider.shutdown()
        receiver.stop()
    assert (got.service, got.name, got.attributes["n"]) == ("probe", "one", 1)


def test_an_unknown_otlp_protocol_stops_start_up_naming_the_variable() -> None:
    with pytest.raises(Exception, match="OTEL_EXPORTER_OTLP_PROTOCOL"):
        TelemetrySettings.from_env({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
