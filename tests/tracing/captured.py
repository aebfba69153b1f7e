"""Spans drawn in the test's own process (``spans.tracer``), placed as a service's are
(``RunAttributesProcessor``), and read as the waterfall reads a span store."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from cronwave_core.telemetry.propagation import RunAttributesProcessor
from cronwave_waterfall import Span


def capturing_tracer() -> tuple[Tracer, InMemorySpanExporter]:
    """A tracer whose spans end in the returned exporter, given their run attributes,
    hop and kind as a service's are."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(RunAttributesProcessor())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("cronwave"), exporter


def as_waterfall_spans(finished: tuple[ReadableSpan, ...] | list[ReadableSpan]) -> list[Span]:
    """The spans as the waterfall's ``Span``s."""
    out = []
    for s in finished:
        assert s.context is not None and s.start_time is not None and s.end_time is not None
        out.append(
            Span(
                trace_id=f"{s.context.trace_id:032x}",
                span_id=f"{s.context.span_id:016x}",
                parent_span_id=f"{s.parent.span_id:016x}" if s.parent else "",
                name=s.name,
                service="test",
                start_ns=s.start_time,
                end_ns=s.end_time,
                attributes=dict(s.attributes or {}),
                span_kind=s.kind.name,
            )
        )
    return out
