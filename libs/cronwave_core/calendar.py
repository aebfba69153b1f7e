"""Fire times of a schedule spec: the one implementation the planner, the store's
validation and ``cronwave schedule preview`` all use.

Cron expressions are evaluated on local wall-clock time in the schedule's zone by
croniter; each wall-clock slot is then resolved to instants by the DST policy:
a slot in a spring-forward gap shifts to the first instant after the gap or is
skipped; a slot in a fall-back overlap fires on the first, the last, or both
occurrences.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from cronwave_core.errors import InvalidArgument
from cronwave_core.spec import DstGap, DstRepeat, Spec


def zone(name: str, field: str = "spec.time_zone") -> ZoneInfo:
    if not name:
        raise InvalidArgument(field, "a time zone is required, e.g. Europe/Berlin or UTC")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidArgument(
            field, f"unknown time zone {name!r}; use an IANA name such as America/New_York"
        ) from exc


def validate(spec: Spec) -> None:
    """Raise ``InvalidArgument`` naming the first field of ``spec`` that is wrong."""
    zone(spec.time_zone)
    if not spec.cron and not spec.intervals and not spec.one_off:
        raise InvalidArgument("spec.cron", "a schedule needs a cron expression, an interval or a one-off time")
    for i, expr in enumerate(spec.cron):
        if not croniter.is_valid(expr):
            raise InvalidArgument(f"spec.cron[{i}]", f"{expr!r} is not a valid cron expression")


def _resolve(local: datetime, tz: ZoneInfo, spec: Spec) -> list[datetime]:
    """The instants (UTC) that one local wall-clock slot stands for."""
    first = local.replace(tzinfo=tz, fold=0)
    second = local.replace(tzinfo=tz, fold=1)
    a, b = first.astimezone(UTC), second.astimezone(UTC)
    if a.astimezone(tz).replace(tzinfo=None) != local:  # in a gap: the slot does not exist
        if spec.dst_gap == DstGap.SKIP:
            return []
        lo, hi = min(a, b), max(a, b)  # the transition lies between the two readings
        while hi - lo > timedelta(seconds=1):
            mid = lo + (hi - lo) / 2
            if mid.astimezone(tz).replace(tzinfo=None) < local:
                lo = mid
            else:
                hi = mid
        return [hi.replace(microsecond=0)]
    if a == b:
        return [a]
    if spec.dst_repeat == DstRepeat.LAST:
        return [max(a, b)]
    if spec.dst_repeat == DstRepeat.TWICE:
        return sorted({a, b})
    return [min(a, b)]


def fire_times(spec: Spec, after: datetime) -> Iterator[datetime]:
    """Fire instants strictly after ``after``, increasing, without repeats."""
    tz = zone(spec.time_zone)
    start = after.astimezone(tz).replace(tzinfo=None) - timedelta(days=2)
    iters = [croniter(expr, start) for expr in spec.cron]
    pending: list[datetime] = []
    last = after
    while True:
        while len(pending) < 4 * max(1, len(iters)):
            for it in iters:
                local = it.get_next(datetime)
                pending.extend(_resolve(local, tz, spec))
            if not iters:
                break
        pending.sort()
        if not pending:
            return
        nxt = pending.pop(0)
        if nxt <= last:
            continue
        if spec.end_at and nxt > spec.end_at:
            return
        if spec.start_at and nxt < spec.start_at:
            continue
        last = nxt
        yield nxt


def next_fire_time(spec: Spec, after: datetime) -> datetime | None:
    return next(fire_times(spec, after), None)
