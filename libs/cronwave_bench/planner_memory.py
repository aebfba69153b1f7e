"""``planner-memory``: 100,000 schedules in the planner's schedule index.

The index (``cron_planner.schedule_index``, with the real calendar code) is loaded in
a process of its own (``python -m cronwave_bench.planner_memory N``), so its resident
memory (``VmRSS``) before and after says what the schedules cost, undisturbed by the
bench. Measured there too: the time to load them, and the time to find the next due
slot and fire it (``peek`` + ``advance``: the heap pop and the next-fire computation
the fire loop does per fire). The planner process's own footprint comes from a real
planner of an earlier scenario's suite (``VmRSS`` of its pid), so the estimate for a
planner holding 100,000 schedules is that plus the index's cost.

The schedules mix 60 x 24 daily cron times in 8 time zones with intervals of
distinct periods, so about a third of them have a calendar of their own.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cronwave_bench.context import BenchContext
from cronwave_bench.measure import ms_figures
from cronwave_bench.report import Result, fmt_ms

TARGET_MIB = 200.0
ZONES = (
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Asia/Tokyo",
    "Australia/Sydney",
    "America/Los_Angeles",
    "Europe/London",
    "Asia/Kolkata",
)
_FIRES_TIMED = 2000


def rss_mib(pid: int | str = "self") -> float | None:
    """Resident memory of a process in MiB (Linux ``/proc``); None elsewhere."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None


def _schedules(n: int, start: datetime) -> list[Any]:
    from cronwave_core.spec import Interval, ScheduleDef, Spec

    out = []
    for i in range(n):
        if i % 3 == 2:
            spec = Spec(intervals=(Interval(every=timedelta(seconds=60 + i % 86_400)),))
        else:
            spec = Spec(
                cron=(f"{i % 60} {(i // 60) % 24} * * *",),
                time_zone=ZONES[(i // 1440) % len(ZONES)],
            )
        out.append((ScheduleDef(f"s{i:06d}", spec, job_type="cronwave.noop", revision=i + 1), start))
    return out


def probe(n: int) -> dict[str, Any]:
    """Load ``n`` schedules into a fresh index in this process and measure it."""
    from cron_planner.schedule_index import ScheduleIndex

    now = datetime.now(UTC)
    gc.collect()
    before = rss_mib()
    began = time.perf_counter()
    pairs = _schedules(n, now)
    index = ScheduleIndex()
    index.load(pairs, revision=n)
    del pairs
    load_s = time.perf_counter() - began
    gc.collect()
    after = rss_mib()
    fire_us = []
    for _ in range(min(_FIRES_TIMED, n)):
        t0 = time.perf_counter()
        slot = index.peek()
        if slot is None:
            break
        index.advance(slot, slot.fire_time, 1)
        fire_us.append((time.perf_counter() - t0) * 1e6)
    return {
        "schedules": len(index),
        "rss_before_mib": before,
        "rss_after_mib": after,
        "index_mib": (after - before) if after is not None and before is not None else None,
        "load_s": load_s,
        "find_and_fire_us": ms_figures(fire_us, ("p50", "p99", "max")),
        "heap_entries": index.heap_size(),
    }


def run_planner_memory(ctx: BenchContext) -> Result:
    n = ctx.sizes.planner_schedules
    result = Result("planner-memory")
    ctx.say(f"planner-memory: loading {n:,} schedules into a schedule index")
    done = subprocess.run(
        [sys.executable, "-P", "-m", "cronwave_bench.planner_memory", str(n)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        check=False,
    )
    if done.returncode != 0:
        result.status = "failed"
        result.notes.append(done.stderr.strip().splitlines()[-1] if done.stderr else "no output")
        return result
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    figures["planner_idle_rss_mib"] = ctx.planner_idle_rss_mib
    index_mib = figures["index_mib"]
    total = None
    if index_mib is not None:
        base = ctx.planner_idle_rss_mib or figures["rss_before_mib"]
        total = base + index_mib
    figures["planner_estimate_mib"] = total
    result.figures = figures
    result.row("schedules loaded", f"{figures['schedules']:,} in {figures['load_s']:.1f} s")
    result.row("index memory", "n/a" if index_mib is None else f"{index_mib:.0f} MiB")
    base_label = (
        "a running planner"
        if ctx.planner_idle_rss_mib
        else "the probe process before loading (no planner ran)"
    )
    result.row(
        "planner RSS with them",
        "n/a" if total is None else f"{total:.0f} MiB ({base_label} + index)",
        f"<= {TARGET_MIB:.0f} MiB",
        None if total is None else total <= TARGET_MIB,
    )
    fire = figures["find_and_fire_us"]
    if fire:
        result.row(
            "find + fire next due",
            f"p50 {fmt_ms(fire['p50'] / 1000)}, p99 {fmt_ms(fire['p99'] / 1000)}",
        )
    return result


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    print(json.dumps(probe(n)))


if __name__ == "__main__":
    main()
