"""The local span store: JSON lines written by cronwave_core's own exporter."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from cronwave_core.errors import InvalidArgument
from cronwave_core.telemetry.export import JsonLinesSpanExporter
from cronwave_core.telemetry.vocabulary import run_attributes
from cronwave_waterfall import build_runs, load_spans

FIRE = "2025-03-01T02:00:00Z"


def _write_run(spans_dir: Path, run_id: str, service: str = "suite") -> JsonLinesSpanExporter:
    """Record one small run through the real SDK and the span store's exporter:
    a planner span around a gRPC-like client call, a server span, and the hops'
    own spans, one of them a database span with SQL nested inside."""
    exporter = JsonLinesSpanExporter(spans_dir, service)
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    run = run_attributes(run_id, "nightly", FIRE)
    rpc = {"rpc.system": "grpc", "rpc.service": "S", "rpc.method": "CreateRun"}
    persist = {**run, "cronwave.hop": "persist", "cronwave.kind": "database"}
    with (
        tracer.start_as_current_span("fire", attributes={**run, "cronwave.hop": "plan"}),
        tracer.start_as_current_span("call", kind=trace.SpanKind.CLIENT, attributes=rpc),
        tracer.start_as_current_span("serve", kind=trace.SpanKind.SERVER, attributes=rpc),
        tracer.start_as_current_span("INSERT run", attributes=persist),
        tracer.start_as_current_span("sql", attributes={"db.system": "sqlite"}),
    ):
        pass
    done = {**run, "cronwave.hop": "complete", "cronwave.kind": "database"}
    with tracer.start_as_current_span("UPDATE run", attributes=done):
        pass
    provider.shutdown()
    return exporter


def test_reads_what_the_exporter_writes(tmp_path: Path):
    # Given a data dir whose span store holds one run
    exporter = _write_run(tmp_path / "spans", "run-a")

    # When the data dir is loaded
    spans = load_spans(tmp_path)
    runs = build_runs(spans)

    # Then every span is there, typed, and forms one measured run
    assert exporter.path.parent == tmp_path / "spans"
    assert len(spans) == 6
    kinds = {s.name: s.span_kind for s in spans}
    assert kinds["call"] == "CLIENT"
    assert kinds["serve"] == "SERVER"
    assert {s.service for s in spans} == {"suite"}
    [run] = runs
    assert run.run_id == "run-a"
    assert set(run.hop_ns) == {"plan", "persist", "complete"}
    assert ("persist", "network") in run.kind_ns  # derived from client minus server
    assert run.end_to_end_ns is not None and run.end_to_end_ns > 0


def test_a_truncated_last_line_is_skipped(tmp_path: Path):
    # Given a span file whose last write was cut short
    exporter = _write_run(tmp_path / "spans", "run-b")
    whole = exporter.path.read_text(encoding="utf-8").splitlines()
    exporter.path.write_text("\n".join(whole) + "\n" + whole[0][: len(whole[0]) // 2])

    # When loaded (the data dir, the spans folder, or the file itself)
    from_dir = load_spans(tmp_path)
    from_folder = load_spans(tmp_path / "spans")
    from_file = load_spans(exporter.path)

    # Then the whole lines are read and the broken one is not
    assert len(from_dir) == len(from_folder) == len(from_file) == len(whole)


def test_a_malformed_line_before_the_end_is_an_error_naming_file_and_line(tmp_path: Path):
    exporter = _write_run(tmp_path / "spans", "run-c")
    lines = exporter.path.read_text(encoding="utf-8").splitlines()
    lines.insert(1, "{not json")
    exporter.path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InvalidArgument, match=rf"{exporter.path.name}:2 is not a JSON span"):
        load_spans(tmp_path)


def test_files_of_several_processes_are_read_together(tmp_path: Path):
    # Given two processes' span files in one store
    _write_run(tmp_path / "spans", "run-d", service="dispatcher")
    _write_run(tmp_path / "spans", "run-e", service="worker")

    # When the data dir is loaded
    runs = build_runs(load_spans(tmp_path))

    # Then both runs are there, each with its process's spans
    assert len(list((tmp_path / "spans").glob("*.jsonl"))) == 2
    assert {r.run_id: {s.service for s in r.spans} for r in runs} == {
        "run-d": {"dispatcher"},
        "run-e": {"worker"},
    }


def test_a_missing_source_says_what_to_pass(tmp_path: Path):
    with pytest.raises(InvalidArgument, match="does not exist"):
        load_spans(tmp_path / "nowhere")
