"""The run span: the one root of a run's trace, ``cronwave.run``, from the fire
decision (or the trigger's arrival) to the run's durable completion, with every hop's
spans beneath it, so that a trace viewer's critical path, flame graph and statistics
cover the whole run.

No process holds a span open across five services and hours of queueing, so the run
span is fixed when the run's trace begins and recorded when the run ends:

- its trace id says when the run began: the first 64 bits are the start, in
  nanoseconds since the epoch; then 32 random bits, the last of which says whether
  the run is sampled (``run_sampled``); then 32 bits of a keyed hash of the 96
  before, which mark the trace as a run's (``new_run_context``). The last 64 bits are
  thus uniformly distributed, as sampling by trace id ratio expects;
- its span id is derived from the trace id (``run_span_id``), the same way in every
  process.

So whatever knows a run's trace id (every call and queued message of the run carries
it, and the store keeps it with the run) can put spans beneath the run span
(``run_context``), and the one that sees the run end records it (``record_run_span``)
with the start its trace id says. A trace whose id lacks the mark (a caller's own
trace) is no run's: it gets no run span, and nothing is put beneath one.

Whether a run is traced is decided once, where its trace begins (head sampling:
``new_run_context`` with the schedule's ``trace_sample``, by the SDK's
``TraceIdRatioBased`` over the trace id), and written into the trace id itself: so
every process reads the decision from the id with no look-up, and the contexts made
here carry it as W3C's ``sampled`` flag, which OpenTelemetry's ``ParentBased`` sampler
follows in every process. A span of a run not sampled is recorded by a process only
where it keeps such spans back until the run's outcome decides (the worker:
``telemetry.deferred``); elsewhere it is not recorded at all.

An attempt's span (``cronwave.attempt``, a child of the run span) is fixed the same way:
its id is derived from the trace id and the attempt's number (``attempt_span_id``),
so the worker puts the attempt's spans beneath it from the claim on and records it
when the attempt ends (``record_attempt_span``), and an attempt whose worker died is
recorded by whoever finds it lost (the dispatcher's sweeper), from its claim to its
last heartbeat, so the spans the dead worker had sent still have their parent.
"""

from __future__ import annotations

import functools
import hashlib
import secrets
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from cronwave_core.telemetry.lean import LeanTracer
from cronwave_core.telemetry.vocabulary import (
    ATTEMPT_KIND,
    ATTR_ATTEMPT,
    ATTR_HOP,
    ATTR_KIND,
    RUN_HOP,
    RUN_KIND,
)

#: The run span's name.
RUN_SPAN = "cronwave.run"
#: The name of an attempt's span, a child of the run span.
ATTEMPT_SPAN = "cronwave.attempt"

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_NOT_SAMPLED = TraceFlags(TraceFlags.DEFAULT)
#: The last of the trace id's random bits: set in a run's trace that is not sampled.
_UNSAMPLED_BIT = 1 << 32
_MARK = b"cronwave.run"
_SPAN = b"cronwave.span"
_U64 = (1 << 64) - 1


def _mark(high: int) -> int:
    """The 32-bit mark of a run's trace id, from its first 96 bits."""
    digest = hashlib.blake2b(high.to_bytes(12, "big"), digest_size=4, person=_MARK).digest()
    return int.from_bytes(digest, "big")


def run_trace_id(start_ns: int, sampled: bool = True) -> int:
    """A new run's trace id, saying that it began at ``start_ns`` and whether it is
    ``sampled``."""
    return _decided(((start_ns & _U64) << 64) | (secrets.randbits(32) << 32), sampled)


def _decided(trace_id: int, sampled: bool) -> int:
    """``trace_id`` (a run's, its mark left out) with the decision written in and the
    mark made anew."""
    high = trace_id >> 32
    high = high & ~1 if sampled else high | 1
    return (high << 32) | _mark(high)


