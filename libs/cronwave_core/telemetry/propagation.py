"""How a run's trace and attributes travel: the trace context crosses processes in gRPC
metadata and inside queued messages (``inject_context``, ``extracted_context``), and
every span names the run it belongs to.

Every span a process starts inside a span of a run inherits the run's attributes
(``RUN_KEYS``) from that parent at start (``RunAttributesProcessor``), or, when the
parent is in another process, from the W3C baggage the caller sent along
(``run_baggage``). So SQL, gRPC and serialization spans name their run as well as the
spans cronwave opens itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import baggage, propagate, trace
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import SpanProcessor

from cronwave_core.telemetry.lean import add_clean, plain_attributes
from cronwave_core.telemetry.vocabulary import ATTR_RUN_ID, BAGGAGE_KEYS, RUN_KEYS

_EMPTY: Mapping[str, Any] = {}


class RunAttributesProcessor(SpanProcessor):
    """Copies the run's attributes (``RUN_KEYS``) from a span's in-process parent, or
    else from the baggage the caller sent, onto the span when it starts, unless the
    span sets them itself. Attributes the parent learns later (a run id known only
    after the insert) are not copied."""

    def on_start(self, span: Any, parent_context: otel_context.Context | None = None) -> None:
        if parent_context is None:
            parent_context = otel_context.get_current()
        inherited = plain_attributes(trace.get_current_span(parent_context))
        carried = baggage.get_all(parent_context) if ATTR_RUN_ID not in inherited else _EMPTY
        if not inherited and not carried:
            return
        own = plain_attributes(span)
        missing = {}
        for key in RUN_KEYS:
            if key not in own:
                value = inherited.get(key) or carried.get(key)
                if value is not None and value != "":
                    missing[key] = value
        if missing:
            add_clean(span, missing)


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
