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


def held_trace(carrier: Mapping[str, str]) -> int:
    """The trace id of a run not sampled whose hand-over carried ``carrier``; 0 for a
    sampled run or none."""
    context = trace.get_current_span(propagate.extract(dict(carrier))).get_span_context()
    if not context.is_valid or run_sampled(context.trace_id):
        return 0
    return context.trace_id


class HeldSpans:
    """The spans of runs not sampled that ``deferred`` holds in this job process (None:
    tracing is off, nothing is held)."""

    def __init__(self, deferred: DeferredSpans | None) -> None:
        self.deferred = deferred
        self._last: tuple[int, dict[str, Any]] = (0, {})

    def outcome(self, carrier: Mapping[str, str]) -> dict[str, Any]:
        """What the body's outcome line carries of the run's held spans:
        ``{"spans": [...]}``, or nothing. Asked again for the same run (its result
        could not be sent, its error is), the same answer."""
        trace_id = held_trace(carrier) if self.deferred is not None else 0
        if not trace_id:
            return {}
        if self._last[0] == trace_id:
            return self._last[1]
        assert self.deferred is not None
        spans = span_wire.encode(self.deferred.take(trace_id))
        answer = {"spans": spans} if spans else {}
        self._last = (trace_id, answer)
        return answer

    def keep(self, carrier: Mapping[str, str]) -> None:
        """The worker stopped the body: export the run's held spans from here."""
        trace_id = held_trace(carrier) if self.deferred is not None else 0
        if trace_id and self.deferred is not None:
            self.deferred.keep(trace_id)
