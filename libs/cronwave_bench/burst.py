"""``burst``: many distinct schedules due the same instant, the moment a cron
scheduler exists for (the top of the hour).

Each variant creates its schedules so that all are due at one whole second T, placed
past the creation of all of them plus the planner's dispatch lead: a one-off fire at T,
or a six-field cron expression naming T's second, minute and hour. Figures per variant
and run: fire lateness p50 / p99 / max over the runs, the time from T to the last body
start (the headline), duplicates (bodies started more than once, or a second
``started`` event of one attempt), runs handed out again (a second attempt: the
first one's lease lapsed, and its body may have begun as well, unrecorded) and runs
not started within 30 s of T. Each variant
runs ``burst_repeats`` times on a suite of its own; the table shows the spread.

The headline variants run the suite a fresh ``cronwave up --workers 2`` gives: mutual
TLS, tracing, job bodies in job processes, the default lease, consumer threads and
dispatch lead. Each of them (the first ``burst_loaded``) runs again while the
throughput scenario's load runs on the same suite (``throughput_rate`` schedules each
firing every second, their phases spread over the second, running before the burst's
schedules are made, whose making is timed under it); its target is twice the idle
one's. A tuned variant (job bodies in threads, 128 consumer threads, one worker)
follows, labelled with every setting it changes.

Where the time goes is told apart too: how many runs the store had recorded before T
(dispatched ahead, within the lead) and how many a worker had claimed before T.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from cronwave import Client
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
    every_second,
    ms,
    ms_figures,
    parallel,
    runs_of,
    wait_settled,
    with_starts,
)
from cronwave_bench.report import Result, fmt_ms
from cronwave_bench.single import NOOP, next_whole_second

TARGET_LAST_START_MS = 250.0
#: The target of the 10,000-schedule variant.
TARGET_LARGE_MS = 2000.0
#: Under the throughput load a burst's target is this many times the idle one's.
LOADED_FACTOR = 2
#: How long after the instant the bench waits for the last run to start.
WAIT_AFTER = timedelta(seconds=30)
_CALIBRATION = 16
#: How long the load runs before the burst's schedules are made.
LOAD_WARMUP = timedelta(seconds=3)


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


@dataclass(frozen=True)
class Variant:
    """One way of meeting the instant: ``kind`` "one-off" or "cron", ``size``
    schedules, on a suite with ``workers`` workers and ``env`` over the defaults."""

    label: str
    kind: str
    size: int
    workers: int = 2
    env: tuple[tuple[str, str], ...] = ()
    load_per_s: int = 0  # runs due per second beside the burst (0: none)

    @property
    def settings(self) -> str:
        changed = ", ".join(f"{k}={v}" for k, v in self.env)
        load = f"; {self.load_per_s}/s load" if self.load_per_s else ""
        return f"{self.workers} workers" + (f"; {changed}" if changed else "; defaults") + load

    @property
    def target_ms(self) -> float:
        target = TARGET_LAST_START_MS if self.size <= 1000 else TARGET_LARGE_MS
        return target * (LOADED_FACTOR if self.load_per_s else 1)


def variants(ctx: BenchContext) -> list[Variant]:
    n, large = ctx.sizes.burst, ctx.sizes.burst_large
    out = [
        Variant(f"{n:,} one-off", "one-off", n),
        Variant(f"{n:,} cron", "cron", n),
    ]
    if large:
        out.append(Variant(f"{large:,} one-off", "one-off", large))
    rate = ctx.sizes.throughput_rate
    if rate:  # again, while the throughput load runs on the same suite
        again = out[: ctx.sizes.burst_loaded]
        out += [Variant(f"{v.label}, under load", v.kind, v.size, load_per_s=rate) for v in again]
    if ctx.sizes.burst_tuned:
        tuned = tuple(sorted(PIPELINE_ENV.items()))
        out.append(Variant(f"{n:,} one-off, tuned", "one-off", n, workers=1, env=tuned))
    return out


def run_burst(ctx: BenchContext) -> Result:
    result = Result("burst")
    lead = dispatch_lead()
    result.figures = {"lead_s": lead.total_seconds(), "variants": {}}
    for variant in variants(ctx):
        trials = []
        for trial in range(max(ctx.sizes.burst_repeats, 1)):
            ctx.say(f"burst: {variant.label} ({variant.settings}), run {trial + 1}")
            trials.append(_one_burst(ctx, variant, lead, trial))
        result.figures["variants"][variant.label] = {
            "settings": variant.settings,
            "runs": trials,
        }
        _rows(result, variant, trials)
    result.notes.append(
        f"dispatch lead {lead.total_seconds():g} s; each variant on a fresh suite per run; "
        "values are min / median / max over the runs"
    )
    return result


def _one_burst(ctx: BenchContext, variant: Variant, lead: timedelta, trial: int) -> dict[str, Any]:
    n = variant.size
    data_dir = ctx.suite_dir(f"burst-{variant.kind}-{n}-{variant.workers}-{trial}")
    env = dict(variant.env)
    options = SuiteOptions(tracing=True, env=env, own_database=True, workers=variant.workers)
    with bench_suite(ctx.backend, data_dir, options) as (suite, client):
        ctx.span_dirs.setdefault("burst", data_dir)  # the first headline run
        wait_leading(client)
        prefix = f"bench-burst-{uuid.uuid4().hex[:8]}"
        # The load runs before the burst's schedules are made, and the time to make
        # them is measured under it: a busy suite makes them more slowly.
        load_ids = _start_load(client, prefix, variant.load_per_s, lead)
        estimate = _creation_seconds(client, n, prefix)
        # Past the creation by twice the dispatch lead, so that even the last schedule
        # made is acted on its whole lead ahead (at most half the time since it was
        # made), as for schedules made long before their instant.
        instant = next_whole_second(
            datetime.now(UTC) + timedelta(seconds=estimate * 1.5 + 2) + 2 * lead
        )
        if variant.kind == "cron":  # cron names whole seconds; keep clear of a minute's edge
            instant = instant + timedelta(seconds=1)
        ids = [f"{prefix}-{i:05d}" for i in range(n)]
        ctx.say(f"burst: creating {n} schedules due at {instant:%H:%M:%S} (~{estimate:.0f}s)")
        try:
            parallel(lambda sid: _create(client, sid, variant.kind, instant), ids)
            made = datetime.now(UTC)
            time.sleep(max(0.0, (instant - datetime.now(UTC)).total_seconds()) + 1)
            left = instant + WAIT_AFTER - datetime.now(UTC)
            wait_settled(client, ids, n, max(left, timedelta(seconds=1)))
            # Nothing later counts: stop producing and consuming, so the store answers
            # the reads below at once.
            for proc in list(suite.procs):
                if proc.startswith(("cron-planner", "dispatcher", "worker")):
                    suite.stop_proc(suite.procs[proc])
            runs = [r for r in runs_of(client, ids, limit=4) if r.fire_time == instant]
            started = with_starts(client, runs)
        finally:
            if shared_database(suite, ctx.backend):
                delete_schedules(client, ids + load_ids)
    return _figures(started, n, instant, made)


def _start_load(client: Client, prefix: str, per_s: int, lead: timedelta) -> list[str]:
    """``per_s`` schedules each firing every second, their phases spread over the
    second, from a few seconds from now on (the suite stops after the trial): the
    steady load a burst meets on a busy suite. Returns once the load runs."""
    if not per_s:
        return []
    first = next_whole_second(datetime.now(UTC) + lead + timedelta(seconds=2))
    ids = [f"{prefix}-load-{i:05d}" for i in range(per_s)]
    every_second(client, ids, first)
    time.sleep(max(0.0, (first + LOAD_WARMUP - datetime.now(UTC)).total_seconds()))
    return ids


def _create(client: Client, schedule_id: str, kind: str, instant: datetime) -> None:
    if kind == "cron":
        cron = f"{instant.second} {instant.minute} {instant.hour} * * *"
        client.create_schedule(schedule_id, cron=cron, job_type=NOOP, overlap="allow_all")
    else:
        client.create_schedule(schedule_id, one_off=[instant], job_type=NOOP, overlap="allow_all")


def _figures(started: list[Started], n: int, instant: datetime, made: datetime) -> dict[str, Any]:
    starts = [s.first for s in started if s.first is not None]
    late_ms = [ms(s.lateness) for s in started if s.lateness is not None]
    duplicates = sum(len(s.starts) - 1 for s in started if len(s.starts) > 1)
    duplicates += len(started) - len({(s.run.schedule_id, s.run.fire_time) for s in started})
    not_started = n - len({s.run.schedule_id for s in started if s.starts})
    recorded_ahead = sum(1 for s in started if s.run.created_at and s.run.created_at < instant)
    claimed_ahead = sum(1 for s in started if s.run.claimed_at and s.run.claimed_at < instant)
    recorded = [s.run.created_at for s in started if s.run.created_at]
    claimed = [s.run.claimed_at for s in started if s.run.claimed_at]
    return {
        "instant": instant.isoformat(),
        "lateness_ms": ms_figures(late_ms, ("p50", "p99", "max")),
        "instant_to_last_start_ms": ms(max(starts) - instant) if starts else None,
        "started": len(starts),
        "not_started": not_started,
        "duplicates": duplicates,
        # A run handed out again (its attempt's lease lapsed) may have begun its body
        # twice: the first attempt's start is not recorded once it was superseded.
        "attempts_after_the_first": sum(1 for s in started if s.run.attempt > 1),
        "recorded_before_instant": recorded_ahead,
        "claimed_before_instant": claimed_ahead,
        "last_recorded_ms": ms(max(recorded) - instant) if recorded else None,
        "last_claimed_ms": ms(max(claimed) - instant) if claimed else None,
        "last_made_ms": ms(made - instant),  # the last of the burst's schedules
    }


def _spread(values: list[float | None]) -> str:
    known = sorted(v for v in values if v is not None)
    if not known:
        return "n/a"
    if len(known) == 1:
        return fmt_ms(known[0])
    middle = known[len(known) // 2]
    return f"{fmt_ms(known[0])} / {fmt_ms(middle)} / {fmt_ms(known[-1])}"


def _rows(result: Result, variant: Variant, trials: list[dict[str, Any]]) -> None:
    last = [t["instant_to_last_start_ms"] for t in trials]
    not_started = sum(t["not_started"] for t in trials)
    duplicates = sum(t["duplicates"] for t in trials)
    target = variant.target_ms
    met = not_started == 0 and all(v is not None and v <= target for v in last)
    tuned = dict(variant.env) != {}
    result.row(
        f"{variant.label}: instant to last start ({variant.settings})",
        _spread(last),
        "" if tuned else f"<= {fmt_ms(target)}",
        None if tuned else met,
    )
    p99 = [(t["lateness_ms"] or {}).get("p99") for t in trials]
    result.row(f"{variant.label}: fire lateness p99", _spread(p99))
    ahead = [t["recorded_before_instant"] for t in trials]
    claimed = [t["claimed_before_instant"] for t in trials]
    last_recorded = _spread([t["last_recorded_ms"] for t in trials])
    last_claimed = _spread([t["last_claimed_ms"] for t in trials])
    last_made = _spread([t["last_made_ms"] for t in trials])
    result.row(
        f"{variant.label}: recorded / claimed before the instant",
        f"{min(ahead)}-{max(ahead)} / {min(claimed)}-{max(claimed)} of {variant.size} "
        f"(the last at {last_recorded} / {last_claimed} from it; the last schedule made "
        f"at {last_made})",
    )
    again = sum(t.get("attempts_after_the_first", 0) for t in trials)
    result.row(
        f"{variant.label}: not started, duplicates (runs handed out again)",
        f"{not_started}, {duplicates} ({again})",
        "0, 0 (0)",
        not_started == 0 and duplicates == 0 and again == 0,
    )
