"""A brute-force reference for the calendar's DST behaviour, written independently
of ``calendar_dst``: it scans UTC minute by minute to learn which instants carry
each wall-clock reading, instead of reasoning about folds and offsets."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

from cronwave_core.domain.spec import DstGap, DstRepeat

MINUTE = timedelta(minutes=1)
US = timedelta(microseconds=1)


def wall_map(tz: ZoneInfo, start: datetime, end: datetime) -> dict[datetime, list[datetime]]:
    """Every naive wall-clock minute seen between two UTC instants -> the UTC
    instants (increasing) that show it."""
    seen: dict[datetime, list[datetime]] = defaultdict(list)
    t = start
    while t <= end:
        seen[t.astimezone(tz).replace(tzinfo=None)].append(t)
        t += MINUTE
    return seen


def expected(
    expr: str, tz: ZoneInfo, gap: DstGap, repeat: DstRepeat, after: datetime, until: datetime
) -> tuple[list[datetime], list[datetime]]:
    """(fire times, reported skipped instants) of a 5-field ``expr`` in ``(after, until]``."""
    margin = timedelta(hours=30)
    scan_from = (after - 2 * margin).replace(second=0, microsecond=0)
    walls = wall_map(tz, scan_from, until + 2 * margin)
    ordered = sorted((instants[0], wall) for wall, instants in walls.items())
    it = croniter(expr, (after - margin).astimezone(tz).replace(tzinfo=None))
    last_wall = (until + margin).astimezone(tz).replace(tzinfo=None)
    fires: set[datetime] = set()
    skipped: list[datetime] = []
    while True:
        wall = it.get_next(datetime)
        if wall > last_wall:
            break
        instants = walls.get(wall, [])
        if len(instants) == 1:
            fires.add(instants[0])
        elif len(instants) == 2:
            chosen = {
                DstRepeat.ONCE: instants[:1],
                DstRepeat.LAST: instants[1:],
                DstRepeat.TWICE: instants,
            }[repeat]
            fires.update(chosen)
        else:  # the wall-clock time never shows: a gap
            gap_end = next(t for t, w in ordered if w > wall)
            if gap == DstGap.SHIFT:
                fires.add(gap_end)
            else:
                before = (gap_end - MINUTE).astimezone(tz).utcoffset()
                assert before is not None
                skipped.append((wall - before).replace(tzinfo=UTC) + US)
    return (
        sorted(t for t in fires if after < t <= until),
        sorted(t for t in skipped if after < t <= until),
    )
