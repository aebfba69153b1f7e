"""Backfill planning: the fire times of a schedule over a past (or future) range,
for a dry-run listing and for the runs a backfill then starts.

The range is ``start <= t < end``: the start is inclusive, the end exclusive, so
consecutive ranges ``[a, b)`` and ``[b, c)`` never list a fire time twice. The spec's
own bounds (``start_at``, ``end_at``, ``max_runs`` counted from ``start_at``) and
exclusions still apply. Slots the DST policy skipped inside the range are listed
apart, with their reason, so a dry run shows them too.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cronwave_core.domain.calendar import Occurrence, occurrences_after
from cronwave_core.domain.spec import Spec
from cronwave_core.errors import InvalidArgument

DEFAULT_LIMIT = 10_000
_US = timedelta(microseconds=1)


@dataclass(frozen=True)
class BackfillPlan:
    """``fire_times`` in ``[start, end)``, oldest first; ``skipped`` DST slots in the
    same range; ``truncated`` when ``limit`` fire times were listed and more exist
    (``resume_at`` is then the start of the rest: pass it as the next ``start``)."""

    fire_times: tuple[datetime, ...]
    skipped: tuple[Occurrence, ...]
    truncated: bool
    resume_at: datetime | None


def plan_backfill(
    spec: Spec,
    start: datetime,
    end: datetime,
    *,
    limit: int = DEFAULT_LIMIT,
    start_field: str = "start",
    end_field: str = "end",
) -> BackfillPlan:
    """List the fire times of ``spec`` in ``[start, end)``, at most ``limit`` of them.

    Raises ``InvalidArgument`` naming ``start_field``/``end_field`` for a naive
    instant or an empty range, and ``limit`` when it is not positive.
    """
    start = _aware(start, start_field)
    end = _aware(end, end_field)
    if end <= start:
        raise InvalidArgument(end_field, f"must be after {start_field} (the end is exclusive)")
    if limit < 1:
        raise InvalidArgument("limit", "must be at least 1")
    fires: list[datetime] = []
    skipped: list[Occurrence] = []
    for occ in occurrences_after(spec, start - _US):
        if occ.at >= end:
            break
        if occ.skipped:
            skipped.append(occ)
            continue
        if len(fires) == limit:
            return BackfillPlan(tuple(fires), tuple(skipped), True, occ.at)
        fires.append(occ.at)
    return BackfillPlan(tuple(fires), tuple(skipped), False, None)


def _aware(value: datetime, field: str) -> datetime:
    if value.utcoffset() is None:
        raise InvalidArgument(field, "must be a timezone-aware datetime")
    return value.astimezone(UTC)
