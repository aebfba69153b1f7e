"""A run's critical path: from the run's end back in time, the child that ended last,
followed down; every moment on the path once, each with its span's hop and kind."""

from __future__ import annotations

import itertools
from typing import Any

from cronwave_waterfall import build_runs
from cronwave_waterfall.critical_path import by_hop, critical_path, steps
from cronwave_waterfall.span import Span

from .synth import all_spans, make_runs

MS = 1_000_000
T0 = 1_740_794_400 * 1_000_000_000  # 2025-03-01T02:00:00Z
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
RPC = {"rpc.system": "grpc", "rpc.service": "cronwave.v1.DispatcherService", "rpc.method": "X"}


def _span(
    span_id: int,
    parent: int,
    start_ms: int,
    end_ms: int,
    hop: str | None,
    kind: str | None,
    span_kind: str = "INTERNAL",
    extra: dict[str, Any] | None = None,
) -> Span:
    attrs: dict[str, Any] = {} if hop is None else {"cronwave.run_id": "r-1"}
    if hop is not None:
        attrs["cronwave.hop"] = hop
    if kind is not None:
        attrs["cronwave.kind"] = kind
    attrs.update(extra or {})
    return Span(
        trace_id=TRACE,
        span_id=f"{span_id:016x}",
        parent_span_id=f"{parent:016x}" if parent else "",
        name=f"span-{span_id}",
        service="svc",
        start_ns=T0 + start_ms * MS,
        end_ns=T0 + end_ms * MS,
        attributes=attrs,
        span_kind=span_kind,
    )


def _a_run_worked_out_by_hand() -> list[Span]:
    """A run span over [0, 100] ms; its path worked out by hand in the test."""
    fire = {"cronwave.fire_time": "2025-03-01T02:00:00Z", "cronwave.trigger": "scheduled"}
    return [
        _span(1, 0, 0, 100, "run", "run", extra=fire),
        _span(2, 1, 0, 10, "plan", "app"),
        _span(3, 2, 2, 8, None, None, "CLIENT", RPC),  # an instrumented call ...
        _span(4, 3, 3, 7, None, None, "SERVER", RPC),  # ... and its server
        _span(5, 4, 3, 7, "dispatch", "app"),
        _span(6, 1, 10, 40, "pickup", "queue"),
        _span(7, 1, 40, 98, "run", "attempt"),
        _span(8, 7, 41, 90, "execute", "app"),
        _span(9, 8, 50, 70, "execute", "database"),
        _span(10, 8, 45, 60, "execute", "cache"),  # overlaps the SQL: ended earlier
        _span(11, 7, 91, 97, "complete", "database"),
    ]


def test_a_run_worked_out_by_hand() -> None:
    (run,) = build_runs(_a_run_worked_out_by_hand())

    path = critical_path(run)

    # Every moment of the run once, in time order
    assert path[0].start_ns == T0 and path[-1].end_ns == T0 + 100 * MS
    assert all(a.end_ns == b.start_ns for a, b in itertools.pairwise(path))
    ms = {hop: {k: v / MS for k, v in kinds.items()} for hop, kinds in by_hop(path).items()}
    # Then: plan's own 0-2 and 8-10; the call's own 2-3 and 7-8 is its network, the
    # server's 3-7 dispatch's; the queue 10-40; the attempt's own 40-41, 90-91, 97-98;
    # in execute the SQL ended last (70), so 70-90 is execute's own, 50-70 the SQL's,
    # 45-50 the cache's part before the SQL began, 41-45 execute's own again; the run
    # span's own 98-100.
    assert ms == {
        "plan": {"app": 4.0},
        "dispatch": {"network": 2.0, "app": 4.0},
        "pickup": {"queue": 30.0},
        "run": {"attempt": 3.0, "run": 2.0},
        "execute": {"app": 24.0, "database": 20.0, "cache": 5.0},
        "complete": {"database": 6.0},
    }
    assert [(s.hop, (s.start_ns - T0) // MS, (s.end_ns - T0) // MS) for s in steps(path)] == [
        ("plan", 0, 2),
        ("dispatch", 2, 8),
        ("plan", 8, 10),
        ("pickup", 10, 40),
        ("run", 40, 41),
        ("execute", 41, 90),
        ("run", 90, 91),
        ("complete", 91, 97),
        ("run", 97, 100),
    ]


def test_a_trace_without_a_run_span_still_has_one_path() -> None:
    # Given runs whose worker spans hang under the queued message (a follow-up)
    runs = build_runs(all_spans(make_runs(20, seed=11)))
    for run in runs:
        # When each one's path is walked
        path = critical_path(run)
        # Then it covers the run from its first span to its last, once
        first = min(s.start_ns for s in run.spans)
        last = max(s.end_ns for s in run.spans)
        assert path[0].start_ns == first and path[-1].end_ns == last
        assert all(a.end_ns == b.start_ns for a, b in itertools.pairwise(path))
        # and the worker's hops are on it, in the run's order
        hops = [s.hop for s in steps(path)]
        assert hops[0] == "plan" and hops[-1] == "complete"
        assert hops.index("pickup") < hops.index("execute") < hops.index("complete")
        # and a hop is on the path no longer than its spans were open
        for hop, kinds in by_hop(path).items():
            if hop != "run":
                assert sum(kinds.values()) <= run.hop_end_ns[hop] - run.hop_start_ns[hop]
