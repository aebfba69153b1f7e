"""The workflow-store's Prometheus metrics (served by the bootstrap, see
``cronwave_core.metrics``). Counted after the transaction that decided them commits,
in the servicer; nothing here does I/O on a call's path."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import sqlalchemy as sa
from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily

from cronwave_core.domain.labels import is_critical
from cronwave_core.domain.runs import IN_FLIGHT, RunState, is_placeholder
from cronwave_core.metrics import CachedGauges, register, schedules, small
from workflow_store import models as m
from workflow_store.records import Completion

if TYPE_CHECKING:  # fencing.py imports this module
    from workflow_store.db import Database
    from workflow_store.slots import MissedSlot


_schedule = schedules()
_job_type = small()
_reason = small()
_queue = small()

RUNS = Counter(
    "cronwave_runs",
    "Runs that reached a terminal state, by schedule, job type and state",
    ["schedule", "job_type", "state"],
)
LAST_SUCCESS = Gauge(
    "cronwave_schedule_last_success_timestamp_seconds",
    "When the schedule's latest SUCCEEDED slot (a scheduled, catchup or backfill run; never"
    " a manual one) completed (Unix time), as seen by this store",
    ["schedule"],
)
LAST_RUN = Gauge(
    "cronwave_schedule_last_run_timestamp_seconds",
    "When the schedule's latest run of each trigger reached a terminal state through a"
    " completion (Unix time), as seen by this store",
    ["schedule", "trigger"],
)
MISSED = Counter(
    "cronwave_missed_slots",
    "Slots recorded MISSED, by schedule and reason (overlap_skip, paused, catchup_skip...)",
    ["schedule", "reason"],
)
FENCING_REJECTIONS = Counter(
    "cronwave_fencing_rejections",
    "Fenced writes refused: reason stale (older than the newest token) or unissued",
    ["reason"],
)
RPC_DURATION = Histogram(
    "cronwave_store_rpc_duration_seconds",
    "Handling time of the store's batch RPCs, by method",
    ["method"],
)
DEADLINE_BREACHES = Counter(
    "cronwave_deadline_breaches",
    "Slots that had not SUCCEEDED by their schedule's deadline, by schedule and reason"
    " (failed, timed_out, cancelled, dead_lettered, still_running, not_started, missed,"
    " succeeded_late), counted by the store process whose deadline sweep recorded them",
    ["schedule", "reason"],
)
WATCH_STREAMS = Gauge(
    "cronwave_store_watch_streams",
    "WatchSchedules streams this store process serves now (each planner's schedule"
    " feed holds one, on one store replica)",
)
BATCH_SIZE = Histogram(
    "cronwave_store_batch_size",
    "Items per batch RPC, by method",
    ["method"],
    buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000),
)


def completed(results: Sequence[object]) -> None:
    """Count the completions that made a run terminal (a repeated one changes nothing,
    and a retry back to PENDING is not an end). Only a slot's success sets the last
    success: a manual trigger proves nothing of any slot, and a test trigger must not
    silence an alert on the last success; it shows in the last run, by trigger."""
    for r in results:
        if not isinstance(r, Completion) or not r.changed or not r.run.state.terminal:
            continue
        run = r.run
        schedule = _schedule.fold(run.schedule_id or "_none")
        RUNS.labels(schedule, _job_type.fold(run.job_type), run.state.value).inc()
        if run.finished_at is None:
            continue
        LAST_RUN.labels(schedule, run.trigger.value).set(run.finished_at.timestamp())
        if run.state is RunState.SUCCEEDED and run.trigger.for_slot:
            LAST_SUCCESS.labels(schedule).set(run.finished_at.timestamp())


def missed(slots: Sequence[MissedSlot]) -> None:
    """Count the slots whose row became MISSED with a final reason (a placeholder,
    ``pending:...``, is a slot still to be decided, not a missed one)."""
    for slot in slots:
        if not is_placeholder(slot.reason):
            MISSED.labels(_schedule.fold(slot.schedule_id), _reason.fold(slot.reason)).inc()


def deadline_breached(schedule_id: str, reason: str) -> None:
    """Count one recorded breach (after its transaction committed)."""
    DEADLINE_BREACHES.labels(_schedule.fold(schedule_id), _reason.fold(reason)).inc()


def batch(method: str, size: int, seconds: float) -> None:
    RPC_DURATION.labels(method).observe(seconds)
    BATCH_SIZE.labels(method).observe(size)


def run_gauges(db: Database, ttl_seconds: float = 5.0) -> CachedGauges:
    """``cronwave_runs_pending``, ``cronwave_runs_waiting`` (claimed, body not started:
    held for its fire time or a job process) and ``cronwave_runs_running`` (body
    started), one grouped count over the indexed ``state`` column, and
    ``cronwave_dead_letters`` (the dead letters not replayed, by queue), per
    ``ttl_seconds`` at most, on scrape."""

    def collect() -> list[GaugeMetricFamily]:
        counts = dict.fromkeys(sorted(state.value for state in IN_FLIGHT), 0)
        query = (
            sa.select(m.Run.state, sa.func.count())
            .where(m.Run.state.in_(list(counts)))
            .group_by(m.Run.state)
        )
        letters = (
            sa.select(m.DeadLetter.queue, sa.func.count())
            .where(m.DeadLetter.replayed_at.is_(None))
            .group_by(m.DeadLetter.queue)
        )
        dead = GaugeMetricFamily(
            "cronwave_dead_letters",
            "Dead letters not replayed, by queue (the dead-letter list's depth)",
            labels=["queue"],
        )
        by_queue: dict[str, int] = {}
        with db.read() as s:
            for state, count in s.execute(query):
                counts[state] = int(count)
            for queue, count in s.execute(letters):
                folded = _queue.fold(queue)
                by_queue[folded] = by_queue.get(folded, 0) + int(count)
        for queue, count in sorted(by_queue.items()):
            dead.add_metric([queue], count)
        pending = GaugeMetricFamily("cronwave_runs_pending", "Runs PENDING (queued or due)")
        pending.add_metric([], counts[RunState.PENDING.value])
        waiting = GaugeMetricFamily(
            "cronwave_runs_waiting",
            "Runs WAITING (claimed, the body not started: its fire time or a job process)",
        )
        waiting.add_metric([], counts[RunState.WAITING.value])
        running = GaugeMetricFamily("cronwave_runs_running", "Runs RUNNING (the body started)")
        running.add_metric([], counts[RunState.RUNNING.value])
        return [pending, waiting, running, dead]

    return CachedGauges(collect, ttl_seconds)


def schedule_gauges(db: Database, ttl_seconds: float = 5.0) -> CachedGauges:
    """``cronwave_schedule_critical``: 1 for each live schedule labelled
    ``critical=true`` (``cronwave_core.domain.labels``), read on scrape by one query
    over the schedules that have labels, per ``ttl_seconds`` at most. An alert joins on
    it by schedule, so it pages for the schedules their owners mark, from the moment
    they mark them (a label on the last-success gauge would wait for the next success,
    which a schedule that never succeeds never has)."""

    def collect() -> list[GaugeMetricFamily]:
        query = sa.select(m.Schedule.id, m.Schedule.labels).where(
            m.Schedule.deleted.is_(False), sa.cast(m.Schedule.labels, sa.Text) != "{}"
        )
        with db.read() as s:
            critical = {
                _schedule.fold(sid) for sid, labels in s.execute(query) if is_critical(labels or {})
            }
        family = GaugeMetricFamily(
            "cronwave_schedule_critical",
            "1 for each live schedule labelled critical=true (its slots must succeed)",
            labels=["schedule"],
        )
        for schedule in sorted(critical):
            family.add_metric([schedule], 1)
        return [family]

    return CachedGauges(collect, ttl_seconds)


def install(db: Database) -> Callable[[], None]:
    """Register the scrape-time gauges; returns their removal (for tests)."""
    collectors = [run_gauges(db), schedule_gauges(db)]
    for collector in collectors:
        register(collector)

    def remove() -> None:
        for collector in collectors:
            REGISTRY.unregister(collector)

    return remove
