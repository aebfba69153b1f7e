"""One tracer provider per process, built by ``init_tracing`` in each ``main()``.

Spans go to an OTLP endpoint when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (Jaeger and
the OpenTelemetry Collector ingest OTLP), through the SDK's OTLP exporter for
``OTEL_EXPORTER_OTLP_PROTOCOL`` (``grpc``, the default, or ``http/protobuf``);
otherwise they are kept as JSON lines under ``<data dir>/spans``
(``export.JsonLinesSpanExporter``) so the waterfall tools work offline. Either way a
batch span processor exports them from its own thread: a span's end only puts it in
a bounded queue, and what a full queue drops is counted
(``cronwave_spans_dropped_total``, ``export_metrics``).

A process given ``deferred`` (the worker) also records the spans of runs that are not
sampled, and holds them there until the run's outcome decides whether they are
exported (``deferred.DeferredSpans``); every other process records nothing of such a
run (``run_span``: the decision is made where the run's trace begins).

With ``CRONWAVE_TRACING=off`` no tracer provider is installed: every span is
OpenTelemetry's no-op span, and the gRPC instrumentation is left out too
(``tracing_enabled``), so tracing costs nothing but a few function calls.
"""

from __future__ import annotations

import sys

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

from cronwave_core.settings import TelemetrySettings
from cronwave_core.telemetry import fanout
from cronwave_core.telemetry.deferred import RECORD_UNSAMPLED_RUNS, DeferredSpans
from cronwave_core.telemetry.export import JsonLinesSpanExporter
from cronwave_core.telemetry.export_metrics import CountingBatchSpanProcessor, CountingExporter
from cronwave_core.telemetry.lean import LeanTracerProvider
from cronwave_core.telemetry.propagation import RunAttributesProcessor

_tracing = False
#: Spans that may wait for export in a process; past this, the oldest are dropped.
QUEUE_SIZE = 65536
#: Spans per OTLP request: well under a collector's 4 MiB receive limit (copies of a
#: batch's spans are sent in requests of this many too, ``fanout.FanOutExporter``).
OTLP_BATCH = 512


def tracing_enabled() -> bool:
    """True once ``init_tracing`` installed a recording tracer provider here."""
    return _tracing


def init_tracing(
    service: str, settings: TelemetrySettings, deferred: DeferredSpans | None = None
) -> TracerProvider:
    """Build this process's tracer provider; with tracing on, make it the global one.
    With ``deferred``, the spans of runs not sampled are recorded and held there
    (its ``keep`` exports them through this provider's export processor).

    With ``CRONWAVE_TRACING=off`` the provider returned records nothing and is not
    installed (spans stay OpenTelemetry's no-op ones); shutting it down is harmless."""
    global _tracing
    if settings.switch_interval:
        # The span exporter's thread shares the interpreter with the calls: while it
        # encodes a batch, a call that gave up the GIL at a blocking read waits up to a
        # whole switch interval to get it back, at every read. A shorter interval
        # bounds that tail, at a cost in throughput (docs/operations/drills.md).
        sys.setswitchinterval(settings.switch_interval.total_seconds())
    resource = Resource.create({"service.name": service})
    if deferred is not None and settings.tracing:
        provider = LeanTracerProvider(resource=resource, sampler=RECORD_UNSAMPLED_RUNS)
    else:
        provider = LeanTracerProvider(resource=resource)
    if not settings.tracing:
        return provider
    provider.add_span_processor(RunAttributesProcessor())
    # A batch call's spans stand for one copy per run it carried (fanout): the local
    # store keeps the batch's items beside its spans, OTLP gets the copies.
    exporter: SpanExporter
    if settings.otlp_endpoint:
        exporter = fanout.FanOutExporter(otlp_exporter(settings.otlp_endpoint, settings))
        batch = OTLP_BATCH
    else:
        exporter = JsonLinesSpanExporter(settings.spans_dir, service, fanout.REGISTRY)
        batch = 4096
    export = CountingBatchSpanProcessor(
        CountingExporter(exporter),
        max_queue_size=QUEUE_SIZE,
        max_export_batch_size=batch,
        schedule_delay_millis=500,
    )
    provider.add_span_processor(export)
    if deferred is not None:
        deferred.export = export
        provider.add_span_processor(deferred)
    trace.set_tracer_provider(provider)
    _tracing = True
    return provider


def otlp_exporter(endpoint: str, settings: TelemetrySettings) -> SpanExporter:
    """The SDK's OTLP span exporter for ``endpoint`` over ``settings.otlp_protocol``:
    gRPC to ``endpoint`` itself (``http://`` without TLS), or HTTP to
    ``<endpoint>/v1/traces`` (the path the standard variable implies). Imported only
    when asked for: a process writing JSON lines never loads either."""
    if settings.otlp_protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpExporter,
        )

        return HttpExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
        OTLPSpanExporter as GrpcExporter,
    )

    return GrpcExporter(endpoint=endpoint)
