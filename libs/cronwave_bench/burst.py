"""``burst``: 1,000 distinct schedules due the same instant.

Each schedule has one one-off fire at the same whole second T, placed past the
creation of all of them plus the planner's dispatch lead. Figures: fire lateness
p50 / p90 / p99 / p99.9 / max over the runs, the time from T to the last body start,
starts per second (runs started / that time), and duplicates (bodies started more than
once) and runs never started.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

from cronwave._client import Client
from cronwave_bench.context import BenchContext
from cronwave_bench.harness import SuiteOptions, bench_suite, dispatch_lead, wait_leading
from cronwave_bench.measure import (
    delete_schedules,
    ms,
    ms_figures,
    parallel,
    wait_terminal,
    with_starts,
)
from cronwave_bench.report import Result, fmt_ms
from cronwave_bench.single import NOOP, next_whole_second

TARGET_LAST_START_MS = 250.0
_CALIBRATION = 16


def _creation_seconds(client: Client, n: int, prefix: str) -> float:
    """How long creating ``n`` schedules will take, from creating a few paused ones
    (the planner ignores them) the same way, then deleting them."""
    ids = [f"{prefix}-probe-{i}" for i in range(_CALIBRATION)]
    far = datetime.now(UTC) + timedelta(days=1)
    started = time.monotonic()
    parallel(
        lambda sid: client.create_schedule(sid, one_off=[far], job_type=NOOP, paused=True), ids
    )
    per = (time.monotonic() - started) / _CALIBRATION
    delete_schedules(client, ids)
    return per * n


def run_burst(ctx: BenchContext) -> Result:
    n = ctx.sizes.burst
    result = Result("burst")
    data_dir = ctx.suite_dir("burst")
    lead = dispatch_lead()
    with bench_suite(ctx.backend, data_dir, SuiteOptions(tracing=True)) as (suite, client):
        ctx.span_dirs["burst"] = data_dir
        wait_leading(client)
        prefix = f"bench-burst-{uuid.uuid4().hex[:8]}"
        estimate = _creation_seconds(client, n, prefix)
        instant = next_whole_second(
            datetime.now(UTC) + timedelta(seconds=estimate * 1.5 + 2) + lead
        )
        ids = [f"{prefix}-{i:05d}" for i in range(n)]
        ctx.say(f"burst: creating {n} schedules due at {instant:%H:%M:%S} (~{estimate:.0f}s)")
        try:
            parallel(
                lambda sid: client.create_schedule(sid, one_off=[instant], job_type=NOOP), ids
            )
            created = datetime.now(UTC)
            if created > instant - lead:
                result.notes.append(
                    f"creating the schedules ended {ms(created - instant + lead) / 1000:.1f}s "
                    "into the dispatch lead; the first runs were planned late"
                )
            time.sleep(max(0.0, (instant - datetime.now(UTC)).total_seconds()) + 1)
            runs = wait_terminal(
                client, ids, n, timedelta(seconds=max(60.0, n * 0.1)), limit=4
            )
            started = with_starts(client, runs)
        finally:
            undeleted = delete_schedules(client, ids)
            if undeleted:
                result.notes.append(f"{undeleted} schedules could not be deleted")
    starts = [s.first for s in started if s.first is not None]
    late_ms = [ms(s.lateness) for s in started if s.lateness is not None]
    duplicates = sum(len(s.starts) - 1 for s in started if len(s.starts) > 1)
    duplicates += len(started) - len({(s.run.schedule_id, s.run.fire_time) for s in started})
    not_started = n - len({s.run.schedule_id for s in started if s.starts})
    figures = ms_figures(late_ms, ("p50", "p90", "p99", "p999", "max", "min"))
    last_ms = ms(max(starts) - instant) if starts else None
    span_s = (last_ms or 0.0) / 1000
    rate = len(starts) / span_s if span_s > 0 else None
    result.figures = {
        "schedules": n,
        "lead_s": lead.total_seconds(),
        "instant": instant.isoformat(),
        "lateness_ms": figures,
        "instant_to_last_start_ms": last_ms,
        "starts_per_s": rate,
        "started": len(starts),
        "not_started": not_started,
        "duplicates": duplicates,
    }
    if figures is not None:
        for name in ("p50", "p90", "p99", "p999"):
            label = "p99.9" if name == "p999" else name
            result.row(f"fire lateness {label}", fmt_ms(figures[name]))
    result.row(
        "instant to last start",
        fmt_ms(last_ms),
        f"<= {TARGET_LAST_START_MS:.0f} ms",
        last_ms is not None and last_ms <= TARGET_LAST_START_MS and not_started == 0,
    )
    result.row("starts per second", f"{rate:,.0f}" if rate else "n/a")
    result.row("started", f"{len(starts)} of {n}", str(n), not_started == 0)
    result.row("duplicates", str(duplicates), "0", duplicates == 0)
    if lead > timedelta(0):
        result.notes.append(f"dispatch lead {lead.total_seconds():g} s")
    return result
