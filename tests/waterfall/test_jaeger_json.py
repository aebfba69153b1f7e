"""Jaeger JSON: reading what Jaeger serves and uploads, and the export round trip."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from cronwave_core.errors import InvalidArgument
from cronwave_waterfall import build_runs, export_jaeger, read_jaeger
from cronwave_waterfall.placement import place

from . import recorded
from .synth import make_run


def test_reads_a_recorded_jaeger_trace_into_the_hand_worked_figures():
    # Given Jaeger's answer for one run
    document = recorded.load(recorded.LEGACY)

    # When it is read and measured
    spans = list(read_jaeger(document))
    runs = build_runs(spans)

    # Then every span, its service, kind and parent come through, and the figures hold
    assert len(spans) == recorded.SPANS
    by_name = {(s.name, s.span_kind): s for s in spans}
    server = by_name[("/cronwave.v1.DispatcherService/StartRun", "SERVER")]
    client = by_name[("/cronwave.v1.DispatcherService/StartRun", "CLIENT")]
    assert server.service == "dispatcher"
    assert server.parent_span_id == client.span_id
    assert "span.kind" not in server.attributes
    job = by_name[("job.billing", "INTERNAL")]
    assert job.attributes["billing.customers"] == 100000
    assert job.attributes["billing.amount_ratio"] == 0.25
    assert job.attributes["billing.dry_run"] is False
    [run] = runs
    assert run.run_id == recorded.RUN_ID
    assert run.hop_ns == recorded.HOP_NS
    assert run.kind_ns == recorded.KIND_NS
    assert run.end_to_end_ns == recorded.END_TO_END_NS
    assert run.lateness_ns == recorded.LATENESS_NS
    assert run.scenario == "redis"


def test_short_trace_ids_follows_from_and_error_tags_are_understood():
    # Given a 64-bit trace id, a FOLLOWS_FROM parent and an error tag
    document = {
        "data": [
            {
                "traceID": "a3ce929d0e0e4736",
                "spans": [
                    {
                        "traceID": "a3ce929d0e0e4736",
                        "spanID": "1",
                        "operationName": "consume",
                        "references": [
                            {
                                "refType": "FOLLOWS_FROM",
                                "traceID": "a3ce929d0e0e4736",
                                "spanID": "2",
                            }
                        ],
                        "startTime": 10,
                        "duration": 5,
                        "tags": [{"key": "error", "type": "bool", "value": True}],
                        "logs": [],
                        "processID": "p1",
                    }
                ],
                "processes": {"p1": {"serviceName": "worker", "tags": []}},
            }
        ]
    }

    # When read
    [span] = read_jaeger(document)

    # Then ids are padded, the parent is the followed span, the status is ERROR
    assert span.trace_id == "0000000000000000a3ce929d0e0e4736"
    assert span.span_id == "0000000000000001"
    assert span.parent_span_id == "0000000000000002"
    assert span.status == "ERROR"
    assert (span.start_ns, span.end_ns) == (10_000, 15_000)
    assert span.service == "worker"


def test_a_document_without_data_is_refused():
    with pytest.raises(InvalidArgument, match="not Jaeger JSON"):
        list(read_jaeger({"traces": []}))


def test_export_then_read_gives_the_same_tree_hops_kinds_and_durations():
    # Given one synthetic run: gRPC client/server pairs, nested SQL, a queue hand-off
    record = make_run(random.Random(3), 0)
    original = record.spans

    # When exported to Jaeger JSON text and read back
    text = json.dumps(export_jaeger(original))
    back = list(read_jaeger(json.loads(text)))

    # Then the span tree, services, names, kinds, attributes and durations are equal
    def shape(spans):
        return {
            s.span_id: (
                s.parent_span_id,
                s.name,
                s.service,
                s.span_kind,
                s.status,
                s.start_ns // 1000,
                s.duration_ns // 1000,
                dict(s.attributes),
            )
            for s in spans
        }

    assert shape(back) == shape(original)
    # And so are the placement and the measured hops, kinds and times
    placed = {p.span.span_id: (p.hop, p.kind, p.derived_network_ns) for p in place(original)}
    placed_back = {p.span.span_id: (p.hop, p.kind, p.derived_network_ns) for p in place(back)}
    assert placed_back == placed
    [run] = build_runs(original)
    [run_back] = build_runs(back)
    assert run_back.hop_ns == run.hop_ns
    assert run_back.kind_ns == run.kind_ns
    assert run_back.end_to_end_ns == run.end_to_end_ns
    assert run_back.lateness_ns == run.lateness_ns


def test_export_types_tags_and_names_the_processes():
    # Given a run's spans
    spans = make_run(random.Random(4), 1).spans

    # When exported
    [trace] = export_jaeger(spans)["data"]

    # Then tags are typed, kinds travel as span.kind, processes name the services
    tags = {t["key"]: t for s in trace["spans"] for t in s["tags"]}
    assert tags["cronwave.attempt"]["type"] == "int64"
    assert tags["cronwave.hop"]["type"] == "string"
    assert tags["span.kind"]["value"] in {"client", "server"}
    services = {p["serviceName"] for p in trace["processes"].values()}
    assert services == {"cron-planner", "leader-election", "dispatcher", "workflow-store", "worker"}
    assert all(s["processID"] in trace["processes"] for s in trace["spans"])
    odd = replace(spans[0], attributes={"b": True, "f": 1.5, "i": 7, "s": "x", "l": [1, 2]})
    typed = export_jaeger([odd])
    kinds = {t["key"]: (t["type"], t["value"]) for t in typed["data"][0]["spans"][0]["tags"]}
    assert kinds["b"] == ("bool", True)
    assert kinds["f"] == ("float64", 1.5)
    assert kinds["i"] == ("int64", 7)
    assert kinds["s"] == ("string", "x")
    assert kinds["l"] == ("string", "[1, 2]")
