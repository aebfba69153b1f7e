"""The overlap decision of one fire: start it now, start an older buffered fire of its
schedule first, or not start it now.

The overlap policy is applied when the schedule has runs in flight (PENDING, WAITING
or RUNNING; looked up only when the policy is not ``allow_all``, for a whole batch of
fires at once when it can be): ``skip`` records the slot MISSED (``overlap_skip``),
``buffer_one``/``buffer_all`` keep it until the run in flight ends
(``overlap_buffer_full`` when ``buffer_one``'s one place is taken), ``cancel_other``
names the runs in flight to complete as CANCELLED (their workers' next heartbeat is
refused, so the jobs stop) before it starts. A skip only for runs lost in the queue
waits instead (``loss_waits``). The policy table itself is
``cronwave_core.domain.overlap.decide_overlap``; this module applies it to the fire loop's
queues. Not thread-safe: the fire loop owns it.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from cron_planner.buffers import Buffers
from cron_planner.fire_stats import FireStats
from cron_planner.loss_waits import LossWaits
from cron_planner.missed_rows import MissedRows
from cron_planner.ports import Ledger
from cron_planner.schedule_index import ScheduleIndex
from cron_planner.work import PENDING_BUFFER, Fire, InFlight, WorkQueue
from cronwave_core.domain.overlap import OverlapAction, RunView, decide_overlap, in_flight
from cronwave_core.domain.spec import Overlap, ScheduleDef
from cronwave_core.errors import CronwaveError

log = logging.getLogger("cronwave.planner.fire")


class OverlapGate:
    def __init__(
        self,
        index: ScheduleIndex,
        ledger: Ledger,
        work: WorkQueue,
        buffers: Buffers,
        rows: MissedRows,
        losses: LossWaits,
        stats: FireStats,
        *,
        give_up_after: timedelta,
    ) -> None:
        self._index = index
        self._ledger = ledger
        self._work = work
        self._buffers = buffers
        self._rows = rows
        self._losses = losses
        self._stats = stats
        self._give_up_after = give_up_after

    def allows_all(self, fire: Fire) -> bool:
        """True when the fire starts whatever runs its schedule has in flight."""
        schedule = self._index.get(fire.schedule_id)
        policy = fire.overlap or (schedule.policy.overlap if schedule else None)
        return policy == Overlap.ALLOW_ALL

    def in_flight_of(self, schedule_ids: list[str]) -> dict[str, list[InFlight]] | None:
        """The runs in flight of the schedules whose overlap policy looks at them, in
        one look-up for the whole batch; None when the store did not answer (each
        fire then asks on its own, and is retried if that fails too)."""
        if not schedule_ids:
            return {}
        try:
            return self._ledger.in_flight_many(schedule_ids)
        except CronwaveError as exc:
            log.warning("runs in flight not known for %d schedules: %s", len(schedule_ids), exc)
            return None

    def decide(
        self,
        fire: Fire,
        schedule: ScheduleDef,
        token: int,
        now: datetime,
        known: dict[str, list[InFlight]] | None = None,
    ) -> tuple[Fire | None, list[InFlight]]:
        """Apply the overlap policy: the fire to start now (``fire``, or an older
        buffered one that goes first) and the runs to cancel before; ``None`` when
        nothing starts now (skipped or buffered). ``known``: the runs in flight,
        looked up for the batch the fire is in."""
        policy = fire.overlap or schedule.policy.overlap
        if policy == Overlap.ALLOW_ALL:
            return fire, []
        sid = fire.schedule_id
        if self._losses.behind_held(fire, now):
            self._losses.wait(fire, now)
            return None, []
        flying = known[sid] if known is not None and sid in known else self._ledger.in_flight(sid)
        # The fire's own run (a repeated start) does not overlap with itself, nor does
        # one recorded beyond any planner's reach (``ScheduleIndex.reach``).
        reach = self._index.reach(now)
        runs = [r for r in flying if r.fire_time != fire.fire_time and r.fire_time <= reach]
        views = [RunView(r.run_id, r.state) for r in runs]
        if fire.fire_time > now and in_flight(views):
            # Acted on ahead of its fire time (the dispatch lead): the run in flight
            # may end before the instant, so the policy decides at the instant.
            fire.act_at = fire.fire_time
            self._work.push(fire)
            return None, []
        if self._buffers.count(sid) and not in_flight(views):
            head = self._buffers.pop_oldest(sid)
            assert head is not None
            head.act_at, head.deadline = now, now + self._give_up_after
            fire.act_at = now
            self._work.push(fire)  # decided again once the older one has started
            return head, []
        self._losses.deciding(fire)
        decision = decide_overlap(policy, views, buffered=self._buffers.count(sid))
        if decision.action == OverlapAction.START:
            self._losses.starting(fire, now)
            return fire, []
        if decision.action == OverlapAction.SKIP:
            if not self._losses.hold(fire, runs, now):
                self._rows.queue([fire.missed(decision.reason)], token, now)
            return None, []
        if decision.action == OverlapAction.BUFFER:
            self._rows.queue([fire.missed(PENDING_BUFFER)], token, now)
            fire.placeholder = True
            self._buffers.add(fire)
            self._stats.buffered += 1
            return None, []
        wanted = set(decision.cancel)
        return fire, [r for r in runs if r.run_id in wanted]
