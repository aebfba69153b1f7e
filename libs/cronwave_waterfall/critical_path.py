"""One run's critical path: the chain of work the run's end waited on, hop by hop.

The rule is a trace viewer's (Jaeger's): from the end of the run, walk back in time;
the path is in the child of the current span that ended last before that moment,
followed into its own children the same way, and where none of the current span's
children is working, the time is the current span's own. Every moment of the run's
extent is on the path exactly once, so the path's segments add up to the extent.

- **Children.** A span's children are the spans parented on it that lie within its
  interval (``placement``'s *nested*). A follow-up that outlives its parent (in a trace
  with no run span, the worker's spans under the message the dispatcher queued) hangs
  from its nearest ancestor that contains it, else from the run. A span whose parent is
  not among the run's spans hangs from the run.
- **Extent.** The run is a virtual root over its first start to its last end. With a
  run span (``cronwave.run``, the trace's root from the fire decision to durable
  completion) that is the run span's interval, give or take the trigger's call that
  began it; without one, the path's time where no span of the run was open is
  ``no span`` time of hop ``run``.
- **Hop and kind.** A segment takes the hop and kind ``placement`` gives its span; no
  kind counts as ``app``, so an RPC client span's own time (its server not yet or no
  longer working) is the call's ``network``. A span of no hop, or of the run's own
  (the run span, an attempt, a hold until the fire time), counts under hop ``run``
  with its kind: time the run spent between hops, not in any.

``critical_path(run)`` gives the segments in time order; ``steps`` merges neighbours
of one hop into the path's steps (a hop can appear twice: ``persist`` inside
``dispatch``, then ``dispatch`` again for the enqueue).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cronwave_core.telemetry.vocabulary import RUN_HOP
from cronwave_waterfall.placement import Placed, place
from cronwave_waterfall.runs import APP, Run
from cronwave_waterfall.span import Span

NO_SPAN = "no span"
_ROOT = ""


@dataclass(frozen=True, slots=True)
class Segment:
    """A stretch of the path, in ns since the epoch, spent in ``span`` (``None``: the
    run's own time, no span open)."""

    start_ns: int
    end_ns: int
    hop: str
    kind: str
    span: Span | None


@dataclass(frozen=True)
class Step:
    """Consecutive path time in one hop: from ``start_ns`` to ``end_ns`` (ns since the
    epoch), split by kind (ns per kind, in order of first appearance)."""

    hop: str
    start_ns: int
    end_ns: int
    kinds: dict[str, int] = field(default_factory=dict)

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


def _hop_kind(placed: Placed | None) -> tuple[str, str]:
    if placed is None:
        return RUN_HOP, NO_SPAN
    return placed.hop or RUN_HOP, placed.kind or APP


def _children(spans: dict[str, Span]) -> dict[str, list[Span]]:
    """Each span's children (see the module docstring), keyed by span id; the run's
    under ``_ROOT``."""
    out: dict[str, list[Span]] = {}
    for span in spans.values():
        parent_id = span.parent_span_id
        seen: set[str] = {span.span_id}
        while parent_id and parent_id in spans and parent_id not in seen:
            parent = spans[parent_id]
            if parent.start_ns <= span.start_ns and span.end_ns <= parent.end_ns:
                break
            seen.add(parent_id)
            parent_id = parent.parent_span_id
        else:
            parent_id = _ROOT
        out.setdefault(parent_id, []).append(span)
    for members in out.values():
        members.sort(key=lambda s: (-s.end_ns, s.start_ns, s.span_id))
    return out


def critical_path(run: Run) -> list[Segment]:
    """The run's critical path, in time order (see the module docstring)."""
    if not run.spans:
        return []
    spans = {s.span_id: s for s in run.spans}
    placed = {p.span.span_id: p for p in place(spans.values())}
    children = _children(spans)
    low = min(s.start_ns for s in spans.values())
    high = max(s.end_ns for s in spans.values())
    out: list[Segment] = []

    def own(span: Span | None, start: int, end: int) -> None:
        if end > start:
            hop, kind = _hop_kind(placed.get(span.span_id) if span is not None else None)
            out.append(Segment(start, end, hop, kind, span))

    # An explicit stack, not recursion: a trace read from a file may nest deeply.
    # Each frame: (span, its window's start, cursor, its remaining children).
    stack: list[tuple[Span | None, int, int, list[Span]]] = [
        (None, low, high, list(children.get(_ROOT, [])))
    ]
    while stack:
        span, start, cursor, pending = stack.pop()
        while pending and cursor > start:
            child = pending.pop(0)
            child_end = min(child.end_ns, cursor)
            child_start = max(child.start_ns, start)
            if child_end <= child_start:
                continue
            own(span, child_end, cursor)
            stack.append((span, start, child_start, pending))
            stack.append((child, child_start, child_end, list(children.get(child.span_id, []))))
            break
        else:
            own(span, start, cursor)
    out.sort(key=lambda s: s.start_ns)
    return out


def steps(segments: list[Segment]) -> list[Step]:
    """Neighbouring segments of one hop merged, in time order."""
    out: list[Step] = []
    for seg in segments:
        if out and out[-1].hop == seg.hop and out[-1].end_ns == seg.start_ns:
            last = out[-1]
            kinds = dict(last.kinds)
            kinds[seg.kind] = kinds.get(seg.kind, 0) + seg.end_ns - seg.start_ns
            out[-1] = Step(last.hop, last.start_ns, seg.end_ns, kinds)
        else:
            out.append(
                Step(seg.hop, seg.start_ns, seg.end_ns, {seg.kind: seg.end_ns - seg.start_ns})
            )
    return out


def by_hop(segments: list[Segment]) -> dict[str, dict[str, int]]:
    """Path time per hop and kind (ns), hops in order of first appearance."""
    out: dict[str, dict[str, int]] = {}
    for seg in segments:
        kinds = out.setdefault(seg.hop, {})
        kinds[seg.kind] = kinds.get(seg.kind, 0) + seg.end_ns - seg.start_ns
    return out
