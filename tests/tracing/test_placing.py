"""Every span placed, and the run span: a span that does not say its hop and kind is
given them at start (``propagation.RunAttributesProcessor``), a SQL span is named by
its operation and table (``telemetry.sql``), and a run's trace id says when the run
began, its run span's and attempts' ids derived from it (``telemetry.run_span``)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from cronwave_core.telemetry import run_span, sql
from cronwave_core.telemetry.export import JsonLinesSpanExporter
from cronwave_core.telemetry.lean import LeanTracer, LeanTracerProvider
from cronwave_core.telemetry.propagation import RunAttributesProcessor, call_hop
from cronwave_core.telemetry.vocabulary import ATTR_HOP, ATTR_KIND

PROVIDERS = pytest.mark.parametrize("provider_cls", [TracerProvider, LeanTracerProvider])


def _provider(tmp_path: Path, provider_cls: type[TracerProvider]) -> tuple[TracerProvider, Path]:
    provider = provider_cls(resource=Resource.create({"service.name": "probe"}))
    provider.add_span_processor(RunAttributesProcessor())
    exporter = JsonLinesSpanExporter(tmp_path / "spans", "probe")
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter.path


def _by_name(path: Path) -> dict[str, dict]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return {line["name"]: line["attributes"] for line in lines}


def _placed(attributes: dict) -> tuple[str | None, str | None]:
    return attributes.get(ATTR_HOP), attributes.get(ATTR_KIND)


@PROVIDERS
def test_spans_that_say_no_hop_or_kind_are_placed_at_start(tmp_path: Path, provider_cls) -> None:
    # Given a process's spans as instrumentation makes them, inside a hop's span
    provider, path = _provider(tmp_path, provider_cls)
    tracer = provider.get_tracer("probe")
    rpc = {"rpc.system": "grpc", "rpc.service": "cronwave.v1.WorkflowStoreService"}
    with tracer.start_as_current_span(
        "dispatch", attributes={ATTR_HOP: "dispatch", ATTR_KIND: "app"}
    ):
        # an RPC with a hop of its own (RecordRuns: persist), client side
        tracer.start_span(
            "record", kind=trace.SpanKind.CLIENT, attributes={**rpc, "rpc.method": "RecordRuns"}
        ).end()
        # an RPC with none (ListRuns): the caller's hop
        tracer.start_span(
            "list", kind=trace.SpanKind.CLIENT, attributes={**rpc, "rpc.method": "ListRuns"}
        ).end()
        # a SQL statement, and a span of the service's (or a job's) own
        tracer.start_span("SELECT runs", attributes={"db.system": "sqlite"}).end()
        tracer.start_span("own").end()
        # a span that says its own keeps them
        tracer.start_span("said", attributes={ATTR_HOP: "pickup", ATTR_KIND: "queue"}).end()
    provider.shutdown()

    # Then each says a hop and a kind by the rules
    spans = _by_name(path)
    assert _placed(spans["record"]) == ("persist", "network")
    assert _placed(spans["list"]) == ("dispatch", "network")
    assert _placed(spans["SELECT runs"]) == ("dispatch", "database")
    assert _placed(spans["own"]) == ("dispatch", "app")
    assert _placed(spans["said"]) == ("pickup", "queue")


@PROVIDERS
def test_a_server_of_an_rpc_with_no_hop_works_in_the_hop_its_caller_sent(
    tmp_path: Path, provider_cls
) -> None:
    # Given a server span of an RPC with no hop (its parent in another process), and
    # of one with a hop of its own, both started under the caller's hop as baggage
    provider, path = _provider(tmp_path, provider_cls)
    tracer = provider.get_tracer("probe")
    remote = trace.NonRecordingSpan(
        trace.SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=trace.TraceFlags(1))
    )
    token = otel_context.attach(trace.set_span_in_context(remote))
    try:
        with call_hop("execute"):
            rpc = {"rpc.system": "grpc", "rpc.service": "cronwave_billing.v1.PaymentGatewayService"}
            server = {**rpc, "rpc.method": "ChargeMany"}
            with tracer.start_as_current_span(
                "charge", kind=trace.SpanKind.SERVER, attributes=server
            ):
                tracer.start_span("decode", attributes={ATTR_KIND: "serialization"}).end()
            claim = {**rpc, "rpc.service": "cronwave.v1.WorkflowStoreService"}
            claim["rpc.method"] = "ClaimRuns"
            tracer.start_span("claim", kind=trace.SpanKind.SERVER, attributes=claim).end()
    finally:
        otel_context.detach(token)
    provider.shutdown()

    # Then the first is the caller's hop, the server's own work; its codec span too;
    # the second keeps its RPC's hop
    spans = _by_name(path)
    assert _placed(spans["charge"]) == ("execute", "app")
    assert _placed(spans["decode"]) == ("execute", "serialization")
    assert _placed(spans["claim"]) == ("pickup", "app")


@pytest.mark.parametrize(
    ("statement", "name"),
    [
        ("INSERT INTO runs (run_id, state) VALUES (?, ?)", "INSERT runs"),
        ('INSERT INTO "run_events" (run_id) VALUES ($1)', "INSERT run_events"),
        ("UPDATE runs SET state=? WHERE run_id = ?", "UPDATE runs"),
        ("SELECT runs.run_id FROM runs WHERE runs.run_id IN (?)", "SELECT runs"),
        ("select count(*) from public.schedules", "SELECT schedules"),
        ("DELETE FROM dedup WHERE key = ?", "DELETE dedup"),
        ("/* cronwave */ SELECT 1", "SELECT"),
        ("SELECT x FROM (SELECT 1 AS x) AS sub", "SELECT"),
        ("BEGIN IMMEDIATE", "BEGIN"),
        ("COMMIT", "COMMIT"),
        ("   ", "SQL"),
    ],
)
def test_a_sql_span_is_named_by_operation_and_table(statement: str, name: str) -> None:
    assert sql.span_name(statement) == name


def test_a_statement_is_kept_cut_to_its_limit() -> None:
    long = "SELECT " + "x, " * 1000 + "y FROM runs"
    kept = sql.statement_text(long)
    assert len(kept) == sql.MAX_STATEMENT and kept.endswith("...")
    assert sql.statement_text("SELECT 1") == "SELECT 1"


def test_a_run_s_trace_id_says_its_start_and_fixes_its_spans_ids() -> None:
    # Given a run begun at a known instant
    start = time.time_ns()
    context = run_span.new_run_context(start)
    parent = trace.get_current_span(context).get_span_context()

    # Then its trace id says when, and the run span's id is the one derived from it
    assert run_span.run_start_ns(parent.trace_id) == start
    assert parent.span_id == run_span.run_span_id(parent.trace_id)
    # each attempt has an id of its own, the same wherever it is derived
    ids = {run_span.attempt_span_id(parent.trace_id, n) for n in (1, 2, 3)}
    assert len(ids) == 3 and parent.span_id not in ids
    assert run_span.attempt_span_id(parent.trace_id, 2) in ids
    # two runs begun at the same instant have traces of their own
    other = trace.get_current_span(run_span.new_run_context(start)).get_span_context()
    assert other.trace_id != parent.trace_id
    # and a trace id that is no run's (a caller's own, random) says no start
    assert run_span.run_start_ns(0x4BF92F3577B34DA6A3CE929D0E0E4736) is None
    assert run_span.run_context("4bf92f3577b34da6a3ce929d0e0e4736") is None
    assert run_span.run_context("not hex") is None


def test_the_run_span_is_recorded_with_the_ids_and_start_its_trace_says(tmp_path: Path) -> None:
    # Given a provider whose tracer can record a span with chosen ids
    provider, path = _provider(tmp_path, LeanTracerProvider)
    tracer = provider.get_tracer("cronwave.run")
    assert isinstance(tracer, LeanTracer)
    start = time.time_ns() - 5_000_000
    trace_id = trace.get_current_span(run_span.new_run_context(start)).get_span_context().trace_id
    context = trace.SpanContext(
        trace_id, run_span.run_span_id(trace_id), False, trace.TraceFlags(1)
    )

    # When the run span is recorded as record_run_span records it
    tracer.record("cronwave.run", context, None, start, start + 5_000_000, {"k": "v"})
    provider.shutdown()

    # Then it is a root with those ids and times, and no attribute of what was current
    [line] = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    assert line["trace_id"] == f"{trace_id:032x}" and line["parent_span_id"] == ""
    assert line["span_id"] == f"{run_span.run_span_id(trace_id):016x}"
    assert (line["start_ns"], line["end_ns"]) == (start, start + 5_000_000)
    assert line["attributes"]["k"] == "v"
