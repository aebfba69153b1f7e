"""Fire times of a schedule spec: the one implementation the planner, the store's
validation and ``cronwave schedule preview`` all use.

What a spec means:

- Its fire times are the union of its cron expressions (wall-clock slots in
  ``time_zone``, syntax in ``calendar_cron``, resolved to instants by the DST policy
  in ``calendar_dst``), its intervals (the Unix epoch + phase + k * every) and its
  one-off instants. An instant named more than once fires once. Intervals and
  one-off times are absolute instants: the DST policy does not apply to them.
- ``exclude_dates`` are local dates in ``time_zone``. A cron slot is excluded by the
  date it names (also when a gap shifts it to the next day); an interval or one-off
  instant by the local date it falls on.
- ``start_at <= t < end_at``: the start is inclusive, the end exclusive.
- ``max_runs`` (0 = unlimited) counts fire times. With ``start_at`` set the count
  starts there and ``fire_times`` stops after the ``max_runs``-th fire time by
  itself. Without ``start_at`` there is no fixed origin to count from: the planner
  counts the fire times it has handled (runs and MISSED records alike) and asks
  ``runs_left``.
- Limits: ``jitter`` at most ``MAX_JITTER`` (one day); at most ``MAX_CRONS``
  expressions, ``MAX_INTERVALS`` intervals and ``MAX_DATES`` one-off instants and
  excluded dates; a zone name of at most ``MAX_ZONE_LENGTH`` characters.
- A slot the DST policy skipped is not a fire time. ``occurrences_after`` and
  ``skipped_slots`` report it with its reason (``dst_gap_skip``) at its nominal
  instant plus one microsecond (see ``calendar_dst``), so the planner records it
  as MISSED, under a fire time no cron slot uses, instead of dropping it silently.

Specs are compiled once and cached by value (the most recently used ones), so the
planner's hot path -- ``next_fire_time`` -- costs one cron step plus a few zone
look-ups; a spec compiled again costs tens of microseconds for plain cron
expressions (see ``calendar_cron``), so the cache is bounded well below the 100,000
distinct specs a planner may hold.
"""

from __future__ import annotations

import bisect
import heapq
import threading
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from typing import TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronwave_core.domain.calendar_cron import CronExpr, parse_cron
from cronwave_core.domain.calendar_dst import DST_GAP_SKIP, Occurrence, Resolver, occurrences
from cronwave_core.domain.spec import DstGap, DstRepeat, Spec
from cronwave_core.errors import InvalidArgument
from cronwave_core.fields import shown

__all__ = [
    "DST_GAP_SKIP",
    "EARLIEST",
    "LATEST",
    "MAX_CRONS",
    "MAX_DATES",
    "MAX_INTERVALS",
    "MAX_JITTER",
    "MAX_ZONE_LENGTH",
    "MIN_INTERVAL",
    "Occurrence",
    "fire_times",
    "next_fire_time",
    "occurrences_after",
    "runs_left",
    "skipped_slots",
    "validate",
    "zone",
]

MIN_INTERVAL = timedelta(seconds=1)
#: The longest jitter: it spreads the fires of one instant over minutes, not days (a
#: longer one would move a daily run past its next fire).
MAX_JITTER = timedelta(days=1)
#: The most entries of a spec's lists: cron expressions and intervals, and dates
#: (one-off instants and excluded dates).
MAX_CRONS = 100
MAX_INTERVALS = 100
MAX_DATES = 1_000
#: IANA names are at most a few tens of characters (America/Argentina/ComodRivadavia).
MAX_ZONE_LENGTH = 64
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
_E = TypeVar("_E", DstGap, DstRepeat)
_NO_DATES: frozenset[date] = frozenset()


def zone(name: str, field: str = "spec.time_zone") -> ZoneInfo:
    """The IANA zone ``name``; ``InvalidArgument(field)`` when it is empty or unknown."""
    if not name:
        raise InvalidArgument(field, "a time zone is required, e.g. Europe/Berlin or UTC")
    if len(name) > MAX_ZONE_LENGTH or not name.isprintable():
        raise InvalidArgument(
            field,
            f"unknown time zone {shown(name)}; an IANA name such as America/New_York has "
            f"at most {MAX_ZONE_LENGTH} printable characters",
        )
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError, OSError) as exc:
        # OSError: a name the zone database cannot even look up; its message would
        # show where the database lives.
        raise InvalidArgument(
            field, f"unknown time zone {shown(name)}; use an IANA name such as America/New_York"
        ) from exc