@functools.lru_cache(maxsize=256)
def _ratio_sampler(ratio: float) -> TraceIdRatioBased:
    return TraceIdRatioBased(ratio)


def decide_run_trace_id(start_ns: int, ratio: float = 1.0) -> int:
    """A new run's trace id, sampled with probability ``ratio`` (0..1; 1: always) by
    the SDK's ``TraceIdRatioBased`` over the trace id's last 64 bits, the decision
    written into the id (``run_sampled``)."""
    trace_id = run_trace_id(start_ns)
    if ratio >= 1.0:
        return trace_id
    decision = _ratio_sampler(max(ratio, 0.0)).should_sample(None, trace_id, RUN_SPAN).decision
    return trace_id if decision.is_sampled() else _decided(trace_id, False)


def run_sampled(trace_id: int) -> bool:
    """Whether the spans of ``trace_id`` are sampled: False only for a run's trace
    whose head decision was not to trace it (another trace is as its flags say)."""
    return not trace_id & _UNSAMPLED_BIT or run_start_ns(trace_id) is None


def run_start_ns(trace_id: int) -> int | None:
    """When the run of ``trace_id`` began (ns since the epoch); None for a trace that
    is no run's."""
    high = trace_id >> 32
    if trace_id & 0xFFFFFFFF != _mark(high) or not high:
        return None
    return trace_id >> 64


def run_span_id(trace_id: int) -> int:
    """The run span's id in the trace ``trace_id``: the same in every process."""
    digest = hashlib.blake2b(trace_id.to_bytes(16, "big"), digest_size=8, person=_SPAN).digest()
    return int.from_bytes(digest, "big") or 1


def attempt_span_id(trace_id: int, attempt: int) -> int:
    """The id of the span of the run's attempt ``attempt``: the same in every process,
    so a process that learns an attempt was lost can record it (``record_span``)."""
    data = trace_id.to_bytes(16, "big") + attempt.to_bytes(4, "big", signed=True)
    digest = hashlib.blake2b(data, digest_size=8, person=_SPAN).digest()
    return int.from_bytes(digest, "big") or 1


def run_flags(trace_id: int) -> TraceFlags:
    """The W3C trace flags of a run's trace: sampled unless its id says not."""
    return _SAMPLED if run_sampled(trace_id) else _NOT_SAMPLED


def _context_of(trace_id: int, span_id: int | None = None) -> otel_context.Context:
    span_id = run_span_id(trace_id) if span_id is None else span_id
    parent = SpanContext(trace_id, span_id, is_remote=True, trace_flags=run_flags(trace_id))
    return trace.set_span_in_context(NonRecordingSpan(parent), otel_context.Context())


def attempt_context(trace_id: int, attempt: int) -> otel_context.Context | None:
    """A context whose current span is the span of the run's attempt ``attempt``
    (recorded when the attempt ends, ``record_attempt_span``); None when the trace is
    no run's."""
    if run_start_ns(trace_id) is None:
        return None
    return _context_of(trace_id, attempt_span_id(trace_id, attempt))


def new_run_context(start_ns: int | None = None, sample: float = 1.0) -> otel_context.Context:
    """A context for a new run's first spans: a new trace (see the module docstring),
    whose current span is the run span, begun at ``start_ns`` (default: now), sampled
    with probability ``sample`` (``decide_run_trace_id``). It holds nothing of the
    caller's context: a run's trace has one root."""
    start = time.time_ns() if start_ns is None else start_ns
    return _context_of(decide_run_trace_id(start, sample))


def run_context(trace_id: int | str) -> otel_context.Context | None:
    """A context whose current span is the run span of the trace ``trace_id`` (an
    int, or 32 hex digits), for spans of a run begun elsewhere (a requeue, an
    attempt); None when the trace is no run's."""
    if isinstance(trace_id, str):
        try:
            trace_id = int(trace_id, 16) if len(trace_id) == 32 else 0
        except ValueError:
            return None
    if not trace_id or run_start_ns(trace_id) is None:
        return None
    return _context_of(trace_id)


