"""``cronwave waterfall``, ``cronwave trace export`` and ``cronwave load`` on real runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cronwave.cli.main import app
from cronwave_core.suite import Suite
from cronwave_core.telemetry.vocabulary import HOPS
from cronwave_waterfall import read_jaeger, read_otlp
from tests.tracing.otlp_receiver import request_from_json
from tests.tracing.otlp_receiver import spans_of as spans_of_request
from tests.tracing.support import scheduled_tick, spans_of, traced_suite, triggered

pytestmark = pytest.mark.slow


def ok(args: list[str], env: dict[str, str | None] | None = None) -> str:
    result = CliRunner().invoke(app, args, env=env or {})
    assert result.exit_code == 0, (args, result.stdout, result.stderr, result.exception)
    return result.stdout


def env_for(suite: Suite, namespace: str) -> dict[str, str | None]:
    return {
        "CRONWAVE_STORE_ADDR": suite.store_addr,
        "CRONWAVE_DISPATCHER_ADDR": suite.dispatcher_addr,
        "CRONWAVE_PLANNER_ADDR": suite.planner_addr,
        "CRONWAVE_LEADER_ADDR": suite.leader_addr,
        "CRONWAVE_REDIS_URL": suite.redis_url,
        "CRONWAVE_NAMESPACE": namespace,
        "CRONWAVE_RPC_TIMEOUT": "10",
    }


def test_after_a_demo_like_session_the_waterfall_has_every_hop_and_a_tail_line(
    make_suite, namespace, tmp_path: Path
) -> None:
    # Given what `make demo` leaves: a manual run and a run the planner fired
    suite = traced_suite(make_suite)
    (manual,) = triggered(suite)
    scheduled = scheduled_tick(suite)
    # and, meanwhile, a short load through the running suite
    loaded = ok(["load", "--runs", "12", "--warmup", "2", "--connect"], env_for(suite, namespace))
    assert "12 runs triggered" in loaded and "throughput" in loaded and "12 succeeded" in loaded
    spans_of(suite)  # stopped: every span is on disk
    data_dir = str(suite.config.data_dir)

    # When the waterfall is asked for, with no other option than where the data is
    text = ok(["waterfall", "--data-dir", data_dir])
    # Then the tail line comes first, and every hop has its row
    lines = text.splitlines()
    assert lines[0].startswith("p99 tail: "), text
    rows = {line.split()[0] for line in lines if line.strip()}
    assert set(HOPS) <= rows, text
    assert "end-to-end" in text and "fire lateness" in text
    assert "note: 15 of 16 runs were manual triggers" in text

    # And the other formats carry the same runs
    document = json.loads(ok(["waterfall", "--data-dir", data_dir, "--format", "json"]))
    assert document["runs"] == 16
    assert {hop["hop"] for hop in document["hops"]} >= set(HOPS)
    page = tmp_path / "waterfall.html"
    ok(["waterfall", "--data-dir", data_dir, "--format", "html", "--output", str(page)])
    assert "<svg" in page.read_text(encoding="utf-8")
    compared = ok(["waterfall", "--data-dir", data_dir, "--compare"])
    assert "[local]" in compared and "[miss]" in compared
    one = ok(["waterfall", "--data-dir", data_dir, "--last", "1", "--format", "json"])
    assert json.loads(one)["runs"] == 1

    # And each run exports as a trace Jaeger UI loads, and as OTLP JSON
    jaeger_file = tmp_path / "run.jaeger.json"
    ok(["trace", "export", scheduled, "--format", "jaeger", "--output", str(jaeger_file),
        "--data-dir", data_dir])  # fmt: skip
    upload = json.loads(jaeger_file.read_text(encoding="utf-8"))
    (trace,) = upload["data"]
    assert {"traceID", "spans", "processes"} <= set(trace)
    fields = {"traceID", "spanID", "operationName", "references", "startTime", "duration",
              "tags", "logs", "processID", "warnings"}  # fmt: skip
    assert all(fields <= set(s) for s in trace["spans"])
    assert {p["serviceName"] for p in trace["processes"].values()} >= {
        "cron-planner", "dispatcher", "workflow-store", "worker",
    }  # fmt: skip
    assert set(HOPS) <= {s.attributes.get("cronwave.hop") for s in read_jaeger(upload)}
    otlp = json.loads(ok(["trace", "export", manual, "--format", "otlp", "--data-dir", data_dir]))
    assert {s.attributes.get("cronwave.run_id") for s in read_otlp(otlp)} >= {manual}
    # which an OTLP receiver takes as an ExportTraceServiceRequest, span for span
    request = request_from_json(otlp)
    assert sorted(s.span_id for s in spans_of_request(request)) == sorted(
        s.span_id for s in read_otlp(otlp)
    )
    assert {s.service for s in spans_of_request(request)} >= {"dispatcher", "worker"}

    # And a bad option is refused by name
    refused = CliRunner().invoke(app, ["waterfall", "--data-dir", data_dir, "--scenario", "disk"])
    assert refused.exit_code == 1 and "scenario" in refused.stderr


def test_with_tracing_off_runs_succeed_and_no_span_is_written(make_suite, namespace) -> None:
    # Given a suite with tracing off
    suite = traced_suite(make_suite, {"CRONWAVE_TRACING": "off"})
    # When runs go through it
    loaded = ok(["load", "--runs", "10", "--warmup", "0", "--connect"], env_for(suite, namespace))
    # Then they succeed (the load sees their end in the run-status cache)
    assert "10 succeeded" in loaded
    # and no service wrote a span
    assert spans_of(suite) == []
