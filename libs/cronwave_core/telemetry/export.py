"""Where finished spans go when no OTLP endpoint is set: JSON lines under
``<data dir>/spans``, one finished span per line (``span_to_dict``), so the waterfall
tools work offline. A batch's items are kept beside its spans (``batch_record`` in
``fanout``), and the reader makes each run's copies.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from cronwave_core.telemetry.fanout import Registry, batch_record
from cronwave_core.telemetry.lean import plain_attributes


def span_to_dict(span: ReadableSpan) -> dict[str, Any]:
    """The local span store's line format: OTLP's fields, flattened."""
    resource = span.resource.attributes if span.resource else {}
    return _span_fields(span, str(resource.get("service.name", "")), dict(plain_attributes(span)))


_LINE_OPTIONS = orjson.OPT_APPEND_NEWLINE


def span_line(span: ReadableSpan, service: str) -> bytes:
    """``span_to_dict(span)`` as one line of JSON (UTF-8, newline-terminated), with
    ``service`` as its service and the span's own attributes dict (no copy); written by
    orjson (a ``LeanSpan`` costs 14-15 µs of CPU from start to line so, 18-20 µs with
    the standard library's encoder: ``python tools/microbench.py spans``)."""
    fields = _span_fields(span, service, _attributes_dict(span))
    return orjson.dumps(fields, default=str, option=_LINE_OPTIONS)


def _span_fields(span: ReadableSpan, service: str, attributes: dict[str, Any]) -> dict[str, Any]:
    ctx = span.get_span_context()
    parent = span.parent
    return {
        "trace_id": f"{ctx.trace_id:032x}" if ctx else "",
        "span_id": f"{ctx.span_id:016x}" if ctx else "",
        "parent_span_id": f"{parent.span_id:016x}" if parent else "",
        "name": span.name,
        "service": service,
        "kind": span.kind.name if span.kind else "INTERNAL",
        "start_ns": span.start_time,
        "end_ns": span.end_time,
        "attributes": attributes,
        "status": span.status.status_code.name if span.status else "UNSET",
    }


def _attributes_dict(span: ReadableSpan) -> dict[str, Any]:
    attributes = plain_attributes(span)
    return attributes if type(attributes) is dict else dict(attributes)


class JsonLinesSpanExporter(SpanExporter):
    """Appends finished spans to ``<dir>/<service>-<pid>.jsonl``, one JSON per line.

    Each batch is one write followed by a flush, so a reader sees whole batches (only
    a process killed mid-write leaves a partial last line)."""

    def __init__(self, directory: Path, service: str, batches: Registry | None = None) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{service}-{os.getpid()}.jsonl"
        self._lock = threading.Lock()
        self._file = self.path.open("ab")
        self._resource: Any = None
        self._service = ""
        self._batches = batches

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = b"".join([span_line(s, self._service_of(s)) for s in spans])
        if self._batches is not None:
            lines += _batch_lines(spans, self._batches)
        with self._lock:
            if self._file.closed:
                return SpanExportResult.FAILURE
            self._file.write(lines)
            self._file.flush()
        return SpanExportResult.SUCCESS

    def _service_of(self, span: ReadableSpan) -> str:
        """The span's ``service.name``, looked up once per resource (a process's spans
        share one)."""
        resource = span.resource
        if resource is not self._resource:
            name = resource.attributes.get("service.name", "") if resource else ""
            self._service = str(name)
            self._resource = resource
        return self._service

    def shutdown(self) -> None:
        with self._lock:
            self._file.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _batch_lines(spans: Sequence[ReadableSpan], batches: Registry) -> bytes:
    """A line per batch whose spans are among ``spans``: its items, from which the
    reader copies the batch's spans into each run's trace (a later line of the
    same batch, with attributes learnt since, completes an earlier one)."""
    seen: set[int] = set()
    lines: list[bytes] = []
    for span in spans:
        trace_id = span.context.trace_id if span.context is not None else 0
        if trace_id in seen:
            continue
        seen.add(trace_id)
        items = batches.get(trace_id)
        if items:
            lines.append(
                orjson.dumps(batch_record(trace_id, items), default=str, option=_LINE_OPTIONS)
            )
    return b"".join(lines)
