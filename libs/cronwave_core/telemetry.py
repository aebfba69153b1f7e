"""Tracing: one tracer provider per process, spans named by hop and kind.

Spans go to an OTLP endpoint when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (Jaeger
ingests OTLP); otherwise they are kept as JSON lines under ``<data dir>/spans`` so the
waterfall tools work offline. Each line is one finished span (see ``span_to_dict``).

With ``CRONWAVE_TRACING=off`` no tracer provider is installed: every span is
OpenTelemetry's no-op span, and the gRPC instrumentation is left out too
(``tracing_enabled``), so tracing costs nothing but a few function calls.

Every span a process starts inside a span of a run inherits the run's attributes
(``RUN_KEYS``) from that parent at start (``RunAttributesProcessor``), or, when the
parent is in another process, from the W3C baggage the caller sent along
(``run_baggage``: it travels in gRPC metadata and inside queued messages with the
trace context). So SQL, gRPC and serialization spans name their run as well as the
spans cronwave opens itself.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, cast

import orjson
from opentelemetry import baggage, propagate, trace
from opentelemetry import context as otel_context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanProcessor, TracerProvider, sampling
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import Span, SpanContext, Status, StatusCode, TraceFlags

from cronwave_core.settings import TelemetrySettings

HOPS = ("plan", "leader", "dispatch", "persist", "pickup", "execute", "complete")
KINDS = ("network", "serialization", "cache", "database", "queue", "app")

ATTR_HOP = "cronwave.hop"
ATTR_KIND = "cronwave.kind"
ATTR_RUN_ID = "cronwave.run_id"
ATTR_SCHEDULE_ID = "cronwave.schedule_id"
ATTR_FIRE_TIME = "cronwave.fire_time"
ATTR_CACHE_HIT = "cronwave.cache.hit"
#: Which cache a look-up asked (``dedup``, ``route``, ``schedule``, ``lease``, ...).
ATTR_CACHE_NAME = "cronwave.cache.name"
ATTR_JOB_TYPE = "cronwave.job_type"
ATTR_QUEUE = "cronwave.queue"
ATTR_ATTEMPT = "cronwave.attempt"
ATTR_WORKER_ID = "cronwave.worker_id"
#: ``scheduled``, ``manual``, ``backfill`` or ``catchup``: why the run exists.
ATTR_TRIGGER = "cronwave.trigger"
#: Set on the span a latency fault was injected into (see ``cronwave_core.faults``).
ATTR_FAULT = "cronwave.fault"
#: Set on the span of a run held until its fire time (dispatched ahead): waiting on
#: purpose before the instant, which is no hop's latency.
ATTR_HOLD = "cronwave.hold"

#: The attributes a span inherits from its in-process parent (``RunAttributesProcessor``).
RUN_KEYS = (
    ATTR_RUN_ID,
    ATTR_SCHEDULE_ID,
    ATTR_FIRE_TIME,
    ATTR_JOB_TYPE,
    ATTR_QUEUE,
    ATTR_ATTEMPT,
    ATTR_WORKER_ID,
    ATTR_TRIGGER,
)

#: The run attributes that travel as baggage to other processes (all strings).
BAGGAGE_KEYS = (
    ATTR_RUN_ID,
    ATTR_SCHEDULE_ID,
    ATTR_FIRE_TIME,
    ATTR_JOB_TYPE,
    ATTR_QUEUE,
    ATTR_TRIGGER,
)

# The hop an RPC belongs to when it is part of a run: its serialization spans are
# filed under it (the caller's own work stays in the caller's hop). Methods not
# listed (reads, and AppendRunEvents, which every hop uses for the run's history) take
# the hop of the span they happen in.
_STORE = "/cronwave.v1.WorkflowStoreService/"
_RPC_HOPS = {
    "/cronwave.v1.DispatcherService/TriggerRun": "dispatch",
    "/cronwave.v1.DispatcherService/StartRuns": "dispatch",
    _STORE + "RecordRuns": "persist",
    _STORE + "ClaimRuns": "pickup",
    _STORE + "GetRuns": "pickup",
    _STORE + "CompleteRuns": "complete",
    _STORE + "Heartbeat": "execute",
    _STORE + "DeadLetterRun": "complete",
}
_LEADER_PREFIX = "/cronwave.v1.LeaderElectionService/"

_log = logging.getLogger("cronwave.telemetry")
_tracing = False
_tracers: dict[str, trace.Tracer] = {}


def tracer(name: str) -> trace.Tracer:
    """The global provider's tracer ``name``, looked up once: the SDK's ``get_tracer``
    costs more than the span it would start. Before a provider is installed this is
    OpenTelemetry's proxy tracer, which follows the provider installed later."""
    found = _tracers.get(name)
    if found is None:
        found = _tracers.setdefault(name, trace.get_tracer(name))
    return found


