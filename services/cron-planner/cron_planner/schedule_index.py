"""Every schedule the planner knows, and which one needs attention next.

Each active schedule has exactly one pending *slot*: its next occurrence -- a fire time,
or a slot the DST policy skipped (so it is recorded as MISSED when it comes, not
dropped) -- and the instant the planner acts on it: the fire time delayed by the
schedule's deterministic jitter (a skipped slot: its own instant). The nominal fire
time stays the run's identity; only the moment of the start moves.

Slots sit in a heap ordered by (act at, schedule id) whose entries know their place
(``slot_heap``): a change moves its own schedule's entry, so the heap holds one entry
per pending slot and nothing stale. Finding the next due slot is O(1), moving one
O(log n), and a change re-computes only its own schedule. Each change also bumps the
schedule's generation, so a ``Slot`` handed out before it is known to be superseded.

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

Crowded instants: a run costs the whole pipeline a few milliseconds of CPU before its
body can start (recorded, queued, claimed, set up), so ten thousand schedules due at one
instant need far more than the lead to be ready at it. Each slot is therefore counted
among the slots pending at its fire time (``_Crowds``): an instant's first
``lead x crowd_rate`` slots are acted on at the lead, every further one at ``lead_max``
(``CRONWAVE_DISPATCH_LEAD_MAX``), so a crowd's runs are ready, claimed and held by their
workers, before the set-up of its first ones begins. The bound of half the gap since
the previous slot still holds.

``fires`` counts the fire times handled, for ``max_runs`` on a schedule without
``start_at`` (with ``start_at`` the calendar stops by itself). Paused, deleted and
finished schedules have no slot. Thread-safe: one lock guards everything.

Parked slots: when a planner gains a shard, where its schedules stand is the store's
word, read in pages. Until its page is read, a schedule is *parked* (``park``): its
slot is never handed out, so it cannot fire from a guess; ``rebase`` puts it back.
Parking a shard's tens of thousands of schedules only marks them: a parked entry
leaves the heap when it comes to the top (``_PARKED``), so the cost is paid for the
few due before their page is read. Changes meanwhile re-compute a parked slot without
handing it out.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from operator import attrgetter

from cron_planner.slot_heap import SlotHeap
from cronwave_core.domain.calendar import occurrences_after, runs_left
from cronwave_core.domain.jitter import jittered
from cronwave_core.domain.runs import CLOCK_SKEW, PLACEHOLDER_AHEAD
from cronwave_core.domain.spec import ScheduleDef, Spec


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


#: Slots a second of the lead is taken to make ready: an instant's first
#: ``lead x CROWD_RATE`` are acted on at the lead, the rest at the most (see the module
#: docstring; a 2-core suite records and claims 800-900 runs a second alone).
CROWD_RATE = 250

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: ``_Entry.position`` of a parked slot taken out of the heap (see the module
#: docstring); -1: no slot.
_PARKED = -2
_US = timedelta(microseconds=1)
#: The fields of a schedule, which an entry holds itself (see ``_Entry``).
_SCHEDULE = tuple(f.name for f in fields(ScheduleDef))


def _micros(instant: datetime) -> int:
    return (instant - _EPOCH) // _US


def _instant(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


class _Crowds:
    """How many slots acted on ahead are pending at each fire instant (microseconds
    since the epoch), so that a slot's lead can grow with its instant's crowd."""

    __slots__ = ("_cells",)

    def __init__(self) -> None:
        # instant -> [the instant (one int object every entry of it shares), count]
        self._cells: dict[int, list[int]] = {}

    def add(self, instant: int) -> tuple[int, int]:
        """Count one more slot at ``instant``: (the shared instant, the slot's rank)."""
        cell = self._cells.get(instant)
        if cell is None:
            cell = self._cells[instant] = [instant, 0]
        cell[1] += 1
        return cell[0], cell[1] - 1

    def drop(self, instant: int) -> None:
        cell = self._cells.get(instant)
        if cell is not None:
            cell[1] -= 1
            if cell[1] <= 0:
                del self._cells[instant]


class _Entry:
    """One schedule, where it stands and its place in the heap.

    A planner holds hundreds of thousands of entries, so every object an entry owns
    costs megabytes; an entry therefore holds its ``ScheduleDef``'s fields itself (the
    spec, policy, job type and payload are shared with other schedules) and builds a
    ``ScheduleDef`` when asked for one, and keeps its pending slot as integers,
    microseconds since the Unix epoch: when it is acted on (``act_at``), and how long
    before its fire time that is (``ahead``; usually the dispatch lead, one int
    object shared by every entry). ``Slot`` gives them as aware datetimes.
    """

    __slots__ = (
        *_SCHEDULE,
        "act_at",
        "ahead",
        "crowd",
        "fires",
        "generation",
        "handled",
        "position",
        "shard",
        "since",
    )
    schedule_id: str
    spec: Spec
    paused: bool
    revision: int

    def __init__(self, schedule: ScheduleDef, since: datetime, shard: int) -> None:
        self.hold(schedule)
        self.since = since
        self.shard = shard
        self.handled: datetime | None = None
        self.fires = 0
        self.act_at = 0  # microseconds since the epoch (while it has a slot)
        self.ahead = 0
        self.crowd = 0  # the instant its slot is counted at in ``_Crowds`` (0: none)
        self.generation = 0
        self.position = -1  # in the heap; -1: no pending slot; _PARKED: parked

    def hold(self, schedule: ScheduleDef) -> None:
        for name in _SCHEDULE:
            setattr(self, name, getattr(schedule, name))

    @property
    def schedule(self) -> ScheduleDef:
        return ScheduleDef(*(getattr(self, name) for name in _SCHEDULE))

    @property
    def after(self) -> datetime:
        return self.since if self.handled is None else max(self.since, self.handled)

    @property
    def slot(self) -> Slot | None:
        if self.position < 0:
            return None
        fire_time = _instant(self.act_at + self.ahead)
        return Slot(self.schedule_id, fire_time, _instant(self.act_at), self.generation)

    def before(self, other: _Entry) -> bool:
        """Whether this slot is acted on first: by its instant, then by schedule id."""
        if self.act_at != other.act_at:
            return self.act_at < other.act_at
        return self.schedule_id < other.schedule_id


class Loading:
    """Schedules gathered to replace an index's (``ScheduleIndex.load``). Each is held
    as an entry, its first slot computed, as it arrives: outside the index's lock, so
    the fire loop goes on while a listing's pages come in, and with nothing else kept
    of it, so a listing leaves no copy of every schedule behind."""

    def __init__(self, index: ScheduleIndex) -> None:
        self._index = index
        self.entries: dict[str, _Entry] = {}
        self.crowds = _Crowds()  # the index's once loaded

    def add(self, schedule: ScheduleDef, since: datetime) -> None:
        index = self._index
        entry = _Entry(schedule, since, index._shard(schedule.schedule_id))
        index._reschedule(entry, place=False, crowds=self.crowds)
        self.entries[schedule.schedule_id] = entry


class ScheduleIndex:
    def __init__(
        self,
        lead: timedelta = timedelta(0),
        shard: Callable[[str], int] = lambda _sid: 0,
        *,
        lead_max: timedelta | None = None,
        crowd_rate: int = CROWD_RATE,
    ) -> None:
        """``shard``: the shard of a schedule id (sharded planning), kept per schedule
        so that ``ids_in`` need not hash every id again. ``lead_max`` (None: ``lead``)
        and ``crowd_rate``: how far ahead a crowded instant's slots are acted on (see
        the module docstring)."""
        if lead < timedelta(0):
            raise ValueError("the dispatch lead must not be negative")
        if crowd_rate < 1:
            raise ValueError("the crowd rate must be positive")
        self.lead = lead
        self.lead_max = max(lead, lead_max or lead)
        self._crowd_at = int(lead.total_seconds() * crowd_rate)  # slots at the lead
        self._crowds = _Crowds()
        self._lead_micros = lead // _US
        self._shard = shard
        self._lock = threading.RLock()
        self._entries: dict[str, _Entry] = {}
        self._heap: SlotHeap[_Entry] = SlotHeap()  # the entries with a slot
        self._parked: set[str] = set()  # ids waiting for the store's word (``park``)
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
            return [entry.schedule_id for entry in self._entries_in(shards)]

    def _entries_in(self, shards: Collection[int]) -> list[_Entry]:
        """The entries of ``shards``, by the shard each keeps (the caller holds the lock)."""
        return [entry for entry in self._entries.values() if entry.shard in shards]

    def slot(self, schedule_id: str) -> Slot | None:
        with self._lock:
            entry = self._entries.get(schedule_id)
            if entry is None or schedule_id in self._parked:
                return None
            return entry.slot

    def peek(self) -> Slot | None:
        """The slot to act on first (smallest ``act_at``), or None when nothing is
        scheduled."""
        with self._lock:
            first = self._heap.first()
            while first is not None and first.schedule_id in self._parked:
                self._heap.remove(first)
                first.position = _PARKED
                first = self._heap.first()
            return first.slot if first is not None else None

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
        """Heap entries: one per pending slot."""
        with self._lock:
            return len(self._heap)

    # changing ----------------------------------------------------------------
    def loading(self) -> Loading:
        """Schedules to replace this index's with (``load``), gathered one by one."""
        return Loading(self)

    def load(
        self, schedules: Loading | Iterable[tuple[ScheduleDef, datetime]], revision: int
    ) -> None:
        """Replace everything with ``schedules`` (each with its ``since``), as read at
        store ``revision``. What was handled of schedules that stay is remembered."""
        if not isinstance(schedules, Loading):
            gathered = self.loading()
            for schedule, since in schedules:
                gathered.add(schedule, since)
            schedules = gathered
        with self._lock:
            old = self._entries
            self._crowds = schedules.crowds
            for schedule_id, entry in schedules.entries.items():
                previous = old.get(schedule_id)
                if previous is None:
                    continue
                entry.generation = previous.generation + 1
                if previous.handled is not None or previous.fires:
                    entry.handled, entry.fires = previous.handled, previous.fires
                    self._reschedule(entry, place=False)
            self._entries = schedules.entries
            # Placed all at once: heapifying is linear, pushing each one is not.
            self._heap.rebuild([e for e in self._entries.values() if e.position == 0])
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
            if schedule.revision and schedule.revision <= entry.revision:
                return False
            same_calendar = schedule.spec == entry.spec and schedule.paused == entry.paused
            entry.hold(schedule)
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
            self._parked.discard(schedule_id)
            if entry is None:
                return False
            if entry.crowd:
                self._crowds.drop(entry.crowd)
            if entry.position >= 0:
                self._heap.remove(entry)
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

    def park(self, shards: Collection[int]) -> list[str]:
        """Hand out no slot of the schedules of ``shards`` until ``rebase`` takes the
        store's word for them (see the module docstring). Returns their ids: the ones
        with a slot by their instant, soonest first, then the rest. One pass over the
        index, the set of parked ids filled at once: it is what a takeover does first
        (about 0.03 s for 50,000 of 500,000 schedules)."""
        with self._lock:
            picked = self._entries_in(shards)
            self._parked.update([entry.schedule_id for entry in picked])
            slotted = [entry for entry in picked if entry.position != -1]
            slotted.sort(key=attrgetter("act_at"))  # ties in listing order
            rest = [entry.schedule_id for entry in picked if entry.position == -1]
            return [entry.schedule_id for entry in slotted] + rest

    def reach(self, now: datetime) -> datetime:
        """The latest fire time a planner on this clock (``now``) records a row for: a
        run at the largest lead, a placeholder (``PLACEHOLDER_AHEAD``), give or take
        the skew between planners. A run further ahead was recorded by a planner whose
        clock ran ahead (or a stolen certificate): a term does not count it as handled
        (it would mark every slot before it so, and none would fire) and no overlap
        policy waits for it; it stands PENDING for its own slot."""
        return now + max(self.lead_max, PLACEHOLDER_AHEAD) + CLOCK_SKEW

    def rebase(
        self, latest: Mapping[str, tuple[datetime, int]], only: Iterable[str] | None = None
    ) -> None:
        """Take the store's word for what was handled (a new term begins): for every
        schedule (or each of ``only`` the index holds; the rest stand as they are),
        ``latest[id]`` is (newest handled fire time, fire times handled); a schedule
        missing from it has handled nothing since its creation. A parked slot is put
        back."""
        with self._lock:
            if only is None:
                entries: Iterable[tuple[str, _Entry]] = self._entries.items()
            else:
                found = ((sid, self._entries.get(sid)) for sid in only)
                entries = [(sid, e) for sid, e in found if e is not None]
            for schedule_id, entry in entries:
                self._parked.discard(schedule_id)
                taken_out = entry.position == _PARKED
                if taken_out:
                    entry.position = -1
                newest, fires = latest.get(schedule_id, (None, 0))
                if entry.handled == newest and entry.fires == fires:
                    # Its slot follows from these: computing it again is costly.
                    if taken_out:
                        self._heap.push(entry)
                    continue
                entry.handled, entry.fires = newest, fires
                self._reschedule(entry)
            if only is None:
                self._parked.clear()

    # internals -----------------------------------------------------------------
    def _current(self, slot: Slot) -> _Entry | None:
        entry = self._entries.get(slot.schedule_id)
        if entry is None or entry.position < 0 or entry.generation != slot.generation:
            return None
        if slot.schedule_id in self._parked:
            return None
        return entry

    def _reschedule(self, entry: _Entry, place: bool = True, crowds: _Crowds | None = None) -> None:
        """Give ``entry`` its next slot from where it stands, or none. ``place``: put it
        in its place in the heap (else the caller rebuilds the heap; an entry given a
        slot is marked by position 0). ``crowds``: where its slot is counted (None: the
        index's)."""
        crowds = self._crowds if crowds is None else crowds
        spec = entry.spec
        entry.generation += 1
        if entry.crowd:
            crowds.drop(entry.crowd)
            entry.crowd = 0
        occurrence = None
        if not entry.paused and not (
            # it has had all its runs
            spec.max_runs and spec.start_at is None and runs_left(spec, entry.fires) == 0
        ):
            occurrence = next(occurrences_after(spec, entry.after), None)
        if occurrence is None:
            if entry.position >= 0 and place:
                self._heap.remove(entry)
            entry.position = -1
            return
        at = occurrence.at
        act_at = at if occurrence.skipped else jittered(entry.schedule_id, at, spec.jitter)
        if self.lead and not occurrence.skipped and not spec.jitter:
            lead = self.lead
            if self.lead_max > lead:
                entry.crowd, rank = crowds.add(_micros(at))
                if rank >= self._crowd_at:
                    lead = self.lead_max
            act_at = at - min(lead, (at - entry.after) / 2)
        entry.act_at = _micros(act_at)
        ahead = _micros(at) - entry.act_at
        entry.ahead = self._lead_micros if ahead == self._lead_micros else ahead
        if entry.position == _PARKED:
            return
        if not place:
            entry.position = 0
        elif entry.position >= 0:
            self._heap.moved(entry)
        elif entry.schedule_id in self._parked:
            entry.position = _PARKED
        else:
            self._heap.push(entry)
