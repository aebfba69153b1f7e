"""Batched calls in per-run traces: the spans of a batch belong to the trace of every
run the batch carried.

A batch call (``StartRuns``, ``RecordRuns``, ``ClaimRuns``, ``CompleteRuns``, ...)
serves many runs at once, but the waterfall reads one trace per run. So the process
that works on a batch *registers* it: the batch's own trace id, and for every item the
run's trace context (``traceparent``) and attributes. Every span of the batch's trace
that this process exports while the registration lasts then stands for one copy per
item: same name, kind, times and attributes, plus the item's run attributes, in the
item's trace. The local span store keeps the batch's spans once and its items beside
them (``batch_record``), and its reader makes the copies; an exporter that cannot do
that (OTLP) sends the copies themselves (``FanOutExporter``). Either way the copying
is done off the calls' threads.

Span ids in the copies are derived from the original id and the item's trace id
(``copy_span_id``), the same way in every process, so a copied server span's parent is
the copy of the client span in the caller's process and the copied tree is the tree of
the batch. A span of the batch with no parent hangs under the item's own span (the
``traceparent`` it was sent with). Each run's waterfall thus shows the batch as the
run lived it: the database time of the batch's transaction is that run's ``persist``
database time, because the run waited for all of it.

The server side registers in its request decode (``register_request``): every batch
request is a message with one repeated field of items that carry ``traceparent``.

Only sampled items get copies (``run_span.run_sampled``: a run's trace id says whether
it is sampled, and its ``traceparent`` carries the flag), and a batch none of whose
items is sampled is itself not sampled, so no process records its spans.
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

from cachetools import TTLCache
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from cronwave_core.telemetry.run_span import run_sampled
from cronwave_core.telemetry.spans import tracer
from cronwave_core.telemetry.vocabulary import ATTR_FIRE_TIME, ATTR_RUN_ID, ATTR_SCHEDULE_ID

#: How long after its registration a batch's late spans (a server's reply encode, a
#: client's reply decode) are still copied.
REGISTRATION_TTL_S = 120.0
#: At most this many batches are remembered at once; the oldest go first.
MAX_BATCHES = 4096
#: The attribute a copy carries: how many runs the batch it was copied from served.
ATTR_BATCH_SIZE = "cronwave.batch.size"

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_NOT_SAMPLED = TraceFlags(TraceFlags.DEFAULT)
_SUCCESS = SpanExportResult.SUCCESS
_RUN_KEYS = (ATTR_RUN_ID, ATTR_SCHEDULE_ID, ATTR_FIRE_TIME)


@dataclass
class Item:
    """One run of a batch: where its copies go and what they say of the run.
    ``attributes`` may be completed while the batch is worked on (a run id the store
    just made), up to the end of the spans that are copied afterwards."""

    trace_id: int
    span_id: int
    attributes: MutableMapping[str, Any] = field(default_factory=dict)

    @property
    def sampled(self) -> bool:
        """Whether the item's run is traced (its trace id says)."""
        return run_sampled(self.trace_id)

    def traceparent(self) -> str:
        flags = "01" if self.sampled else "00"
        return f"00-{self.trace_id:032x}-{self.span_id:016x}-{flags}"

    def context(self) -> otel_context.Context:
        """A context whose current span is this item's own (for the spans started for
        this run alone, e.g. its queue message, while the batch is worked on)."""
        flags = _SAMPLED if self.sampled else _NOT_SAMPLED
        parent = SpanContext(self.trace_id, self.span_id, is_remote=True, trace_flags=flags)
        return trace.set_span_in_context(NonRecordingSpan(parent))

    def under_current(self) -> Item:
        """This item, as seen from inside the current batch span: its span id is the
        copy of the current span in this item's trace."""
        current = trace.get_current_span().get_span_context()
        if not current.is_valid:
            return self
        return Item(self.trace_id, copy_span_id(current.span_id, self.trace_id), self.attributes)


def parse_traceparent(value: str) -> tuple[int, int] | None:
    """(trace id, span id) of a W3C ``traceparent``; None when it is not one."""
    parts = value.split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        trace_id, span_id = int(parts[1], 16), int(parts[2], 16)
    except ValueError:
        return None
    if not trace_id or not span_id:
        return None
    return trace_id, span_id


