"""What ``cronwave status`` says of one schedule, from its latest runs and its latest
deadline breach (no I/O here).

A schedule is ``breached`` when the store recorded a deadline breach for a slot and no
later slot has SUCCEEDED since: the health check stays red until the schedule works
again. ``ok``: it has a deadline and is not breached; ``none``: it has no deadline
(and no breach). Its last slot is its newest run of one of its calendar's slots
(SCHEDULED, CATCHUP or BACKFILL, MISSED ones included); a MANUAL run proves nothing of
any slot and is never its last slot, so a schedule that only ever ran by hand has no
slot yet. A slot ran on time when its body began within a minute (plus the schedule's
jitter) of the fire time, the planner's own bound for a slot that runs now rather than
being caught up.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from cronwave._models import DeadlineBreach, Run, Schedule
from cronwave.cli._json import instant, seconds

ON_TIME = timedelta(minutes=1)


@dataclass(frozen=True)
class ScheduleStatus:
    schedule: Schedule
    last_slot: Run | None
    breach: DeadlineBreach | None
    deadline_state: str  # ok, breached, none
    #: What is said without a last slot: "no slot yet", or, when the runs looked at
    #: were not all the schedule's, that none was among them (an older one may be).
    no_slot: str = "no slot yet"

    @property
    def on_time(self) -> bool | None:
        run = self.last_slot
        if run is None or run.lateness is None:
            return None
        return run.lateness <= ON_TIME + self.schedule.jitter

    @property
    def healthy(self) -> bool:
        return self.deadline_state != "breached"


def status_of(
    schedule: Schedule,
    runs: list[Run],
    breach: DeadlineBreach | None,
    *,
    complete: bool = True,
) -> ScheduleStatus:
    """``runs``: the schedule's newest runs, newest first (``complete``: all it has);
    ``breach``: its newest."""
    planned = [r for r in runs if r.for_slot]
    last = planned[0] if planned else None
    state = "none" if schedule.deadline is None else "ok"
    if breach is not None:
        recovered = any(r.state == "SUCCEEDED" and r.fire_time > breach.fire_time for r in planned)
        if not recovered:
            state = "breached"
    no_slot = "no slot yet" if complete else f"no slot in the newest {len(runs)} runs"
    return ScheduleStatus(schedule, last, breach, state, no_slot)


def document(status: ScheduleStatus) -> dict[str, Any]:
    run, breach = status.last_slot, status.breach
    return {
        "schedule_id": status.schedule.schedule_id,
        "paused": status.schedule.paused,
        "deadline_seconds": seconds(status.schedule.deadline),
        "deadline_state": status.deadline_state,
        "last_slot": None
        if run is None
        else {
            "run_id": run.run_id,
            "fire_time": instant(run.fire_time),
            "state": run.state,
            "lateness_seconds": seconds(run.lateness),
            "on_time": status.on_time,
            "error": run.error,
        },
        "last_breach": None if breach is None else breach_document(breach),
    }


def breach_document(b: DeadlineBreach) -> dict[str, Any]:
    return {
        "breach_id": b.breach_id,
        "fire_time": instant(b.fire_time),
        "deadline_at": instant(b.deadline_at),
        "reason": b.reason,
        "cause": b.cause,
        "run_id": b.run_id or None,
        "run_state": b.run_state or None,
        "detected_at": instant(b.detected_at),
        "deliveries": [
            {
                "url": d.url,
                "format": d.format,
                "status": d.status,
                "attempts": d.attempts,
                "http_status": d.http_status,
                "error": d.error,
            }
            for d in b.deliveries
        ],
    }
