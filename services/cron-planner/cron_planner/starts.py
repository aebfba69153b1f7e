"""Starting the fires that are due: planning each due slot, collecting the due fires
into batches, and one call to the dispatcher per batch.

Contract of one start (one schedule's nominal fire time):
- Only the leader starts, with its fencing token; the idempotency key
  ``<schedule_id>@<fire time ISO>`` makes a repeated start of the same slot (by a
  retry, by the next leader, by a backfill) return the run that exists instead of a
  second one.
- The overlap policy is applied first when the schedule has runs in flight
  (``overlap_gate``); the runs ``cancel_other`` names are cancelled before the start.
- A start refused for its fencing token (``StaleFencingToken``,
  ``UnissuedFencingToken``): another planner leads; this one steps down.
- A transient failure (the dispatcher away or slow): retried with a backoff that
  doubles up to a bound, until the fire is ``give_up_after`` (60 s) past the instant
  it was due to start. Then, or when the start is refused for good, the slot is
  recorded MISSED with the reason, and the schedule moves on.
- A fire of a schedule paused meanwhile is recorded MISSED (``paused``).
No slot is dropped without a run or a MISSED record (or an error log line when even
recording fails for good). Not thread-safe: the fire loop owns it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from opentelemetry import trace

from cron_planner.backoff import Backoff
from cron_planner.buffers import Buffers
from cron_planner.clock import Clock
from cron_planner.fire_stats import FireStats
from cron_planner.metrics import SLOTS_FIRED
from cron_planner.missed_rows import MissedRows
from cron_planner.overlap_gate import OverlapGate
from cron_planner.planning import plan_slot
from cron_planner.ports import Dispatch, Leadership, Ledger, Start
from cron_planner.schedule_index import ScheduleIndex, Slot
from cron_planner.work import PAUSED, Fire, InFlight, Trigger, WorkQueue, iso, pending_reason
from cronwave_core.domain.overlap import RunView, in_flight
from cronwave_core.domain.spec import ScheduleDef
from cronwave_core.errors import (
    CronwaveError,
    SchedulePaused,
    StaleFencingToken,
    Unavailable,
    UnissuedFencingToken,
)
from cronwave_core.telemetry import fanout
from cronwave_core.telemetry.run_span import new_run_context
from cronwave_core.telemetry.spans import hop_span
from cronwave_core.telemetry.vocabulary import (
    ATTR_CACHE_HIT,
    ATTR_CACHE_NAME,
    ATTR_HOP,
    ATTR_KIND,
    ATTR_RUN_ID,
    ATTR_TRIGGER,
    Hop,
    Kind,
    run_attributes,
)

log = logging.getLogger("cronwave.planner.fire")

ROOT_SPAN = "cron-planner fire"
BATCH_SPAN = "cron-planner dispatch"
#: At most this many fires go to the dispatcher in one call ...
BATCH_LIMIT = 500
#: ... and the loop collects due fires for at most this long before it sends them.
BATCH_COLLECT = timedelta(milliseconds=100)
#: A fire dispatched ahead of its fire time (the dispatch lead) joins the batch of an
#: earlier one when it is due within this long, or within ``EARLY_SHARE`` of its lead
#: if that is less: a step sends the fires of the next moment together, one call per
#: moment rather than one per fire, and a body still starts at its fire time. A fire
#: with no lead (or one already past its fire time) waits for its own instant.
COLLECT_AHEAD = timedelta(milliseconds=100)
EARLY_SHARE = 0.2


@dataclass
class _Prepared:
    """A fire ready for the dispatcher, with its open fire span (beneath its run span)."""

    fire: Fire
    root: trace.Span
    now: datetime


def _stale_token(error: CronwaveError) -> bool:
    """Whether a start was refused for this planner's fencing token (older than the
    newest, or never issued): another planner leads. The refusal keeps its kind across
    the wire, a batch item's too (``cronwave.v1.ItemError.kind``)."""
    return isinstance(error, StaleFencingToken | UnissuedFencingToken)