def validate(spec: Spec) -> None:
    """Raise ``InvalidArgument`` naming the first field of ``spec`` that is wrong."""
    _calendar(spec)


def fire_times(spec: Spec, after: datetime) -> Iterator[datetime]:
    """Fire instants (aware UTC) strictly after ``after``, strictly increasing.

    Finite when the spec ends (``end_at``, ``max_runs`` with ``start_at``, only
    one-off times); the caller bounds its reads otherwise. Raises
    ``InvalidArgument`` at once for a bad spec or a naive ``after``.
    """
    cal = _calendar(spec)
    return (occ.at for occ in cal.occurrences(_aware(after, "after")) if not occ.skipped)


def next_fire_time(spec: Spec, after: datetime) -> datetime | None:
    """The first fire instant strictly after ``after``, or ``None`` if there is none."""
    return next(fire_times(spec, after), None)


def occurrences_after(spec: Spec, after: datetime) -> Iterator[Occurrence]:
    """Fire times and DST-skipped slots strictly after ``after``, by instant.

    Each ``Occurrence`` has ``skipped == ""`` when it fires, else the reason. The
    instants strictly increase. (Should an interval or one-off time fall on the
    very microsecond a skipped slot is reported at, the fire wins and covers it.)
    """
    cal = _calendar(spec)
    return cal.occurrences(_aware(after, "after"))


def skipped_slots(
    spec: Spec, start: datetime, end: datetime, limit: int = 10_000
) -> list[Occurrence]:
    """The slots the DST policy skipped with ``start < at <= end`` (the window a
    planner has just handled), at most ``limit`` of them, oldest first."""
    start = _aware(start, "start")
    end = _aware(end, "end")
    found: list[Occurrence] = []
    for occ in _calendar(spec).occurrences(start):
        if occ.at > end or len(found) >= limit:
            break
        if occ.skipped:
            found.append(occ)
    return found


def runs_left(spec: Spec, handled: int) -> int | None:
    """How many more fire times a schedule may have after ``handled`` of them
    (``None``: unlimited). The planner counts every fire time it handled, whether
    it ran or was recorded as MISSED."""
    if handled < 0:
        raise InvalidArgument("handled", "must not be negative")
    if not spec.max_runs:
        return None
    return max(0, spec.max_runs - handled)


def _aware(value: datetime, field: str) -> datetime:
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise InvalidArgument(field, "must be a timezone-aware datetime (cronwave uses UTC)")
    return value.astimezone(UTC)


def _instant(value: datetime, field: str) -> datetime:
    """An instant a spec names: aware, and inside the range cronwave schedules in."""
    instant = _aware(value, field)
    if not EARLIEST <= instant < LATEST:
        raise InvalidArgument(
            field, f"must lie between {EARLIEST.date()} and {LATEST.date()} (UTC)"
        )
    return instant


def _calendar(spec: Spec) -> _Calendar:
    try:
        return _cached_calendar(spec)
    except TypeError:  # a Spec built with lists is unhashable: compile it uncached
        return _Calendar(spec)


@lru_cache(maxsize=8192)
def _cached_calendar(spec: Spec) -> _Calendar:
    return _Calendar(spec)


@lru_cache(maxsize=1024)
def _resolver(tz: ZoneInfo, gap: DstGap, repeat: DstRepeat) -> Resolver:
    """One resolver per zone and policy, shared by every calendar that uses them."""
    return Resolver(tz, gap, repeat)


