"""The fire loop: wait for the earliest due slot, and start its run while leading.

Contract of one slot (one schedule's nominal fire time):
- Only the leader fires, with its fencing token; the idempotency key
  ``<schedule_id>@<fire time ISO>`` makes a repeated start of the same slot (by a
  retry or by the next leader) return the run that exists instead of a second one.
- Not leading: the slot is kept, not fired and not dropped.
- A start refused for its fencing token (FAILED_PRECONDITION on ``fencing_token``):
  another planner leads; this one steps down and keeps the slot.
- A transient failure (the dispatcher away or slow): retried with a backoff that
  doubles up to a bound, until the slot is ``give_up_after`` (60 s) stale. Then, or
  when the dispatcher refuses the start for good, the slot is recorded as MISSED with
  the reason through the store (retried until the store takes it) and the schedule
  moves on. No slot is dropped without a run or a MISSED record, or an error log line
  when even that is impossible.

Where a new leader starts: when this planner begins a term with a new fencing token,
every schedule is re-based to fire strictly after the newest fire time the store holds
a scheduled run for (fired or missed), and never before ``now - 60 s`` nor before the
schedule's last change. So slots that came due within the last minute while nobody
led are fired (at most once each, thanks to the idempotency key); older ones are
neither fired nor recorded. A planner whose token comes back unchanged was never
succeeded, and keeps its own place.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from opentelemetry import context as otel_context
from opentelemetry import trace

from cron_planner.clock import Clock
from cron_planner.schedule_index import ScheduleIndex, Slot
from cronwave_core.errors import CronwaveError, FailedPrecondition, Unavailable
from cronwave_core.telemetry import ATTR_RUN_ID, hop_span, run_attributes

log = logging.getLogger("cronwave.planner.fire")

ROOT_SPAN = "cron-planner fire"


class Leadership(Protocol):
    def token(self) -> int:
        """The fencing token while this planner leads, else 0."""
        ...

    def step_down(self, reason: str) -> None: ...


class Dispatch(Protocol):
    def start_run(self, schedule_id: str, fire_time: datetime, token: int) -> str:
        """Start the run of a slot; its run id. Raises ``Unavailable`` (retry),
        ``FailedPrecondition`` or another ``CronwaveError`` (refused)."""
        ...


class Ledger(Protocol):
    def record_missed(
        self, schedule_id: str, fire_time: datetime, reason: str, token: int
    ) -> None: ...

    def newest_fire_time(self, schedule_id: str) -> datetime | None: ...


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
class _Missed:
    schedule_id: str
    fire_time: datetime
    reason: str
    token: int
    next_try: datetime
    attempts: int = 0


@dataclass
class FireStats:
    fired: int = 0
    duplicates: int = 0
    missed: int = 0
    retries: int = 0
    step_downs: int = 0
    terms: int = 0
    last_error: str = ""


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
    ) -> None:
        self._index = index
        self._clock = clock
        self._leadership = leadership
        self._dispatch = dispatch
        self._ledger = ledger
        self._give_up_after = give_up_after
        self._backoff = backoff or Backoff()
        self._idle = idle
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._term = 0  # the token whose term the index was re-based for
        self._missed: list[_Missed] = []
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

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self.step()
            except Exception:  # the loop must outlive any one bad slot
                log.exception("fire loop iteration failed")
                self._stopping.wait(self._idle.total_seconds())

    # one iteration -------------------------------------------------------------
    def step(self) -> None:
        """Do what is due now, then wait until something else is (or a wake)."""
        self._wake.clear()
        now = self._clock.now()
        token = self._leadership.token()
        self._flush_missed(now)
        until = now + self._idle
        if self._missed:
            until = min(until, min(m.next_try for m in self._missed))
        if not token:
            self._term = 0
            self._clock.wait(self._wake, until)
            return
        if token != self._term:
            self._begin_term(token, now)
            return
        slot = self._index.peek()
        if slot is not None and slot.act_at <= now:
            self._fire(slot)
            return
        if slot is not None:
            until = min(until, slot.act_at)
        self._clock.wait(self._wake, until)

    def _begin_term(self, token: int, now: datetime) -> None:
        self.stats.terms += 1
        for schedule_id in self._index.ids():
            try:
                newest = self._ledger.newest_fire_time(schedule_id)
            except CronwaveError as exc:
                # The idempotency key still keeps a re-fired slot from running twice.
                log.warning("no newest run of '%s' from the store (%s)", schedule_id, exc)
                newest = None
            self._index.rebase(schedule_id, newest, now)
        self._term = token
        log.info("term of token %d: %d schedules re-based", token, len(self._index))

    def _fire(self, slot: Slot) -> None:
        attrs = run_attributes("", slot.schedule_id, iso(slot.fire_time))
        with self._tracer.start_as_current_span(
            ROOT_SPAN, context=otel_context.Context(), attributes=attrs
        ) as root:
            with hop_span("plan due fire", hop="plan", kind="app", attributes=attrs):
                now = self._clock.now()
                current = self._index.due(now)
            if current != slot:
                return  # a change superseded it; the loop looks again
            with hop_span("leader token", hop="leader", kind="app", attributes=attrs):
                token = self._leadership.token()
            if not token:
                root.set_attribute("cronwave.planner.outcome", "not leader; slot kept")
                return
            try:
                run_id = self._dispatch.start_run(slot.schedule_id, slot.fire_time, token)
            except FailedPrecondition as exc:
                if exc.message.startswith("fencing_token"):
                    root.set_attribute("cronwave.planner.outcome", "stale token; stepped down")
                    self.stats.step_downs += 1
                    self._leadership.step_down(exc.message)
                    return
                self._give_up(slot, token, f"dispatcher refused the start: {exc.message}", now)
                return
            except Unavailable as exc:
                self._retry_or_give_up(slot, token, exc, now)
                return
            except CronwaveError as exc:
                self._give_up(slot, token, f"dispatcher refused the start: {exc.message}", now)
                return
            root.set_attribute(ATTR_RUN_ID, run_id)
            with hop_span("plan next fire", hop="plan", kind="app", attributes=attrs):
                self._index.advance(slot, now)
            self.stats.fired += 1

    def _retry_or_give_up(self, slot: Slot, token: int, exc: CronwaveError, now: datetime) -> None:
        self.stats.last_error = exc.message
        deadline = slot.fire_time + self._give_up_after
        if now >= deadline:
            reason = (
                f"not started within {self._give_up_after.total_seconds():.0f}s of its fire "
                f"time after {slot.attempts + 1} attempts; last error: {exc.message}"
            )
            self._give_up(slot, token, reason, now)
            return
        self.stats.retries += 1
        retry_at = min(now + self._backoff.delay(slot.attempts), deadline)
        log.warning(
            "start of %s@%s failed (%s); retrying at %s",
            slot.schedule_id,
            iso(slot.fire_time),
            exc.message,
            iso(retry_at),
        )
        self._index.defer(slot, retry_at)

    def _give_up(self, slot: Slot, token: int, reason: str, now: datetime) -> None:
        log.error("slot %s@%s is MISSED: %s", slot.schedule_id, iso(slot.fire_time), reason)
        self.stats.missed += 1
        self.stats.last_error = reason
        self._missed.append(_Missed(slot.schedule_id, slot.fire_time, reason, token, now))
        self._index.advance(slot, now)
        self._flush_missed(now)

    def _flush_missed(self, now: datetime) -> None:
        """Record every MISSED slot whose turn has come; keep the rest for later."""
        keep: list[_Missed] = []
        for m in self._missed:
            if m.next_try > now:
                keep.append(m)
                continue
            try:
                self._ledger.record_missed(m.schedule_id, m.fire_time, m.reason, m.token)
            except Unavailable as exc:
                m.attempts += 1
                m.next_try = now + self._backoff.delay(m.attempts)
                keep.append(m)
                log.warning("MISSED %s@%s not recorded yet (%s)", m.schedule_id, m.fire_time, exc)
            except CronwaveError as exc:
                log.error(
                    "MISSED %s@%s could not be recorded and is only in this log: %s (%s)",
                    m.schedule_id,
                    iso(m.fire_time),
                    m.reason,
                    exc,
                )
        self._missed = keep

    @property
    def pending_missed(self) -> int:
        return len(self._missed)