class Starter:
    def __init__(
        self,
        index: ScheduleIndex,
        clock: Clock,
        leadership: Leadership,
        dispatch: Dispatch,
        ledger: Ledger,
        work: WorkQueue,
        buffers: Buffers,
        rows: MissedRows,
        gate: OverlapGate,
        stats: FireStats,
        *,
        give_up_after: timedelta,
        backoff: Backoff,
        buffer_poll: timedelta,
        buffer_poll_limit: int,
        holds: Callable[[str], bool] = lambda _schedule_id: True,
    ) -> None:
        """``holds``: whether a schedule is this planner's to fire now (sharded
        planning: its shard is held, not only loaded)."""
        self._index = index
        self._holds = holds
        self._clock = clock
        self._leadership = leadership
        self._dispatch = dispatch
        self._ledger = ledger
        self._work = work
        self._buffers = buffers
        self._rows = rows
        self._gate = gate
        self._stats = stats
        self._give_up_after = give_up_after
        self._backoff = backoff
        self._buffer_poll = buffer_poll
        self._buffer_poll_limit = buffer_poll_limit
        self._next_poll: datetime | None = None
        self._paced: dict[tuple[str, Trigger], datetime] = {}
        self._tracer = trace.get_tracer("cronwave.planner")

    @property
    def next_poll(self) -> datetime | None:
        """When the buffered fires are polled next (None: not polled yet)."""
        return self._next_poll

    def forget_paces(self) -> None:
        """Forget when the paced fires last started (a term begins)."""
        self._paced.clear()

    # due slots ---------------------------------------------------------------------
    def _handle_slot(self, slot: Slot, token: int, now: datetime) -> None:
        position = self._index.position(slot)
        if position is None:
            return  # a change superseded it; the loop looks again
        if not self._holds(slot.schedule_id):
            # Loaded for a shard this planner campaigns for but does not hold yet: its
            # holder plans the slot. The term that wins the shard re-bases the schedule
            # from the store's newest fire time, so nothing is decided here.
            self._index.advance(slot, max(now, slot.fire_time))
            return
        try:
            plan = plan_slot(
                position.schedule,
                position.after,
                position.fires,
                slot.fire_time,
                now,
                give_up_after=self._give_up_after,
            )
        except CronwaveError as exc:
            log.error("schedule '%s' cannot be planned (%s); skipped", slot.schedule_id, exc)
            self._index.advance(slot, max(now, slot.fire_time))
            return
        self._rows.queue(plan.missed, token, now)
        for fire in plan.fires:
            self._work.push(fire)
        self._index.advance(slot, plan.through, plan.handled)

    # starts -----------------------------------------------------------------------------
    def start_due(self, token: int, now: datetime) -> None:
        """Plan every due slot and start every due fire, in order of their instants,
        the fires in one call to the dispatcher (at most ``BATCH_LIMIT``, collected for
        at most ``BATCH_COLLECT``; the rest are the next step's). Due: its ``act_at``
        has come, or, for a fire dispatched ahead, comes within ``COLLECT_AHEAD``. A
        second fire of a schedule whose overlap policy looks at its runs in flight
        waits for the next call, so that the first is recorded when the policy looks."""
        fires: list[Fire] = []
        checked: list[str] = []  # schedules whose overlap policy looks at runs in flight
        seen: set[str] = set()
        later: list[Fire] = []
        stop_at = time.monotonic() + BATCH_COLLECT.total_seconds()
        for _ in range(BATCH_LIMIT * 4):
            fire, slot = self._work.peek(), self._index.peek()
            fire_at = fire.act_at if fire is not None and _due(fire, now) else None
            slot_at = slot.act_at if slot is not None and _due(slot, now) else None
            if fire is not None and fire_at is not None and (slot_at is None or fire_at <= slot_at):
                self._work.pop()
                if self._paced_later(fire, token, now):
                    continue
                allows_all = self._gate.allows_all(fire)
                if fire.schedule_id in seen and not allows_all:
                    later.append(fire)
                    continue
                seen.add(fire.schedule_id)
                fires.append(fire)
                if not allows_all:
                    checked.append(fire.schedule_id)
                if len(fires) >= BATCH_LIMIT:
                    break
            elif slot is not None and slot_at is not None:
                self._handle_slot(slot, token, now)
            else:
                break
            if time.monotonic() >= stop_at:
                break
        for fire in later:
            self._work.push(fire)
        known = self._gate.in_flight_of(checked)
        batch = [p for p in (self._prepare(f, token, known=known) for f in fires) if p]
        self._dispatch_batch(batch, token)

    def _paced_later(self, fire: Fire, token: int, now: datetime) -> bool:
        """Put a paced fire back when the last of its kind started less than its pace
        ago (the loop got to them late: they must not start as a burst)."""
        if not fire.pace:
            return False
        key = (fire.schedule_id, fire.trigger)
        last = self._paced.get(key)
        if last is not None and now < last + fire.pace:
            fire.act_at = last + fire.pace
            self._defer(fire, token, now)
            return True
        self._paced[key] = now
        return False

    def _start(self, fire: Fire, token: int, *, checked: bool = False) -> None:
        """Start ``fire`` alone (``checked``: its overlap policy already let it start)."""
        prepared = self._prepare(fire, token, checked=checked)
        if prepared is not None:
            self._dispatch_batch([prepared], token)

    def _prepare(
        self,
        fire: Fire,
        token: int,
        *,
        checked: bool = False,
        known: dict[str, list[InFlight]] | None = None,
    ) -> _Prepared | None:
        """Everything before the dispatcher is asked: the fire's trace (the run's, its
        fire span left open until the dispatcher answered), the lease, the schedule's state and
        its overlap policy. None when the fire is not to start now (it was recorded,
        deferred or left to the next term)."""
        now = self._clock.now()
        schedule = self._index.get(fire.schedule_id)
        if schedule is None:
            log.info("%s@%s not started: schedule gone", fire.schedule_id, iso(fire.fire_time))
            return None
        if schedule.paused:
            self._rows.queue([fire.missed(PAUSED)], token, now)
            return None
        attrs = {
            **run_attributes("", fire.schedule_id, iso(fire.fire_time)),
            ATTR_HOP: Hop.PLAN,
            ATTR_KIND: Kind.APP,
        }
        # The fire decision begins the run's trace: its spans sit beneath the run
        # span, which the run's durable completion records (``run_span``). Whether the
        # run is traced is decided here, once, from the schedule's share (head
        # sampling); the trace id carries the decision to every other process.
        decided = time.time_ns()
        context = new_run_context(decided, schedule.trace_sample)
        root = self._tracer.start_span(
            ROOT_SPAN, context=context, attributes=attrs, start_time=decided
        )
        prepared = self._prepare_in(root, fire, schedule, token, now, checked=checked, known=known)
        if prepared is None:
            root.end()
        return prepared

    def _prepare_in(
        self,
        root: trace.Span,
        fire: Fire,
        schedule: ScheduleDef,
        token: int,
        now: datetime,
        *,
        checked: bool,
        known: dict[str, list[InFlight]] | None,
    ) -> _Prepared | None:
        attrs = run_attributes("", fire.schedule_id, iso(fire.fire_time))
        with trace.use_span(root, end_on_exit=False):
            root.set_attribute(ATTR_TRIGGER, fire.trigger.value)
            # The lease as the elector holds it in the process: a local look-up.
            lease = {**attrs, ATTR_CACHE_NAME: "lease", ATTR_CACHE_HIT: "local"}
            with hop_span("leader token", Hop.LEADER, Kind.CACHE, attributes=lease):
                token = self._leadership.token()
            if not token:
                root.set_attribute("cronwave.planner.outcome", "not leader; left to the next term")
                return None
            cancel: list[InFlight] = []
            chosen: Fire | None = fire
            # One span for the planning of this fire: the clock, and the overlap check
            # when the batch did not decide it for every fire at once.
            try:
                with hop_span("plan due fire", Hop.PLAN, Kind.APP, attributes=attrs) as plan:
                    now = self._clock.now()
                    if not checked:
                        plan.set_attribute("cronwave.planner.overlap_checked", True)
                        chosen, cancel = self._gate.decide(fire, schedule, token, now, known)
            except Unavailable as exc:
                self._retry_or_give_up(fire, token, exc, now)
                return None
            except CronwaveError as exc:
                self._give_up(fire, token, f"overlap check failed: {exc.message}", now)
                return None
            if chosen is None:
                root.set_attribute("cronwave.planner.outcome", "overlap: not started now")
                return None
            if chosen is not fire:
                fire = chosen
                root.set_attributes(run_attributes("", fire.schedule_id, iso(fire.fire_time)))
            for run in cancel:
                if not self._cancel(run, fire, token, now):
                    return None
        return _Prepared(fire, root, now)

    def _dispatch_batch(self, batch: Sequence[_Prepared], token: int) -> None:
        """One call to the dispatcher for ``batch``; every fire's outcome as its own."""
        if not batch:
            return
        items = []
        for p in batch:
            context = p.root.get_span_context()
            attrs = run_attributes("", p.fire.schedule_id, iso(p.fire.fire_time))
            items.append(fanout.Item(context.trace_id, context.span_id, attrs))
        starts = [
            Start(p.fire.schedule_id, p.fire.fire_time, p.fire.trigger, item.traceparent())
            for p, item in zip(batch, items, strict=True)
        ]
        try:
            with fanout.batch_span(BATCH_SPAN, items, {ATTR_HOP: Hop.PLAN, ATTR_KIND: Kind.APP}):
                results = self._dispatch.start_runs(starts, token)
        except CronwaveError as exc:
            results = [exc] * len(batch)
        stepped_down = False
        for p, result in zip(batch, results, strict=True):
            if isinstance(result, str):
                self._started(p, result)
            elif _stale_token(result):
                p.root.set_attribute("cronwave.planner.outcome", "stale token; stepped down")
                if not stepped_down:
                    stepped_down = True
                    # Said in the log so an operator can see that fencing held a stale
                    # leader off (the slot is the new leader's to fire).
                    log.warning(
                        "start of %s@%s refused: fencing token %d is stale (%s)",
                        p.fire.schedule_id,
                        iso(p.fire.fire_time),
                        token,
                        result.message,
                    )
                    self._stats.step_downs += 1
                    self._leadership.step_down(result.message)
            elif isinstance(result, Unavailable):
                self._retry_or_give_up(p.fire, token, result, p.now)
            elif _paused(result):
                p.root.set_attribute("cronwave.planner.outcome", "paused")
                self._rows.queue([p.fire.missed(PAUSED)], token, p.now)
            else:
                self._give_up(
                    p.fire, token, f"dispatcher refused the start: {result.message}", p.now
                )
            p.root.end()

    def _started(self, p: _Prepared, run_id: str) -> None:
        p.root.set_attribute(ATTR_RUN_ID, run_id)
        self._stats.fired += 1
        SLOTS_FIRED.labels(p.fire.trigger.value).inc()
        if p.fire.trigger is Trigger.CATCHUP:
            self._stats.catchups += 1
        elif p.fire.trigger is Trigger.BACKFILL:
            self._stats.backfills += 1

    def _cancel(self, run: InFlight, fire: Fire, token: int, now: datetime) -> bool:
        """Cancel ``run`` for ``fire`` (overlap ``cancel_other``); False when the fire
        was deferred or given up instead."""
        reason = (
            f"cancelled by overlap policy cancel_other: the run at {iso(fire.fire_time)} "
            "replaces it"
        )
        try:
            if self._ledger.cancel_run(run, reason):
                self._stats.cancelled += 1
                log.info("run %s of '%s' cancelled: %s", run.run_id, fire.schedule_id, reason)
        except Unavailable as exc:
            self._retry_or_give_up(fire, token, exc, now)
            return False
        except CronwaveError as exc:
            log.warning("run %s could not be cancelled (%s); starting anyway", run.run_id, exc)
        return True

    def poll_buffers(self, token: int, now: datetime) -> None:
        """Start the oldest buffered fire of each polled schedule with nothing in flight."""
        self._next_poll = now + self._buffer_poll
        for sid in self._buffers.next_round(self._buffer_poll_limit):
            schedule = self._index.get(sid)
            if schedule is None:
                self._buffers.take(sid)
                continue
            if schedule.paused:
                self._rows.queue([f.missed(PAUSED) for f in self._buffers.take(sid)], token, now)
                continue
            try:
                runs = self._ledger.in_flight(sid)
            except CronwaveError as exc:
                log.warning("buffered fires wait: in-flight runs unknown (%s)", exc)
                return
            if in_flight([RunView(r.run_id, r.state) for r in runs]):
                continue
            fire = self._buffers.pop_oldest(sid)
            if fire is not None:
                fire.act_at, fire.deadline = now, now + self._give_up_after
                self._start(fire, token, checked=True)

    def _retry_or_give_up(self, fire: Fire, token: int, exc: CronwaveError, now: datetime) -> None:
        self._stats.last_error = exc.message
        if now >= fire.deadline:
            reason = (
                f"not started within {self._give_up_after.total_seconds():.0f}s of its "
                f"fire time after {fire.attempts + 1} attempts; last error: {exc.message}"
            )
            self._give_up(fire, token, reason, now)
            return
        self._stats.retries += 1
        fire.act_at = min(now + self._backoff.delay(fire.attempts), fire.deadline)
        fire.attempts += 1
        log.warning(
            "start of %s@%s failed (%s); retrying at %s",
            fire.schedule_id,
            iso(fire.fire_time),
            exc.message,
            iso(fire.act_at),
        )
        self._defer(fire, token, now)

    def _defer(self, fire: Fire, token: int, now: datetime) -> None:
        """Queue ``fire`` again for later. A fire put off for the first time gets a
        placeholder in the store: a later slot of its schedule may be recorded before it
        starts, and the next term (here, or a planner that takes the shard over) plans
        from the store's newest fire time, so without the placeholder the slot would
        be neither run nor recorded."""
        if not fire.placeholder:
            fire.placeholder = True
            self._rows.queue([fire.missed(pending_reason(fire.trigger))], token, now)
        self._work.push(fire)

    def _give_up(self, fire: Fire, token: int, reason: str, now: datetime) -> None:
        log.error("slot %s@%s is MISSED: %s", fire.schedule_id, iso(fire.fire_time), reason)
        self._stats.last_error = reason
        self._rows.queue([fire.missed(reason)], token, now)


def _due(item: Fire | Slot, now: datetime) -> bool:
    """Whether ``item`` goes in the batch sent ``now``: its ``act_at`` has come, or
    comes within the collection window its lead allows (``COLLECT_AHEAD``)."""
    ahead = (item.fire_time - item.act_at) * EARLY_SHARE
    return item.act_at <= now + max(timedelta(0), min(COLLECT_AHEAD, ahead))


def _paused(error: CronwaveError) -> bool:
    """Whether the store refused a start because its schedule is paused (before this
    planner heard of the pause over its watch): the slot is MISSED, reason paused."""
    return isinstance(error, SchedulePaused)
