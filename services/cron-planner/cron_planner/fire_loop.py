"""The fire loop: while leading, handle every schedule's due slot, start the runs that
are due, and record every slot that is not run as MISSED with its reason.

A due slot is planned whole (``planning.plan_slot``): every occurrence since the
schedule was last handled gets one outcome -- due now, a paced catch-up run, or MISSED
with a reason (outside the catch-up window, skipped by the catch-up policy, skipped by
the DST policy). Runs to start go into a work queue by the instant they may start.

Contract of one start (one schedule's nominal fire time):
- Only the leader starts, with its fencing token; the idempotency key
  ``<schedule_id>@<fire time ISO>`` makes a repeated start of the same slot (by a
  retry, by the next leader, by a backfill) return the run that exists instead of a
  second one.
- The overlap policy is applied first when the schedule has runs in flight (PENDING or
  RUNNING; looked up only when the policy is not ``allow_all``): ``skip`` records the
  slot MISSED (``overlap_skip``), ``buffer_one``/``buffer_all`` keep it until the
  run in flight ends (``overlap_buffer_full`` when ``buffer_one``'s one place is
  taken), ``cancel_other`` completes the runs in flight as CANCELLED (their workers'
  next heartbeat is refused, so the jobs stop) and starts.
- A run whose message went down with the queue is not a reason to skip. When a skip
  would be only for runs recorded before the queue last lost its messages
  (``QueueLoss``: Redis restarted empty, flushed, failed over; lately) and not claimed
  by a worker before then, the fire is decided again ``LOST_RECHECK`` later, until its
  deadline, instead of being recorded MISSED: such a run had no message, and the
  dispatcher sends it again (``dispatcher.sweeper``); its late run is the recovery, so
  the fire waits for it to end, as it would have ended before the loss. A run a
  worker held through the loss (claimed before it) is truly in flight and skips the
  slot as ever. The schedule's later fires wait behind the held one, so its slots
  start in their order, and a fire that finds in flight only runs started late this
  way waits for them too: the recovery ends when a fire finds nothing in flight.
  Safe for exactly-once: a fire still starts only when nothing of its schedule is in
  flight. Treating the lost run as not in flight and starting beside it would not be:
  its new message would start it next to the fire's run. Bounded: once the loss is
  older than the queue's horizon, or the fire is past its deadline, the policy
  decides as usual.
- A start refused for its fencing token (FAILED_PRECONDITION on ``fencing_token``):
  another planner leads; this one steps down.
- A transient failure (the dispatcher away or slow): retried with a backoff that
  doubles up to a bound, until the fire is ``give_up_after`` (60 s) past the instant
  it was due to start. Then, or when the start is refused for good, the slot is
  recorded MISSED with the reason, and the schedule moves on.
- A fire of a schedule paused meanwhile is recorded MISSED (``paused``).
No slot is dropped without a run or a MISSED record (or an error log line when even
recording fails for good).

Terms. When this planner begins a term with a new fencing token it takes the store's
word for where every schedule stands -- the newest fire time handled and the count of
fire times (``LatestFireTimes``, one GROUP BY query per 10,000 schedules, never one
query per schedule) -- and re-plans from there: slots missed while nobody led are
caught up by each schedule's catch-up policy. It then resumes the placeholders of the
term before (see ``work``): paced catch-up runs, buffered fires and backfills that a
previous leader decided but did not start. When a term ends, queued work is left to
the next term: placeholders in the store stand for it, and due fires that were not
started are newer than anything recorded, so the next term plans them again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from opentelemetry import context as otel_context
from opentelemetry import trace

from cron_planner.buffers import Buffers
from cron_planner.clock import Clock
from cron_planner.planning import plan_slot
from cron_planner.schedule_index import ScheduleIndex, Slot
from cron_planner.work import (
    PAUSED,
    PENDING_BUFFER,
    PENDING_PREFIX,
    Fire,
    InFlight,
    Missed,
    Trigger,
    WorkQueue,
)
from cronwave_core.errors import CronwaveError, FailedPrecondition, Unavailable
from cronwave_core.overlap import OverlapAction, RunView, decide_overlap, in_flight
from cronwave_core.spec import Overlap, ScheduleDef
from cronwave_core.telemetry import fanout
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
#: A fire held back for a run lost in the queue is decided again this much later.
LOST_RECHECK = timedelta(milliseconds=100)
#: Runs started late for a run lost in the queue are remembered this long, and at most
#: this many (the queue's loss horizon ends the recovery well before).
LATE_RUNS_KEPT = timedelta(minutes=1)
LATE_RUNS_MAX = 100_000
# A buffered fire waits for the run in flight however long it takes.
_NO_DEADLINE = datetime(9000, 1, 1, tzinfo=UTC)


class Leadership(Protocol):
    def token(self) -> int:
        """The fencing token while this planner leads, else 0."""
        ...

    def step_down(self, reason: str) -> None: ...


@dataclass(frozen=True)
class Start:
    """One fire handed to the dispatcher; ``traceparent`` is its trace's context."""

    schedule_id: str
    fire_time: datetime
    trigger: Trigger = Trigger.SCHEDULED
    traceparent: str = ""


