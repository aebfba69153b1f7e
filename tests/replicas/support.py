"""What the replica tests share: a suite of every service in replicas, each store
replica's own counts (from its ``/metrics``), and the audit of a schedule's slots."""

from __future__ import annotations

import contextlib
import itertools
import os
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TypeVar

from prometheus_client.parser import text_string_to_metric_families

import cronwave
from cronwave_core.domain.calendar import fire_times
from cronwave_core.suite import Proc, Suite
from tests.harness.suites import SuiteFactory
from tests.helpers import REPO, eventually, fresh
from tests.replicas.jobs import MARK, executions

T = TypeVar("T")

#: Two of every service: the ones the suite replicates by name, plus planners and workers.
REPLICAS = {"workflow-store": 2, "leader-election": 2, "dispatcher": 2}
JOBS = {
    "CRONWAVE_JOB_MODULES": "tests.replicas.jobs",
    "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")])),
}
ONE_SECOND = cronwave.Interval(timedelta(seconds=1))


def replicated_suite(make_suite: SuiteFactory, **overrides: object) -> Suite:
    """Two workflow-stores, leader-elections, dispatchers, workers and planners over the
    test's PostgreSQL database and Redis; every process is given every replica of the
    services it calls."""
    env = {**JOBS, **overrides.pop("env", {})}  # type: ignore[dict-item]
    suite = make_suite(replicas=REPLICAS, workers=2, planners=2, env=env, **overrides)
    for service, count in REPLICAS.items():
        assert suite.replicas(service) == count
        assert suite.peer_address(service).count(",") == count - 1
    return suite


def stores(suite: Suite) -> list[Proc]:
    return [p for p in suite.procs.values() if p.service == "workflow-store"]


def samples(proc: Proc, name: str) -> dict[str, float]:
    """The values of metric sample ``name`` on ``proc``'s ``/metrics``, by their
    ``method`` label ('' when none); {} when the process does not answer."""
    url = f"http://{proc.metrics_address}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return {}
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found[sample.labels.get("method", "")] = sample.value
    return found


def batch_calls(proc: Proc) -> dict[str, int]:
    """RecordRuns and ClaimRuns calls the store replica ``proc`` has handled."""
    counts = samples(proc, "cronwave_store_rpc_duration_seconds_count")
    return {m: int(counts.get(m, 0)) for m in ("RecordRuns", "ClaimRuns")}


def watch_streams(proc: Proc) -> int | None:
    """The WatchSchedules streams the store replica ``proc`` serves; None: it does not
    answer."""
    value = samples(proc, "cronwave_store_watch_streams")
    return int(value[""]) if "" in value else None


def create_marking(
    client: cronwave.Client, marks: Path, count: int, prefix: str = "rep"
) -> list[cronwave.Schedule]:
    """``count`` 1-second schedules of the marking job, phases spread over the second,
    overlap allowed, once the workers have registered the job type."""
    name = fresh(prefix)

    def create(i: int) -> cronwave.Schedule:
        try:
            return client.create_schedule(
                f"{name}-{i:02d}",
                job_type=MARK,
                payload={"marks": str(marks)},
                intervals=[cronwave.Interval(timedelta(seconds=1), timedelta(seconds=i / count))],
                # Every slot runs even while the one before is still in flight (a
                # completion retried across a store kill): the audit is one run per slot.
                overlap="allow_all",
                if_absent=True,
            )
        except (cronwave.InvalidArgument, cronwave.Unavailable) as exc:  # job type not yet
            raise AssertionError(str(exc)) from exc

    return [eventually(partial(create, i), timeout=60, what=f"schedule {i}") for i in range(count)]


@dataclass
class SlotAudit:
    """Every slot of some schedules from each one's first scheduled run to ``until``."""

    slots: int = 0
    missing: list[str] = field(default_factory=list)
    doubled: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)
    ran_twice: list[str] = field(default_factory=list)
    never_ran: list[str] = field(default_factory=list)

    def clean(self) -> bool:
        return not (
            self.missing or self.doubled or self.unfinished or self.ran_twice or self.never_ran
        )


def scheduled_runs(client: cronwave.Client, schedule_id: str) -> list[cronwave.Run]:
    """The schedule's scheduled runs; AssertionError (for ``eventually``) while the call
    meets a store replica that was just killed."""
    try:
        runs = client.list_runs(schedule_id, limit=1000)
    except cronwave.Unavailable as exc:
        raise AssertionError(str(exc)) from exc
    return [r for r in runs if r.trigger == "SCHEDULED"]


def audit_slots(
    client: cronwave.Client,
    schedules: list[cronwave.Schedule],
    until: datetime,
    marks: Path | None = None,
) -> SlotAudit:
    """One scheduled run per slot of each schedule in ``[its first run, until]``, each
    SUCCEEDED, each body run once (when ``marks`` is the marking job's folder)."""
    audit = SlotAudit()
    for schedule in schedules:
        runs = [r for r in scheduled_runs(client, schedule.schedule_id) if r.fire_time <= until]
        if not runs:
            audit.missing.append(f"{schedule.schedule_id}: no run at all")
            continue
        first = min(r.fire_time for r in runs)
        due = list(
            itertools.takewhile(
                lambda t: t <= until,
                fire_times(schedule.spec, first - timedelta(microseconds=1)),
            )
        )
        audit.slots += len(due)
        per_slot = Counter(r.fire_time for r in runs)
        audit.missing += [f"{schedule.schedule_id}@{t}" for t in due if not per_slot[t]]
        audit.doubled += [f"{schedule.schedule_id}@{t}" for t, n in per_slot.items() if n > 1]
        for run in runs:
            where = f"{schedule.schedule_id}@{run.fire_time} {run.run_id}"
            if run.state != "SUCCEEDED":
                audit.unfinished.append(f"{where}: {run.state} {run.error}".rstrip())
            if marks is not None:
                ran = executions(marks, run.run_id)
                if ran > 1:
                    audit.ran_twice.append(f"{where}: {ran} times")
                if ran == 0 and run.state == "SUCCEEDED":
                    audit.never_ran.append(where)
    return audit


def settled_audit(
    client: cronwave.Client,
    schedules: list[cronwave.Schedule],
    until: datetime,
    marks: Path | None = None,
    timeout: float = 60,
) -> SlotAudit:
    """``audit_slots`` once every run up to ``until`` has ended (bounded by ``timeout``:
    the last audit then, whatever it says)."""
    last: list[SlotAudit] = []

    def ended() -> bool:
        last[:] = [audit_slots(client, schedules, until, marks)]
        assert not last[0].unfinished, last[0].unfinished[:5]
        return True

    with contextlib.suppress(AssertionError):  # the audit below says what is unfinished
        eventually(ended, timeout=timeout, interval=0.5, what="every run up to the end ended")
    return last[0]


def retried(call: Callable[[], T], what: str, timeout: float = 30) -> T:
    """``call()`` again while it meets a store replica that was just killed (bounded)."""

    def attempt() -> T:
        try:
            return call()
        except cronwave.Unavailable as exc:
            raise AssertionError(str(exc)) from exc

    return eventually(attempt, timeout=timeout, interval=0.1, what=what)


def pause_all(client: cronwave.Client, schedules: list[cronwave.Schedule]) -> None:
    for schedule in schedules:
        retried(partial(client.pause_schedule, schedule.schedule_id), f"pause {schedule}")
