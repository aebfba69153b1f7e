"""Jaeger JSON: the format of Jaeger UI's "upload" and of ``/api/traces``.

``{"data": [{"traceID", "spans": [...], "processes": {"p1": {"serviceName",
"tags"}}, "warnings"}]}`` with times in microseconds. The span kind travels as
the ``span.kind`` tag and the status as ``otel.status_code`` (plus ``error=true``),
the way Jaeger translates OpenTelemetry spans; the reader maps them back and drops
them from the attributes. Exporting loses sub-microsecond precision (Jaeger's unit)
and turns list attributes into JSON strings (Jaeger tags are scalars).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from cronwave_core.errors import InvalidArgument
from cronwave_waterfall.span import Span, as_int, checked_span, normalize_id

KIND_TAG = "span.kind"
STATUS_TAG = "otel.status_code"
ERROR_TAG = "error"
_REF_ORDER = {"CHILD_OF": 0, "FOLLOWS_FROM": 1}


def read_jaeger(document: Any) -> Iterator[Span]:
    """The spans of a Jaeger JSON document (a dict with ``data``)."""
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise InvalidArgument("source", "not Jaeger JSON: expected an object with a 'data' list")
    for t, trace in enumerate(document["data"]):
        where = f"data[{t}]"
        if not isinstance(trace, dict):
            raise InvalidArgument(where, "expected a trace object")
        processes = trace.get("processes") or {}
        services = {
            pid: str(proc.get("serviceName", "")) if isinstance(proc, dict) else ""
            for pid, proc in processes.items()
        }
        for s, raw in enumerate(trace.get("spans") or []):
            yield _span(raw, services, f"{where}.spans[{s}]")


def _span(raw: Any, services: dict[str, str], where: str) -> Span:
    if not isinstance(raw, dict):
        raise InvalidArgument(where, "expected a span object")
    attributes: dict[str, Any] = {}
    for i, tag in enumerate(raw.get("tags") or []):
        if not isinstance(tag, dict) or "key" not in tag:
            raise InvalidArgument(f"{where}.tags[{i}]", "expected {key, type, value}")
        attributes[str(tag["key"])] = _tag_value(tag, f"{where}.tags[{i}]")
    span_kind = str(attributes.pop(KIND_TAG, "internal"))
    status = str(attributes.pop(STATUS_TAG, "UNSET"))
    if attributes.get(ERROR_TAG) is True:
        attributes.pop(ERROR_TAG)
        status = "ERROR"
    start_us = as_int(raw.get("startTime"), f"{where}.startTime")
    duration_us = as_int(raw.get("duration", 0), f"{where}.duration")
    process = raw.get("process")
    service = (
        str(process.get("serviceName", ""))
        if isinstance(process, dict)
        else services.get(str(raw.get("processID", "")), "")
    )
    return checked_span(
        trace_id=normalize_id(raw.get("traceID"), 32, f"{where}.traceID"),
        span_id=normalize_id(raw.get("spanID"), 16, f"{where}.spanID"),
        parent_span_id=_parent(raw, where),
        name=str(raw.get("operationName", "")),
        service=service,
        start_ns=start_us * 1000,
        end_ns=(start_us + duration_us) * 1000,
        attributes=attributes,
        status=status,
        span_kind=span_kind,
        where=where,
    )


def _parent(raw: dict[str, Any], where: str) -> str:
    """The first CHILD_OF reference, else the first FOLLOWS_FROM (a queued message's
    consumer may only follow its producer), else the legacy ``parentSpanID``."""
    refs = [r for r in raw.get("references") or [] if isinstance(r, dict)]
    refs.sort(key=lambda r: _REF_ORDER.get(str(r.get("refType", "")).upper(), 2))
    for ref in refs:
        parent = normalize_id(ref.get("spanID"), 16, f"{where}.references.spanID")
        if parent:
            return parent
    return normalize_id(raw.get("parentSpanID"), 16, f"{where}.parentSpanID")


def _tag_value(tag: dict[str, Any], where: str) -> Any:
    kind = str(tag.get("type", "string")).lower()
    value = tag.get("value")
    if kind == "bool":
        return value if isinstance(value, bool) else str(value).lower() == "true"
    if kind == "int64":
        return as_int(value, f"{where}.value")
    if kind == "float64":
        try:
            return float(str(value))
        except (TypeError, ValueError) as exc:
            raise InvalidArgument(f"{where}.value", f"expected a number, got {value!r}") from exc
    return value if isinstance(value, str) else json.dumps(value)


def _tag(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "type": "bool", "value": value}
    if isinstance(value, int):
        return {"key": key, "type": "int64", "value": value}
    if isinstance(value, float):
        return {"key": key, "type": "float64", "value": value}
    if isinstance(value, str):
        return {"key": key, "type": "string", "value": value}
    return {"key": key, "type": "string", "value": json.dumps(value, default=str)}


def export_jaeger(spans: Iterable[Span]) -> dict[str, Any]:
    """Jaeger JSON for the given spans: one ``data`` entry per trace (sorted by trace
    id), processes numbered per trace in order of first appearance. Loadable by
    Jaeger UI's "upload" and by ``read_jaeger``."""
    by_trace: dict[str, list[Span]] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    data = []
    for trace_id in sorted(by_trace):
        members = sorted(by_trace[trace_id], key=lambda s: (s.start_ns, s.span_id))
        process_ids: dict[str, str] = {}
        out_spans = []
        for span in members:
            pid = process_ids.setdefault(span.service, f"p{len(process_ids) + 1}")
            out_spans.append(_jaeger_span(span, pid))
        data.append(
            {
                "traceID": trace_id,
                "spans": out_spans,
                "processes": {
                    pid: {"serviceName": service, "tags": []}
                    for service, pid in process_ids.items()
                },
                "warnings": None,
            }
        )
    return {"data": data}


def _jaeger_span(span: Span, process_id: str) -> dict[str, Any]:
    tags = [_tag(key, value) for key, value in span.attributes.items()]
    if span.span_kind != "INTERNAL":
        tags.append(_tag(KIND_TAG, span.span_kind.lower()))
    if span.status != "UNSET":
        tags.append(_tag(STATUS_TAG, span.status))
    if span.status == "ERROR":
        tags.append(_tag(ERROR_TAG, True))
    references = (
        [{"refType": "CHILD_OF", "traceID": span.trace_id, "spanID": span.parent_span_id}]
        if span.parent_span_id
        else []
    )
    start_us = span.start_ns // 1000
    return {
        "traceID": span.trace_id,
        "spanID": span.span_id,
        "operationName": span.name,
        "references": references,
        "startTime": start_us,
        "duration": span.end_ns // 1000 - start_us,
        "tags": tags,
        "logs": [],
        "processID": process_id,
        "warnings": None,
        "flags": 1,
    }