class Dispatch(Protocol):
    def start_runs(self, starts: Sequence[Start], token: int) -> list[str | CronwaveError]:
        """Start the runs of ``starts`` in one call: per start, its run id or the
        error it was refused with (``Unavailable``: retry; ``FailedPrecondition`` or
        another ``CronwaveError``: refused). Raises ``Unavailable`` when the call as
        a whole failed (nothing is known of any start) and another ``CronwaveError``
        when it was refused as a whole."""
        ...


class QueueLoss(Protocol):
    def lost_at(self, now: datetime) -> datetime | None:
        """When the queue last lost the messages it held, if lately; None when no
        recent loss is known (or the queue cannot be asked)."""
        ...


class Ledger(Protocol):
    """The store, as the fire loop needs it."""

    def record_missed(self, slots: Sequence[Missed], token: int) -> list[str]:
        """Record ``slots`` (MISSED rows and placeholders); the ids of schedules the
        store no longer has."""
        ...

    def latest_fire_times(self) -> dict[str, tuple[datetime, int]]: ...

    def pending_fires(self) -> list[Missed]: ...

    def in_flight(self, schedule_id: str) -> list[InFlight]: ...

    def in_flight_many(self, schedule_ids: Sequence[str]) -> dict[str, list[InFlight]]:
        """``in_flight`` of each of ``schedule_ids``, in one look-up."""
        ...

    def cancel_run(self, run: InFlight, reason: str) -> bool: ...


@dataclass(frozen=True)
class Backoff:
    """Delays between attempts: ``initial * multiplier**n``, at most ``maximum``."""

    initial: timedelta = timedelta(seconds=0.2)
    maximum: timedelta = timedelta(seconds=5)
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        if self.initial <= timedelta(0) or self.maximum < self.initial or self.multiplier < 1:
            raise ValueError("Backoff needs 0 < initial <= maximum and multiplier >= 1")

    def delay(self, attempts: int) -> timedelta:
        return min(self.maximum, self.initial * (self.multiplier ** min(attempts, 32)))


@dataclass
class _Record:
    """A row on its way to the store: retried while the store is away."""

    missed: Missed
    token: int
    next_try: datetime
    attempts: int = 0


@dataclass
class FireStats:
    fired: int = 0
    catchups: int = 0
    backfills: int = 0
    missed: int = 0
    retries: int = 0
    step_downs: int = 0
    terms: int = 0
    buffered: int = 0
    cancelled: int = 0
    resumed: int = 0
    lost_waits: int = 0  # overlap decisions put off for a run lost in the queue
    last_error: str = ""


@dataclass
class _Prepared:
    """A fire ready for the dispatcher, with its open root span."""

    fire: Fire
    root: trace.Span
    now: datetime


def _stale_token(error: CronwaveError) -> bool:
    return isinstance(error, FailedPrecondition) and error.message.startswith("fencing_token")


