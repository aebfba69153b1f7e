"""Tracing: one tracer provider per process, spans named by hop and kind.

Spans go to an OTLP endpoint when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (Jaeger
ingests OTLP); otherwise they are kept as JSON lines under ``<data dir>/spans`` so the
waterfall tools work offline. Each line is one finished span (see ``span_to_dict``).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import Span

from cronwave_core.settings import Settings

HOPS = ("plan", "leader", "dispatch", "persist", "pickup", "execute", "complete")
KINDS = ("network", "serialization", "cache", "database", "queue", "app")

ATTR_HOP = "cronwave.hop"
ATTR_KIND = "cronwave.kind"
ATTR_RUN_ID = "cronwave.run_id"
ATTR_SCHEDULE_ID = "cronwave.schedule_id"
ATTR_FIRE_TIME = "cronwave.fire_time"
ATTR_CACHE_HIT = "cronwave.cache.hit"


def span_to_dict(span: ReadableSpan) -> dict[str, Any]:
    """The local span store's line format: OTLP's fields, flattened."""
    ctx = span.get_span_context()
    parent = span.parent
    resource = span.resource.attributes if span.resource else {}
    return {
        "trace_id": f"{ctx.trace_id:032x}" if ctx else "",
        "span_id": f"{ctx.span_id:016x}" if ctx else "",
        "parent_span_id": f"{parent.span_id:016x}" if parent else "",
        "name": span.name,
        "service": str(resource.get("service.name", "")),
        "kind": span.kind.name if span.kind else "INTERNAL",
        "start_ns": span.start_time,
        "end_ns": span.end_time,
        "attributes": dict(span.attributes or {}),
        "status": span.status.status_code.name if span.status else "UNSET",
    }


class JsonLinesSpanExporter(SpanExporter):
    """Appends finished spans to ``<dir>/<service>-<pid>.jsonl``, one JSON per line."""

    def __init__(self, directory: Path, service: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{service}-{os.getpid()}.jsonl"
        self._lock = threading.Lock()
        self._file = self.path.open("a", encoding="utf-8")

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = "".join(json.dumps(span_to_dict(s), default=str) + "\n" for s in spans)
        with self._lock:
            if self._file.closed:
                return SpanExportResult.FAILURE
            self._file.write(lines)
            self._file.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        with self._lock:
            self._file.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def init_tracing(service: str, settings: Settings) -> TracerProvider:
    """Build this process's tracer provider and make it the global one."""
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    if settings.tracing:
        exporter: SpanExporter
        if settings.otlp_endpoint:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter(endpoint=settings.otlp_endpoint)
        else:
            exporter = JsonLinesSpanExporter(settings.spans_dir, service)
        provider.add_span_processor(
            BatchSpanProcessor(exporter, max_queue_size=65536, schedule_delay_millis=500)
        )
    trace.set_tracer_provider(provider)
    return provider


def run_attributes(run_id: str, schedule_id: str, fire_time: str) -> dict[str, str]:
    """The attributes every span of a run carries."""
    return {ATTR_RUN_ID: run_id, ATTR_SCHEDULE_ID: schedule_id, ATTR_FIRE_TIME: fire_time}


@contextmanager
def hop_span(
    name: str,
    hop: str,
    kind: str,
    attributes: Mapping[str, Any] | None = None,
    tracer_name: str = "cronwave",
) -> Iterator[Span]:
    """A span that belongs to ``hop`` and measures ``kind`` time."""
    attrs: dict[str, Any] = {ATTR_HOP: hop, ATTR_KIND: kind}
    if attributes:
        attrs.update(attributes)
    with trace.get_tracer(tracer_name).start_as_current_span(name, attributes=attrs) as span:
        yield span


def inject_context() -> dict[str, str]:
    """The current trace context as a carrier for a queued message."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


@contextmanager
def extracted_context(carrier: Mapping[str, str]) -> Iterator[None]:
    """Make the trace context carried by a message current for the block."""
    token = otel_context.attach(propagate.extract(dict(carrier)))
    try:
        yield
    finally:
        otel_context.detach(token)
