"""Per-run measurement rules (``runs`` and ``placement`` docstrings), on tiny traces."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from cronwave_waterfall import Span, build_runs

FIRE = datetime(2025, 3, 1, 2, 0, tzinfo=UTC)
FIRE_NS = int(FIRE.timestamp()) * 1_000_000_000
US = 1000


def sp(
    span_id: int,
    parent: int | None,
    start_us: int,
    end_us: int,
    hop: str | None = None,
    kind: str | None = None,
    *,
    span_kind: str = "INTERNAL",
    run: str | None = "r1",
    trace: str = "t1",
    **attrs: Any,
) -> Span:
    attributes: dict[str, Any] = {}
    if run is not None:
        attributes["cronwave.run_id"] = run
        attributes["cronwave.fire_time"] = "2025-03-01T02:00:00Z"
    if hop is not None:
        attributes["cronwave.hop"] = hop
    if kind is not None:
        attributes["cronwave.kind"] = kind
    attributes.update({k.replace("__", "."): v for k, v in attrs.items()})
    return Span(
        trace_id=trace.rjust(32, "0"),
        span_id=f"{span_id:016x}",
        parent_span_id=f"{parent:016x}" if parent is not None else "",
        name=f"s{span_id}",
        service="svc",
        start_ns=FIRE_NS + start_us * US,
        end_ns=FIRE_NS + end_us * US,
        attributes=attributes,
        span_kind=span_kind,
    )


def one(spans: list[Span]):
    [run] = build_runs(spans)
    return run


def test_nested_and_overlapping_spans_of_one_hop_and_kind_count_once():
    run = one(
        [
            sp(1, None, 0, 100, "persist", "app"),
            sp(2, 1, 0, 10, "persist", "database"),
            sp(3, 2, 2, 8, "persist", "database"),  # nested in 2
            sp(4, 1, 9, 12, "persist", "database"),  # overlaps 2
            sp(5, 1, 20, 25, None, None, db__system="sqlite"),  # SQL instrumentation
        ]
    )
    assert run.kind_ns[("persist", "database")] == 17 * US
    assert run.hop_ns["persist"] == 100 * US
    assert run.kind_ns[("persist", "app")] == 83 * US


def test_network_is_client_minus_server_and_belongs_to_the_called_hop():
    rpc = {"rpc__service": "S", "rpc__method": "CreateRun"}
    run = one(
        [
            sp(1, None, 0, 100, "dispatch", "app"),
            sp(2, 1, 10, 60, span_kind="CLIENT", run=None, **rpc),
            sp(3, 2, 15, 55, span_kind="SERVER", run=None, **rpc),
            sp(4, 3, 16, 50, "persist", "database"),
        ]
    )
    assert run.kind_ns[("persist", "network")] == 10 * US
    assert run.kind_ns[("persist", "database")] == 34 * US
    assert run.hop_ns["persist"] == 50 * US
    assert run.kind_ns[("persist", "app")] == 6 * US
    # dispatch's own time excludes the call it waited on
    assert run.hop_ns["dispatch"] == 50 * US
    assert ("dispatch", "network") not in run.kind_ns


def test_a_server_of_another_method_is_not_the_client_s_match():
    run = one(
        [
            sp(1, None, 0, 100, "dispatch", "app"),
            sp(2, 1, 10, 60, span_kind="CLIENT", run=None, rpc__method="A"),
            sp(3, 2, 15, 55, span_kind="SERVER", run=None, rpc__method="B"),
        ]
    )
    assert not any(kind == "network" for _, kind in run.kind_ns)


def test_network_already_measured_is_not_derived_again():
    rpc = {"rpc__method": "CreateRun"}
    run = one(
        [
            sp(1, None, 0, 100, "persist", "network"),  # the service measured the call
            sp(2, 1, 0, 100, span_kind="CLIENT", run=None, **rpc),
            sp(3, 2, 40, 60, "persist", "database", span_kind="SERVER"),
        ]
    )
    assert run.kind_ns[("persist", "network")] == 100 * US
    assert run.kind_ns[("persist", "app")] == 0  # overlapping kinds: never negative


def test_app_is_never_negative_when_kinds_overlap():
    run = one(
        [
            sp(1, None, 0, 10, "dispatch", "cache"),
            sp(2, 1, 0, 10, "dispatch", "database"),
        ]
    )
    assert run.hop_ns["dispatch"] == 10 * US
    assert run.kind_ns[("dispatch", "app")] == 0


def test_a_follow_up_that_outlives_its_parent_is_not_cut_from_it():
    run = one(
        [
            sp(1, None, 0, 100, "dispatch", "app"),
            sp(2, 1, 90, 95, "dispatch", "queue"),
            sp(3, 2, 95, 300, "pickup", "queue"),  # the queued message: outlives 2
            sp(4, 1, 20, 40, "persist", "database"),  # a synchronous call: cut
        ]
    )
    assert run.hop_ns["dispatch"] == 80 * US
    assert run.hop_ns["pickup"] == 205 * US


def test_spans_without_a_run_id_join_their_trace_s_run():
    run = one(
        [
            sp(1, None, 0, 10, "plan", "app"),
            sp(2, None, 20, 30, "leader", "cache", run=None),  # a root without run id
        ]
    )
    assert set(run.hop_ns) == {"plan", "leader"}


def test_in_a_trace_of_several_runs_a_span_takes_its_ancestor_s_run():
    runs = build_runs(
        [
            sp(1, None, 0, 10, "plan", "app", run="a"),
            sp(2, None, 0, 10, "plan", "app", run="b"),
            sp(3, 2, 2, 4, "plan", "cache", run=None),
            sp(4, None, 50, 60, "plan", "database", run=None),  # whose? nobody's
        ]
    )
    assert {r.run_id: sorted(r.kind_ns) for r in runs} == {
        "a": [("plan", "app")],
        "b": [("plan", "app"), ("plan", "cache")],
    }


def test_end_to_end_and_lateness_from_fire_time():
    run = one(
        [
            sp(1, None, 100, 900, "execute", "app"),
            sp(2, None, 950, 1200, "complete", "database"),
            sp(3, None, 940, 1150, "complete", "app"),
        ]
    )
    assert run.end_to_end_ns == 1200 * US
    assert run.lateness_ns == 100 * US
    assert run.fire_time == FIRE


def test_stated_lateness_wins_and_no_complete_means_no_end_to_end():
    run = one([sp(1, None, 100, 900, "execute", "app", cronwave__lateness_ms=2.5)])
    assert run.lateness_ns == 2_500_000
    assert run.end_to_end_ns is None


def test_a_fire_time_with_an_offset_is_understood():
    span = sp(1, None, 100, 900, "execute", "app")
    attrs = {**span.attributes, "cronwave.fire_time": "2025-03-01T03:00:00+01:00"}
    run = one([replace(span, attributes=attrs)])
    assert run.fire_time == FIRE
    assert run.lateness_ns == 100 * US


def test_scenario_is_the_slowest_path_any_span_took():
    def scenario(*hits: str) -> str:
        spans = [
            sp(i + 1, None, 0, 1, "dispatch", "cache", cronwave__cache__hit=h)
            for i, h in enumerate(hits)
        ]
        return one(spans).scenario

    assert scenario("local", "local") == "local"
    assert scenario("local", "redis") == "redis"
    assert scenario("redis", "miss", "local") == "miss"
    assert one([sp(1, None, 0, 1, "plan", "app")]).scenario == "local"


def test_a_span_read_twice_counts_once():
    spans = [sp(1, None, 0, 10, "plan", "app"), sp(2, 1, 0, 5, "plan", "cache")]
    assert one(spans + spans).kind_ns == one(spans).kind_ns


def test_a_placed_rpc_s_network_is_derived_as_an_unplaced_one_s():
    # Given an RPC whose client and server spans say their hop and kind, as the
    # services now place them (network: the client's; app: the server's own work)
    rpc = {"rpc__service": "S", "rpc__method": "RecordRuns"}
    run = one(
        [
            sp(1, None, 0, 100, "dispatch", "app"),
            sp(2, 1, 10, 60, "persist", "network", span_kind="CLIENT", **rpc),
            sp(3, 2, 15, 55, "persist", "app", span_kind="SERVER", **rpc),
            sp(4, 3, 16, 50, "persist", "database"),
        ]
    )
    # Then network is still the client's duration minus the server's
    assert run.kind_ns[("persist", "network")] == 10 * US
    assert run.kind_ns[("persist", "database")] == 34 * US
    assert run.hop_ns["persist"] == 50 * US
    assert run.hop_ns["dispatch"] == 50 * US


def test_the_run_s_own_spans_are_in_no_hop_s_time():
    # Given a run span over everything, an attempt span and a hold (hop "run"), with
    # the hops beneath them
    run = one(
        [
            sp(1, None, 0, 1000, "run", "run"),
            sp(2, 1, 0, 100, "plan", "app"),
            sp(3, 1, 100, 1000, "run", "attempt"),
            sp(4, 3, 100, 600, "run", "hold", cronwave__hold="fire_time"),
            sp(5, 3, 600, 900, "execute", "app"),
            sp(6, 3, 900, 1000, "complete", "database"),
        ]
    )
    # Then no row is the run's, and each hop has its own time only
    assert set(run.hop_ns) == {"plan", "execute", "complete"}
    assert run.hop_ns == {"plan": 100 * US, "execute": 300 * US, "complete": 100 * US}
    assert run.kind_ns[("complete", "database")] == 100 * US


def test_a_connection_s_set_up_counts_once_as_its_narrowest_kind():
    # Given a pool checkout (database) that opened a connection (connect) whose
    # name was looked up first (dns), then ran a statement
    run = one(
        [
            sp(1, None, 0, 100, "persist", "app"),
            sp(2, 1, 0, 60, "persist", "database"),  # the checkout
            sp(3, 2, 5, 55, "persist", "connect"),
            sp(4, 3, 5, 35, "persist", "dns"),
            sp(5, 1, 60, 80, "persist", "database"),  # the statement
        ]
    )
    # Then the look-up is dns, the rest of the set-up connect, the rest database
    assert run.kind_ns[("persist", "dns")] == 30 * US
    assert run.kind_ns[("persist", "connect")] == 20 * US
    assert run.kind_ns[("persist", "database")] == 30 * US  # 10 of the checkout, 20
    assert run.kind_ns[("persist", "app")] == 20 * US
    assert sum(v for (hop, _), v in run.kind_ns.items() if hop == "persist") == 100 * US


def test_set_up_in_one_hop_takes_nothing_from_another_hop_s_kinds():
    run = one(
        [
            sp(1, None, 0, 50, "dispatch", "cache"),
            sp(2, None, 0, 50, "persist", "database"),
            sp(3, 2, 0, 40, "persist", "connect"),
        ]
    )
    assert run.kind_ns[("dispatch", "cache")] == 50 * US
    assert run.kind_ns[("persist", "database")] == 10 * US
    assert run.kind_ns[("persist", "connect")] == 40 * US
