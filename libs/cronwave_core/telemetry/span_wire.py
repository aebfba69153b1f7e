"""Finished spans of one trace as JSON data, and back: how a job process hands the
spans it held of a run not sampled to its worker, whose keep rule decides them with
the worker's own (``telemetry.deferred``, the worker's ``middleware.tracing``).

What a span is made of survives the trip: its ids (the trace's once, in the worker's
call), parent, name, kind, times, status, attributes, events and links, and its
instrumentation scope. Its resource is the receiving process's: a job process and its
worker are one service (``service.name`` ``worker``). A float attribute that JSON
cannot carry (NaN, an infinity) is carried as its text; a span that is not a finished
record of ``trace_id`` is left out, never failing the run it belongs to.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

_NOT_SAMPLED = TraceFlags(TraceFlags.DEFAULT)
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_KINDS = {kind.value: kind for kind in SpanKind}
_CODES = {code.value: code for code in StatusCode}


def encode(spans: Iterable[ReadableSpan]) -> list[dict[str, Any]]:
    """``spans`` (finished, of one trace) as JSON data."""
    return [_encoded(span) for span in spans if span.context is not None and span.end_time]


def decode(trace_id: int, data: object, resource: Resource | None = None) -> list[ReadableSpan]:
    """The spans of ``trace_id`` that ``encode`` made, not sampled (as held), with
    ``resource``; what is not such a span is left out."""
    if not isinstance(data, list):
        return []
    spans = []
    for item in data:
        try:
            spans.append(_decoded(trace_id, item, resource or Resource.get_empty()))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return spans


def _encoded(span: ReadableSpan) -> dict[str, Any]:
    context = span.context
    assert context is not None
    data: dict[str, Any] = {
        "id": context.span_id,
        "name": span.name,
        "start": span.start_time,
        "end": span.end_time,
    }
    parent = span.parent
    if parent is not None:
        data["parent"] = parent.span_id
        if parent.trace_id != context.trace_id:  # a root beneath another trace's span
            data["parent_trace"] = parent.trace_id
        if parent.is_remote:
            data["remote"] = True
    if span.kind is not SpanKind.INTERNAL:
        data["kind"] = span.kind.value
    if span.status.status_code is not StatusCode.UNSET:
        data["status"] = [span.status.status_code.value, span.status.description or ""]
    if span.attributes:
        data["attrs"] = _attributes(span.attributes)
    if span.events:
        data["events"] = [
            [event.name, event.timestamp, _attributes(event.attributes or {})]
            for event in span.events
        ]
    if span.links:
        data["links"] = [
            [link.context.trace_id, link.context.span_id, _attributes(link.attributes or {})]
            for link in span.links
        ]
    scope = span.instrumentation_scope
    if scope is not None:
        data["scope"] = [scope.name, scope.version or ""]
    return data


def _decoded(trace_id: int, data: Mapping[str, Any], resource: Resource) -> ReadableSpan:
    parent = None
    if "parent" in data:
        parent = SpanContext(
            int(data.get("parent_trace", trace_id)),
            int(data["parent"]),
            bool(data.get("remote", False)),
            _NOT_SAMPLED,
        )
    code, description = data.get("status") or (StatusCode.UNSET.value, "")
    status_code = _CODES[int(code)]
    scope = data.get("scope")
    start, end = int(data["start"]), int(data["end"])
    return ReadableSpan(
        name=str(data["name"]),
        context=SpanContext(trace_id, int(data["id"]), False, _NOT_SAMPLED),
        parent=parent,
        resource=resource,
        attributes=_restored(data.get("attrs") or {}),
        events=tuple(
            Event(str(name), _restored(attributes), int(at))
            for name, at, attributes in data.get("events") or ()
        ),
        links=tuple(
            Link(SpanContext(int(t), int(s), True, _SAMPLED), _restored(attributes))
            for t, s, attributes in data.get("links") or ()
        ),
        kind=_KINDS[int(data.get("kind", SpanKind.INTERNAL.value))],
        status=Status(status_code, str(description) or None)
        if status_code is StatusCode.ERROR
        else Status(status_code),
        start_time=start,
        end_time=max(end, start),
        instrumentation_scope=InstrumentationScope(str(scope[0]), str(scope[1]) or None)
        if scope
        else None,
    )


def _attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {str(key): _value(value) for key, value in attributes.items()}


def _value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, Sequence):
        return [_value(v) for v in value]
    return str(value)


def _restored(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {
        str(key): tuple(value) if isinstance(value, list) else value
        for key, value in attributes.items()
    }
