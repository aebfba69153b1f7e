"""One line per fire time, for ``cronwave schedule preview`` and logs.

A line reads ``<local ISO-8601 with its offset> <UTC ISO-8601 ending in Z>``, for
example ``2024-03-10T03:00:00-04:00 2024-03-10T07:00:00Z``. Seconds are always
written; microseconds only when there are any. The UTC half always ends in ``Z``
(never ``+00:00``), so the two halves cannot be mistaken for one another.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from cronwave_core.domain.calendar import zone as _zone
from cronwave_core.errors import InvalidArgument


def format_preview_line(instant: datetime, zone: str | ZoneInfo) -> str:
    """``instant`` in ``zone`` and in UTC, as described in the module docstring."""
    if instant.utcoffset() is None:
        raise InvalidArgument("instant", "must be a timezone-aware datetime")
    tz = zone if isinstance(zone, ZoneInfo) else _zone(zone)
    local = instant.astimezone(tz).isoformat()
    utc = instant.astimezone(UTC).replace(tzinfo=None).isoformat() + "Z"
    return f"{local} {utc}"
