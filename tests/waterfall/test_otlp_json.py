"""OTLP JSON: reading ExportTraceServiceRequest documents, and the export round trip."""

from __future__ import annotations

import base64
import json
import random

import pytest

from cronwave_core.errors import InvalidArgument
from cronwave_waterfall import build_runs, export_otlp, read_otlp

from . import recorded
from .synth import make_run


def test_reads_jaeger_v3_otlp_into_the_hand_worked_figures():
    # Given Jaeger v2's /api/v3 answer (OTLP JSON under "result") for the recorded run
    document = recorded.load(recorded.V3)

    # When read and measured
    spans = list(read_otlp(document))
    [run] = build_runs(spans)

    # Then services come from the resource, kinds from the enum, the figures hold
    assert len(spans) == recorded.SPANS
    assert {s.service for s in spans} == {
        "cron-planner",
        "dispatcher",
        "workflow-store",
        "worker",
    }
    kinds = {s.name: s.span_kind for s in spans if s.name == "queue.wait" or s.name == "enqueue"}
    assert kinds == {"queue.wait": "CONSUMER", "enqueue": "PRODUCER"}
    assert run.hop_ns == recorded.HOP_NS
    assert run.kind_ns == recorded.KIND_NS
    assert run.end_to_end_ns == recorded.END_TO_END_NS
    assert run.lateness_ns == recorded.LATENESS_NS


def test_reads_plain_otlp_with_named_enums_base64_ids_and_typed_values():
    # Given an OTLP file as a collector's file exporter might write it
    trace = bytes.fromhex("5b8efff798038103d269b633813fc60c")
    span = bytes.fromhex("eee19b7ec3c1b174")
    document = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "worker"}}]
                },
                "scopeSpans": [
                    {
                        "scope": {"name": "x"},
                        "spans": [
                            {
                                "traceId": base64.b64encode(trace).decode(),
                                "spanId": base64.b64encode(span).decode(),
                                "parentSpanId": "",
                                "name": "job",
                                "kind": "SPAN_KIND_CONSUMER",
                                "startTimeUnixNano": "1000",
                                "endTimeUnixNano": 2500,
                                "attributes": [
                                    {"key": "i", "value": {"intValue": "42"}},
                                    {"key": "d", "value": {"doubleValue": 0.5}},
                                    {"key": "b", "value": {"boolValue": True}},
                                    {
                                        "key": "a",
                                        "value": {"arrayValue": {"values": [{"stringValue": "q"}]}},
                                    },
                                ],
                                "status": {"code": "STATUS_CODE_ERROR"},
                            }
                        ],
                    }
                ],
            }
        ]
    }

    # When read
    [read] = read_otlp(document)

    # Then ids are hex, enums and values typed
    assert read.trace_id == trace.hex()
    assert read.span_id == span.hex()
    assert read.parent_span_id == ""
    assert read.span_kind == "CONSUMER"
    assert read.status == "ERROR"
    assert (read.start_ns, read.end_ns) == (1000, 2500)
    assert read.attributes == {"i": 42, "d": 0.5, "b": True, "a": ["q"]}
    assert read.service == "worker"


def test_a_span_that_ends_before_it_starts_is_refused_by_name():
    document = recorded.load(recorded.V3)
    first = document["result"]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    first["endTimeUnixNano"] = "1"
    with pytest.raises(InvalidArgument, match=r"resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[0\]"):
        list(read_otlp(document))


def test_export_then_read_is_lossless():
    # Given a synthetic run (nanosecond times, typed attributes, five services)
    spans = make_run(random.Random(5), 2).spans

    # When exported as OTLP JSON text and read back
    back = list(read_otlp(json.loads(json.dumps(export_otlp(spans)))))

    # Then every span is equal, field by field
    assert sorted(back, key=lambda s: s.span_id) == sorted(spans, key=lambda s: s.span_id)
    document = export_otlp(spans)
    some = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert isinstance(some["startTimeUnixNano"], str)
    assert len(some["traceId"]) == 32
    assert [build_runs(back)[0].kind_ns] == [build_runs(spans)[0].kind_ns]
