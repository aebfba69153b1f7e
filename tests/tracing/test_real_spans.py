"""The spans real runs leave behind: every hop, run attributes, RPC spans that pair up
across processes, serialization on both ends, and figures the waterfall derives from
them that a direct computation on the raw spans agrees with."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from datetime import UTC, datetime

import pytest

from cronwave_core.telemetry.vocabulary import (
    ATTR_FIRE_TIME,
    ATTR_HOP,
    ATTR_KIND,
    ATTR_RUN_ID,
    ATTR_SCHEDULE_ID,
    HOPS,
    KINDS,
)
from cronwave_waterfall import (
    Run,
    RunFilter,
    Span,
    build_runs,
    export_jaeger,
    read_jaeger,
    waterfall,
)
from cronwave_waterfall.placement import place
from tests.tracing.support import load, scheduled_tick, spans_of, traced_suite, triggered

pytestmark = pytest.mark.slow

CORE_SERVICES = {"dispatcher", "workflow-store", "worker"}
# RPCs on the path of every run, and the hop their serialization is filed under: a
# scheduled run is started in a batch (StartRuns), a triggered one in a batch of one;
# either batch records its runs with their "enqueued" events (RecordRuns with
# enqueue), and workers claim and complete in batches (group commit).
WORKER_RPCS = {"ClaimRuns": "pickup", "CompleteRuns": "complete"}
SCHEDULED_RPCS = {**WORKER_RPCS, "RecordRuns": "persist"}
TRIGGERED_RPCS = SCHEDULED_RPCS


def _traces(spans: list[Span], run: Run) -> list[Span]:
    traces = {s.trace_id for s in run.spans}
    return [s for s in spans if s.trace_id in traces]


def test_a_scheduled_run_has_seven_hops_and_spans_that_pair_up(make_suite) -> None:
    # Given a suite, one run fired by the planner and one triggered by hand
    suite = traced_suite(make_suite)
    scheduled_id = scheduled_tick(suite)
    (manual_id,) = triggered(suite)
    spans = spans_of(suite)
    runs = {r.run_id: r for r in build_runs(spans)}

    # Then the scheduled run crosses all seven hops, each with its kinds of time
    scheduled = runs[scheduled_id]
    assert set(HOPS) <= set(scheduled.hop_ns), sorted(scheduled.hop_ns)
    assert all(kind in KINDS for _, kind in scheduled.kind_ns)
    assert scheduled.end_to_end_ns is not None and scheduled.lateness_ns is not None
    # and the manual one all but the planner's two
    assert set(runs[manual_id].hop_ns) == set(HOPS) - {"plan", "leader"}

    for run, rpcs in ((scheduled, SCHEDULED_RPCS), (runs[manual_id], TRIGGERED_RPCS)):
        trace = _traces(spans, run)
        # every span of the run's traces belongs to the run
        placed = place(trace)
        assert {p.run_id for p in placed} == {run.run_id}
        assert len(placed) == len(trace)
        # every span a service opens for a hop names the schedule and fire time, and
        # every one that began once the store had named the run names the run too
        recorded = min(s.end_ns for s in trace if s.name == "workflow-store RecordRuns")
        for s in trace:
            if s.service not in CORE_SERVICES or ATTR_HOP not in s.attributes:
                continue
            assert s.attributes.get(ATTR_SCHEDULE_ID) == run.schedule_id, s
            assert s.attributes.get(ATTR_FIRE_TIME), s
            if s.start_ns > recorded:
                assert s.attributes.get(ATTR_RUN_ID) == run.run_id, s
        _rpc_spans_pair_up(trace)
        _serialization_on_both_ends(trace, rpcs)


def _rpc_spans_pair_up(trace: list[Span]) -> None:
    by_id = {s.span_id: s for s in trace}
    clients = [s for s in trace if s.span_kind == "CLIENT" and "rpc.method" in s.attributes]
    servers = [s for s in trace if s.span_kind == "SERVER"]
    assert clients and servers
    children = defaultdict(list)
    for s in trace:
        children[s.parent_span_id].append(s)
    # The client span of a call is the parent of its server span, across processes
    for server in servers:
        client = by_id.get(server.parent_span_id)
        if client is None:
            assert server.service == "dispatcher", server  # the trigger came from outside
            continue
        assert client.span_kind == "CLIENT", (client, server)
        assert client.service != server.service
        assert client.attributes["rpc.method"] == server.attributes["rpc.method"]
        # and holds it: network time (client minus server) is never negative
        assert client.duration_ns >= server.duration_ns, (client, server)
    for client in clients:
        assert any(c.span_kind == "SERVER" for c in children[client.span_id]), client


def _serialization_on_both_ends(trace: list[Span], rpcs: dict[str, str | None]) -> None:
    by_id = {s.span_id: s for s in trace}
    coded = [s for s in trace if s.attributes.get(ATTR_KIND) == "serialization"]
    for method, hop in rpcs.items():
        names = {
            f"{side} {verb} {method}"
            for side in ("client", "server")
            for verb in ("encode", "decode")
        }
        found = {s.name: s for s in coded if s.name in names}
        assert set(found) == names, (method, sorted(found))
        assert all(s.attributes.get(ATTR_HOP) == hop for s in found.values()), method
        server = by_id[found[f"server decode {method}"].parent_span_id]
        client = by_id[server.parent_span_id]
        # the server's decode and encode are inside its span (the stock span leaves
        # them out); the client's are outside its call, so the call is transport only
        for verb in ("decode", "encode"):
            inner = found[f"server {verb} {method}"]
            assert server.start_ns <= inner.start_ns <= inner.end_ns <= server.end_ns
        assert found[f"client encode {method}"].end_ns <= client.start_ns
        assert found[f"client decode {method}"].start_ns >= client.end_ns


def _quantile(values: list[int], q: float) -> float:
    """The linear-interpolation quantile, written out here (numpy's default method)."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def test_hop_percentiles_match_a_direct_computation_and_jaeger_round_trips(
    make_suite, namespace
) -> None:
    # Given 60 real runs
    suite = traced_suite(make_suite)
    report = load(suite, namespace, 60, concurrency=4, warmup=4)
    spans = spans_of(suite)
    result = waterfall(build_runs(spans), RunFilter(since=report.since))
    assert result.runs == 60

    # When the same figures are computed straight from the raw spans
    by_run: dict[str, list[Span]] = defaultdict(list)
    for s in spans:
        run_id = s.attributes.get(ATTR_RUN_ID)
        if run_id in report.run_ids:
            by_run[str(run_id)].append(s)
    assert len(by_run) == 60
    direct: dict[str, list[int]] = defaultdict(list)
    for members in by_run.values():
        stated = {
            str(s.attributes[ATTR_FIRE_TIME]) for s in members if s.attributes.get(ATTR_FIRE_TIME)
        }
        assert len(stated) == 1, stated  # every span that says it says the same
        fire = datetime.fromisoformat(stated.pop())
        since_epoch = fire - datetime(1970, 1, 1, tzinfo=UTC)
        fire_ns = (since_epoch.days * 86_400 + since_epoch.seconds) * 10**9
        fire_ns += since_epoch.microseconds * 1000
        (pickup,) = [s for s in members if s.name == "worker.pickup"]
        (execute,) = [s for s in members if s.name == "worker.execute"]
        completes = [s for s in members if s.attributes.get(ATTR_HOP) == "complete"]
        direct["pickup queue"].append(pickup.duration_ns)
        direct["execute"].append(execute.duration_ns)
        direct["end-to-end"].append(max(s.end_ns for s in completes) - fire_ns)

    # Then the tool's percentiles are those, to the nanosecond's rounding
    hops = {row.hop: row for row in result.hops}
    tool = {
        "pickup queue": next(k.stats for k in hops["pickup"].kinds if k.kind == "queue"),
        "execute": hops["execute"].stats,
        "end-to-end": result.end_to_end,
    }
    for name, values in direct.items():
        stats = tool[name]
        assert stats is not None and stats.count == len(values) == 60, name
        for q, got in (
            (0.5, stats.p50_ms),
            (0.9, stats.p90_ms),
            (0.99, stats.p99_ms),
            (0.999, stats.p999_ms),
        ):
            assert got == pytest.approx(_quantile(values, q) / 1e6, abs=1e-3), (name, q)
        assert stats.mean_ms == pytest.approx(sum(values) / len(values) / 1e6, abs=1e-3), name

    # And a real run's trace survives Jaeger JSON: span tree, hops and durations
    run = next(r for r in build_runs(spans) if r.run_id == report.run_ids[-1])
    trace = _traces(spans, run)
    document = json.loads(json.dumps(export_jaeger(trace)))
    back = list(read_jaeger(document))
    assert {s.span_id for s in back} == {s.span_id for s in trace}
    original = {s.span_id: s for s in trace}
    for s in back:
        before = original[s.span_id]
        assert s.parent_span_id == before.parent_span_id
        assert s.span_kind == before.span_kind and s.service == before.service
        assert abs(s.duration_ns - before.duration_ns) <= 1000  # Jaeger keeps microseconds
        assert s.attributes.get(ATTR_HOP) == before.attributes.get(ATTR_HOP)
    (again,) = [r for r in build_runs(back) if r.run_id == run.run_id]
    assert set(again.hop_ns) == set(run.hop_ns)
    for hop, ns in run.hop_ns.items():
        assert abs(again.hop_ns[hop] - ns) <= 20_000, hop  # a few spans' µs rounding
