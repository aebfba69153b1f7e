"""What becomes of a schedule's due slot: every occurrence since the schedule was last
handled gets exactly one outcome (``cronwave_core.domain.catchup.plan_catchup``), turned into
the fire loop's work. Pure: no clock, no I/O.

- The occurrence due now (late by less than the grace, one minute plus the schedule's
  jitter, and not followed by a later one that has come) starts now, trigger
  SCHEDULED. A planner back 13 s behind a 1 s schedule has one such slot; the twelve
  before it are late, whatever the grace: catch-up runs under overlap ``allow_all``,
  else as the catch-up policy says (``plan_catchup``).
- Late occurrences inside the catch-up window are run or recorded MISSED as the
  schedule's catch-up policy says (skip | latest | all, capped). Catch-up runs (trigger
  CATCHUP) start oldest first, ``min_spacing`` apart, so a long outage does not start a
  storm; the ones that wait are recorded as placeholders at once.
- Everything else -- outside the window, skipped by the policy, skipped by the DST
  policy -- is recorded MISSED with its reason. Past 10,000 slots outside the window,
  the rest are recorded as one summary row (reason ``outside_catchup_window: ...``).
- ``max_runs`` on a schedule without ``start_at``: the plan stops at the schedule's
  last fire time; what lies beyond is not a slot of the schedule at all.

Lateness is measured from the nominal fire time, as everywhere in cronwave (a jittered
schedule's runs are up to its jitter late on purpose, and say so); the grace that
separates "due" from "late" therefore includes the jitter.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from cron_planner.work import OUTSIDE_WINDOW_SUMMARY, Fire, Missed, Trigger, pending_reason
from cronwave_core.domain.calendar import DST_GAP_SKIP, runs_left
from cronwave_core.domain.catchup import DEFAULT_GRACE, plan_catchup
from cronwave_core.domain.spec import ScheduleDef

#: Slots outside the catch-up window listed one by one before the rest are summarised.
OUTSIDE_LIMIT = 10_000


@dataclass(frozen=True)
class SlotPlan:
    """``missed``: rows to record (final reasons and placeholders); ``fires``: runs to
    start, each at its ``act_at``; ``through``: the schedule is handled up to here;
    ``handled``: how many fire times that was."""

    missed: tuple[Missed, ...]
    fires: tuple[Fire, ...]
    through: datetime
    handled: int


def plan_slot(
    schedule: ScheduleDef,
    after: datetime,
    fires_so_far: int,
    slot_time: datetime,
    now: datetime,
    *,
    give_up_after: timedelta,
    grace: timedelta = DEFAULT_GRACE,
) -> SlotPlan:
    """Plan every occurrence of ``schedule`` in ``(after, max(now, slot_time)]``.

    ``slot_time`` is the due slot's instant: acting on a slot early (a dispatch lead
    time) still plans it as due, not as a slot of the future.
    """
    spec = schedule.spec
    sid = schedule.schedule_id
    horizon = max(now, slot_time)
    plan = plan_catchup(
        spec, schedule.policy, after, horizon, grace=grace + spec.jitter, limit=OUTSIDE_LIMIT
    )
    events = [(m.fire_time, "missed", m.reason) for m in plan.missed]
    events += [(t, "due", "") for t in plan.due]
    events += [(t, "catchup", "") for t in plan.catchup]
    events.sort()

    left = runs_left(spec, fires_so_far) if spec.start_at is None else None
    missed: list[Missed] = []
    fires: list[Fire] = []
    handled = 0
    waiting = 0  # catch-up runs queued so far, for their pacing
    for at, kind, reason in events:
        if reason != DST_GAP_SKIP:
            if left is not None and left <= 0:
                break  # past the schedule's last fire time: not a slot at all
            if left is not None:
                left -= 1
            handled += 1
        if kind == "missed":
            missed.append(Missed(sid, at, reason))
        elif kind == "due":
            fires.append(Fire(sid, at, Trigger.SCHEDULED, now, now + give_up_after))
        else:
            act_at = now + plan.min_spacing * waiting
            waiting += 1
            fire = Fire(sid, at, Trigger.CATCHUP, act_at, act_at + give_up_after)
            fire.pace = plan.min_spacing
            if act_at > now:
                fire.placeholder = True
                missed.append(Missed(sid, at, pending_reason(Trigger.CATCHUP), Trigger.CATCHUP))
            fires.append(fire)
    if plan.unlisted is not None:
        span = plan.unlisted
        missed.append(
            Missed(
                sid,
                span.through,
                f"{OUTSIDE_WINDOW_SUMMARY}: summary of every slot after "
                f"{span.after.isoformat()} through {span.through.isoformat()}, "
                "not listed one by one",
            )
        )
    return SlotPlan(tuple(missed), tuple(fires), plan.handled_through, handled)
