"""``saturation``: the highest rate of durable runs a suite of the defaults carries,
fire to completion, found by raising the offered rate until it falls behind.

One suite of what ``cronwave up --workers 2`` gives (mutual TLS, tracing and metrics
on, job bodies in job processes). The load grows in steps of ``saturation_step``
runs due per second: each step adds that many schedules firing every second, their
phases spread over the second (so each step's load is spread as evenly as the first).
After a warm-up, a window of ``saturation_window`` counts the runs the store completed
(SUCCEEDED, by its ``finished_at``) whose fire time lies in the window, and the CPU
each process spent in it. A step *keeps up* when it completes at least
``KEPT_UP`` of what it offered and the p99 from fire to completion stays under
``LATE_P99``; the saturation point is the last step that kept up. The ramp stops at the
first step that does not, or at ``saturation_max``. The ramp runs
``saturation_repeats`` times, each on a fresh suite; the table shows each run's steps
and the spread of the saturation points, and the target is met when every run's is.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from cronwave_bench.context import BenchContext
from cronwave_bench.harness import SuiteOptions, bench_suite, dispatch_lead, wait_leading
from cronwave_bench.measure import (
    CpuMeter,
    every_second,
    ms,
    ms_figures,
    runs_of,
    sleep_until,
)
from cronwave_bench.report import Result, fmt_ms
from cronwave_bench.single import next_whole_second

TARGET_RATE = 1000.0
#: A step keeps up when it completes this share of what it offered ...
KEPT_UP = 0.98
#: ... and its runs' p99 from fire to completion stays under this.
LATE_P99 = timedelta(seconds=1)
WARMUP = timedelta(seconds=4)


@dataclass(frozen=True)
class Step:
    offered_per_s: int
    completed_per_s: float
    p99_ms: float | None
    cpu_ms_per_run: dict[str, float]
    busy: float | None

    @property
    def kept_up(self) -> bool:
        return (
            self.completed_per_s >= KEPT_UP * self.offered_per_s
            and self.p99_ms is not None
            and self.p99_ms < ms(LATE_P99)
        )

    def figures(self) -> dict[str, Any]:
        return {
            "offered_per_s": self.offered_per_s,
            "completed_per_s": round(self.completed_per_s, 1),
            "fire_to_completion_p99_ms": self.p99_ms,
            "cpu_ms_per_run": self.cpu_ms_per_run,
            "machine_busy": self.busy,
            "kept_up": self.kept_up,
        }


def run_saturation(ctx: BenchContext) -> Result:
    result = Result("saturation")
    ramps = [_ramp(ctx, trial) for trial in range(max(ctx.sizes.saturation_repeats, 1))]
    points = [_point(steps) for steps in ramps]
    result.figures = {
        "runs": [
            {"steps": [s.figures() for s in steps], "saturation_per_s": point}
            for steps, point in zip(ramps, points, strict=True)
        ],
        "saturation_per_s": sorted(points)[len(points) // 2],  # the median run's
        "kept_up_rule": {"completed_share": KEPT_UP, "p99_s": LATE_P99.total_seconds()},
    }
    for trial, steps in enumerate(ramps):
        run = f"run {trial + 1}: " if len(ramps) > 1 else ""
        for s in steps:
            result.row(f"{run}offered {s.offered_per_s}/s", _step_value(s), "", None)
    spread = " / ".join(f"{p}/s" for p in sorted(points))
    tops = [not steps or steps[-1].kept_up for steps in ramps]
    result.row(
        "saturation (last rate kept up" + (f", {len(points)} runs)" if len(points) > 1 else ")"),
        spread + (" (the ramp's top)" if all(tops) else ""),
        f">= {TARGET_RATE:.0f}/s",
        min(points) >= TARGET_RATE,
    )
    result.notes.append(
        "defaults of cronwave up --workers 2 (TLS, tracing, metrics, job processes); a step "
        f"keeps up when it completes >= {KEPT_UP:.0%} of its offer with p99 fire to "
        f"completion < {LATE_P99.total_seconds():g} s"
    )
    return result


def _ramp(ctx: BenchContext, trial: int) -> list[Step]:
    """One ramp on a fresh suite: its steps, up to the first that fell behind."""
    sizes = ctx.sizes
    step_size, top = sizes.saturation_step, sizes.saturation_max
    window = sizes.saturation_window
    steps: list[Step] = []
    options = SuiteOptions(tracing=True, own_database=True, workers=2)
    data_dir = ctx.suite_dir(f"saturation-{trial}")
    with bench_suite(ctx.backend, data_dir, options) as (suite, client):
        wait_leading(client)
        prefix = f"bench-sat-{uuid.uuid4().hex[:8]}"
        ids: list[str] = []
        every = timedelta(seconds=1)
        rate = 0
        while rate + step_size <= top:
            batch = [f"{prefix}-{rate // step_size}-{i:05d}" for i in range(step_size)]
            first = next_whole_second(
                datetime.now(UTC) + dispatch_lead() + timedelta(seconds=2 + step_size * 0.01)
            )
            every_second(client, batch, first)
            ids += batch
            rate += step_size
            start = max(first, next_whole_second(datetime.now(UTC))) + WARMUP
            end = start + window
            ctx.say(
                f"saturation: run {trial + 1}, {rate}/s offered, "
                f"window {start:%H:%M:%S}-{end:%H:%M:%S}"
            )
            meter = CpuMeter({name: proc.pid for name, proc in suite.procs.items()})
            sleep_until(start)
            meter.start()
            sleep_until(end)
            cpu = meter.stop()
            time.sleep(LATE_P99.total_seconds())  # the window's last fires may complete
            fires = int((WARMUP + window + LATE_P99) / every) + 4
            runs = [r for r in runs_of(client, ids, limit=fires) if start <= r.fire_time < end]
            done = [r for r in runs if r.state == "SUCCEEDED" and r.finished_at]
            late = [ms(r.finished_at - r.fire_time) for r in done if r.finished_at]
            p99 = (ms_figures(late, ("p99",)) or {}).get("p99")
            per_run = {
                name: round(1000 * seconds / len(done), 3) for name, seconds in cpu.items()
            } if done else {}  # fmt: skip
            step = Step(
                rate,
                len(done) / window.total_seconds(),
                p99,
                per_run,
                meter.machine["busy"] if meter.machine else None,
            )
            steps.append(step)
            if not step.kept_up:
                break
    return steps


def _point(steps: list[Step]) -> int:
    """The ramp's saturation point: the offer of its last step that kept up (0: none)."""
    kept = [s for s in steps if s.kept_up]
    return kept[-1].offered_per_s if kept else 0


def _step_value(s: Step) -> str:
    cpu_total = sum(s.cpu_ms_per_run.values())
    detail = ", ".join(
        f"{name} {value:.2f}"
        for name, value in sorted(s.cpu_ms_per_run.items(), key=lambda kv: -kv[1])
        if value >= 0.01
    )
    busy = f"; machine {s.busy * 100:.0f}% busy" if s.busy is not None else ""
    p99 = fmt_ms(s.p99_ms) if s.p99_ms is not None else "n/a"
    return (
        f"{s.completed_per_s:,.1f}/s completed, p99 {p99}; CPU per run "
        f"{cpu_total:.2f} ms ({detail}){busy}"
    )