def iso(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat()


class FireLoop:
    def __init__(
        self,
        index: ScheduleIndex,
        clock: Clock,
        leadership: Leadership,
        dispatch: Dispatch,
        ledger: Ledger,
        *,
        give_up_after: timedelta = timedelta(seconds=60),
        backoff: Backoff | None = None,
        idle: timedelta = timedelta(seconds=1),
        buffer_poll: timedelta = timedelta(seconds=0.5),
        buffer_poll_limit: int = 100,
        resume_spacing: timedelta = timedelta(seconds=1),
        resume_backfill_rate: float = 10.0,
        queue_loss: QueueLoss | None = None,
    ) -> None:
        self._index = index
        self._queue_loss = queue_loss
        self._clock = clock
        self._leadership = leadership
        self._dispatch = dispatch
        self._ledger = ledger
        self._give_up_after = give_up_after
        self._backoff = backoff or Backoff()
        self._idle = idle
        self._buffer_poll = buffer_poll
        self._buffer_poll_limit = buffer_poll_limit
        self._resume_spacing = resume_spacing
        self._resume_backfill_gap = timedelta(seconds=1 / resume_backfill_rate)
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._term = 0  # the token whose term the index was re-based for
        self._term_attempts = 0
        self._term_retry_at: datetime | None = None
        self._records: list[_Record] = []
        self._work = WorkQueue()
        self._buffers = Buffers()
        # Per schedule, the (fire time, deadline) of its earliest fire held back for a
        # run lost in the queue: its later fires wait behind it.
        self._held: dict[str, tuple[datetime, datetime]] = {}
        # Slots whose runs this loop started late, held back for a run lost in the
        # queue, with when they started: the recovery goes on behind them.
        self._late: dict[tuple[str, datetime], datetime] = {}
        self._next_poll: datetime | None = None
        self._paced: dict[tuple[str, Trigger], datetime] = {}
        self._inbox: list[Fire] = []
        self._pauses: list[tuple[str, datetime]] = []
        self._inbox_lock = threading.Lock()
        self.stats = FireStats()
        self._tracer = trace.get_tracer("cronwave.planner")

    # lifecycle ---------------------------------------------------------------
    def wake(self) -> None:
        """Re-examine now: a schedule changed or leadership did."""
        self._wake.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="fire-loop", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout)

    def paused(self, schedule_id: str, at: datetime) -> None:
        """``schedule_id`` was paused at ``at`` (from any thread): its runs dispatched
        ahead of a fire time after ``at`` (the dispatch lead) are cancelled, so a pause
        stops what has not begun. Queued and buffered fires of a paused schedule are
        recorded MISSED ``paused`` when their turn comes."""
        with self._inbox_lock:
            self._pauses.append((schedule_id, at))
        self.wake()

    def submit(self, fires: Sequence[Fire]) -> None:
        """Queue ``fires`` (a backfill whose placeholders are recorded) from any
        thread; the loop takes them in while it leads."""
        with self._inbox_lock:
            self._inbox.extend(fires)
        self.wake()

    @property
    def term(self) -> int:
        """The fencing token of the term the loop works in (0: none)."""
        return self._term

    @property
    def pending_missed(self) -> int:
        return len(self._records)

    @property
    def queued(self) -> int:
        return len(self._work)

    @property
    def buffered(self) -> int:
        return len(self._buffers)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self.step()
            except Exception:  # the loop must outlive any one bad slot
                log.exception("fire loop iteration failed")
                self._stopping.wait(self._idle.total_seconds())

    # one iteration -------------------------------------------------------------
    def step(self) -> None:
        """Do one thing that is due now, or wait until something is (or a wake)."""
        self._wake.clear()
        now = self._clock.now()
        token = self._leadership.token()
        self._flush_records(now)
        until = now + self._idle
        if self._records:
            until = min(until, min(r.next_try for r in self._records))
        if not token:
            if self._term:
                self._end_term()
            self._term = 0
            with self._inbox_lock:
                self._pauses.clear()  # the leader's own feed tells it of the pause
            self._clock.wait(self._wake, until)
            return
        if token != self._term:
            if self._term_retry_at is not None and now < self._term_retry_at:
                self._clock.wait(self._wake, min(until, self._term_retry_at))
                return
            self._begin_term(token, now)
            return
        self._take_inbox()
        fire = self._work.peek()
        slot = self._index.peek()
        if (fire is not None and fire.act_at <= now) or (slot is not None and slot.act_at <= now):
            self._start_due(token, now)
            return
        if self._buffers and (self._next_poll is None or self._next_poll <= now):
            self._poll_buffers(token, now)
            return
        for instant in (
            fire.act_at if fire else None,
            slot.act_at if slot else None,
            self._next_poll if self._buffers else None,
        ):
            if instant is not None:
                until = min(until, instant)
        self._clock.wait(self._wake, until)

    # terms -----------------------------------------------------------------------
    def _begin_term(self, token: int, now: datetime) -> None:
        try:
            latest = self._ledger.latest_fire_times()
            pending = self._ledger.pending_fires()
        except CronwaveError as exc:
            # Not knowing where the schedules stand, the planner does not fire.
            self._term_retry_at = now + self._backoff.delay(self._term_attempts)
            self._term_attempts += 1
            log.warning("term of token %d waits: the store did not answer (%s)", token, exc)
            return
        self._term_attempts, self._term_retry_at = 0, None
        self._work.clear()
        self._buffers.clear()
        self._held.clear()
        self._paced.clear()
        with self._inbox_lock:
            self._inbox.clear()  # their placeholders are among `pending`
        self._index.rebase(latest)
        self._resume(pending, now)
        self._term = token
        self.stats.terms += 1
        log.info(
            "term of token %d: %d schedules re-based (%d with runs), %d placeholders resumed",
            token,
            len(self._index),
            len(latest),
            len(pending),
        )

    def _end_term(self) -> None:
        queued, buffered = self._work.clear(), self._buffers.clear()
        self._held.clear()
        with self._inbox_lock:
            self._inbox.clear()
        if queued or buffered:
            log.warning(
                "term of token %d ended with %d queued and %d buffered fires; the next "
                "term resumes their placeholders and re-plans the due ones",
                self._term,
                len(queued),
                len(buffered),
            )

    def _resume(self, pending: Sequence[Missed], now: datetime) -> None:
        """Queue the placeholders of an earlier term again, paced per schedule."""
        turns: dict[tuple[str, bool], int] = defaultdict(int)
        for p in sorted(pending, key=lambda m: (m.schedule_id, m.fire_time)):
            if not p.reason.startswith(PENDING_PREFIX):
                continue
            if p.reason == PENDING_BUFFER:
                fire = Fire(p.schedule_id, p.fire_time, p.trigger, now, _NO_DEADLINE)
                fire.placeholder = True
                self._buffers.add(fire)
                continue
            backfill = p.trigger is Trigger.BACKFILL
            gap = self._resume_backfill_gap if backfill else self._resume_spacing
            turn = turns[(p.schedule_id, backfill)]
            turns[(p.schedule_id, backfill)] = turn + 1
            act_at = now + gap * turn
            fire = Fire(p.schedule_id, p.fire_time, p.trigger, act_at, act_at + self._give_up_after)
            fire.placeholder, fire.pace = True, gap
            self._work.push(fire)
        self.stats.resumed += len(pending)

    def _paced_later(self, fire: Fire, now: datetime) -> bool:
        """Put a paced fire back when the last of its kind started less than its pace
        ago (the loop got to them late: they must not start as a burst)."""
        if not fire.pace:
            return False
        key = (fire.schedule_id, fire.trigger)
        last = self._paced.get(key)
        if last is not None and now < last + fire.pace:
            fire.act_at = last + fire.pace
            self._work.push(fire)
            return True
        self._paced[key] = now
        return False

    def _take_inbox(self) -> None:
        with self._inbox_lock:
            fires, self._inbox = self._inbox, []
            pauses, self._pauses = self._pauses, []
        for fire in fires:
            self._work.push(fire)
        for schedule_id, at in pauses:
            self._cancel_ahead(schedule_id, at)

    def _cancel_ahead(self, schedule_id: str, at: datetime) -> None:
        try:
            runs = [r for r in self._ledger.in_flight(schedule_id) if r.fire_time > at]
            for run in runs:
                reason = f"paused: the schedule was paused at {iso(at)}, before this fire time"
                if self._ledger.cancel_run(run, reason):
                    self.stats.cancelled += 1
        except CronwaveError as exc:
            log.warning("runs of paused '%s' dispatched ahead not cancelled: %s", schedule_id, exc)

    # due slots ---------------------------------------------------------------------
    def _handle_slot(self, slot: Slot, token: int, now: datetime) -> None:
        position = self._index.position(slot)
        if position is None:
            return  # a change superseded it; the loop looks again
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
        self._queue_records(plan.missed, token, now)
        for fire in plan.fires:
            self._work.push(fire)
        self._index.advance(slot, plan.through, plan.handled)

    # starts -----------------------------------------------------------------------------
    def _start_due(self, token: int, now: datetime) -> None:
        """Plan every due slot and start every due fire, in order of their instants,
        the fires in one call to the dispatcher (at most ``BATCH_LIMIT``, collected for
        at most ``BATCH_COLLECT``; the rest are the next step's). A second fire of a
        schedule whose overlap policy looks at its runs in flight waits for the next
        call, so that the first is recorded when the policy looks."""
        fires: list[Fire] = []
        checked: list[str] = []  # schedules whose overlap policy looks at runs in flight
        seen: set[str] = set()
        later: list[Fire] = []
        stop_at = time.monotonic() + BATCH_COLLECT.total_seconds()
        for _ in range(BATCH_LIMIT * 4):
            fire, slot = self._work.peek(), self._index.peek()
            fire_at = fire.act_at if fire is not None and fire.act_at <= now else None
            slot_at = slot.act_at if slot is not None and slot.act_at <= now else None
            if fire is not None and fire_at is not None and (slot_at is None or fire_at <= slot_at):
                self._work.pop()
                if self._paced_later(fire, now):
                    continue
                allows_all = self._allows_all(fire)
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
        known = self._in_flight_of(checked)
        batch = [p for p in (self._prepare(f, token, known=known) for f in fires) if p]
        self._dispatch_batch(batch, token)

    def _allows_all(self, fire: Fire) -> bool:
        """True when the fire starts whatever runs its schedule has in flight."""
        schedule = self._index.get(fire.schedule_id)
        policy = fire.overlap or (schedule.policy.overlap if schedule else None)
        return policy == Overlap.ALLOW_ALL

    def _in_flight_of(self, schedule_ids: list[str]) -> dict[str, list[InFlight]] | None:
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
        """Everything before the dispatcher is asked: the fire's trace (its root span,
        left open until the dispatcher answered), the lease, the schedule's state and
        its overlap policy. None when the fire is not to start now (it was recorded,
        deferred or left to the next term)."""
        now = self._clock.now()
        schedule = self._index.get(fire.schedule_id)
        if schedule is None:
            log.info("%s@%s not started: schedule gone", fire.schedule_id, iso(fire.fire_time))
            return None
        if schedule.paused:
            self._queue_records([fire.missed(PAUSED)], token, now)
            return None
        attrs = run_attributes("", fire.schedule_id, iso(fire.fire_time))
        root = self._tracer.start_span(ROOT_SPAN, context=otel_context.Context(), attributes=attrs)
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
            with hop_span("leader token", hop=Hop.LEADER, kind=Kind.CACHE, attributes=lease):
                token = self._leadership.token()
            if not token:
                root.set_attribute("cronwave.planner.outcome", "not leader; left to the next term")
                return None
            cancel: list[InFlight] = []
            chosen: Fire | None = fire
            # One span for the planning of this fire: the clock, and the overlap check
            # when the batch did not decide it for every fire at once.
            try:
                with hop_span(
                    "plan due fire", hop=Hop.PLAN, kind=Kind.APP, attributes=attrs
                ) as plan:
                    now = self._clock.now()
                    if not checked:
                        plan.set_attribute("cronwave.planner.overlap_checked", True)
                        chosen, cancel = self._overlap(fire, schedule, token, now, known)
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
                    self.stats.step_downs += 1
                    self._leadership.step_down(result.message)
            elif isinstance(result, Unavailable):
                self._retry_or_give_up(p.fire, token, result, p.now)
            else:
                self._give_up(
                    p.fire, token, f"dispatcher refused the start: {result.message}", p.now
                )
            p.root.end()

    def _started(self, p: _Prepared, run_id: str) -> None:
        p.root.set_attribute(ATTR_RUN_ID, run_id)
        self.stats.fired += 1
        if p.fire.trigger is Trigger.CATCHUP:
            self.stats.catchups += 1
        elif p.fire.trigger is Trigger.BACKFILL:
            self.stats.backfills += 1

    def _overlap(
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
        held = self._held.get(sid)
        if held is not None and now >= held[1]:
            del self._held[sid]  # past its deadline: it has been decided or given up
            held = None
        if held is not None and held[0] < fire.fire_time and now < fire.deadline:
            # An earlier fire of the schedule waits for a run lost in the queue: this
            # one is decided after it, so that the slots start in their order.
            return self._wait_for_loss(fire, now)
        flying = known[sid] if known is not None and sid in known else self._ledger.in_flight(sid)
        # The fire's own run (a repeated start) does not overlap with itself.
        runs = [r for r in flying if r.fire_time != fire.fire_time]
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
        if held is not None and held[0] == fire.fire_time:
            del self._held[sid]  # decided now (or held again just below)
        decision = decide_overlap(policy, views, buffered=self._buffers.count(sid))
        if decision.action == OverlapAction.START:
            if fire.waited_for_loss:
                self._late_run(sid, fire.fire_time, now)
            return fire, []
        if decision.action == OverlapAction.SKIP:
            if now < fire.deadline and self._lost_in_queue(sid, runs, now):
                self._held[sid] = (fire.fire_time, fire.deadline)
                return self._wait_for_loss(fire, now)
            self._queue_records([fire.missed(decision.reason)], token, now)
            return None, []
        if decision.action == OverlapAction.BUFFER:
            self._queue_records([fire.missed(PENDING_BUFFER)], token, now)
            fire.placeholder = True
            self._buffers.add(fire)
            self.stats.buffered += 1
            return None, []
        wanted = set(decision.cancel)
        return fire, [r for r in runs if r.run_id in wanted]

    def _wait_for_loss(self, fire: Fire, now: datetime) -> tuple[Fire | None, list[InFlight]]:
        """Decide ``fire`` again a moment later (see the module docstring)."""
        fire.act_at = min(now + LOST_RECHECK, fire.deadline)
        fire.waited_for_loss = True
        self._work.push(fire)
        self.stats.lost_waits += 1
        return None, []

    def _late_run(self, schedule_id: str, fire_time: datetime, now: datetime) -> None:
        """Remember that the run of this slot starts late, for a run lost in the queue
        (kept ``LATE_RUNS_KEPT``, at most ``LATE_RUNS_MAX`` of them)."""
        self._late[(schedule_id, fire_time)] = now
        for key, at in list(self._late.items()):
            if now - at < LATE_RUNS_KEPT and len(self._late) <= LATE_RUNS_MAX:
                break
            del self._late[key]

    def _lost_in_queue(self, schedule_id: str, runs: Sequence[InFlight], now: datetime) -> bool:
        """True when every run in flight is part of the recovery from the queue's last
        loss: recorded before it and not claimed before it (waiting for, or running on,
        a message the dispatcher sent again), or started late by this loop for such a
        run (see the module docstring)."""
        if self._queue_loss is None or not runs:
            return False
        lost_at = self._queue_loss.lost_at(now)
        if lost_at is None:
            return False
        for run in runs:
            if (schedule_id, run.fire_time) in self._late:
                continue
            if run.recorded_at is None or run.recorded_at > lost_at:
                return False  # its message went to the queue as it is now
            if run.state != "pending" and (run.started_at is None or run.started_at <= lost_at):
                return False  # its worker held it through the loss: truly in flight
        return True

    def _cancel(self, run: InFlight, fire: Fire, token: int, now: datetime) -> bool:
        """Cancel ``run`` for ``fire`` (overlap ``cancel_other``); False when the fire
        was deferred or given up instead."""
        reason = (
            f"cancelled by overlap policy cancel_other: the run at {iso(fire.fire_time)} "
            "replaces it"
        )
        try:
            if self._ledger.cancel_run(run, reason):
                self.stats.cancelled += 1
                log.info("run %s of '%s' cancelled: %s", run.run_id, fire.schedule_id, reason)
        except Unavailable as exc:
            self._retry_or_give_up(fire, token, exc, now)
            return False
        except CronwaveError as exc:
            log.warning("run %s could not be cancelled (%s); starting anyway", run.run_id, exc)
        return True

    def _poll_buffers(self, token: int, now: datetime) -> None:
        """Start the oldest buffered fire of each polled schedule with nothing in flight."""
        self._next_poll = now + self._buffer_poll
        for sid in self._buffers.next_round(self._buffer_poll_limit):
            schedule = self._index.get(sid)
            if schedule is None:
                self._buffers.take(sid)
                continue
            if schedule.paused:
                self._queue_records([f.missed(PAUSED) for f in self._buffers.take(sid)], token, now)
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
        self.stats.last_error = exc.message
        if now >= fire.deadline:
            reason = (
                f"not started within {self._give_up_after.total_seconds():.0f}s of its "
                f"fire time after {fire.attempts + 1} attempts; last error: {exc.message}"
            )
            self._give_up(fire, token, reason, now)
            return
        self.stats.retries += 1
        fire.act_at = min(now + self._backoff.delay(fire.attempts), fire.deadline)
        fire.attempts += 1
        log.warning(
            "start of %s@%s failed (%s); retrying at %s",
            fire.schedule_id,
            iso(fire.fire_time),
            exc.message,
            iso(fire.act_at),
        )
        self._work.push(fire)

    def _give_up(self, fire: Fire, token: int, reason: str, now: datetime) -> None:
        log.error("slot %s@%s is MISSED: %s", fire.schedule_id, iso(fire.fire_time), reason)
        self.stats.last_error = reason
        self._queue_records([fire.missed(reason)], token, now)

    # MISSED rows ---------------------------------------------------------------------
    def _queue_records(self, missed: Sequence[Missed], token: int, now: datetime) -> None:
        for m in missed:
            if not m.reason.startswith(PENDING_PREFIX):
                self.stats.missed += 1
            self._records.append(_Record(m, token, now))

    def _flush_records(self, now: datetime) -> None:
        """Send every row whose turn has come, a batch per token; keep the rest."""
        ready = [r for r in self._records if r.next_try <= now]
        if not ready:
            return
        keep = [r for r in self._records if r.next_try > now]
        by_token: dict[int, list[_Record]] = defaultdict(list)
        for r in ready:
            by_token[r.token].append(r)
        for token, batch in by_token.items():
            try:
                unknown = self._ledger.record_missed([r.missed for r in batch], token)
            except Unavailable as exc:
                for r in batch:
                    r.attempts += 1
                    r.next_try = now + self._backoff.delay(r.attempts)
                keep.extend(batch)
                log.warning("%d MISSED rows not recorded yet (%s)", len(batch), exc)
                continue
            except CronwaveError as exc:
                for r in batch:
                    log.error(
                        "MISSED %s@%s could not be recorded and is only in this log: %s (%s)",
                        r.missed.schedule_id,
                        iso(r.missed.fire_time),
                        r.missed.reason,
                        exc,
                    )
                continue
            if unknown:
                log.info("MISSED rows of deleted schedules left out: %s", ", ".join(unknown))
        self._records = keep