def tracing_enabled() -> bool:
    """True once ``init_tracing`` installed a recording tracer provider here."""
    return _tracing


def rpc_hop(method: str) -> str | None:
    """The hop of a gRPC method (``/package.Service/Method``), if it has one."""
    if method.startswith(_LEADER_PREFIX):
        return "leader"
    return _RPC_HOPS.get(method)


def span_to_dict(span: ReadableSpan) -> dict[str, Any]:
    """The local span store's line format: OTLP's fields, flattened."""
    resource = span.resource.attributes if span.resource else {}
    return _span_fields(span, str(resource.get("service.name", "")), dict(_plain(span)))


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
    attributes = _plain(span)
    return attributes if type(attributes) is dict else dict(attributes)


class JsonLinesSpanExporter(SpanExporter):
    """Appends finished spans to ``<dir>/<service>-<pid>.jsonl``, one JSON per line.

    Each batch is one write followed by a flush, so a reader sees whole batches (only
    a process killed mid-write leaves a partial last line)."""

    def __init__(self, directory: Path, service: str, batches: Any = None) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{service}-{os.getpid()}.jsonl"
        self._lock = threading.Lock()
        self._file = self.path.open("ab")
        self._resource: Any = None
        self._service = ""
        self._batches = batches  # a cronwave_core.fanout.Registry, or None

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = b"".join([span_line(s, self._service_of(s)) for s in spans])
        if self._batches is not None:
            lines += self._batch_lines(spans)
        with self._lock:
            if self._file.closed:
                return SpanExportResult.FAILURE
            self._file.write(lines)
            self._file.flush()
        return SpanExportResult.SUCCESS

    def _batch_lines(self, spans: Sequence[ReadableSpan]) -> bytes:
        """A line per batch whose spans are among ``spans``: its items, from which the
        reader copies the batch's spans into each run's trace (a later line of the
        same batch, with attributes learnt since, completes an earlier one)."""
        from cronwave_core.fanout import batch_record

        seen: set[int] = set()
        lines: list[bytes] = []
        for span in spans:
            trace_id = span.context.trace_id if span.context is not None else 0
            if trace_id in seen:
                continue
            seen.add(trace_id)
            items = self._batches.get(trace_id)
            if items:
                lines.append(
                    orjson.dumps(batch_record(trace_id, items), default=str, option=_LINE_OPTIONS)
                )
        return b"".join(lines)

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


class RunAttributesProcessor(SpanProcessor):
    """Copies the run's attributes (``RUN_KEYS``) from a span's in-process parent, or
    else from the baggage the caller sent, onto the span when it starts, unless the
    span sets them itself. Attributes the parent learns later (a run id known only
    after the insert) are not copied."""

    def on_start(self, span: Any, parent_context: otel_context.Context | None = None) -> None:
        if parent_context is None:
            parent_context = otel_context.get_current()
        inherited = _plain(trace.get_current_span(parent_context))
        carried = baggage.get_all(parent_context) if ATTR_RUN_ID not in inherited else _EMPTY
        if not inherited and not carried:
            return
        own = _plain(span)
        missing = {}
        for key in RUN_KEYS:
            if key not in own:
                value = inherited.get(key) or carried.get(key)
                if value is not None and value != "":
                    missing[key] = value
        if missing:
            _add_clean(span, missing)


