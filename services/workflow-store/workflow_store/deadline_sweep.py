"""The deadline sweep: the workflow-store notices every slot that had not SUCCEEDED by
its schedule's deadline, records the breach, counts it and hands it to the notifiers.

Why the store: it holds the schedules, the runs and the MISSED slots, and it is the one
service every other needs, so a breach is noticed while the planner, the leader or
every worker is down (a slot nobody recorded is judged from the calendar itself). Each
store replica sweeps; the breach's unique row makes one of them its recorder.

Every ``CRONWAVE_DEADLINE_SWEEP_INTERVAL`` a tick (1) reads the schedules changed since
the last tick (by revision, at most ``PAGES_PER_TICK`` pages) into an index of those
with a deadline, and (2) judges, for at most ``SCHEDULES_PER_TICK`` schedules whose
next slot's deadline has passed, every slot from its cursor up to now minus its
deadline: the calendar's slots and the runs recorded there, at most
``SLOTS_PER_CHECK`` of them per schedule and tick (the rest wait for the next tick).
A breach is thus recorded within one interval plus one tick's work of its deadline.

Which slots are judged: a schedule's slots after the later of its cursor and its last
change (``updated_at``: a create, an update, a pause or a resume), from its current
calendar unless it is paused; the slots of its previous calendar (the one before the
last change this process saw, unless that one was paused) up to the change; and every
run a planner recorded (SCHEDULED, CATCHUP) in the range. A slot before a change of
which no run was recorded and that this process did not see under the earlier version
(it was not running) is not judged, and the runs recorded then are judged one deadline
after the change at the latest. A schedule with ``max_runs`` and no ``start_at`` is
judged by its recorded runs only (the planner alone counts its fires). Manual triggers
and backfills have no deadline.

The sweep is a component beside the store, not a part of it: it reaches the database
only through ``DeadlineRecords`` (``deadline_store.DeadlineStore`` in the store process) and
hands breaches on through ``BreachSink`` (``notifier.Notifications``).
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from cronwave_core.domain import calendar
from cronwave_core.domain.deadlines import Notifier, NotifyFormat
from cronwave_core.domain.spec import Spec
from cronwave_core.errors import CronwaveError
from cronwave_core.settings_deadlines import DeadlineSettings
from workflow_store import metrics
from workflow_store.deadline_records import BreachRecord, SlotCheck
from workflow_store.records import ScheduleRecord
from workflow_store.store_core import utc_now

log = logging.getLogger("cronwave.store.deadlines")

PAGES_PER_TICK = 20
PAGE = 500
SCHEDULES_PER_TICK = 200
SLOTS_PER_CHECK = 1_000


class DeadlineRecords(Protocol):
    """What the sweep reads and writes: schedule changes by revision, the schedules
    named, the judging cursors, and one transaction per schedule judged."""

    def deadline_changes(self, after: int, limit: int) -> list[tuple[str, int, bool]]: ...

    def schedules_named(self, schedule_ids: Sequence[str]) -> dict[str, ScheduleRecord]: ...

    def deadline_cursors(self, schedule_ids: Sequence[str]) -> dict[str, datetime]: ...

    def judge_slots(self, check: SlotCheck) -> tuple[list[BreachRecord], datetime]: ...


class BreachSink(Protocol):
    """Where a recorded breach goes to be notified; ``submit`` must not block."""

    def submit(self, breach: BreachRecord) -> None: ...


@dataclass
class _Watched:
    schedule_id: str
    spec: Spec
    deadline: timedelta
    notifiers: tuple[Notifier, ...]
    paused: bool
    version_at: datetime
    cursor: datetime
    previous: Spec | None = None
    next_due: datetime | None = None


class DeadlineSweep:
    def __init__(
        self,
        store: DeadlineRecords,
        notifications: BreachSink,
        settings: DeadlineSettings,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._store = store
        self._notifications = notifications
        self._interval = settings.sweep_interval
        fmt = NotifyFormat(settings.notify_format)
        self._global = tuple((url, fmt) for url in settings.notify_urls)
        self._clock = clock
        self._index: dict[str, _Watched] = {}
        self._revision = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="deadline-sweep", daemon=True)

    def start(self) -> None:
        if self._interval > timedelta(0):
            self._thread.start()

    def stop(self, wait: bool = True) -> None:
        """Stop after the tick in progress; ``wait``: for it, up to 5 s."""
        self._stop.set()
        if wait and self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self._interval.total_seconds()):
            try:
                self.tick()
            except CronwaveError as exc:  # the database did not answer: next tick
                log.warning("deadline sweep skipped a tick: %s", exc)
            except Exception:
                log.exception("deadline sweep tick failed")

    def tick(self) -> list[BreachRecord]:
        """One sweep; the breaches it recorded."""
        self._refresh()
        now = self._clock()
        due = sorted(
            (w for w in self._index.values() if w.next_due is not None and w.next_due <= now),
            key=lambda w: w.next_due or now,
        )[:SCHEDULES_PER_TICK]
        recorded: list[BreachRecord] = []
        for watched in due:
            if self._stop.is_set():
                break
            recorded.extend(self._check(watched, now))
        return recorded

    def _check(self, w: _Watched, now: datetime) -> list[BreachRecord]:
        through = now - w.deadline
        if through <= w.cursor:
            w.next_due = self._next_due(w)
            return []
        slots = self._slots(w, through)
        if len(slots) > SLOTS_PER_CHECK:
            slots = slots[:SLOTS_PER_CHECK]
            through = slots[-1]
        notify = tuple(dict.fromkeys([*((n.url, n.format) for n in w.notifiers), *self._global]))
        check = SlotCheck(w.schedule_id, w.deadline, w.cursor, through, tuple(slots), notify)
        breaches, cursor = self._store.judge_slots(check)
        w.cursor = cursor
        if w.previous is not None and cursor >= w.version_at:
            w.previous = None
        w.next_due = self._next_due(w)
        for breach in breaches:
            metrics.deadline_breached(breach.schedule_id, breach.reason)
            log.warning(
                "deadline breached: %s@%s %s%s",
                breach.schedule_id,
                breach.fire_time.isoformat(),
                breach.reason,
                f" ({breach.cause})" if breach.cause else "",
            )
            self._notifications.submit(breach)
        return breaches

    def _slots(self, w: _Watched, through: datetime) -> list[datetime]:
        """The calendar's slots in ``(cursor, through]``, at most one more than
        ``SLOTS_PER_CHECK``."""
        found: list[datetime] = []
        if w.previous is not None and w.cursor < w.version_at:
            end = min(through, w.version_at)
            found.extend(_between(w.previous, w.cursor, end, exclusive_end=True))
        if _planned_by_calendar(w):
            found.extend(_between(w.spec, max(w.cursor, w.version_at), through))
        return sorted(set(found))[: SLOTS_PER_CHECK + 1]

    def _next_due(self, w: _Watched) -> datetime | None:
        """When the next slot's deadline passes (None: no slot to come)."""
        candidates = []
        if w.previous is not None and w.cursor < w.version_at:
            t = calendar.next_fire_time(w.previous, w.cursor)
            if t is not None and t < w.version_at:
                candidates.append(t)
        elif w.cursor < w.version_at:
            # Runs recorded before a change this process did not see (it started since):
            # judged from their rows, at the latest one deadline after the change.
            candidates.append(w.version_at)
        if not w.paused:  # (with max_runs uncounted too: the planner fires by it)
            t = calendar.next_fire_time(w.spec, max(w.cursor, w.version_at))
            if t is not None:
                candidates.append(t)
        return min(candidates) + w.deadline if candidates else None

    def _refresh(self) -> None:
        for _ in range(PAGES_PER_TICK):
            changes = self._store.deadline_changes(self._revision, PAGE)
            if not changes:
                return
            named = [schedule_id for schedule_id, _, has in changes if has]
            records = self._store.schedules_named(named)
            fresh = [i for i in named if i not in self._index]
            cursors = self._store.deadline_cursors(fresh)
            for schedule_id, revision, _ in changes:
                self._revision = max(self._revision, revision)
                record = records.get(schedule_id)
                if record is None or record.revision != revision:
                    # no deadline, or changed again since: that change comes later
                    if record is None:
                        self._index.pop(schedule_id, None)
                    continue
                self._apply(record, cursors)
            if len(changes) < PAGE:
                return

    def _apply(self, record: ScheduleRecord, cursors: dict[str, datetime]) -> None:
        old = self._index.get(record.schedule_id)
        deadline = record.policy.deadline
        if not _has_deadline(record) or deadline is None:
            self._index.pop(record.schedule_id, None)
            return
        if old is not None:
            cursor = old.cursor
            previous = old.spec if not old.paused else None
        else:
            cursor = cursors.get(record.schedule_id, record.updated_at)
            previous = None
        watched = _Watched(
            schedule_id=record.schedule_id,
            spec=record.spec,
            deadline=deadline,
            notifiers=record.policy.notifiers,
            paused=record.paused,
            version_at=record.updated_at,
            cursor=cursor,
            previous=previous,
        )
        watched.next_due = self._next_due(watched)
        self._index[record.schedule_id] = watched


def _planned_by_calendar(w: _Watched) -> bool:
    """Whether the calendar alone says which slots are due: not while paused, nor for
    a ``max_runs`` counted without ``start_at`` (only the planner knows how many fires
    it has handled; its recorded runs are judged instead)."""
    return not w.paused and not (w.spec.max_runs and w.spec.start_at is None)


def _has_deadline(record: ScheduleRecord) -> bool:
    return not record.deleted and not record.identity_only and record.policy.deadline is not None


def _between(
    spec: Spec, after: datetime, through: datetime, exclusive_end: bool = False
) -> list[datetime]:
    """The fire times in ``(after, through]`` (``(after, through)``), at most one more
    than ``SLOTS_PER_CHECK``."""
    times = calendar.fire_times(spec, after)
    inside = itertools.takewhile(lambda t: t < through if exclusive_end else t <= through, times)
    return list(itertools.islice(inside, SLOTS_PER_CHECK + 1))