@contextmanager
def within_run(trace_id: int | str) -> Iterator[None]:
    """Within the block, new spans sit beneath the run span of ``trace_id`` (a span
    of the run made apart from its other spans: a requeue); for a trace that is no
    run's, beneath what is current."""
    context = run_context(trace_id)
    if context is None:
        yield
        return
    token = otel_context.attach(context)
    try:
        yield
    finally:
        otel_context.detach(token)


def current_run_trace_id() -> int | None:
    """The trace id of the current span when its trace is a run's."""
    current = trace.get_current_span().get_span_context()
    if not current.is_valid or run_start_ns(current.trace_id) is None:
        return None
    return current.trace_id


def record_run_span(
    trace_id: int,
    attributes: Mapping[str, Any],
    end_ns: int | None = None,
    links: Sequence[trace.Link] = (),
) -> bool:
    """Record the run span of ``trace_id``, from the start its trace id says to
    ``end_ns`` (default: now), with ``attributes`` (the run's), its hop ``run`` and
    kind ``run``. Call it once per run, where the run's end was made durable. False
    (nothing recorded) for a trace that is no run's, or where nothing is traced."""
    start = run_start_ns(trace_id)
    if start is None:
        return False
    recorder = _recorder()
    if recorder is None:
        return False
    end = time.time_ns() if end_ns is None else end_ns
    flags = run_flags(trace_id)
    context = SpanContext(trace_id, run_span_id(trace_id), is_remote=False, trace_flags=flags)
    attrs = {**attributes, ATTR_HOP: RUN_HOP, ATTR_KIND: RUN_KIND}
    recorder.record(RUN_SPAN, context, None, start, max(start, end), attrs, links)
    return True


def record_attempt_span(
    trace_id: int,
    attempt: int,
    start_ns: int,
    attributes: Mapping[str, Any],
    end_ns: int | None = None,
) -> bool:
    """Record the span of the run's attempt ``attempt`` (``cronwave.attempt``, a child
    of the run span), from ``start_ns`` to ``end_ns`` (default: now), hop ``run``, kind
    ``attempt``. Call it once per attempt: where the attempt ended, or where it was
    found lost. False for a trace that is no run's, or where nothing is traced."""
    if run_start_ns(trace_id) is None:
        return False
    recorder = _recorder()
    if recorder is None:
        return False
    end = time.time_ns() if end_ns is None else end_ns
    flags = run_flags(trace_id)
    context = SpanContext(trace_id, attempt_span_id(trace_id, attempt), False, flags)
    parent = SpanContext(trace_id, run_span_id(trace_id), True, flags)
    attrs = {
        **attributes,
        ATTR_ATTEMPT: attempt,
        ATTR_HOP: RUN_HOP,
        ATTR_KIND: ATTEMPT_KIND,
    }
    recorder.record(ATTEMPT_SPAN, context, parent, start_ns, max(start_ns, end), attrs)
    return True


#: The installed provider and its recorder, looked up once: the SDK's ``get_tracer``
#: costs more than the span it records (two per run). Tests install other providers.
_recorder_of: tuple[object, LeanTracer | None] = (None, None)


def _recorder() -> LeanTracer | None:
    """The installed provider's tracer as a ``LeanTracer`` (which records a span with
    chosen ids); None where no recording provider is installed."""
    global _recorder_of
    provider = trace.get_tracer_provider()
    if _recorder_of[0] is provider:
        return _recorder_of[1]
    found = provider.get_tracer("cronwave.run")
    recorder: LeanTracer | None = None
    if isinstance(found, LeanTracer):
        recorder = found
    elif isinstance(found, SdkTracer):  # a configured sampler: the SDK's own tracer
        recorder = LeanTracer(found)
    if not isinstance(found, trace.ProxyTracer):  # a proxy follows a later provider
        _recorder_of = (provider, recorder)
    return recorder
