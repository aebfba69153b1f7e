"""The scenarios by name, run one after another, each on suites of its own.

A scenario that raises is reported as ``failed`` with the error, and the next one
runs; one whose code is not part of this installation (``failover``, ``billing``) is
reported as ``not available``. Each scenario bounds its own waits, so the whole run
is bounded too.
"""

from __future__ import annotations

import importlib
import os
import platform
import time
import traceback
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cronwave_bench.billing import run_billing
from cronwave_bench.burst import run_burst
from cronwave_bench.cli_latency import run_cli
from cronwave_bench.console_list import run_console_list
from cronwave_bench.context import BenchContext
from cronwave_bench.fault_matrix import run_fault_matrix
from cronwave_bench.harness import dispatch_lead, own_database
from cronwave_bench.matrix_faults import SEED_VAR, MatrixConfig, seed_from_env
from cronwave_bench.planner_memory import run_planner_memory
from cronwave_bench.report import FAILED, NOT_AVAILABLE, Result, fmt_ms
from cronwave_bench.saturation import run_saturation
from cronwave_bench.sharded_planners import run_sharded_planners
from cronwave_bench.single import run_single
from cronwave_bench.stall import run_stall
from cronwave_bench.startup import run_startup
from cronwave_bench.throughput import run_throughput
from cronwave_bench.truth import run_truth
from cronwave_bench.waterfall import run_waterfall
from cronwave_core.errors import InvalidArgument

Scenario = Callable[[BenchContext], Result]


#: The share of the failover scenario's leader deaths that are a SIGTERM (a hand-over).
GRACEFUL_SHARE = 0.25


def run_failover_scenario(ctx: BenchContext) -> Result:
    """Planner failover, by ``cronwave_bench.failover.run_failover``: leader death to
    the next fire the store accepts, over ``failover_trials`` trials."""
    result = Result("failover")
    try:
        failover: Any = importlib.import_module("cronwave_bench.failover")
        run = failover.run_failover
    except (ImportError, AttributeError) as exc:
        result.status = NOT_AVAILABLE
        result.notes.append(f"the failover drill is not part of this installation ({exc})")
        return result
    trials = ctx.sizes.failover_trials
    ctx.say(f"failover: {trials} leader deaths (a quarter by SIGTERM), the default lease")
    with own_database(ctx.backend, "failover") as backend:
        figures: dict[str, Any] = run(
            trials,
            graceful_share=GRACEFUL_SHARE,
            database_url=backend.database_url,
            redis_url=backend.redis_url,
            data_dir=ctx.suite_dir("failover"),
            progress=ctx.say,
        )
    result.figures = figures
    rows = (
        ("failover_crash_s", "kill -9: leader death to next fire", 2.0),
        ("failover_graceful_s", "SIGTERM: leader stop to next fire", None),
        ("takeover_s", "takeover (both)", None),
    )
    for key, label, target in rows:
        stats = figures.get(key)
        if stats:
            result.row(
                label,
                f"p50 {fmt_ms(stats['p50'] * 1000)}, p99 {fmt_ms(stats['p99'] * 1000)}, "
                f"max {fmt_ms(stats['max'] * 1000)} over {stats['count']} trials",
                f"p99 <= {target:g} s" if target else "",
                stats["p99"] <= target if target else None,
            )
    twice = int(figures.get("job_body_ran_twice", 0))
    audit = figures.get("audit") or {}
    duplicates = twice + int(audit.get("duplicate_runs", 0))
    missed = int(figures.get("missed_fires", 0))
    result.row("duplicate fires", str(duplicates), "0", duplicates == 0)
    result.row("missed fires", str(missed), "0", missed == 0)
    refused = figures.get("refused_stale")
    if refused:
        result.row("stale starts refused by fencing", str(refused))
    lease = figures.get("lease") or {}
    if lease:
        result.notes.append(
            f"lease ttl {lease.get('ttl_s')} s, renew {lease.get('renew_interval_s')} s, "
            f"retry {lease.get('retry_interval_s')} s"
        )
    return result


