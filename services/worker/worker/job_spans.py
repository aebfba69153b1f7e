"""A job process's spans of a run not sampled: held as its worker holds its own
(``telemetry.deferred``), and left to the worker's keep rule.

The job process records the body's spans (``job.body`` and the job's own) of a run
its schedule's ``trace_sample`` left out, beneath the worker's ``worker.execute``
(the trace context of the hand-over), and holds them. When the body ends by itself,
they go to the worker with its outcome (``done``, ``error``, ``released``: a
``spans`` field, ``telemetry.span_wire``), and the worker holds them with its own
spans of the run until its keep rule keeps or drops them all. When the worker stops
the body (SIGTERM: its duration limit, a cancel's grace, the worker's stop, a newer
attempt) no outcome line is read any more, and all but the last of those are kept by
the rule anyway: the process exports them itself as it stops.

A sampled run's spans are exported by the process as they end; none is held.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry import propagate, trace

from cronwave_core.telemetry import span_wire
from cronwave_core.telemetry.deferred import DeferredSpans
from cronwave_core.telemetry.run_span import run_sampled


def held_trace(carrier: Mapping[str, str]) -> tuple[int, int]:
    """The trace id of a run not sampled whose hand-over carried ``carrier``, and the
    id of the span it was handed over from (the attempt's ``worker.execute``); (0, 0)
    for a sampled run or none."""
    context = trace.get_current_span(propagate.extract(dict(carrier))).get_span_context()
    if not context.is_valid or run_sampled(context.trace_id):
        return 0, 0
    return context.trace_id, context.span_id


class HeldSpans:
    """The spans of runs not sampled that ``deferred`` holds in this job process (None:
    tracing is off, nothing is held)."""

    def __init__(self, deferred: DeferredSpans | None) -> None:
        self.deferred = deferred
        self._last: tuple[tuple[int, int], dict[str, Any]] = ((0, 0), {})

    def outcome(self, carrier: Mapping[str, str]) -> dict[str, Any]:
        """What the body's outcome line carries of the run's held spans:
        ``{"spans": [...]}``, or nothing. Asked again for the same hand-over (its
        result could not be sent, its error is), the same answer; a later attempt of
        the run (the same trace) is another hand-over."""
        if self.deferred is None:
            return {}
        handed = held_trace(carrier)
        if not handed[0]:
            return {}
        if self._last[0] == handed:
            return self._last[1]
        spans = span_wire.encode(self.deferred.take(handed[0]))
        answer = {"spans": spans} if spans else {}
        self._last = (handed, answer)
        return answer

    def keep(self, carrier: Mapping[str, str]) -> None:
        """The worker stopped the body: export the run's held spans from here."""
        trace_id = held_trace(carrier)[0]
        if trace_id and self.deferred is not None:
            self.deferred.keep(trace_id)
