"""A schedule's calendar: its upcoming slots, computed by the code the planner fires
with (``cronwave_core.domain.calendar``), and the days ahead on which its zone changes
its clocks, each with what the schedule's DST policy makes of that day's slots.

On a spring-forward day a slot inside the gap does not exist: ``shift`` fires it at
the first instant after the gap, ``skip`` records it MISSED (``dst_gap_skip``). On a
fall-back day a slot inside the repeated hour happens twice: ``once`` fires the first,
``last`` the second, ``twice`` both. A DST day is listed whether or not the schedule
has a slot in the changed hour; its ``slots`` say what happens to those it has.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from itertools import islice
from zoneinfo import ZoneInfo

from cronwave_core.domain import calendar
from cronwave_core.domain.calendar_dst import Occurrence
from cronwave_core.domain.spec import Spec

#: How far ahead the calendar looks for the zone's clock changes.
DST_HORIZON = timedelta(days=400)
#: The names of UTC itself in the zone database: a schedule in one of them has local
#: times equal to its UTC ones, so its calendar has one column of slots.
UTC_NAMES = frozenset(
    {"UTC", "Etc/UTC", "UCT", "Etc/UCT", "Universal", "Etc/Universal", "Zulu", "Etc/Zulu"}
)


def is_utc(time_zone: str) -> bool:
    """Whether ``time_zone`` is UTC under one of its names."""
    return time_zone in UTC_NAMES


@dataclass(frozen=True)
class Upcoming:
    at: datetime  # UTC
    local: datetime  # in the schedule's zone
    skipped: str  # the reason the DST policy skipped it, else ""
    slot: datetime | None = None  # the wall-clock time a cron expression named (naive)


@dataclass(frozen=True)
class DstDay:
    day: date
    change: str  # "spring forward" | "fall back"
    offset_before: timedelta
    offset_after: timedelta
    policy: str  # e.g. "dst_gap=skip"
    slots: tuple[Upcoming, ...]  # the schedule's occurrences that local day


def upcoming(spec: Spec, now: datetime, count: int = 20) -> list[Upcoming]:
    """The next ``count`` occurrences after ``now``: fire times and skipped slots."""
    zone = calendar.zone(spec.time_zone)
    occurrences = islice(calendar.occurrences_after(spec, now), count)
    return [_upcoming(occ, zone) for occ in occurrences]


def _upcoming(occ: Occurrence, zone: ZoneInfo) -> Upcoming:
    return Upcoming(occ.at, occ.at.astimezone(zone), occ.skipped, occ.slot)


def _transitions(zone: ZoneInfo, start: datetime, end: datetime) -> Iterator[date]:
    """Local dates in ``[start, end)`` whose UTC offset differs at the day's end."""
    day = start.astimezone(zone).date()
    last = end.astimezone(zone).date()
    while day < last:
        begin = datetime.combine(day, time(0), zone)
        after = datetime.combine(day + timedelta(days=1), time(0), zone)
        if begin.utcoffset() != after.utcoffset():
            yield day
        day += timedelta(days=1)


def dst_days(spec: Spec, now: datetime, horizon: timedelta = DST_HORIZON) -> list[DstDay]:
    """The zone's clock changes within ``horizon`` of ``now``, with the policy and the
    schedule's occurrences on each of those local days (cron slots only feel it)."""
    zone = calendar.zone(spec.time_zone)
    out = []
    for day in _transitions(zone, now, now + horizon):
        begin = datetime.combine(day, time(0), zone)
        end = datetime.combine(day + timedelta(days=1), time(0), zone)
        before, after = begin.utcoffset() or timedelta(0), end.utcoffset() or timedelta(0)
        forward = after > before
        policy = f"dst_gap={spec.dst_gap}" if forward else f"dst_repeat={spec.dst_repeat}"
        slots: list[Upcoming] = []
        for occ in calendar.occurrences_after(spec, begin.astimezone(UTC) - timedelta(seconds=1)):
            if occ.at >= end.astimezone(UTC) + timedelta(seconds=1) or len(slots) >= 48:
                break
            slots.append(_upcoming(occ, zone))
        change = "spring forward" if forward else "fall back"
        out.append(DstDay(day, change, before, after, policy, tuple(slots)))
    return out
