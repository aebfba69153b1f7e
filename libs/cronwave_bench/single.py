"""``single``: one schedule that fires every second, for at least 60 fires.

Figures: fire lateness (body start minus nominal fire time) p50 / p90 / p99 / max,
skipped fires (a slot of the schedule without a started body) and duplicates (bodies
started more than once for a slot). The schedule's first fire is placed past the
planner's dispatch lead, so every fire measured is planned the way a long-lived
schedule's are. The worker runs each body in a job process (the default isolation):
what that process added to a run, handing the run over and the result back, is read
off the runs' ``worker.execute`` spans (p50 / p95 / max).
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cronwave_bench.context import BenchContext
from cronwave_bench.floor import floor_figures, start_floor
from cronwave_bench.harness import (
    SuiteOptions,
    bench_suite,
    dispatch_lead,
    shared_database,
    wait_leading,
)
from cronwave_bench.measure import (
    NOOP,
    delete_schedules,
    ms,
    ms_figures,
    wait_terminal,
    with_starts,
)
from cronwave_bench.planner_memory import rss_mib
from cronwave_bench.report import Result, fmt_ms
from cronwave_core.domain.spec import Interval
from cronwave_waterfall import load_spans

TARGET_P50_MS = 0.5
TARGET_P99_MS = 1.5
#: Set by the worker on a run's ``worker.execute`` span when its body ran in a job
#: process (``worker.middleware.tracing.ATTR_OVERHEAD_MS``: a library never imports a service).
OVERHEAD_ATTR = "cronwave.job_process.overhead_ms"


def next_whole_second(instant: datetime) -> datetime:
    return instant.replace(microsecond=0) + timedelta(seconds=1)


def job_process_overhead_ms(spans_dir: Path) -> list[float]:
    """What the job process added to each run whose spans are in ``spans_dir``: the
    hand-over of the run and the hand-back of its result, in milliseconds."""
    if not spans_dir.exists():
        return []
    return [
        float(span.attributes[OVERHEAD_ATTR])
        for span in load_spans(spans_dir)
        if span.name == "worker.execute" and OVERHEAD_ATTR in span.attributes
    ]


def run_single(ctx: BenchContext) -> Result:
    fires = ctx.sizes.single_fires
    result = Result("single")
    data_dir = ctx.suite_dir("single")
    options = SuiteOptions(tracing=True, own_database=True)
    with bench_suite(ctx.backend, data_dir, options) as (suite, client):
        ctx.span_dirs["single"] = data_dir
        wait_leading(client)
        ctx.planner_idle_rss_mib = rss_mib(suite.procs["cron-planner"].pid)
        schedule_id = f"bench-single-{uuid.uuid4().hex[:10]}"
        lead = dispatch_lead()
        first = next_whole_second(datetime.now(UTC) + lead + timedelta(seconds=1))
        last = first + timedelta(seconds=fires - 1)
        client.create_schedule(
            schedule_id,
            intervals=[Interval(every=timedelta(seconds=1))],
            job_type=NOOP,
            start_at=first,
            end_at=last + timedelta(seconds=1),  # the end is exclusive
        )
        ctx.say(
            f"single: {fires} fires of a 1-second schedule, {first:%H:%M:%S} to {last:%H:%M:%S}"
        )
        probe = start_floor(last - datetime.now(UTC))
        try:
            time.sleep(max(0.0, (last - datetime.now(UTC)).total_seconds()) + 0.5)
            runs = wait_terminal(
                client, [schedule_id], fires, timedelta(seconds=30), limit=fires + 10
            )
            started = with_starts(client, runs)
        finally:
            if shared_database(suite, ctx.backend):
                delete_schedules(client, [schedule_id])
        floor = floor_figures(probe, timedelta(seconds=10))
    slots = {first + timedelta(seconds=i) for i in range(fires)}
    by_slot: dict[datetime, int] = {}
    late_ms: list[float] = []
    for s in started:
        if s.run.fire_time not in slots or not s.starts:
            continue
        by_slot[s.run.fire_time] = by_slot.get(s.run.fire_time, 0) + len(s.starts)
        lateness = s.lateness
        assert lateness is not None  # it has starts
        late_ms.append(ms(lateness))
    duplicates = sum(n - 1 for n in by_slot.values() if n > 1)
    skipped = len(slots - set(by_slot))
    figures = ms_figures(late_ms, ("p50", "p90", "p99", "max", "min"))
    result.figures = {
        "fires": fires,
        "lead_s": lead.total_seconds(),
        "lateness_ms": figures,
        "skipped": skipped,
        "duplicates": duplicates,
        "runs": sum(1 for s in started if s.run.fire_time in slots),
    }
    if figures is None:
        result.row("fire lateness", "no body started", "", False)
    else:
        result.row(
            "fire lateness p50",
            fmt_ms(figures["p50"]),
            f"<= {TARGET_P50_MS} ms",
            figures["p50"] <= TARGET_P50_MS,
        )
        result.row("fire lateness p90", fmt_ms(figures["p90"]))
        result.row(
            "fire lateness p99",
            fmt_ms(figures["p99"]),
            f"<= {TARGET_P99_MS} ms",
            figures["p99"] <= TARGET_P99_MS,
        )
        result.row("fire lateness max", fmt_ms(figures["max"]))
    overhead = ms_figures(job_process_overhead_ms(data_dir / "spans"), ("p50", "p95", "max"))
    result.figures["job_process_overhead_ms"] = overhead
    if overhead is not None:
        result.row(
            "job process hand-over + hand-back",
            f"p50 {fmt_ms(overhead['p50'])}, p95 {fmt_ms(overhead['p95'])}, "
            f"max {fmt_ms(overhead['max'])}",
        )
    result.figures["machine_floor_ms"] = floor
    if floor is not None:
        result.row(
            "machine floor (a bare process's wake-up)",
            f"p50 {fmt_ms(floor['p50'])}, p99 {fmt_ms(floor['p99'])}, max {fmt_ms(floor['max'])}",
        )
    result.row("fires", f"{len(by_slot)} of {fires} started")
    result.row("skipped fires", str(skipped), "0", skipped == 0)
    result.row("duplicates", str(duplicates), "0", duplicates == 0)
    if lead > timedelta(0):
        result.notes.append(f"dispatch lead {lead.total_seconds():g} s")
    return result