def copy_span_id(span_id: int, trace_id: int) -> int:
    """The id of ``span_id``'s copy in trace ``trace_id``: the same in every process."""
    digest = hashlib.blake2b(
        span_id.to_bytes(8, "big") + trace_id.to_bytes(16, "big"), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big") or 1


class Registry:
    """Batches being worked on in this process, by their trace id: each for ``ttl_s``
    from its registration, at most ``limit`` at once (the least recently used go
    first)."""

    def __init__(self, ttl_s: float = REGISTRATION_TTL_S, limit: int = MAX_BATCHES) -> None:
        self._lock = threading.Lock()
        self._batches: TTLCache[int, list[Item]] = TTLCache(limit, ttl_s)

    def add(self, trace_id: int, items: Sequence[Item]) -> None:
        """Register the batch of ``trace_id``; a second registration replaces the
        first (a server's handler takes over the items its request decode found)."""
        with self._lock:
            self._batches[trace_id] = list(items)

    def get(self, trace_id: int) -> list[Item] | None:
        if not self._batches:  # the common case, without the lock
            return None
        with self._lock:
            try:
                return self._batches[trace_id]
            except KeyError:
                return None


REGISTRY = Registry()


def register(items: Sequence[Item], trace_id: int | None = None) -> None:
    """Register a batch of ``items`` under ``trace_id`` (default: the current span's
    trace). Nothing happens outside a trace."""
    if trace_id is None:
        current = trace.get_current_span().get_span_context()
        if not current.is_valid:
            return
        trace_id = current.trace_id
    if items:
        REGISTRY.add(trace_id, items)


@contextmanager
def batch_span(name: str, items: Sequence[Item], attributes: Mapping[str, Any]) -> Iterator[None]:
    """A new trace for a batch the caller sends, registered with ``items``; its root
    span (``name``) is copied under each sampled item's span. Not sampled when no item
    is."""
    context = otel_context.Context()
    if items and not any(item.sampled for item in items):
        context = unsampled_context()
    with tracer("cronwave.batch").start_as_current_span(
        name, context=context, attributes={**attributes, ATTR_BATCH_SIZE: len(items)}
    ) as span:
        register(items, span.get_span_context().trace_id)
        yield


def unsampled_context() -> otel_context.Context:
    """A context whose span is of a new trace that is not sampled: spans started in it
    are not recorded (``ParentBased``), nor are those of the calls made from them."""
    parent = SpanContext(
        random.getrandbits(128) or 1, random.getrandbits(64) or 1, True, _NOT_SAMPLED
    )
    return trace.set_span_in_context(NonRecordingSpan(parent), otel_context.Context())


def annotate(traceparent: str, attributes: Mapping[str, Any]) -> None:
    """Add ``attributes`` (what the batch's worker learnt of the run: its id, schedule
    and fire time) to the item of the current batch that ``traceparent`` names. The
    copies are made when the batch's spans are exported, so all of them, also those
    that ended before, say it."""
    annotate_many([(traceparent, attributes)])


def annotate_many(annotations: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
    """``annotate`` for many items of the current batch, each found by its ids."""
    current = trace.get_current_span().get_span_context()
    items = REGISTRY.get(current.trace_id) if current.is_valid else None
    if not items:
        return
    by_ids = {(item.trace_id, item.span_id): item for item in items}
    for traceparent, attributes in annotations:
        parsed = parse_traceparent(traceparent)
        item = by_ids.get(parsed) if parsed is not None else None
        if item is not None:
            item.attributes.update(attributes)


def items_of(request: Any) -> list[Item]:
    """The items of a batch request: the elements of its repeated message field whose
    ``traceparent`` names a trace, with the run attributes they state."""
    items: list[Item] = []
    for descriptor in request.DESCRIPTOR.fields:
        if not descriptor.is_repeated or descriptor.message_type is None:
            continue
        if "traceparent" not in descriptor.message_type.fields_by_name:
            continue
        for element in getattr(request, descriptor.name):
            item = item_of(element)
            if item is not None:
                items.append(item)
        break
    return items


def item_of(element: Any) -> Item | None:
    """The batch item an element of a batch request stands for (its ``traceparent``
    and run attributes); None when it names no trace."""
    parsed = parse_traceparent(element.traceparent)
    if parsed is None:
        return None
    return Item(parsed[0], parsed[1], _attributes(element))


def register_request(request: Any) -> None:
    """Register the batch a server just decoded, if it is one (see ``items_of``)."""
    if not trace.get_current_span().get_span_context().is_valid:
        return
    fields = request.DESCRIPTOR.fields
    if not any(f.is_repeated and f.message_type is not None for f in fields):
        return
    register(items_of(request))


def _attributes(element: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    fields = element.DESCRIPTOR.fields_by_name
    if "run_id" in fields and element.run_id:
        attrs[ATTR_RUN_ID] = element.run_id
    if "schedule_id" in fields and element.schedule_id:
        attrs[ATTR_SCHEDULE_ID] = element.schedule_id
    if "fire_time" in fields and element.HasField("fire_time"):
        attrs[ATTR_FIRE_TIME] = element.fire_time.ToDatetime(tzinfo=UTC).isoformat()
    return attrs


def item_for_current(attributes: Mapping[str, Any] | None = None) -> Item | None:
    """The current span as a batch item, naming the run the span names, or as
    ``attributes`` say (None outside a trace)."""
    span = trace.get_current_span()
    current = span.get_span_context()
    if not current.is_valid:
        return None
    known = attributes if attributes is not None else getattr(span, "attributes", None) or {}
    return Item(
        current.trace_id, current.span_id, {key: known[key] for key in _RUN_KEYS if key in known}
    )


def expand(spans: Sequence[ReadableSpan], registry: Registry = REGISTRY) -> list[ReadableSpan]:
    """``spans`` with every span of a registered batch replaced by its copies."""
    out: list[ReadableSpan] = []
    for span in spans:
        context = span.context
        items = registry.get(context.trace_id) if context is not None else None
        if not items or context is None:
            out.append(span)
            continue
        out.extend(_copy(span, context, item, len(items)) for item in items if item.sampled)
    return out


def batch_record(trace_id: int, items: Sequence[Item]) -> dict[str, Any]:
    """The items of a batch as the local span store keeps them (one JSON line beside
    the batch's spans, which its reader expands; see ``cronwave_waterfall``)."""
    kept = [i for i in items if i.sampled]
    return {
        "batch_trace_id": f"{trace_id:032x}",
        "items": [[f"{i.trace_id:032x}", f"{i.span_id:016x}", dict(i.attributes)] for i in kept],
    }


class FanOutExporter(SpanExporter):
    """Exports through ``delegate`` with the spans of registered batches copied into
    their items' traces (for exporters that cannot keep a batch's items beside its
    spans, e.g. OTLP). The copies are made on the export thread, off the calls."""

    def __init__(
        self, delegate: SpanExporter, registry: Registry = REGISTRY, chunk: int = 512
    ) -> None:
        self._delegate = delegate
        self._registry = registry
        self._chunk = chunk

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        expanded = expand(spans, self._registry)
        if len(expanded) <= self._chunk:
            return self._delegate.export(expanded)
        # The copies of a large batch's spans go in requests of at most ``chunk``.
        result = SpanExportResult.SUCCESS
        for start in range(0, len(expanded), self._chunk):
            if self._delegate.export(expanded[start : start + self._chunk]) is not _SUCCESS:
                result = SpanExportResult.FAILURE
        return result

    def shutdown(self) -> None:
        self._delegate.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._delegate.force_flush(timeout_millis)


def _copy(span: ReadableSpan, context: SpanContext, item: Item, size: int) -> ReadableSpan:
    trace_id = item.trace_id
    parent = span.parent
    if parent is not None and parent.trace_id == context.trace_id:
        parent_id = copy_span_id(parent.span_id, trace_id)
    else:
        parent_id = item.span_id
    attributes = dict(span.attributes or {})
    attributes.update(item.attributes)
    attributes[ATTR_BATCH_SIZE] = size
    return ReadableSpan(
        name=span.name,
        context=SpanContext(
            trace_id, copy_span_id(context.span_id, trace_id), False, context.trace_flags
        ),
        parent=SpanContext(trace_id, parent_id, True, context.trace_flags),
        resource=span.resource,
        attributes=attributes,
        events=span.events,
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )
