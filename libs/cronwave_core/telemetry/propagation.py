"""How a run's trace and attributes travel: the trace context crosses processes in gRPC
metadata and inside queued messages (``inject_context``, ``extracted_context``), and
every span names the run it belongs to, its hop and its kind of time.

Every span a process starts inside a span of a run inherits the run's attributes
(``RUN_KEYS``) from that parent at start (``RunAttributesProcessor``), or, when the
parent is in another process, from the W3C baggage the caller sent along
(``run_baggage``). So SQL, gRPC and serialization spans name their run as well as the
spans cronwave opens itself.

A span that does not say its hop and kind (``cronwave.hop``, ``cronwave.kind``) is
given them at start, by the same processor:

- hop: an RPC's own (its client and its server span: ``rpc_hops``), else the hop of
  its parent in the process, else the hop its caller sent as baggage
  (``cronwave.hop``; a channel sends it for an RPC with no hop of its own, whose
  server then works in its caller's hop: ``call_hop``);
- kind: ``database`` for a SQL span (``db.system``), ``network`` for an RPC's
  client span (the waterfall derives its network time: the client's duration minus
  the server's), ``app`` for anything else (an RPC's server span, a job's own span):
  the work of the service or the job itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import baggage, propagate, trace
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import SpanProcessor

from cronwave_core.telemetry.lean import add_clean, plain_attributes
from cronwave_core.telemetry.vocabulary import (
    ATTR_HOP,
    ATTR_KIND,
    ATTR_RUN_ID,
    BAGGAGE_KEYS,
    RUN_KEYS,
    Kind,
)

_EMPTY: Mapping[str, Any] = {}
_CLIENT = trace.SpanKind.CLIENT
_DATABASE = Kind.DATABASE.value
_NETWORK = Kind.NETWORK.value
_APP = Kind.APP.value
_rpc_hop: Callable[[str], Any] | None = None


def _hop_of_rpc(service: Any, method: Any) -> str | None:
    """The hop of the RPC ``/service/method`` (``rpc_hops``, loaded on first use: it
    loads every service's descriptors, which a process tracing no RPC never needs)."""
    global _rpc_hop
    if _rpc_hop is None:
        from cronwave_core.telemetry.rpc_hops import rpc_hop

        _rpc_hop = rpc_hop
    hop = _rpc_hop(f"/{service}/{method}")
    return None if hop is None else str.__str__(hop)


def _kind_of(span: Any, own: Mapping[str, Any]) -> str:
    if "db.system" in own or "db.system.name" in own:
        return _DATABASE
    if "rpc.system" in own and getattr(span, "kind", None) is _CLIENT:
        return _NETWORK
    return _APP


class RunAttributesProcessor(SpanProcessor):
    """Copies the run's attributes (``RUN_KEYS``) from a span's in-process parent, or
    else from the baggage the caller sent, onto the span when it starts, unless the
    span sets them itself, and gives a span that says no hop or kind the ones the
    module docstring's rules give it. Attributes the parent learns later (a run id
    known only after the insert) are not copied."""

    def on_start(self, span: Any, parent_context: otel_context.Context | None = None) -> None:
        if parent_context is None:
            parent_context = otel_context.get_current()
        inherited = plain_attributes(trace.get_current_span(parent_context))
        own = plain_attributes(span)
        placed = ATTR_HOP in own and ATTR_KIND in own
        needs_baggage = ATTR_RUN_ID not in inherited or (
            not placed and ATTR_HOP not in own and ATTR_HOP not in inherited
        )
        carried = baggage.get_all(parent_context) if needs_baggage else _EMPTY
        if not inherited and not carried and placed:
            return
        missing = {}
        for key in RUN_KEYS:
            if key not in own:
                value = inherited.get(key) or carried.get(key)
                if value is not None and value != "":
                    missing[key] = value
        if not placed:
            if ATTR_HOP not in own:
                hop: Any = None
                if "rpc.method" in own:
                    hop = _hop_of_rpc(own.get("rpc.service"), own["rpc.method"])
                hop = hop or inherited.get(ATTR_HOP) or carried.get(ATTR_HOP)
                if hop:
                    missing[ATTR_HOP] = hop
            if ATTR_KIND not in own:
                missing[ATTR_KIND] = _kind_of(span, own)
        if missing:
            add_clean(span, missing)


@contextmanager
def call_hop(hop: str | None) -> Iterator[None]:
    """Within the block, ``hop`` travels as baggage (``cronwave.hop``) with every
    outgoing call, so the server of an RPC that has no hop of its own places its
    spans in the caller's (``RunAttributesProcessor``)."""
    if not hop:
        yield
        return
    token = otel_context.attach(baggage.set_baggage(ATTR_HOP, hop))
    try:
        yield
    finally:
        otel_context.detach(token)


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
