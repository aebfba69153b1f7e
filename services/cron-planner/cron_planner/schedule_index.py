"""Every schedule the planner knows, and which one fires next.

Each active schedule has exactly one pending *slot*: its next nominal fire time and the
instant the planner should act on it (the fire time, or later while a failed start is
being retried). Slots sit in a heap keyed by (act at, schedule id, generation); a change
bumps the schedule's generation instead of searching the heap, and stale heap entries
are dropped when they surface (lazy invalidation). Finding the next due slot is
therefore O(log n) amortised, and a change re-computes only its own schedule.

Where a schedule's next fire is searched from: strictly after the latest of
- the instant its current version took effect (``since``: created, edited or resumed),
  so no slot from before a change or from a pause is fired;
- the newest slot already consumed here (fired or recorded missed), so none fires twice;
- ``now - lookback``, so a slot that came due shortly before the schedule reached the
  index (a late watch event, a planner restart) still fires, but no older backlog does.

Paused and deleted schedules have no slot. Thread-safe: one lock guards everything.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from cronwave_core.calendar import next_fire_time
from cronwave_core.spec import ScheduleDef

DEFAULT_LOOKBACK = timedelta(seconds=60)


@dataclass(frozen=True)
class Slot:
    """One pending fire of a schedule."""

    schedule_id: str
    fire_time: datetime  # nominal
    act_at: datetime  # when the planner should (re)try it
    attempts: int = 0  # failed start attempts so far
    generation: int = 0


@dataclass
class _Entry:
    schedule: ScheduleDef
    since: datetime
    consumed: datetime | None = None
    slot: Slot | None = None
    generation: int = 0


class ScheduleIndex:
    def __init__(self, lookback: timedelta = DEFAULT_LOOKBACK) -> None:
        self.lookback = lookback
        self._lock = threading.RLock()
        self._entries: dict[str, _Entry] = {}
        self._heap: list[tuple[datetime, str, int]] = []
        self._live = 0  # entries with a slot
        self._revision = 0

    # reading ---------------------------------------------------------------
    @property
    def revision(self) -> int:
        """The newest store revision applied (the watch resumes after it)."""
        with self._lock:
            return self._revision

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def get(self, schedule_id: str) -> ScheduleDef | None:
        with self._lock:
            entry = self._entries.get(schedule_id)
            return entry.schedule if entry else None

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._entries)

    def slot(self, schedule_id: str) -> Slot | None:
        with self._lock:
            entry = self._entries.get(schedule_id)
            return entry.slot if entry else None

    def peek(self) -> Slot | None:
        """The slot to act on first (smallest ``act_at``), or None when nothing is
        scheduled."""
        with self._lock:
            while self._heap:
                _, schedule_id, generation = self._heap[0]
                entry = self._entries.get(schedule_id)
                if entry and entry.slot and entry.generation == generation:
                    return entry.slot
                heapq.heappop(self._heap)  # superseded by a later change
            return None

    def due(self, now: datetime) -> Slot | None:
        """The first slot whose ``act_at`` has come, if any."""
        slot = self.peek()
        return slot if slot is not None and slot.act_at <= now else None

    def heap_size(self) -> int:
        """Heap entries including stale ones (kept bounded by compaction)."""
        with self._lock:
            return len(self._heap)

    # changing ----------------------------------------------------------------
    def load(
        self, schedules: Iterable[tuple[ScheduleDef, datetime]], revision: int, now: datetime
    ) -> None:
        """Replace everything with ``schedules`` (each with its ``since``), as read at
        store ``revision``. Consumed slots of schedules that stay are remembered."""
        with self._lock:
            old = self._entries
            self._entries = {}
            self._heap = []
            self._live = 0
            for schedule, since in schedules:
                previous = old.get(schedule.schedule_id)
                entry = _Entry(schedule, since, previous.consumed if previous else None)
                entry.generation = previous.generation + 1 if previous else 0
                self._entries[schedule.schedule_id] = entry
                self._reschedule(entry, now)
            self._revision = revision

    def apply(self, schedule: ScheduleDef, since: datetime, now: datetime) -> bool:
        """Apply one change of a schedule (created, edited, paused or resumed).

        Returns False, changing nothing, for a change no newer than the one already
        applied. An edit that leaves the calendar and the pause alone keeps the
        pending slot; any other change re-computes that schedule's next fire only.
        """
        with self._lock:
            self._revision = max(self._revision, schedule.revision)
            entry = self._entries.get(schedule.schedule_id)
            if entry is None:
                entry = _Entry(schedule, since)
                self._entries[schedule.schedule_id] = entry
                self._reschedule(entry, now)
                return True
            if schedule.revision and schedule.revision <= entry.schedule.revision:
                return False
            same_calendar = (
                schedule.spec == entry.schedule.spec and schedule.paused == entry.schedule.paused
            )
            entry.schedule = schedule
            if same_calendar:
                return True
            entry.since = since
            self._reschedule(entry, now)
            return True

    def remove(self, schedule_id: str, revision: int = 0) -> bool:
        """Forget a deleted schedule; its stale heap entries drop out lazily."""
        with self._lock:
            self._revision = max(self._revision, revision)
            entry = self._entries.pop(schedule_id, None)
            if entry is None:
                return False
            if entry.slot is not None:
                self._live -= 1
            self._compact_if_sparse()
            return True

    def advance(self, slot: Slot, now: datetime) -> Slot | None:
        """``slot`` is done (started, found started already, or recorded missed): the
        schedule moves on to its next fire after it. A slot a change has superseded
        in the meantime is ignored; the current one stands."""
        with self._lock:
            entry = self._current(slot)
            if entry is None:
                return self.slot(slot.schedule_id)
            entry.consumed = max(slot.fire_time, entry.consumed or slot.fire_time)
            self._reschedule(entry, now)
            return entry.slot

    def defer(self, slot: Slot, until: datetime) -> Slot | None:
        """Act on ``slot`` again at ``until`` (a retry), counting the failed attempt."""
        with self._lock:
            entry = self._current(slot)
            if entry is None:
                return self.slot(slot.schedule_id)
            self._set_slot(entry, replace(slot, act_at=until, attempts=slot.attempts + 1))
            return entry.slot

    def rebase(self, schedule_id: str, newest: datetime | None, now: datetime) -> Slot | None:
        """Re-compute a schedule's next fire knowing that ``newest`` is the latest fire
        time another planner already handled (used when this one becomes leader)."""
        with self._lock:
            entry = self._entries.get(schedule_id)
            if entry is None:
                return None
            if newest is not None:
                entry.consumed = max(newest, entry.consumed or newest)
            self._reschedule(entry, now)
            return entry.slot

    # internals -----------------------------------------------------------------
    def _current(self, slot: Slot) -> _Entry | None:
        entry = self._entries.get(slot.schedule_id)
        if entry is None or entry.slot is None or entry.generation != slot.generation:
            return None
        return entry

    def _reschedule(self, entry: _Entry, now: datetime) -> None:
        if entry.schedule.paused:
            self._set_slot(entry, None)
            return
        after = max(entry.since, now - self.lookback)
        if entry.consumed is not None:
            after = max(after, entry.consumed)
        fire = next_fire_time(entry.schedule.spec, after)
        if fire is None:
            self._set_slot(entry, None)
            return
        self._set_slot(entry, Slot(entry.schedule.schedule_id, fire, fire))

    def _set_slot(self, entry: _Entry, slot: Slot | None) -> None:
        entry.generation += 1
        self._live += (slot is not None) - (entry.slot is not None)
        if slot is None:
            entry.slot = None
            self._compact_if_sparse()
            return
        entry.slot = replace(slot, generation=entry.generation)
        heapq.heappush(self._heap, (slot.act_at, slot.schedule_id, entry.generation))
        self._compact_if_sparse()

    def _compact_if_sparse(self) -> None:
        # Stale entries only leave the heap when they surface; rebuild once they
        # outnumber the live ones so memory stays proportional to the schedules.
        if len(self._heap) <= 2 * self._live + 64:
            return
        self._heap = [
            (e.slot.act_at, e.slot.schedule_id, e.generation)
            for e in self._entries.values()
            if e.slot is not None
        ]
        heapq.heapify(self._heap)
