"""Opening cronwave's own spans: a span of a hop (``hop_span``), a span of a kind in
whichever hop it starts in (``kind_span``) and the span of one protobuf encode or
decode (``codec_call``), through tracers looked up once (``tracer``).

Before ``tracing.init_tracing`` installs a provider (and with ``CRONWAVE_TRACING=off``)
these are OpenTelemetry's no-op spans, so they cost a few function calls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, Literal

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from cronwave_core.telemetry.vocabulary import ATTR_HOP, ATTR_KIND, ATTR_RUN_ID, Hop, Kind

_tracers: dict[str, trace.Tracer] = {}
_SERIALIZATION = Kind.SERIALIZATION.value


def tracer(name: str) -> trace.Tracer:
    """The global provider's tracer ``name``, looked up once: the SDK's ``get_tracer``
    costs more than the span it would start. Before a provider is installed this is
    OpenTelemetry's proxy tracer, which follows the provider installed later."""
    found = _tracers.get(name)
    if found is None:
        found = _tracers.setdefault(name, trace.get_tracer(name))
    return found


def hop_span(
    name: str,
    hop: Hop,
    kind: Kind,
    attributes: Mapping[str, Any] | None = None,
    tracer_name: str = "cronwave",
    start_time: int | None = None,
) -> AbstractContextManager[Span]:
    """A span that belongs to ``hop`` and measures ``kind`` time, current inside the
    block (begun at ``start_time``, ns since the epoch, when the caller knows better
    than now); an exception leaving the block is recorded on it and sets its status
    to ERROR (as ``start_as_current_span`` does)."""
    attrs: dict[str, Any] = {ATTR_HOP: hop.value, ATTR_KIND: kind.value}
    if attributes:
        attrs.update(attributes)
    return _CurrentSpan(tracer(tracer_name), name, attrs, start_time)


def kind_span(
    name: str, kind: Kind, attributes: Mapping[str, Any] | None = None
) -> AbstractContextManager[Span]:
    """A span that measures ``kind`` time in the hop of the span it starts in (given at
    start by ``propagation.RunAttributesProcessor``): for work any hop may do, such as
    opening a connection. Current inside the block; an exception leaving it is
    recorded, as in ``hop_span``."""
    attrs: dict[str, Any] = {ATTR_KIND: kind.value}
    if attributes:
        attrs.update(attributes)
    return _CurrentSpan(tracer("cronwave"), name, attrs)


class _CurrentSpan(AbstractContextManager[Span]):
    """``start_as_current_span`` in one object: the current context is read once and
    handed to the SDK, instead of being looked up by each of three nested context
    managers, the sampler and the span processors."""

    __slots__ = ("_attrs", "_name", "_span", "_start", "_token", "_tracer")

    def __init__(
        self, tracer: trace.Tracer, name: str, attrs: dict[str, Any], start: int | None = None
    ) -> None:
        self._tracer = tracer
        self._name = name
        self._attrs = attrs
        self._start = start

    def __enter__(self) -> Span:
        ctx = otel_context.get_current()
        span = self._tracer.start_span(
            self._name, ctx, attributes=self._attrs, start_time=self._start
        )
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


def codec_call(
    codec: Callable[[Any], Any],
    value: Any,
    name: str,
    hop: Hop | None,
    side: Literal["client", "server"],
) -> Any:
    """``codec(value)`` (a protobuf encode or decode) inside a span of kind
    ``serialization``; ``hop`` ``None`` leaves the span in its parent's hop. The span
    names the run when the message does (``run_id`` or ``run.run_id``)."""
    attrs: dict[str, Any] = {ATTR_KIND: _SERIALIZATION, "rpc.side": side}
    if hop is not None:
        attrs[ATTR_HOP] = hop.value
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