_PLAIN_TYPES = (str, bool, int, float)
#: ``LeanSpan`` keeps every attribute set: used only where at least this many may be.
LEAN_MAX_ATTRIBUTES = 128
_UNSET_STATUS = Status(StatusCode.UNSET)
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
#: W3C trace-context level 2's "random trace id" flag, where the API knows it.
_RANDOM = int(getattr(TraceFlags, "RANDOM_TRACE_ID", 0))
_ROOT_FLAGS = TraceFlags(TraceFlags.SAMPLED | _RANDOM)


class LeanSpan(ReadableSpan, Span):
    """A recording span that is its own finished record: the SDK's span, less what
    cronwave's spans never use and what costs most per span (per-value attribute
    validation and locking, bounded containers, a read-only copy at the end).

    Attributes live in a plain dict (values are ``str``, ``bool``, ``int``, ``float``
    or sequences of one of these; anything else is dropped with a warning, as the SDK
    does). Span processors see it at start and at end, as they see an SDK span; after
    ``end`` it is not changed again, so it is handed to them as it is."""

    def __init__(
        self,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        tracer: SdkTracer,
        kind: trace.SpanKind,
        attributes: dict[str, Any],
        links: Sequence[trace.Link],
        record_exception: bool,
        set_status_on_exception: bool,
    ) -> None:
        self._name = name
        self._context = context
        self._parent = parent
        self._resource = tracer.resource
        self._attrs = attributes  # the same dict as ReadableSpan's _attributes
        self._attributes = attributes
        self._span_context = context
        self._events: list[Event] = []
        self._links = tuple(links)
        self._kind = kind
        self._instrumentation_info = tracer.instrumentation_info
        self._instrumentation_scope = getattr(tracer, "_instrumentation_scope", None)
        self._status = _UNSET_STATUS
        self._start_time: int | None = None
        self._end_time: int | None = None
        self._processor = tracer.span_processor
        self._record_exception = record_exception
        self._set_status_on_exception = set_status_on_exception

    def start(self, start_time: int | None, parent_context: otel_context.Context | None) -> None:
        self._start_time = start_time if start_time is not None else time.time_ns()
        self._processor.on_start(cast(Any, self), parent_context=parent_context)

    # the API's Span -------------------------------------------------------------
    def get_span_context(self) -> SpanContext:
        return self._span_context

    def is_recording(self) -> bool:
        return self._end_time is None

    def set_attribute(self, key: str, value: Any) -> None:
        if self._end_time is not None:
            return
        if type(value) in _PLAIN_TYPES:
            self._attrs[key] = value
            return
        if isinstance(value, Sequence) and not isinstance(value, str | bytes):
            kinds = {type(v) for v in value}
            if len(kinds) <= 1 and kinds <= set(_PLAIN_TYPES):
                self._attrs[key] = tuple(value)
                return
        _log.warning(
            "span %r: attribute %r dropped: invalid type %s", self._name, key, type(value).__name__
        )

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        for key, value in attributes.items():
            self.set_attribute(key, value)

    def add_event(
        self,
        name: str,
        attributes: Mapping[str, Any] | None = None,
        timestamp: int | None = None,
    ) -> None:
        if self._end_time is None:
            self._events.append(Event(name, attributes, timestamp))

    def add_link(self, context: SpanContext, attributes: Mapping[str, Any] | None = None) -> None:
        if self._end_time is None and context.is_valid:
            self._links = (*self._links, trace.Link(context, attributes))

    def update_name(self, name: str) -> None:
        if self._end_time is None:
            self._name = name

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        # As the SDK: a status set OK is final.
        if self._end_time is not None or self._status.status_code is StatusCode.OK:
            return
        if isinstance(status, Status):
            self._status = status
        else:
            self._status = Status(status, description)

    def record_exception(
        self,
        exception: BaseException,
        attributes: Mapping[str, Any] | None = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        stacktrace = "".join(
            traceback.format_exception(type(exception), exception, exception.__traceback__)
        )
        recorded: dict[str, Any] = {
            "exception.type": type(exception).__qualname__,
            "exception.message": str(exception),
            "exception.stacktrace": stacktrace,
            "exception.escaped": str(escaped),
        }
        if attributes:
            recorded.update(attributes)
        self.add_event("exception", recorded, timestamp)

    def end(self, end_time: int | None = None) -> None:
        if self._end_time is not None:
            return
        self._end_time = end_time if end_time is not None else time.time_ns()
        self._processor.on_end(self)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        if exc_val is not None and self.is_recording():
            if self._record_exception:
                self.record_exception(exc_val, escaped=True)
            if self._set_status_on_exception:
                self.set_status(Status(StatusCode.ERROR, f"{type(exc_val).__name__}: {exc_val}"))
        self.end()


class LeanTracer(trace.Tracer):
    """Starts ``LeanSpan``s for the SDK tracer it wraps, which keeps its resource,
    scope, id generator and span processors. Used only with the SDK's default sampler
    (record every trace whose parent is sampled); any other sampler, configured
    through ``OTEL_TRACES_SAMPLER``, gets the SDK's own spans."""

    def __init__(self, inner: SdkTracer) -> None:
        self._inner = inner
        self._ids = inner.id_generator

    def start_span(
        self,
        name: str,
        context: otel_context.Context | None = None,
        kind: trace.SpanKind = trace.SpanKind.INTERNAL,
        attributes: Mapping[str, Any] | None = None,
        links: Sequence[trace.Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> Span:
        parent: SpanContext | None = trace.get_current_span(context).get_span_context()
        if parent is not None and parent.is_valid:
            if not parent.trace_flags.sampled:
                return self._inner.start_span(
                    name,
                    context,
                    kind,
                    attributes,
                    links,
                    start_time,
                    record_exception,
                    set_status_on_exception,
                )
            trace_id = parent.trace_id
            flags = TraceFlags(TraceFlags.SAMPLED | (parent.trace_flags & _RANDOM))
            state = parent.trace_state
        else:
            parent = None
            trace_id = self._ids.generate_trace_id()
            flags = _ROOT_FLAGS if self._ids.is_trace_id_random() else _SAMPLED
            state = None
        span_context = SpanContext(
            trace_id,
            self._ids.generate_span_id(),
            is_remote=False,
            trace_flags=flags,
            trace_state=state,
        )
        span = LeanSpan(
            name,
            span_context,
            parent,
            self._inner,
            kind,
            {},
            links or (),
            record_exception,
            set_status_on_exception,
        )
        if attributes:
            span.set_attributes(attributes)
        span.start(start_time, context)
        return span

    @contextmanager
    # OpenTelemetry declares its own decorator's type (_AgnosticContextManager);
    # contextlib's is the same protocol under another name.
    def start_as_current_span(  # type: ignore[override]
        self,
        name: str,
        context: otel_context.Context | None = None,
        kind: trace.SpanKind = trace.SpanKind.INTERNAL,
        attributes: Mapping[str, Any] | None = None,
        links: Sequence[trace.Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[Span]:
        span = self.start_span(
            name,
            context,
            kind,
            attributes,
            links,
            start_time,
            record_exception,
            set_status_on_exception,
        )
        with trace.use_span(
            span,
            end_on_exit=end_on_exit,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
        ) as current:
            yield current


class LeanTracerProvider(TracerProvider):
    """A tracer provider whose tracers start ``LeanSpan``s when its sampler is the
    SDK's default, one ``LeanTracer`` per SDK tracer; the SDK's own tracers else."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lean: dict[int, trace.Tracer] = {}
        self._lean_lock = threading.Lock()

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        inner = super().get_tracer(*args, **kwargs)
        if not isinstance(inner, SdkTracer) or not self._lean_applies(inner):
            return inner
        with self._lean_lock:
            lean = self._lean.get(id(inner))
            if lean is None:
                lean = self._lean[id(inner)] = LeanTracer(inner)
            return lean

    @staticmethod
    def _lean_applies(tracer: SdkTracer) -> bool:
        """The default sampler, and span limits that cronwave's spans never reach
        (the SDK's defaults: 128 attributes, values of any length)."""
        limits = getattr(tracer, "_span_limits", None)
        count = getattr(limits, "max_span_attributes", 0)
        return (
            tracer.sampler is sampling.DEFAULT_ON
            and getattr(limits, "max_span_attribute_length", 0) is None
            and (count is None or count >= LEAN_MAX_ATTRIBUTES)
        )


def _add_clean(span: Any, attributes: dict[str, Any]) -> None:
    """Add attributes that are already valid (copied from another span, or baggage
    strings) to a span that has just started and is seen by no other thread yet:
    straight into the SDK's dict when no limit could apply, which skips the
    per-value validation and locking of ``set_attributes``; else through it."""
    bounded = getattr(span, "_attributes", None)
    if type(span) is LeanSpan and type(bounded) is dict:
        bounded.update(attributes)
        return
    inner = getattr(bounded, "_dict", None)
    if (
        type(inner) is dict
        and getattr(bounded, "_immutable", True) is False
        and getattr(bounded, "max_value_len", 0) is None
    ):
        maxlen = getattr(bounded, "maxlen", 0)
        if maxlen is None or len(inner) + len(attributes) <= maxlen:
            inner.update(attributes)
            return
    span.set_attributes(attributes)


def _plain(span: Any) -> Mapping[str, Any]:
    """A span's attributes as a plain dict when the SDK keeps one (read for speed:
    this runs for every span), else through the public mapping."""
    bounded = getattr(span, "_attributes", None)
    if type(bounded) is dict:  # a span built from a plain dict (a fan-out copy)
        return bounded
    inner = getattr(bounded, "_dict", None)
    if isinstance(inner, dict):
        return inner
    return getattr(span, "attributes", None) or _EMPTY


_EMPTY: Mapping[str, Any] = {}


def init_tracing(service: str, settings: TelemetrySettings) -> TracerProvider:
    """Build this process's tracer provider; with tracing on, make it the global one.

    With ``CRONWAVE_TRACING=off`` the provider returned records nothing and is not
    installed (spans stay OpenTelemetry's no-op ones); shutting it down is harmless."""
    global _tracing
    if settings.switch_interval:
        # The span exporter's thread shares the interpreter with the calls: while it
        # encodes a batch, a call that gave up the GIL at a blocking read waits up to a
        # whole switch interval to get it back, at every read. A shorter interval
        # bounds that tail, at a cost in throughput (docs/operations.md).
        sys.setswitchinterval(settings.switch_interval.total_seconds())
    provider = LeanTracerProvider(resource=Resource.create({"service.name": service}))
    if not settings.tracing:
        return provider
    provider.add_span_processor(RunAttributesProcessor())
    from cronwave_core import fanout  # it imports this module

    # A batch call's spans stand for one copy per run it carried (cronwave_core.fanout):
    # the local store keeps the batch's items beside its spans, OTLP gets the copies.
    exporter: SpanExporter
    if settings.otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        exporter = fanout.FanOutExporter(OTLPSpanExporter(endpoint=settings.otlp_endpoint))
    else:
        exporter = JsonLinesSpanExporter(settings.spans_dir, service, fanout.REGISTRY)
    provider.add_span_processor(
        BatchSpanProcessor(
            exporter,
            max_queue_size=65536,
            max_export_batch_size=4096,
            schedule_delay_millis=500,
        )
    )
    trace.set_tracer_provider(provider)
    _tracing = True
    return provider


def run_attributes(run_id: str, schedule_id: str, fire_time: str) -> dict[str, str]:
    """The attributes every span of a run carries."""
    return {ATTR_RUN_ID: run_id, ATTR_SCHEDULE_ID: schedule_id, ATTR_FIRE_TIME: fire_time}


def codec_call(
    codec: Callable[[Any], Any],
    value: Any,
    name: str,
    hop: str | None,
    side: str,
) -> Any:
    """``codec(value)`` (a protobuf encode or decode) inside a span of kind
    ``serialization``; ``hop`` ``None`` leaves the span in its parent's hop. The span
    names the run when the message does (``run_id`` or ``run.run_id``)."""
    attrs: dict[str, Any] = {ATTR_KIND: "serialization", "rpc.side": side}
    if hop is not None:
        attrs[ATTR_HOP] = hop
    span = tracer("cronwave.rpc").start_span(name, otel_context.get_current(), attributes=attrs)
    try:
        result = codec(value)
    except Exception as exc:
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        span.end()
        raise
    message = value if isinstance(result, bytes) else result
    run_id = _run_id_of(message)
    if run_id:
        span.set_attribute(ATTR_RUN_ID, run_id)
    span.end()
    return result


def _run_id_of(message: Any) -> str:
    """The run a request or response names directly (``run_id``, or ``run.run_id``)."""
    run_id = getattr(message, "run_id", None)
    if isinstance(run_id, str):
        return run_id
    run = getattr(message, "run", None)
    nested = getattr(run, "run_id", None)
    return nested if isinstance(nested, str) else ""


def hop_span(
    name: str,
    hop: str,
    kind: str,
    attributes: Mapping[str, Any] | None = None,
    tracer_name: str = "cronwave",
) -> AbstractContextManager[Span]:
    """A span that belongs to ``hop`` and measures ``kind`` time, current inside the
    block; an exception leaving the block is recorded on it and sets its status to
    ERROR (as ``start_as_current_span`` does)."""
    attrs: dict[str, Any] = {ATTR_HOP: hop, ATTR_KIND: kind}
    if attributes:
        attrs.update(attributes)
    return _CurrentSpan(tracer(tracer_name), name, attrs)


class _CurrentSpan(AbstractContextManager[Span]):
    """``start_as_current_span`` in one object: the current context is read once and
    handed to the SDK, instead of being looked up by each of three nested context
    managers, the sampler and the span processors."""

    __slots__ = ("_attrs", "_name", "_span", "_token", "_tracer")

    def __init__(self, tracer: trace.Tracer, name: str, attrs: dict[str, Any]) -> None:
        self._tracer = tracer
        self._name = name
        self._attrs = attrs

    def __enter__(self) -> Span:
        ctx = otel_context.get_current()
        span = self._tracer.start_span(self._name, ctx, attributes=self._attrs)
        self._token = otel_context.attach(trace.set_span_in_context(span, ctx))
        self._span = span
        return span

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        otel_context.detach(self._token)
        span = self._span
        # Only errors are recorded: a GeneratorExit or KeyboardInterrupt is not one.
        if isinstance(exc, Exception) and span.is_recording():
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        span.end()


@contextmanager
def run_baggage(attributes: Mapping[str, Any]) -> Iterator[None]:
    """Within the block, the run's attributes (those in ``BAGGAGE_KEYS`` that are set)
    travel as baggage with every outgoing call and queued message, so the spans the
    callee starts name the run too (``RunAttributesProcessor``)."""
    ctx = otel_context.get_current()
    for key in BAGGAGE_KEYS:
        value = attributes.get(key)
        if value is not None and value != "":
            ctx = baggage.set_baggage(key, str(value), ctx)
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


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
