"""Text on the command line -> the values a schedule is made of. Each bad value raises
``InvalidArgument`` naming the option, so the CLI prints one red line and exits 1."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from cronwave_core.domain.spec import Interval
from cronwave_core.errors import InvalidArgument

_UNITS = {
    "ms": timedelta(milliseconds=1),
    "s": timedelta(seconds=1),
    "m": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "d": timedelta(days=1),
}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def parse_duration(text: str, option: str) -> timedelta:
    """``90s``, ``15m``, ``1h30m``, ``2d``, ``500ms`` or plain seconds (``2.5``)."""
    raw = text.strip().lower()
    try:
        return timedelta(seconds=float(raw))
    except ValueError:
        pass
    pos, total = 0, timedelta(0)
    for match in _PART.finditer(raw):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if not raw or pos != len(raw):
        raise InvalidArgument(option, f"{text!r} is not a duration such as 90s, 15m, 1h30m or 2d")
    return total


def parse_instant(text: str, option: str, tz: str | ZoneInfo = "UTC") -> datetime:
    """An ISO-8601 instant; without an offset it is read as wall-clock time in ``tz``
    (the first of two, in a fall-back hour)."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise InvalidArgument(
            option, f"{text!r} is not an ISO-8601 time such as 2030-03-10T02:30:00-05:00"
        ) from exc
    if value.tzinfo is None:
        from cronwave_core.domain.calendar import zone  # croniter: only when needed

        value = value.replace(tzinfo=tz if isinstance(tz, ZoneInfo) else zone(tz, "--tz"))
    return value.astimezone(UTC)


def parse_dates(texts: Sequence[str], option: str = "--exclude-date") -> list[date]:
    dates = []
    for text in texts:
        try:
            dates.append(date.fromisoformat(text.strip()))
        except ValueError as exc:
            raise InvalidArgument(option, f"{text!r} is not a date in YYYY-MM-DD form") from exc
    return dates


def parse_intervals(every: Sequence[str], phase: Sequence[str]) -> list[Interval]:
    """``--every`` values with their ``--phase`` (by position; missing phases are 0)."""
    if len(phase) > len(every):
        raise InvalidArgument("--phase", "each --phase belongs to an --every before it")
    intervals = []
    for i, text in enumerate(every):
        step = parse_duration(text, "--every")
        offset = parse_duration(phase[i], "--phase") if i < len(phase) else timedelta(0)
        intervals.append(Interval(step, offset))
    return intervals
