"""Lean spans: OpenTelemetry's SDK span, less what cronwave's spans never use and what
costs most per span (per-value attribute validation and locking, bounded containers,
a read-only copy at the end). Every run is traced, so a span's cost is paid hundreds of
times a second (``python tools/microbench.py spans``).

``LeanTracerProvider`` is the services' tracer provider (``tracing.init_tracing``); it
falls back to the SDK's own spans whenever a setting could make them behave
differently (a sampler other than the default, span limits).
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any, cast

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider, sampling
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.trace import Span, SpanContext, Status, StatusCode, TraceFlags

_log = logging.getLogger("cronwave.telemetry")

_PLAIN_TYPES = (str, bool, int, float)
#: ``LeanSpan`` keeps every attribute set: used only where at least this many may be.
LEAN_MAX_ATTRIBUTES = 128
_UNSET_STATUS = Status(StatusCode.UNSET)
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
#: W3C trace-context level 2's "random trace id" flag, where the API knows it.
_RANDOM = int(getattr(TraceFlags, "RANDOM_TRACE_ID", 0))
_ROOT_FLAGS = TraceFlags(TraceFlags.SAMPLED | _RANDOM)
_NOT_SAMPLED = TraceFlags(TraceFlags.DEFAULT)


class _RecordOnlyWhere(sampling.Sampler):
    """``RECORD_ONLY`` for a span of a trace ``records`` holds to, ``DROP`` else."""

    def __init__(self, records: Callable[[int], bool]) -> None:
        self._records = records

    def should_sample(
        self,
        parent_context: otel_context.Context | None,
        trace_id: int,
        name: str,
        kind: trace.SpanKind | None = None,
        attributes: Any = None,
        links: Sequence[trace.Link] | None = None,
        trace_state: Any = None,
    ) -> sampling.SamplingResult:
        parent = trace.get_current_span(parent_context).get_span_context()
        decision = (
            sampling.Decision.RECORD_ONLY if self._records(trace_id) else sampling.Decision.DROP
        )
        return sampling.SamplingResult(decision, None, parent.trace_state)

    def get_description(self) -> str:
        return "RecordOnlyWhere"


class RecordUnsampled(sampling.ParentBased):
    """The sampler of a process that holds the spans of some traces not sampled until it
    knows whether to keep them (``telemetry.deferred``): as the SDK's default
    (``ParentBased``, every root sampled), but a span whose parent is not sampled is
    recorded without being sampled (``RECORD_ONLY``: the export processors pass it by)
    when ``records(trace_id)`` says its trace is one to hold, and not recorded else."""

    def __init__(self, records: Callable[[int], bool]) -> None:
        only = _RecordOnlyWhere(records)
        super().__init__(
            sampling.ALWAYS_ON, remote_parent_not_sampled=only, local_parent_not_sampled=only
        )
        self.records = records


class LeanSpan(ReadableSpan, Span):
    """A recording span that is its own finished record: the SDK's span, less what
    cronwave's spans never use and what costs most per span (per-value attribute
    validation and locking, bounded containers, a read-only copy at the end).

    Attributes live in a plain dict (values are ``str``, ``bool``, ``int``, ``float``
    or sequences of one of these, a ``str`` subclass such as ``Hop`` stored as its
    plain string; anything else is dropped with a warning, as the SDK does). Span
    processors see it at start and at end, as they see an SDK span; after ``end`` it is
    not changed again, so it is handed to them as it is."""

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
        if isinstance(value, str):  # a Hop or a Kind: kept as the plain string it is
            self._attrs[key] = str.__str__(value)
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
    (record every trace whose parent is sampled) or a ``RecordUnsampled`` (the same,
    and record a span whose parent is not sampled, of a trace it holds, without
    sampling it), whose decisions it makes itself, as they would; any other sampler,
    configured through ``OTEL_TRACES_SAMPLER``, gets the SDK's own spans."""

    def __init__(self, inner: SdkTracer) -> None:
        self._inner = inner
        self._ids = inner.id_generator
        sampler = inner.sampler
        self._records = sampler.records if isinstance(sampler, RecordUnsampled) else None

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
            if not parent.trace_flags.sampled and (
                self._records is None or not self._records(parent.trace_id)
            ):
                # What either sampler decides for a parent not sampled (DROP): a span
                # that records nothing, as the SDK's tracer would make it.
                unrecorded = SpanContext(
                    parent.trace_id,
                    self._ids.generate_span_id(),
                    is_remote=False,
                    trace_flags=_NOT_SAMPLED,
                    trace_state=parent.trace_state,
                )
                return trace.NonRecordingSpan(unrecorded)
            trace_id = parent.trace_id
            if parent.trace_flags.sampled:
                flags = TraceFlags(TraceFlags.SAMPLED | (parent.trace_flags & _RANDOM))
            else:  # RecordUnsampled's RECORD_ONLY
                flags = _NOT_SAMPLED
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

    def record(
        self,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        start_time: int,
        end_time: int,
        attributes: Mapping[str, Any],
        links: Sequence[trace.Link] = (),
    ) -> None:
        """A finished span whose ids the caller chose (a span fixed in one process and
        recorded in another, ``run_span``), handed to the span processors as any
        other. No sampler is asked: ``context``'s flags say whether it is sampled (a span
        not sampled reaches only a processor that keeps such spans back,
        ``telemetry.deferred``)."""
        span = LeanSpan(
            name, context, parent, self._inner, trace.SpanKind.INTERNAL, {}, links, True, True
        )
        span.set_attributes(attributes)
        # An empty context: the span takes nothing from what is current here.
        span.start(start_time, otel_context.Context())
        span.end(end_time)

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
        """The default sampler (or a ``RecordUnsampled``), and span limits that
        cronwave's spans never reach (the SDK's defaults: 128 attributes, values of any length)."""
        limits = getattr(tracer, "_span_limits", None)
        count = getattr(limits, "max_span_attributes", 0)
        return (
            (tracer.sampler is sampling.DEFAULT_ON or isinstance(tracer.sampler, RecordUnsampled))
            and getattr(limits, "max_span_attribute_length", 0) is None
            and (count is None or count >= LEAN_MAX_ATTRIBUTES)
        )


def add_clean(span: Any, attributes: dict[str, Any]) -> None:
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


def plain_attributes(span: Any) -> Mapping[str, Any]:
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