class _Calendar:
    """A validated, compiled spec. Immutable apart from memos, so it is shared."""

    __slots__ = (
        "counter",
        "crons",
        "end_at",
        "excluded",
        "intervals",
        "max_runs",
        "one_off",
        "resolver",
        "start_at",
        "tz",
    )

    def __init__(self, spec: Spec) -> None:
        self.tz = zone(spec.time_zone)
        gap = _policy(DstGap, spec.dst_gap, "spec.dst_gap")
        repeat = _policy(DstRepeat, spec.dst_repeat, "spec.dst_repeat")
        for what, items, most in (
            ("cron", spec.cron, MAX_CRONS),
            ("intervals", spec.intervals, MAX_INTERVALS),
            ("one_off", spec.one_off, MAX_DATES),
            ("exclude_dates", spec.exclude_dates, MAX_DATES),
        ):
            if len(items) > most:
                raise InvalidArgument(
                    f"spec.{what}", f"must have at most {most} entries, got {len(items)}"
                )
        if not spec.cron and not spec.intervals and not spec.one_off:
            raise InvalidArgument(
                "spec.cron", "a schedule needs a cron expression, an interval or a one-off time"
            )
        self.crons: tuple[CronExpr, ...] = tuple(
            parse_cron(text, f"spec.cron[{i}]") if isinstance(text, str) else _not_text(i)
            for i, text in enumerate(spec.cron)
        )
        self.intervals = tuple(
            _interval(i, iv.every, iv.phase) for i, iv in enumerate(spec.intervals)
        )
        self.one_off = (
            tuple(sorted({_instant(t, f"spec.one_off[{i}]") for i, t in enumerate(spec.one_off)}))
            if spec.one_off
            else ()
        )
        for i, day in enumerate(spec.exclude_dates):
            if not isinstance(day, date) or isinstance(day, datetime):
                raise InvalidArgument(
                    f"spec.exclude_dates[{i}]", "must be a local date (YYYY-MM-DD), not a time"
                )
        self.excluded = frozenset(spec.exclude_dates) if spec.exclude_dates else _NO_DATES
        self.start_at = None if spec.start_at is None else _instant(spec.start_at, "spec.start_at")
        self.end_at = None if spec.end_at is None else _instant(spec.end_at, "spec.end_at")
        if self.start_at is not None and self.end_at is not None and self.end_at <= self.start_at:
            raise InvalidArgument(
                "spec.end_at", "must be after spec.start_at (the end is exclusive)"
            )
        if isinstance(spec.max_runs, bool) or not isinstance(spec.max_runs, int):
            raise InvalidArgument("spec.max_runs", "must be a whole number")
        if spec.max_runs < 0:
            raise InvalidArgument("spec.max_runs", "must not be negative (0 means unlimited)")
        self.max_runs = spec.max_runs
        if not isinstance(spec.jitter, timedelta) or spec.jitter < timedelta(0):
            raise InvalidArgument("spec.jitter", "must be a non-negative duration")
        if spec.jitter > MAX_JITTER:
            raise InvalidArgument(
                "spec.jitter",
                f"must be at most {MAX_JITTER.total_seconds():g}s (one day: it spreads the "
                f"fires of one instant), got {spec.jitter.total_seconds():g}s",
            )
        self.resolver = _resolver(self.tz, gap, repeat)
        self.counter = (
            _RunCounter(self, self.start_at)
            if self.start_at is not None and self.max_runs
            else None
        )

    def occurrences(self, after: datetime) -> Iterator[Occurrence]:
        """Occurrences strictly after ``after`` within every bound of the spec."""
        if self.start_at is not None and after < self.start_at:
            after = self.start_at - _US
        if self.counter is None:
            yield from self.raw(after)
            return
        remaining = self.max_runs - self.counter.fires_through(after)
        if remaining <= 0:
            return
        for occ in self.raw(after):
            yield occ
            if not occ.skipped:
                remaining -= 1
                if remaining <= 0:
                    return

    def raw(self, after: datetime) -> Iterator[Occurrence]:
        """Occurrences strictly after ``after`` and before ``end_at``, by strictly
        increasing instant; ``start_at`` and ``max_runs`` are not applied."""
        try:
            yield from self._merged(after)
        except OverflowError:  # the ends of datetime's range (years 1 and 9999)
            return

    def _merged(self, after: datetime) -> Iterator[Occurrence]:
        streams: list[Iterator[Occurrence]] = []
        if self.crons:
            streams.append(occurrences(self._slots(after), self.resolver, after))
        streams.extend(self._interval_occurrences(iv, after) for iv in self.intervals)
        if self.one_off:
            streams.append(self._one_off_occurrences(after))
        merged = streams[0] if len(streams) == 1 else heapq.merge(*streams, key=_order)
        end_at = self.end_at
        last: datetime | None = None
        for occ in merged:
            if end_at is not None and occ.at >= end_at:
                return
            if last is not None and occ.at <= last:
                continue  # the same instant again: a fire sorts before a skipped slot
            last = occ.at
            yield occ

    def _slots(self, after: datetime) -> Iterator[datetime]:
        start = self.resolver.search_start(after)
        if len(self.crons) == 1:
            return self.crons[0].slots_after(start, self.excluded)
        return _distinct(heapq.merge(*(c.slots_after(start, self.excluded) for c in self.crons)))

    def _interval_occurrences(
        self, interval: tuple[int, int], after: datetime
    ) -> Iterator[Occurrence]:
        every, phase = interval
        k = ((after - _EPOCH) // _US - phase) // every + 1
        t = phase + k * every
        while True:
            try:
                at = _EPOCH + timedelta(microseconds=t)
                day = at.astimezone(self.tz).date() if self.excluded else None
            except OverflowError:
                return
            if day is not None and day in self.excluded:
                # Jump the whole excluded day instead of stepping through it.
                try:
                    resume = datetime.combine(day + timedelta(days=1), time(), self.tz)
                except OverflowError:
                    return
                resume_us = (resume.astimezone(UTC) - _EPOCH) // _US
                t = max(t + every, phase + -((phase - resume_us) // every) * every)
                continue
            yield Occurrence(at, None)
            t += every

    def _one_off_occurrences(self, after: datetime) -> Iterator[Occurrence]:
        for at in self.one_off[bisect.bisect_right(self.one_off, after) :]:
            if self.excluded and at.astimezone(self.tz).date() in self.excluded:
                continue
            yield Occurrence(at, None)


class _RunCounter:
    """Counts fire times from ``start_at``, for ``max_runs``.

    Keeps a mark every ``STRIDE`` fires and the furthest point counted, so the
    planner's queries -- mostly moving forward -- cost only the fires since the last
    one, and a query into the past walks at most ``STRIDE`` fires.
    """

    STRIDE = 256

    def __init__(self, cal: _Calendar, start_at: datetime) -> None:
        self._cal = cal
        self._lock = threading.Lock()
        origin = start_at - _US
        self._marks: list[tuple[datetime, int]] = [(origin, 0)]
        self._frontier: tuple[datetime, int] = (origin, 0)
        self._finished = False

    def fires_through(self, t: datetime) -> int:
        """The number of fire times in ``[start_at, t]``, counting no further than
        ``max_runs``."""
        limit = self._cal.max_runs
        with self._lock:
            front_at, counted = self._frontier
            if t < front_at:
                return self._walk_from_mark(t, limit)
            if counted >= limit or self._finished:
                return counted
            last = front_at
            for occ in self._cal.raw(front_at):
                if occ.skipped:
                    continue
                if occ.at > t:
                    break
                counted += 1
                last = occ.at
                if counted % self.STRIDE == 0:
                    self._marks.append((last, counted))
                if counted >= limit:
                    break
            else:
                self._finished = True
            self._frontier = (last, counted)
            return counted

    def _walk_from_mark(self, t: datetime, limit: int) -> int:
        i = bisect.bisect_right(self._marks, t, key=lambda mark: mark[0]) - 1
        at, counted = self._marks[max(i, 0)]
        for occ in self._cal.raw(at):
            if counted >= limit:
                break
            if occ.skipped:
                continue
            if occ.at > t:
                break
            counted += 1
        return counted


def _interval(i: int, every: timedelta, phase: timedelta) -> tuple[int, int]:
    if not isinstance(every, timedelta) or every < MIN_INTERVAL:
        raise InvalidArgument(
            f"spec.intervals[{i}].every", f"must be a duration of at least {MIN_INTERVAL}"
        )
    if not isinstance(phase, timedelta) or not timedelta(0) <= phase < every:
        raise InvalidArgument(f"spec.intervals[{i}].phase", "must be in [0, every)")
    return every // _US, phase // _US


def _policy(kind: type[_E], value: str, field: str) -> _E:
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(member.value for member in kind)
        raise InvalidArgument(field, f"unknown policy {value!r}; use one of {choices}") from None


def _not_text(i: int) -> CronExpr:
    raise InvalidArgument(f"spec.cron[{i}]", "must be a cron expression string")


def _order(occ: Occurrence) -> tuple[datetime, bool]:
    return occ.at, bool(occ.skipped)


def _distinct(slots: Iterator[datetime]) -> Iterator[datetime]:
    last: datetime | None = None
    for slot in slots:
        if slot != last:
            last = slot
            yield slot
