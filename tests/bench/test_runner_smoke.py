"""The bench's scenarios end to end at tiny sizes, on real processes: every figure is
produced and the exactly-once counts hold. No figure is held to a time target here
(targets are read from a full run's table, never asserted)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cronwave.cli.main import app
from cronwave_bench.context import BenchContext, Sizes
from cronwave_bench.harness import Backend
from cronwave_bench.report import OK
from cronwave_bench.runner import run_scenarios


@pytest.fixture
def tiny(tmp_path: Path, database_url: str, redis_url: str) -> BenchContext:
    """A bench context of the runner's smallest sizes, on the test's backends."""
    return BenchContext(
        Backend(database_url, redis_url),
        tmp_path,
        Sizes.tiny(),
        say=lambda line: print(line, file=sys.stderr),
    )


def test_single_burst_and_waterfall_produce_their_figures(tiny: BenchContext) -> None:
    ctx = tiny

    single, burst, waterfall = run_scenarios(["single", "burst", "waterfall"], ctx)

    assert [r.status for r in (single, burst, waterfall)] == [OK, OK, OK]
    fires = ctx.sizes.single_fires
    # Every slot has its run: a body started, or, when the run before was still in flight
    # (a loaded machine can hold a body back seconds), recorded MISSED by the overlap
    # policy with its cause; none dropped, none twice
    assert single.figures["runs"] == fires
    started = single.figures["lateness_ms"]["count"]  # every started body's start read
    assert started >= 1 and started + single.figures["skipped"] == fires
    assert single.figures["duplicates"] == 0
    assert single.figures["job_process_overhead_ms"]["count"] == started  # from the spans
    variants = burst.figures["variants"]
    n = ctx.sizes.burst
    loaded = f"{n} one-off, under load"  # tiny: the first variant again, under the load
    assert set(variants) == {f"{n} one-off", f"{n} cron", loaded}
    assert variants[loaded]["settings"].endswith(f"; {ctx.sizes.throughput_rate}/s load")
    for variant in variants.values():
        assert "defaults" in variant["settings"]  # the headline runs what `up` gives
        (run,) = variant["runs"]
        assert run["started"] == ctx.sizes.burst
        assert (run["not_started"], run["duplicates"]) == (0, 0)
        assert run["instant_to_last_start_ms"] is not None
    assert set(waterfall.figures) == {"single", "burst"}
    hops = waterfall.figures["single"]["hops"]
    assert {"dispatch", "persist", "pickup", "execute", "complete"} <= set(hops)


def test_the_cli_prints_the_table_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"

    result = CliRunner().invoke(
        app, ["bench", "planner-memory", "--size", "planner_schedules=50", "--json", str(out)]
    )

    assert result.exit_code == 0, result.output
    assert "| scenario | metric | value | target | |" in result.output
    assert "\n| planner-memory | " in result.output
    document = json.loads(out.read_text())
    (scenario,) = document["scenarios"]
    assert (scenario["scenario"], scenario["status"]) == ("planner-memory", "ok")
    assert scenario["rows"] and scenario["figures"]
    assert document["machine"]["nproc"] >= 1


def test_an_unknown_scenario_is_refused_by_name() -> None:
    result = CliRunner().invoke(app, ["bench", "singel"])

    assert result.exit_code == 1
    assert "unknown singel" in result.output


def test_saturation_raises_the_offer_step_by_step_and_names_the_last_kept_up(
    tiny: BenchContext,
) -> None:
    (saturation,) = run_scenarios(["saturation"], tiny)

    assert saturation.status == OK
    (run,) = saturation.figures["runs"]  # tiny: one ramp
    steps = run["steps"]
    offered = [s["offered_per_s"] for s in steps]
    assert offered == [5, 10][: len(offered)] and offered  # tiny: steps of 5 up to 10
    # the ramp goes on while a step keeps up (how fast is the machine's, never asserted)
    assert all(s["kept_up"] for s in steps[:-1])
    for step in steps:
        assert step["completed_per_s"] > 0
        assert step["cpu_ms_per_run"]["workflow-store"] > 0
    kept = [s["offered_per_s"] for s in steps if s["kept_up"]]
    assert run["saturation_per_s"] == (kept[-1] if kept else 0)
    assert saturation.figures["saturation_per_s"] == run["saturation_per_s"]


def test_stall_stops_the_store_and_accounts_for_every_slot_of_its_window(
    tiny: BenchContext,
) -> None:
    (stall,) = run_scenarios(["stall"], tiny)

    assert stall.status == OK
    (run,) = stall.figures["runs"]  # tiny: one run
    # 5 schedules over a window of at least the stop and what follows it
    assert run["slots"] >= 5 * 5
    # every slot has a row, and every run ended: the stop delays slots, never drops one
    assert run["missing"] == 0 and run["not_finished"] == 0
