"""Fires held back for runs lost in the queue: a run whose message went down with the
queue is not a reason to skip a slot.

When an overlap skip would be only for runs recorded before the queue last lost its
messages (``QueueLoss``: Redis restarted empty, flushed, failed over, lately; or it
does not answer now, so nothing rules a loss out) and not claimed by a worker before
then, the fire is decided again ``LOST_RECHECK`` later, until its deadline, instead of
being recorded MISSED: such a run had no message, and the dispatcher sends it again
(``dispatcher.sweeper``); its late run is the recovery, so the fire waits for it to
end, as it would have ended before the loss. A run a worker held through the loss
(claimed before it, or before a restarted server's start when the loss was noticed
later: ``QueueLoss.held_before``) is truly in flight and skips the slot as ever. The
schedule's later fires wait behind the held one, so its slots start in their order, and a fire
that finds in flight only runs started late this way waits for them too: the
recovery ends when a fire finds nothing in flight.

Safe for exactly-once: a fire still starts only when nothing of its schedule is in
flight. Treating the lost run as not in flight and starting beside it would not be:
its new message would start it next to the fire's run. Bounded: once the loss is older
than the queue's horizon, or the fire is past its deadline, the policy decides as
usual. Not thread-safe: the fire loop owns it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from cron_planner.fire_stats import FireStats
from cron_planner.ports import QueueLoss
from cron_planner.work import Fire, InFlight, WorkQueue

log = logging.getLogger("cronwave.planner.fire")

#: A fire held back for a run lost in the queue is decided again this much later.
LOST_RECHECK = timedelta(milliseconds=100)
#: Runs started late for a run lost in the queue are remembered this long, and at most
#: this many (the queue's loss horizon ends the recovery well before).
LATE_RUNS_KEPT = timedelta(minutes=1)
LATE_RUNS_MAX = 100_000


class LossWaits:
    def __init__(self, queue_loss: QueueLoss | None, work: WorkQueue, stats: FireStats) -> None:
        self._queue_loss = queue_loss
        self._work = work
        self._stats = stats
        # Per schedule, the (fire time, deadline) of its earliest fire held back for a
        # run lost in the queue: its later fires wait behind it.
        self._held: dict[str, tuple[datetime, datetime]] = {}
        # Slots whose runs this loop started late, held back for a run lost in the
        # queue, with when they started: the recovery goes on behind them.
        self._late: dict[tuple[str, datetime], datetime] = {}

    def clear(self) -> None:
        """Forget the held fires (a term begins or ends: its queued work goes)."""
        self._held.clear()

    def forget(self, schedule: Callable[[str], bool]) -> None:
        """Forget the held fires of the schedules ``schedule`` names (a term begins
        that drops or resumes their work)."""
        for sid in [sid for sid in self._held if schedule(sid)]:
            del self._held[sid]

    def behind_held(self, fire: Fire, now: datetime) -> bool:
        """True when an earlier fire of the schedule waits for a run lost in the queue
        and ``fire`` is not yet past its deadline: it is decided after that one, so
        that the slots start in their order."""
        sid = fire.schedule_id
        held = self._held.get(sid)
        if held is not None and now >= held[1]:
            del self._held[sid]  # past its deadline: it has been decided or given up
            held = None
        return held is not None and held[0] < fire.fire_time and now < fire.deadline

    def deciding(self, fire: Fire) -> None:
        """``fire`` is decided now: it is no longer the schedule's held fire (it may be
        held again by ``hold``)."""
        held = self._held.get(fire.schedule_id)
        if held is not None and held[0] == fire.fire_time:
            del self._held[fire.schedule_id]

    def starting(self, fire: Fire, now: datetime) -> None:
        """``fire`` starts: when it waited for a lost run, its run is part of the
        recovery (remembered ``LATE_RUNS_KEPT``, at most ``LATE_RUNS_MAX`` of them)."""
        if not fire.waited_for_loss:
            return
        self._late[(fire.schedule_id, fire.fire_time)] = now
        for key, at in list(self._late.items()):
            if now - at < LATE_RUNS_KEPT and len(self._late) <= LATE_RUNS_MAX:
                break
            del self._late[key]

    def hold(self, fire: Fire, runs: Sequence[InFlight], now: datetime) -> bool:
        """Hold ``fire`` back, to be decided again (True), when the skip its overlap
        policy decided is only for runs lost in the queue and it is before its
        deadline."""
        if now < fire.deadline and self._lost_in_queue(fire.schedule_id, runs, now):
            self._held[fire.schedule_id] = (fire.fire_time, fire.deadline)
            self.wait(fire, now)
            return True
        return False

    def wait(self, fire: Fire, now: datetime) -> None:
        """Decide ``fire`` again ``LOST_RECHECK`` later (by its deadline at the latest)."""
        fire.act_at = min(now + LOST_RECHECK, fire.deadline)
        fire.waited_for_loss = True
        self._work.push(fire)
        self._stats.lost_waits += 1

    def _lost_in_queue(self, schedule_id: str, runs: Sequence[InFlight], now: datetime) -> bool:
        """True when every run in flight is part of the recovery from the queue's last
        loss: recorded before it and not claimed before it (waiting for, or running on,
        a message the dispatcher sent again), or started late by this loop for such a
        run."""
        if self._queue_loss is None or not runs:
            return False
        lost_at = self._queue_loss.lost_at(now)
        if lost_at is None:
            return False
        held_by: datetime | None = None  # looked up for the first run claimed
        for run in runs:
            if (schedule_id, run.fire_time) in self._late:
                continue
            if run.recorded_at is None or run.recorded_at > lost_at:
                # its message went to the queue as it is now
                return _in_flight(schedule_id, run, "recorded after", lost_at, held_by)
            if run.state == "pending":
                continue
            held_by = held_by or self._queue_loss.held_before(now) or lost_at
            if run.started_at is None or run.started_at <= held_by:
                # its worker held it through the loss: truly in flight
                return _in_flight(schedule_id, run, "claimed before", lost_at, held_by)
        return True


def _in_flight(
    schedule_id: str, run: InFlight, why: str, lost_at: datetime, held_by: datetime | None
) -> bool:
    """False, saying why a run of ``schedule_id`` in flight within a queue loss's
    horizon is not taken for one lost in the queue (a skip follows: the line says why
    the recovery did not hold it)."""
    log.info(
        "%s: run %s (%s, recorded %s, claimed %s) not lost in the queue: %s the loss "
        "(lost at %s, held through it if claimed by %s)",
        schedule_id, run.run_id, run.state, _at(run.recorded_at), _at(run.started_at), why,
        _at(lost_at), _at(held_by),
    )  # fmt: skip
    return False


def _at(instant: datetime | None) -> str:
    return instant.isoformat(timespec="milliseconds") if instant else "-"
