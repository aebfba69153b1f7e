"""Spans lost in export, counted for ``/metrics``: the batch span processor does not
retry a batch its exporter failed, so every span of it is dropped."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from prometheus_client import Counter

DROPPED = Counter(
    "cronwave_spans_dropped",
    "Spans lost in export (reason=export_failed: the exporter failed their batch)",
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
