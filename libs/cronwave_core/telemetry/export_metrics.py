"""Spans lost on their way out, counted for ``/metrics``
(``cronwave_spans_dropped_total``, by ``reason``):

- ``queue_full``: the batch span processor's queue was full when the span ended (the
  exporter fell behind, or the collector is away and each export waits out its
  timeout); the span was dropped there and then, so no call ever waits for export;
- ``export_failed``: the exporter failed the span's batch, which the processor does
  not retry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from prometheus_client import Counter

DROPPED = Counter(
    "cronwave_spans_dropped",
    "Spans lost in export (reason=queue_full: the batch queue was full when the span "
    "ended; reason=export_failed: the exporter failed their batch)",
    ["reason"],
)


class CountingExporter(SpanExporter):
    """``inner``, counting the spans of every batch it fails (one increment per batch,
    on the exporter's thread, never on a call's)."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self._failed = DROPPED.labels("export_failed")

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception:
            self._failed.inc(len(spans))
            raise
        if result is not SpanExportResult.SUCCESS:
            self._failed.inc(len(spans))
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class CountingBatchSpanProcessor(BatchSpanProcessor):
    """The SDK's batch span processor (a bounded queue, emptied in batches by its own
    thread), counting each span it drops because the queue is full. Handing a span
    over never waits: a full queue drops its oldest span to take the new one.

    The queue's length is read from the SDK's processor (``_batch_processor._queue``,
    not a public attribute; ``tests/tracing/test_otlp.py`` fails if it goes away)."""

    def __init__(self, exporter: SpanExporter, *, max_queue_size: int, **options: Any) -> None:
        super().__init__(exporter, max_queue_size=max_queue_size, **options)
        self._max_queue = max_queue_size
        self._queue: Sequence[Any] | None = getattr(
            getattr(self, "_batch_processor", None), "_queue", None
        )
        self._full = DROPPED.labels("queue_full")

    def on_end(self, span: ReadableSpan) -> None:
        queue = self._queue
        if queue is not None and len(queue) >= self._max_queue:
            context = span.context
            if context is not None and context.trace_flags.sampled:
                self._full.inc()
        super().on_end(span)

    @property
    def counts_drops(self) -> bool:
        """Whether this processor can see its queue (and so count what it drops)."""
        return self._queue is not None
