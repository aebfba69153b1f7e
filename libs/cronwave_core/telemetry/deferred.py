"""The spans of runs not sampled, kept back in the process until the run's outcome
decides: exported when the run turned out to matter (it failed, was retried, or
started late), dropped when it did not.

A process that keeps them (the worker: ``init_tracing(..., deferred=...)``) samples
with ``RECORD_UNSAMPLED_RUNS``: a span of a run's trace whose parent is not sampled is
recorded but not sampled, so the export processor passes it by and ``DeferredSpans``
holds it, by its trace id; a span of another trace not sampled (a batch call that
carried no sampled run) is not recorded at all. ``keep(trace_id)`` hands copies of the
held spans, now sampled, to the export processor; ``drop(trace_id)`` forgets them.

Only the worker's spans of the run can be kept so: the other hops (the planner's
fire, the dispatch, the store's persist and complete, a batch call's copies) did not
record theirs, as the run was not sampled where they ran. A job process holds the
spans of the body it runs the same way and hands them to its worker with the body's
outcome (``span_wire``), where they are held with the worker's own; a body its worker
stops (duration limit, cancel, the worker's stop) is always kept, so its job process
exports them itself as it stops. A kept run's trace is therefore the worker's part
of the waterfall (pickup, hold, execute, the body's spans, the attempt and the run
span) with the other hops missing.

Memory is bounded: at most ``max_spans`` spans are held in all, past which the trace
held longest is dropped whole (a run that outlives that many other runs' spans is not
kept), and at most ``max_run_spans`` of one run (its later spans are not held).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.trace import SpanContext, TraceFlags

from cronwave_core.telemetry.lean import RecordUnsampled
from cronwave_core.telemetry.run_span import run_start_ns

#: Spans held in a process at most, over all its runs not sampled.
MAX_SPANS = 16384
#: Spans held of one run at most: a body that makes more (a statement per row) keeps
#: its first ones, and does not push every other run out.
MAX_RUN_SPANS = 2048

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


_last: tuple[int, bool] = (0, False)


def _is_run(trace_id: int) -> bool:
    """Whether ``trace_id`` is a run's (the answer for the last trace asked about is
    remembered: a run's spans come one after another)."""
    global _last
    last = _last
    if last[0] == trace_id:
        return last[1]
    found = run_start_ns(trace_id) is not None
    _last = (trace_id, found)
    return found


#: The sampler of a process that holds runs not sampled (``lean.RecordUnsampled``).
RECORD_UNSAMPLED_RUNS = RecordUnsampled(_is_run)


class DeferredSpans(SpanProcessor):
    """Holds the recorded spans that are not sampled (``RECORD_UNSAMPLED_RUNS`` records
    only runs' such spans), by trace, until ``keep`` hands them to ``export`` (set by
    ``init_tracing``) or ``drop`` forgets them."""

    def __init__(self, max_spans: int = MAX_SPANS, max_run_spans: int = MAX_RUN_SPANS) -> None:
        self.export: SpanProcessor | None = None
        self._max_spans = max_spans
        self._max_run_spans = max_run_spans
        self._held = 0
        self._traces: OrderedDict[int, list[ReadableSpan]] = OrderedDict()
        self._lock = threading.Lock()

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None or context.trace_flags.sampled:
            return
        with self._lock:
            spans = self._traces.get(context.trace_id)
            if spans is None:
                spans = self._traces[context.trace_id] = []
            elif len(spans) >= self._max_run_spans:
                return
            spans.append(span)
            self._held += 1
            while self._held > self._max_spans and self._traces:
                _, oldest = self._traces.popitem(last=False)
                self._held -= len(oldest)

    def held(self, trace_id: int) -> int:
        """How many spans of ``trace_id`` are held."""
        with self._lock:
            return len(self._traces.get(trace_id, ()))

    def keep(self, trace_id: int) -> int:
        """Export the held spans of ``trace_id``, as sampled; how many."""
        spans = self._take(trace_id)
        export = self.export
        if export is not None:
            for span in spans:
                export.on_end(_sampled(span))
        return len(spans)

    def drop(self, trace_id: int) -> None:
        """Forget the held spans of ``trace_id``."""
        self._take(trace_id)

    def take(self, trace_id: int) -> list[ReadableSpan]:
        """The held spans of ``trace_id``, no longer held (a job process hands them to
        its worker: ``span_wire``)."""
        return self._take(trace_id)

    def _take(self, trace_id: int) -> list[ReadableSpan]:
        with self._lock:
            spans = self._traces.pop(trace_id, [])
            self._held -= len(spans)
        return spans

    def shutdown(self) -> None:
        with self._lock:
            self._traces.clear()
            self._held = 0

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _sampled(span: ReadableSpan) -> ReadableSpan:
    """A finished span's copy with its context and parent's marked sampled."""
    context = span.context
    parent = span.parent
    assert context is not None
    attributes: Any = span.attributes
    return ReadableSpan(
        name=span.name,
        context=_flagged(context),
        parent=_flagged(parent) if parent is not None else None,
        resource=span.resource,
        attributes=dict(attributes or {}),
        events=span.events,
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def _flagged(context: SpanContext) -> SpanContext:
    return SpanContext(
        context.trace_id, context.span_id, context.is_remote, _SAMPLED, context.trace_state
    )
