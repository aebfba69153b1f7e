"""OTLP JSON: ``ExportTraceServiceRequest`` as the OTLP/HTTP JSON encoding writes it.

``{"resourceSpans": [{"resource": {"attributes"}, "scopeSpans": [{"scope", "spans"}]}]}``
with hex ids, nanosecond times as decimal strings, attributes as
``[{"key", "value": {"stringValue"|"intValue"|"doubleValue"|"boolValue"|...}}]``, the
span kind as an enum number (or its name) and ``status.code`` likewise. The reader
also accepts Jaeger v2's ``/api/v3`` wrapping (``{"result": {...}}``) and
base64 ids (older gateways encoded bytes that way).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from cronwave_core.errors import InvalidArgument
from cronwave_waterfall.span import SPAN_KINDS, STATUSES, Span, as_int, checked_span, normalize_id

# OTLP's enum numbers: SpanKind 0 = UNSPECIFIED, then INTERNAL..CONSUMER; StatusCode.
_KIND_BY_NUMBER = {0: "INTERNAL", **{i + 1: name for i, name in enumerate(SPAN_KINDS)}}
_NUMBER_BY_KIND = {name: number for number, name in _KIND_BY_NUMBER.items() if number}
_STATUS_BY_NUMBER = dict(enumerate(STATUSES))
_NUMBER_BY_STATUS = {name: number for number, name in _STATUS_BY_NUMBER.items()}


def read_otlp(document: Any) -> Iterator[Span]:
    """The spans of an OTLP JSON document (or of ``{"result": document}``)."""
    if isinstance(document, dict) and isinstance(document.get("result"), dict):
        document = document["result"]
    if not isinstance(document, dict) or not isinstance(document.get("resourceSpans"), list):
        raise InvalidArgument(
            "source", "not OTLP JSON: expected an object with a 'resourceSpans' list"
        )
    for r, resource_spans in enumerate(document["resourceSpans"]):
        where = f"resourceSpans[{r}]"
        resource = resource_spans.get("resource") or {}
        resource_attrs = attributes_from_otlp(resource.get("attributes"), f"{where}.resource")
        service = str(resource_attrs.get("service.name", ""))
        for s, scope_spans in enumerate(resource_spans.get("scopeSpans") or []):
            for i, raw in enumerate(scope_spans.get("spans") or []):
                yield _span(raw, service, f"{where}.scopeSpans[{s}].spans[{i}]")


def _span(raw: Any, service: str, where: str) -> Span:
    if not isinstance(raw, dict):
        raise InvalidArgument(where, "expected a span object")
    status = raw.get("status") or {}
    return checked_span(
        trace_id=normalize_id(raw.get("traceId"), 32, f"{where}.traceId"),
        span_id=normalize_id(raw.get("spanId"), 16, f"{where}.spanId"),
        parent_span_id=normalize_id(raw.get("parentSpanId"), 16, f"{where}.parentSpanId"),
        name=str(raw.get("name", "")),
        service=service,
        start_ns=as_int(raw.get("startTimeUnixNano"), f"{where}.startTimeUnixNano"),
        end_ns=as_int(raw.get("endTimeUnixNano"), f"{where}.endTimeUnixNano"),
        attributes=attributes_from_otlp(raw.get("attributes"), where),
        status=_enum(status.get("code", 0), _STATUS_BY_NUMBER),
        span_kind=_enum(raw.get("kind", 0), _KIND_BY_NUMBER),
        where=where,
    )


def _enum(raw: Any, names: dict[int, str]) -> str:
    if isinstance(raw, int) and not isinstance(raw, bool):
        return names.get(raw, names[0])
    return str(raw)


def attributes_from_otlp(raw: Any, where: str) -> dict[str, Any]:
    """``[{key, value: AnyValue}]`` as a plain dict."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise InvalidArgument(f"{where}.attributes", "expected a list of {key, value}")
    out: dict[str, Any] = {}
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or "key" not in item:
            raise InvalidArgument(f"{where}.attributes[{i}]", "expected {key, value}")
        out[str(item["key"])] = _any_value(item.get("value") or {}, f"{where}.attributes[{i}]")
    return out


def _any_value(value: dict[str, Any], where: str) -> Any:
    if "stringValue" in value:
        return str(value["stringValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return as_int(value["intValue"], f"{where}.intValue")
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "arrayValue" in value:
        items = (value["arrayValue"] or {}).get("values") or []
        return [_any_value(v, where) for v in items]
    if "kvlistValue" in value:
        return attributes_from_otlp((value["kvlistValue"] or {}).get("values"), where)
    if "bytesValue" in value:
        return str(value["bytesValue"])
    return None


def _otlp_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [_otlp_value(v) for v in value]}}
    return {"stringValue": str(value)}


def attributes_to_otlp(attributes: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": key, "value": _otlp_value(value)} for key, value in attributes.items()]


def export_otlp(spans: Iterable[Span]) -> dict[str, Any]:
    """An ``ExportTraceServiceRequest`` in OTLP JSON: one ``resourceSpans`` entry per
    service (sorted), one scope, spans in start order."""
    by_service: dict[str, list[Span]] = {}
    for span in spans:
        by_service.setdefault(span.service, []).append(span)
    resource_spans = []
    for service in sorted(by_service):
        members = sorted(by_service[service], key=lambda s: (s.trace_id, s.start_ns, s.span_id))
        resource_spans.append(
            {
                "resource": {"attributes": attributes_to_otlp({"service.name": service})},
                "scopeSpans": [
                    {"scope": {"name": "cronwave"}, "spans": [_otlp_span(s) for s in members]}
                ],
            }
        )
    return {"resourceSpans": resource_spans}


def _otlp_span(span: Span) -> dict[str, Any]:
    return {
        "traceId": span.trace_id,
        "spanId": span.span_id,
        "parentSpanId": span.parent_span_id,
        "name": span.name,
        "kind": _NUMBER_BY_KIND.get(span.span_kind, 1),
        "startTimeUnixNano": str(span.start_ns),
        "endTimeUnixNano": str(span.end_ns),
        "attributes": attributes_to_otlp(dict(span.attributes)),
        "status": {"code": _NUMBER_BY_STATUS.get(span.status, 0)},
    }
