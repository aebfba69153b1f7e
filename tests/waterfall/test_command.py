"""The CLI entry points: plain arguments in, text out (or a file written)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cronwave_core.errors import InvalidArgument
from cronwave_waterfall import read_jaeger, read_otlp, trace_export_command, waterfall_command

from .synth import Injection, all_spans, make_runs, write_span_store


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir whose span store holds 400 runs, split over two process files."""
    root = tmp_path_factory.mktemp("data")
    records = make_runs(400, Injection("persist", "database", 30.0, share=0.05), seed=13)
    write_span_store(all_spans(records[:200]), root / "spans", "dispatcher-101")
    write_span_store(all_spans(records[200:]), root / "spans", "worker-202")
    return root


def test_terminal_waterfall_of_a_data_dir(data_dir: Path):
    text = waterfall_command(data_dir, last=300)
    assert text.startswith("p99 tail: ")
    assert "database in persist" in text.splitlines()[0]
    assert "300 runs (last=300)" in text


def test_json_with_filters_given_as_text(data_dir: Path):
    document = json.loads(
        waterfall_command(
            str(data_dir),
            fmt="json",
            since="2025-03-01T02:01:00Z",
            until="2025-03-01T02:03:00+00:00",
            schedule_id="nightly-billing",
            job_type="billing",
        )
    )
    assert document["runs"] == 120
    assert document["selection"]["since"] == "2025-03-01T02:01:00+00:00"


def test_scenario_and_compare(data_dir: Path):
    one = json.loads(waterfall_command(data_dir, fmt="json", scenario="redis"))
    assert one["scenario"] == "redis"
    assert one["runs"] == one["scenario_counts"]["redis"] > 0
    both = json.loads(waterfall_command(data_dir, fmt="json", compare=True))
    assert [w["scenario"] for w in both["scenarios"]] == ["local", "redis", "miss"]


def test_html_to_a_file(data_dir: Path, tmp_path: Path):
    target = tmp_path / "out" / "waterfall.html"
    said = waterfall_command(data_dir, fmt="html", output=target)
    assert said == f"wrote html waterfall to {target}\n"
    page = target.read_text(encoding="utf-8")
    assert "<svg" in page and "http://" not in page


def test_bad_arguments_name_the_argument(data_dir: Path):
    with pytest.raises(InvalidArgument, match=r"^format: "):
        waterfall_command(data_dir, fmt="pdf")
    with pytest.raises(InvalidArgument, match=r"^since: "):
        waterfall_command(data_dir, since="yesterday")
    with pytest.raises(InvalidArgument, match=r"^since: "):
        waterfall_command(data_dir, since="2025-03-01T02:00:00")  # no zone
    with pytest.raises(InvalidArgument, match=r"^scenario: "):
        waterfall_command(data_dir, scenario="disk")
    with pytest.raises(InvalidArgument, match=r"^last: "):
        waterfall_command(data_dir, last=0)


def test_trace_export_by_trace_and_by_run(data_dir: Path, tmp_path: Path):
    records = make_runs(400, Injection("persist", "database", 30.0, share=0.05), seed=13)
    wanted = records[7]

    jaeger = json.loads(trace_export_command(data_dir, trace_id=wanted.trace_id))
    spans = list(read_jaeger(jaeger))
    assert {s.trace_id for s in spans} == {wanted.trace_id}
    assert len(spans) == len(wanted.spans)

    target = tmp_path / "trace.json"
    said = trace_export_command(data_dir, run_id=wanted.run_id, fmt="otlp", output=target)
    assert said.startswith("wrote otlp trace (29 spans) to ")
    assert {s.span_id for s in read_otlp(json.loads(target.read_text()))} == {
        s.span_id for s in wanted.spans
    }


def test_trace_export_needs_a_trace_when_there_are_several(data_dir: Path):
    with pytest.raises(InvalidArgument, match=r"^trace_id: .* holds 400 traces"):
        trace_export_command(data_dir)
    with pytest.raises(InvalidArgument, match=r"^run_id: "):
        trace_export_command(data_dir, run_id="nope")


def test_one_runs_critical_path(data_dir: Path, tmp_path: Path):
    wanted = make_runs(400, Injection("persist", "database", 30.0, share=0.05), seed=13)[7]

    # As JSON: the steps in time order, from the plan to the completion
    document = json.loads(waterfall_command(data_dir, run=wanted.run_id, fmt="json"))
    assert document["schema"] == "cronwave.run-path/v1"
    assert document["run_id"] == wanted.run_id
    hops = [step["hop"] for step in document["steps"]]
    assert hops[0] == "plan" and hops[-1] == "complete"
    assert abs(sum(step["ms"] for step in document["steps"]) - document["path_ms"]) < 0.05
    persist = next(h for h in document["hops"] if h["hop"] == "persist")
    assert persist["kinds"]["database"] > 0 and persist["work_ms"] >= persist["path_ms"]

    # As text: the headline first, then a row per step
    text = waterfall_command(data_dir, run=wanted.run_id, width=140)
    assert text.startswith("critical path ")
    assert f"run {wanted.run_id} (trigger unknown; schedule nightly-billing" in text

    # As HTML, to a file
    target = tmp_path / "path.html"
    said = waterfall_command(data_dir, run=wanted.run_id, fmt="html", output=target)
    assert said == f"wrote html critical path of run {wanted.run_id} to {target}\n"
    page = target.read_text(encoding="utf-8")
    assert page.count('<tr class="step"') == len(document["steps"])


def test_bad_run_and_trigger_name_the_option_and_the_rule(data_dir: Path):
    with pytest.raises(InvalidArgument, match=r"^run: must be a run id: 1 to 200 printable"):
        waterfall_command(data_dir, run="two words")
    with pytest.raises(InvalidArgument, match=r"^run: must be a run id"):
        waterfall_command(data_dir, run=" ")
    with pytest.raises(InvalidArgument, match=r"^run: no span of run 'nope' in the spans read"):
        waterfall_command(data_dir, run="nope")
    with pytest.raises(InvalidArgument, match=r"^run: .* leave out --last, --compare"):
        waterfall_command(data_dir, run="nightly-billing-000007", last=5, compare=True)
    with pytest.raises(InvalidArgument, match=r"^trigger: must be one of scheduled, manual, "):
        waterfall_command(data_dir, trigger="nightly")
