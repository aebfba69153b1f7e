"""One tracer provider per process, built by ``init_tracing`` in each ``main()``.

Spans go to an OTLP endpoint when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (Jaeger
ingests OTLP); otherwise they are kept as JSON lines under ``<data dir>/spans``
(``export.JsonLinesSpanExporter``) so the waterfall tools work offline.

With ``CRONWAVE_TRACING=off`` no tracer provider is installed: every span is
OpenTelemetry's no-op span, and the gRPC instrumentation is left out too
(``tracing_enabled``), so tracing costs nothing but a few function calls.
"""

from __future__ import annotations

import sys

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from cronwave_core.settings import TelemetrySettings
from cronwave_core.telemetry import fanout
from cronwave_core.telemetry.export import JsonLinesSpanExporter
from cronwave_core.telemetry.export_metrics import CountingExporter
from cronwave_core.telemetry.lean import LeanTracerProvider
from cronwave_core.telemetry.propagation import RunAttributesProcessor

_tracing = False


def tracing_enabled() -> bool:
    """True once ``init_tracing`` installed a recording tracer provider here."""
    return _tracing


def init_tracing(service: str, settings: TelemetrySettings) -> TracerProvider:
    """Build this process's tracer provider; with tracing on, make it the global one.

    With ``CRONWAVE_TRACING=off`` the provider returned records nothing and is not
    installed (spans stay OpenTelemetry's no-op ones); shutting it down is harmless."""
    global _tracing
    if settings.switch_interval:
        # The span exporter's thread shares the interpreter with the calls: while it
        # encodes a batch, a call that gave up the GIL at a blocking read waits up to a
        # whole switch interval to get it back, at every read. A shorter interval
        # bounds that tail, at a cost in throughput (docs/operations.md).
        sys.setswitchinterval(settings.switch_interval.total_seconds())
    provider = LeanTracerProvider(resource=Resource.create({"service.name": service}))
    if not settings.tracing:
        return provider
    provider.add_span_processor(RunAttributesProcessor())
    # A batch call's spans stand for one copy per run it carried (fanout): the local
    # store keeps the batch's items beside its spans, OTLP gets the copies.
    exporter: SpanExporter
    if settings.otlp_endpoint:
        # Imported only when asked for: the OTLP exporter loads grpc's protobuf
        # stubs for the collector, which a process writing JSON lines never needs.
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        exporter = fanout.FanOutExporter(OTLPSpanExporter(endpoint=settings.otlp_endpoint))
    else:
        exporter = JsonLinesSpanExporter(settings.spans_dir, service, fanout.REGISTRY)
    provider.add_span_processor(
        BatchSpanProcessor(
            CountingExporter(exporter),
            max_queue_size=65536,
            max_export_batch_size=4096,
            schedule_delay_millis=500,
        )
    )
    trace.set_tracer_provider(provider)
    _tracing = True
    return provider
