"""Every schedule the planner knows, and which one needs attention next.

Each active schedule has exactly one pending *slot*: its next occurrence -- a fire time,
or a slot the DST policy skipped (so it is recorded as MISSED when it comes, not
dropped) -- and the instant the planner acts on it: the fire time delayed by the
schedule's deterministic jitter (a skipped slot: its own instant). The nominal fire
time stays the run's identity; only the moment of the start moves.

Slots sit in a heap keyed by (act at, schedule id, generation); a change bumps the
schedule's generation instead of searching the heap, and stale heap entries are dropped
when they surface (lazy invalidation). Finding the next due slot is therefore
O(log n) amortised, and a change re-computes only its own schedule.

Where a schedule's next occurrence is searched from: strictly after
``max(since, handled)``, where
- ``since`` is the instant its current version took effect (created, edited or
  resumed), so nothing from before a change or from a pause is planned: slots during
  a pause are not runs and are not caught up;
- ``handled`` is the instant through which every occurrence was handled (started,
  queued, or recorded MISSED): by this planner, or -- at the start of a term -- by
  whoever led before, as the store's newest fire time says.
The fire loop plans every occurrence in ``(max(since, handled), now]`` at once
(catch-up, ``cronwave_core.domain.catchup``), so the index never needs to look further back.

Dispatch lead: fire times are known in advance, so the slot of a schedule without
jitter is acted on ``lead`` before its fire time (``CRONWAVE_DISPATCH_LEAD``), but never
more than half the gap since the schedule's previous slot, so a frequent schedule's
previous run has had time to end before the overlap policy looks. The run is recorded,
queued and claimed ahead, carries its nominal fire time, and its worker starts the body
at that instant; fencing is checked when it is recorded, as for any start. A jittered
schedule is acted on at its jittered instant (a worker would start a run dispatched
early at the nominal time, undoing the jitter).

``fires`` counts the fire times handled, for ``max_runs`` on a schedule without
``start_at`` (with ``start_at`` the calendar stops by itself). Paused, deleted and
finished schedules have no slot. Thread-safe: one lock guards everything.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from cronwave_core.domain.calendar import occurrences_after, runs_left
from cronwave_core.domain.jitter import jittered
from cronwave_core.domain.spec import ScheduleDef


@dataclass(frozen=True, slots=True)
class Slot:
    """The next occurrence of a schedule."""

    schedule_id: str
    fire_time: datetime  # nominal instant (a DST-skipped slot: as calendar_dst reports it)
    act_at: datetime  # when the planner handles it
    generation: int = 0


@dataclass(frozen=True, slots=True)
class Position:
    """What the fire loop needs to plan a due slot: every occurrence at or before
    ``after`` is handled, and ``fires`` fire times were."""

    schedule: ScheduleDef
    after: datetime
    fires: int


@dataclass(slots=True)
class _Entry:
    """One schedule. Its pending slot is kept as two instants, not as a ``Slot``
    object (built when asked for): 100,000 schedules, one object fewer each."""

    schedule: ScheduleDef
    since: datetime
    shard: int = 0
    handled: datetime | None = None
    fires: int = 0
    fire_time: datetime | None = None  # None: no pending slot
    act_at: datetime | None = None
    generation: int = 0

    @property
    def after(self) -> datetime:
        return self.since if self.handled is None else max(self.since, self.handled)

    @property
    def slot(self) -> Slot | None:
        if self.fire_time is None or self.act_at is None:
            return None
        return Slot(self.schedule.schedule_id, self.fire_time, self.act_at, self.generation)


class ScheduleIndex:
    def __init__(
        self, lead: timedelta = timedelta(0), shard: Callable[[str], int] = lambda _sid: 0
    ) -> None:
        """``shard``: the shard of a schedule id (sharded planning), kept per schedule
        so that ``ids_in`` need not hash every id again."""
        if lead < timedelta(0):
            raise ValueError("the dispatch lead must not be negative")
        self.lead = lead
        self._shard = shard
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

    def ids_in(self, shards: Collection[int]) -> list[str]:
        """The ids of the schedules of ``shards``."""
        with self._lock:
            return [sid for sid, e in self._entries.items() if e.shard in shards]

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
                if entry and entry.fire_time is not None and entry.generation == generation:
                    return entry.slot
                heapq.heappop(self._heap)  # superseded by a later change
            return None

    def due(self, now: datetime) -> Slot | None:
        """The first slot whose ``act_at`` has come, if any."""
        slot = self.peek()
        return slot if slot is not None and slot.act_at <= now else None

    def position(self, slot: Slot) -> Position | None:
        """Where ``slot``'s schedule stands; None when a change superseded the slot."""
        with self._lock:
            entry = self._current(slot)
            if entry is None:
                return None
            return Position(entry.schedule, entry.after, entry.fires)

    def heap_size(self) -> int:
        """Heap entries including stale ones (kept bounded by compaction)."""
        with self._lock:
            return len(self._heap)

    # changing ----------------------------------------------------------------
    def load(self, schedules: Iterable[tuple[ScheduleDef, datetime]], revision: int) -> None:
        """Replace everything with ``schedules`` (each with its ``since``), as read at
        store ``revision``. What was handled of schedules that stay is remembered."""
        with self._lock:
            old = self._entries
            self._entries = {}
            self._heap = []
            self._live = 0
            for schedule, since in schedules:
                previous = old.get(schedule.schedule_id)
                entry = _Entry(schedule, since, self._shard(schedule.schedule_id))
                if previous is not None:
                    entry.handled, entry.fires = previous.handled, previous.fires
                    entry.generation = previous.generation + 1
                self._entries[schedule.schedule_id] = entry
                self._reschedule(entry)
            self._revision = revision

    def apply(self, schedule: ScheduleDef, since: datetime) -> bool:
        """Apply one change of a schedule (created, edited, paused or resumed).

        Returns False, changing nothing, for a change no newer than the one already
        applied. An edit that leaves the calendar and the pause alone keeps the
        pending slot; any other change re-computes that schedule's next slot only,
        from the change on.
        """
        with self._lock:
            self._revision = max(self._revision, schedule.revision)
            entry = self._entries.get(schedule.schedule_id)
            if entry is None:
                entry = _Entry(schedule, since, self._shard(schedule.schedule_id))
                self._entries[schedule.schedule_id] = entry
                self._reschedule(entry)
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
            self._reschedule(entry)
            return True

    def remove(self, schedule_id: str, revision: int = 0) -> bool:
        """Forget a deleted schedule; its stale heap entries drop out lazily."""
        with self._lock:
            self._revision = max(self._revision, revision)
            entry = self._entries.pop(schedule_id, None)
            if entry is None:
                return False
            if entry.fire_time is not None:
                self._live -= 1
            self._compact_if_sparse()
            return True

    def advance(self, slot: Slot, through: datetime, fires: int = 0) -> Slot | None:
        """Every occurrence of ``slot``'s schedule up to ``through`` is handled, ``fires``
        of them fire times: the schedule moves on to its next occurrence after that. A
        slot a change has superseded in the meantime is ignored; the current one
        stands."""
        with self._lock:
            entry = self._current(slot)
            if entry is None:
                return self.slot(slot.schedule_id)
            entry.handled = through if entry.handled is None else max(entry.handled, through)
            entry.fires += fires
            self._reschedule(entry)
            return entry.slot

    def rebase(
        self, latest: Mapping[str, tuple[datetime, int]], only: Iterable[str] | None = None
    ) -> None:
        """Take the store's word for what was handled (a new term begins): for every
        schedule (or each of ``only`` the index holds; the rest stand as they are),
        ``latest[id]`` is (newest handled fire time, fire times handled); a schedule
        missing from it has handled nothing since its creation."""
        with self._lock:
            if only is None:
                entries: Iterable[tuple[str, _Entry]] = self._entries.items()
            else:
                found = ((sid, self._entries.get(sid)) for sid in only)
                entries = [(sid, e) for sid, e in found if e is not None]
            for schedule_id, entry in entries:
                newest, fires = latest.get(schedule_id, (None, 0))
                if entry.handled == newest and entry.fires == fires:
                    continue  # its slot follows from these: computing it again is costly
                entry.handled, entry.fires = newest, fires
                self._reschedule(entry)

    # internals -----------------------------------------------------------------
    def _current(self, slot: Slot) -> _Entry | None:
        entry = self._entries.get(slot.schedule_id)
        if entry is None or entry.fire_time is None or entry.generation != slot.generation:
            return None
        return entry

    def _reschedule(self, entry: _Entry) -> None:
        schedule = entry.schedule
        spec = schedule.spec
        if schedule.paused:
            self._set_slot(entry, None)
            return
        if spec.max_runs and spec.start_at is None and runs_left(spec, entry.fires) == 0:
            self._set_slot(entry, None)  # it has had all its runs
            return
        occurrence = next(occurrences_after(spec, entry.after), None)
        if occurrence is None:
            self._set_slot(entry, None)
            return
        at = occurrence.at
        act_at = at if occurrence.skipped else jittered(schedule.schedule_id, at, spec.jitter)
        if self.lead and not occurrence.skipped and not spec.jitter:
            act_at = at - min(self.lead, (at - entry.after) / 2)
        self._set_slot(entry, (at, act_at))

    def _set_slot(self, entry: _Entry, times: tuple[datetime, datetime] | None) -> None:
        """Give ``entry`` the slot (fire time, act at) under a new generation, or none."""
        entry.generation += 1
        self._live += (times is not None) - (entry.fire_time is not None)
        if times is None:
            entry.fire_time = entry.act_at = None
            self._compact_if_sparse()
            return
        entry.fire_time, entry.act_at = times
        heapq.heappush(self._heap, (times[1], entry.schedule.schedule_id, entry.generation))
        self._compact_if_sparse()

    def _compact_if_sparse(self) -> None:
        # Stale entries only leave the heap when they surface; rebuild once they
        # outnumber the live ones so memory stays proportional to the schedules.
        if len(self._heap) <= 2 * self._live + 64:
            return
        self._heap = [
            (e.act_at, e.schedule.schedule_id, e.generation)
            for e in self._entries.values()
            if e.act_at is not None
        ]
        heapq.heapify(self._heap)
