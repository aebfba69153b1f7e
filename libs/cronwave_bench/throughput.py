"""``throughput``: runs per second from fire to durable completion, sustained, with
tracing on and with tracing off (``CRONWAVE_TRACING=off``: no span is exported).

The offered load is ``rate`` schedules that each fire every second, their phases
spread evenly over the second, so ``rate`` runs come due per second: by default 510, a
little over the 500/s target. A pipeline that keeps up completes what is offered, give
or take the runs whose completion lands a few milliseconds either side of the window's
edges (about one run per second of window); offered exactly at the target, such a
pipeline would read 499.5 as often as 500.5. After a warm-up,
a window of at least 30 s counts the runs the store completed (SUCCEEDED, by the
store's own ``finished_at``) inside it: that count over the window's length is the
sustained rate. The rate of every 5-second slice of the window is kept too, so a rate
that sags is seen. Each variant runs on a suite of its own.

The CPU time the suite's services, PostgreSQL and Redis spent inside the window
(``/proc``), over the runs completed in it, is the CPU cost of a run. Tracing's cost
is how much more a run costs with tracing on: unlike the ratio of the two rates, it
does not depend on whether the offered load saturated the machine. The machine's busy
and stolen shares of its CPU time in the window (``/proc/stat``) say how near to
saturation it ran, and how much of it the host gave to other guests.
"""

from __future__ import annotations

import time
import urllib.request
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from cronwave_bench.context import BenchContext
from cronwave_bench.harness import (
    PIPELINE_ENV,
    SuiteOptions,
    bench_suite,
    dispatch_lead,
    shared_database,
    wait_leading,
)
from cronwave_bench.measure import (
    CpuMeter,
    delete_schedules,
    every_second,
    ms,
    ms_figures,
    runs_of,
    sleep_until,
)
from cronwave_bench.report import Result, fmt_ms
from cronwave_bench.single import next_whole_second
from cronwave_core.suite import Suite

TARGET_RATE = 500.0
TARGET_TRACING_COST = 0.10
SLICE = timedelta(seconds=5)


@dataclass(frozen=True)
class Variant:
    tracing: bool
    offered_per_s: float
    completed: int
    rate: float
    slice_rates: list[float]
    missed: int
    leaders_lost: int | None  # leases lost by the planner in the window (None: unread)
    end_to_end_ms: dict[str, float] | None
    cpu_s: dict[str, float]
    machine: dict[str, float] | None = None

    @property
    def cpu_ms_per_run(self) -> float | None:
        """CPU milliseconds per completed run, all processes together."""
        return 1000 * sum(self.cpu_s.values()) / self.completed if self.completed else None

    def figures(self) -> dict[str, Any]:
        return {
            "tracing": self.tracing,
            "offered_per_s": self.offered_per_s,
            "completed_in_window": self.completed,
            "runs_per_s": self.rate,
            "slice_runs_per_s": self.slice_rates,
            "missed_in_window": self.missed,
            "leases_lost_in_window": self.leaders_lost,
            "fire_to_completion_ms": self.end_to_end_ms,
            "cpu_s_in_window": self.cpu_s,
            "cpu_ms_per_run": self.cpu_ms_per_run,
            "machine_cpu_shares": self.machine,
        }


def _measure(ctx: BenchContext, tracing: bool) -> Variant:
    sizes = ctx.sizes
    n = sizes.throughput_rate
    name = "throughput-" + ("traced" if tracing else "untraced")
    data_dir = ctx.suite_dir(name)
    options = SuiteOptions(tracing=tracing, own_database=True, env=PIPELINE_ENV)
    with bench_suite(ctx.backend, data_dir, options) as (suite, client):
        if tracing:
            ctx.span_dirs["throughput"] = data_dir
        wait_leading(client)
        prefix = f"bench-tp-{uuid.uuid4().hex[:8]}"
        ids = [f"{prefix}-{i:05d}" for i in range(n)]
        # Creation takes about 10 ms a schedule over 8 connections; start well after.
        first = next_whole_second(
            datetime.now(UTC) + dispatch_lead() + timedelta(seconds=2 + n * 0.01)
        )
        window_start = first + sizes.throughput_warmup
        window_end = window_start + sizes.throughput_window
        every = timedelta(seconds=1)
        ctx.say(
            f"throughput ({'tracing on' if tracing else 'tracing off'}): {n} schedules, "
            f"window {window_start:%H:%M:%S} to {window_end:%H:%M:%S}"
        )
        try:
            every_second(client, ids, first, window_end)
            late = datetime.now(UTC) - first
            meter = CpuMeter({name: proc.pid for name, proc in suite.procs.items()})
            sleep_until(window_start)
            lost_before = _leases_lost(suite)
            meter.start()
            sleep_until(window_end)
            cpu = meter.stop()
            lost_after = _leases_lost(suite)
            time.sleep(0.5)
            # Nothing after the window counts: stop producing and consuming, so the
            # store answers the reads below at once.
            for proc in ("cron-planner", "dispatcher", "worker"):
                suite.stop_proc(suite.procs[proc])
            fires = int((window_end - first) / every) + 4
            runs = runs_of(client, ids, limit=fires)
        finally:
            if shared_database(suite, ctx.backend):
                delete_schedules(client, ids)
    done = [
        r
        for r in runs
        if r.state == "SUCCEEDED" and r.finished_at and window_start <= r.finished_at < window_end
    ]
    slices = int(sizes.throughput_window / SLICE) or 1
    slice_len = sizes.throughput_window / slices
    slice_rates = []
    for k in range(slices):
        lo, hi = window_start + slice_len * k, window_start + slice_len * (k + 1)
        count = sum(1 for r in done if r.finished_at and lo <= r.finished_at < hi)
        slice_rates.append(count / slice_len.total_seconds())
    missed = sum(
        1 for r in runs if r.state == "MISSED" and window_start <= r.fire_time < window_end
    )
    e2e = [ms(r.finished_at - r.fire_time) for r in done if r.finished_at]
    if late > timedelta(0):
        ctx.say(f"{name}: creating the schedules ran {late.total_seconds():.1f}s past the start")
    return Variant(
        tracing=tracing,
        offered_per_s=float(n),
        completed=len(done),
        rate=len(done) / sizes.throughput_window.total_seconds(),
        slice_rates=slice_rates,
        missed=missed,
        leaders_lost=(
            None if lost_before is None or lost_after is None else lost_after - lost_before
        ),
        end_to_end_ms=ms_figures(e2e, ("p50", "p99", "max")),
        cpu_s=cpu,
        machine=meter.machine,
    )