def run_fault_matrix_scenario(ctx: BenchContext) -> Result:
    """Every service faulted in turn under steady load, every slot audited, by
    ``cronwave_bench.fault_matrix.run_fault_matrix``: a row per fault."""
    sizes = ctx.sizes
    config = MatrixConfig(
        schedules=sizes.fault_matrix_schedules,
        hold=sizes.fault_matrix_hold,
        quiet=sizes.fault_matrix_quiet,
        settle=min(sizes.fault_matrix_quiet, timedelta(seconds=5)),
        seed=seed_from_env(),
    )
    ctx.say(f"fault-matrix: {config.schedules} schedules, seed {config.seed} ({SEED_VAR})")
    with own_database(ctx.backend, "faultmatrix") as backend:
        figures = run_fault_matrix(
            config,
            database_url=backend.database_url,
            data_dir=ctx.suite_dir("fault-matrix"),
            say=ctx.say,
        )
    ctx.say(figures["table"])
    result = Result("fault-matrix", figures=figures)
    for window in figures["windows"]:
        bad = window["missing"] + window["duplicate"] + window["stuck"]
        recovery = window["recovery_from_injection_s"]
        reasons = ", ".join(f"{k} {v}" for k, v in window["missed_by_reason"].items())
        result.row(
            window["name"],
            f"{window['slots']} slots: {window['missing']} missing, "
            f"{window['duplicate']} duplicate, {window['stuck']} stuck; "
            f"MISSED {reasons or 'none'}; recovery "
            + ("n/a" if recovery is None else f"{recovery:.2f} s after injection"),
            "0 missing, duplicate, stuck",
            bad == 0,
        )
    for check in figures["worker_check"]:
        result.row(
            "worker's own count",
            f"{check['attempts_begun']} attempts begun for {check['runs_it_holds']} runs "
            f"(excess {check['excess']})",
            "excess 0",
            check["excess"] == 0,
        )
    for fault, why in figures["left_out"].items():
        result.notes.append(f"{fault} left out: {why}")
    result.notes.append(f"seed {config.seed}; the table: see the progress output")
    return result


SCENARIOS: dict[str, Scenario] = {
    "cli": run_cli,
    "startup": run_startup,
    "console": run_console_list,
    "single": run_single,
    "burst": run_burst,
    "throughput": run_throughput,
    "saturation": run_saturation,
    "stall": run_stall,
    "waterfall": run_waterfall,
    "failover": run_failover_scenario,
    "billing": run_billing,
    "planner-memory": run_planner_memory,
    "sharded-planners": run_sharded_planners,
    "fault-matrix": run_fault_matrix_scenario,
    "truth": run_truth,
}


def choose(names: Sequence[str]) -> list[str]:
    """The scenarios to run, in the canonical order (all when none are named)."""
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise InvalidArgument(
            "scenario", f"unknown {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}"
        )
    return [n for n in SCENARIOS if not names or n in names]


def brief(exc: BaseException, limit: int = 240) -> str:
    """The first line of an error (a log tail it carries is in the progress output)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}".strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def run_scenarios(names: Sequence[str], ctx: BenchContext) -> list[Result]:
    results = []
    for name in choose(names):
        started = time.monotonic()
        try:
            result = SCENARIOS[name](ctx)
        except Exception as exc:  # one scenario's failure must not hide the others
            result = Result(name, status=FAILED)
            result.notes.append(brief(exc))
            ctx.say(f"{name} failed:\n{traceback.format_exc()}")
        result.seconds = time.monotonic() - started
        ctx.say(f"{name}: {result.status} in {result.seconds:.0f}s")
        results.append(result)
    return results


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = ""
    memory = 0
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = int(line.split()[1]) // 1024
                break
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu or platform.processor(),
        "memory_mib": memory,
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()}",
        "load_average_at_start": [round(x, 2) for x in load],
        "dispatch_lead_s": dispatch_lead().total_seconds(),
        "taken_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def header_lines(ctx: BenchContext, facts: dict[str, Any]) -> list[str]:
    return [
        f"backend: {ctx.backend.describe()}",
        f"machine: {facts['nproc']} CPUs ({facts['cpu']}), {facts['memory_mib']:,} MiB, "
        f"load average {facts['load_average_at_start'][0]} at start",
        f"dispatch lead: {facts['dispatch_lead_s']:g} s (CRONWAVE_DISPATCH_LEAD)",
    ]
