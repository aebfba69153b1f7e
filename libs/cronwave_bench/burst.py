"""``burst``: 1,000 distinct schedules due the same instant.

Each schedule has one one-off fire at the same whole second T, placed past the
creation of all of them plus the planner's dispatch lead. Figures: fire lateness
p50 / p90 / p99 / p99.9 / max over the runs, the time from T to the last body start,
starts per second (runs started / that time), duplicates (bodies started more than
once) and runs not started within 30 s of T.

Where the time goes is told apart too: how many runs the store had recorded before T
(dispatched ahead, within the lead) and how many a worker had claimed and held for T,
and how late the held ones started. A run recorded after T waited for the dispatch
path, not for the worker.

The burst's worker runs job bodies in threads (``CRONWAVE_JOB_ISOLATION=thread``): the
runs it claimed ahead wait in its held-runs heap and start together from its pool of
threads, whereas a job process per body (the default isolation, for bodies that must be
killable inside C code) would mean a thousand processes for ``cronwave.noop``.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

from cronwave._client import Client
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
    Started,
    delete_schedules,
    ms,
    ms_figures,
    parallel,
    runs_of,
    wait_terminal,
    with_starts,
)
from cronwave_bench.report import Result, fmt_ms
from cronwave_bench.single import NOOP, next_whole_second

TARGET_LAST_START_MS = 250.0
#: How long after the instant the bench waits for the last run to start.
WAIT_AFTER = timedelta(seconds=30)
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


def burst_env() -> dict[str, str]:
    return dict(PIPELINE_ENV)


def run_burst(ctx: BenchContext) -> Result:
    n = ctx.sizes.burst
    result = Result("burst")
    data_dir = ctx.suite_dir("burst")
    lead = dispatch_lead()
    env = burst_env()
    options = SuiteOptions(tracing=True, env=env, own_database=True)
    with bench_suite(ctx.backend, data_dir, options) as (suite, client):
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
                lambda sid: client.create_schedule(
                    sid, one_off=[instant], job_type=NOOP, overlap="allow_all"
                ),
                ids,
            )
            created = datetime.now(UTC)
            if created > instant - lead:
                result.notes.append(
                    f"creating the schedules ended {ms(created - instant + lead) / 1000:.1f}s "
                    "into the dispatch lead; the first runs were planned late"
                )
            time.sleep(max(0.0, (instant - datetime.now(UTC)).total_seconds()) + 1)
            left = instant + WAIT_AFTER - datetime.now(UTC)
            wait_terminal(client, ids, n, max(left, timedelta(seconds=1)), limit=4)
            # Nothing later counts: stop producing and consuming, so the store answers
            # the reads below at once.
            for proc in ("cron-planner", "dispatcher", "worker"):
                suite.stop_proc(suite.procs[proc])
            runs = runs_of(client, ids, limit=4)
            started = with_starts(client, runs)
        finally:
            if shared_database(suite, ctx.backend):
                undeleted = delete_schedules(client, ids)
                if undeleted:
                    result.notes.append(f"{undeleted} schedules could not be deleted")
    _figures(result, started, n, instant, lead, env)
    return result


def _figures(
    result: Result,
    started: list[Started],
    n: int,
    instant: datetime,
    lead: timedelta,
    env: dict[str, str],
) -> None:
    starts = [s.first for s in started if s.first is not None]
    late_ms = [ms(s.lateness) for s in started if s.lateness is not None]
    duplicates = sum(len(s.starts) - 1 for s in started if len(s.starts) > 1)
    duplicates += len(started) - len({(s.run.schedule_id, s.run.fire_time) for s in started})
    not_started = n - len({s.run.schedule_id for s in started if s.starts})
    recorded_ahead = [s for s in started if s.run.created_at and s.run.created_at < instant]
    held = [s for s in started if s.run.claimed_at and s.run.claimed_at < instant and s.starts]
    held_last = max((s.first for s in held if s.first), default=None)
    created = sorted(s.run.created_at for s in started if s.run.created_at)
    record_rate = (
        (len(created) - 1) / (created[-1] - created[0]).total_seconds()
        if len(created) > 1 and created[-1] > created[0]
        else None
    )
    figures = ms_figures(late_ms, ("p50", "p90", "p99", "p999", "max", "min"))
    last_ms = ms(max(starts) - instant) if starts else None
    span_s = (last_ms or 0.0) / 1000
    rate = len(starts) / span_s if span_s > 0 else None
    result.figures = {
        "schedules": n,
        "lead_s": lead.total_seconds(),
        "worker": env,
        "instant": instant.isoformat(),
        "lateness_ms": figures,
        "instant_to_last_start_ms": last_ms,
        "starts_per_s": rate,
        "started": len(starts),
        "not_started": not_started,
        "duplicates": duplicates,
        "recorded_before_instant": len(recorded_ahead),
        "held_by_worker_at_instant": len(held),
        "instant_to_last_held_start_ms": ms(held_last - instant) if held_last else None,
        "runs_recorded_per_s": record_rate,
    }
    if figures is not None:
        for name in ("p50", "p90", "p99", "p999"):
            label = "p99.9" if name == "p999" else name
            result.row(f"fire lateness {label}", fmt_ms(figures[name]))
    result.row(
        "instant to last start",
        fmt_ms(last_ms) + ("" if not not_started else f" ({not_started} not started)"),
        f"<= {TARGET_LAST_START_MS:.0f} ms",
        last_ms is not None and last_ms <= TARGET_LAST_START_MS and not_started == 0,
    )
    result.row("starts per second", f"{rate:,.0f}" if rate else "n/a")
    result.row(
        f"started within {WAIT_AFTER.total_seconds():.0f} s",
        f"{len(starts)} of {n}",
        str(n),
        not_started == 0,
    )
    result.row("duplicates", str(duplicates), "0", duplicates == 0)
    result.row(
        "recorded before the instant",
        f"{len(recorded_ahead)} of {n} (store recorded {record_rate:,.0f} runs/s)"
        if record_rate
        else f"{len(recorded_ahead)} of {n}",
    )
    result.row(
        "held by the worker at the instant",
        f"{len(held)}, last started {fmt_ms(ms(held_last - instant))} after it"
        if held_last
        else str(len(held)),
    )
    if lead > timedelta(0):
        result.notes.append(
            f"dispatch lead {lead.total_seconds():g} s; job bodies in worker threads "
            f"(CRONWAVE_JOB_ISOLATION={env['CRONWAVE_JOB_ISOLATION']})"
        )