def _leases_lost(suite: Suite) -> int | None:
    """How many times the suite's planners stopped leading so far (their
    ``cronwave_leader_changes{change="lost"}``); None when a planner's metrics cannot
    be read. Under a steady load with the default lease this should not move: a
    leader that loses its lease under load is a false failover."""
    total = 0
    for proc in suite.procs.values():
        if proc.service != "cron-planner" or not proc.metrics_address:
            continue
        url = f"http://{proc.metrics_address}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                text = response.read().decode()
        except OSError:
            return None
        for family in text_string_to_metric_families(text):
            if family.name != "cronwave_leader_changes":
                continue
            total += sum(
                int(sample.value)
                for sample in family.samples
                if sample.name.endswith("_total") and sample.labels.get("change") == "lost"
            )
    return total


def _cpu_row(variant: Variant) -> str:
    """``4.21 ms (worker 1.60, workflow-store 1.20, ...)``: a run's CPU, by process."""
    per_run = variant.cpu_ms_per_run
    if per_run is None:
        return "n/a"
    parts = sorted(variant.cpu_s.items(), key=lambda kv: -kv[1])
    detail = ", ".join(f"{name} {1000 * sec / variant.completed:.2f}" for name, sec in parts)
    return f"{per_run:.2f} ms ({detail})"


def run_throughput(ctx: BenchContext) -> Result:
    result = Result("throughput")
    traced = _measure(ctx, tracing=True)
    untraced = _measure(ctx, tracing=False)
    rate_cost = 1 - traced.rate / untraced.rate if untraced.rate > 0 else None
    on, off = traced.cpu_ms_per_run, untraced.cpu_ms_per_run
    cost = on / off - 1 if on is not None and off else None
    result.figures = {
        "window_s": ctx.sizes.throughput_window.total_seconds(),
        "warmup_s": ctx.sizes.throughput_warmup.total_seconds(),
        "database": ctx.backend.database,
        "traced": traced.figures(),
        "untraced": untraced.figures(),
        "tracing_cost": cost,
        "tracing_rate_cost": rate_cost,
    }
    target_ok = ctx.backend.database == "postgresql"
    for variant in (untraced, traced):
        label = "tracing on" if variant.tracing else "tracing off"
        result.row(
            f"completed runs/s, {label}",
            f"{variant.rate:,.1f} (offered {variant.offered_per_s:,.0f}/s; 5-s slices "
            f"{min(variant.slice_rates):,.0f}-{max(variant.slice_rates):,.0f})",
            f">= {TARGET_RATE:.0f}/s" + ("" if target_ok else " (on PostgreSQL)"),
            variant.rate >= TARGET_RATE if target_ok else None,
        )
        if variant.end_to_end_ms:
            result.row(
                f"fire to completion, {label}",
                f"p50 {fmt_ms(variant.end_to_end_ms['p50'])}, "
                f"p99 {fmt_ms(variant.end_to_end_ms['p99'])}",
            )
        result.row(f"CPU per run, {label}", _cpu_row(variant))
        if variant.machine:
            result.row(
                f"machine CPU in the window, {label}",
                f"{variant.machine['busy'] * 100:.0f}% busy, "
                f"{variant.machine['stolen'] * 100:.1f}% stolen by other guests",
            )
        if variant.missed:
            result.row(f"slots recorded MISSED, {label}", str(variant.missed))
        result.row(
            f"leader lost its lease in the window, {label}",
            "n/a" if variant.leaders_lost is None else str(variant.leaders_lost),
            "0 (default lease)",
            None if variant.leaders_lost is None else variant.leaders_lost == 0,
        )
    if rate_cost is not None:
        result.row("fewer runs/s with tracing on", f"{rate_cost * 100:.1f}%")
    result.row(
        "tracing cost (CPU per run)",
        "n/a" if cost is None else f"{cost * 100:.1f}%",
        f"<= {TARGET_TRACING_COST * 100:.0f}%",
        None if cost is None else cost <= TARGET_TRACING_COST,
    )
    return result
