"""Preview lines: local time with its offset, then UTC with a Z."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from cronwave_core.domain.preview import format_preview_line
from cronwave_core.errors import InvalidArgument


@pytest.mark.parametrize(
    ("instant", "zone", "line"),
    [
        (
            datetime(2024, 3, 10, 7, 0, tzinfo=UTC),
            "America/New_York",
            "2024-03-10T03:00:00-04:00 2024-03-10T07:00:00Z",
        ),
        (
            datetime(2024, 4, 6, 15, 15, tzinfo=UTC),
            "Australia/Lord_Howe",
            "2024-04-07T01:45:00+10:30 2024-04-06T15:15:00Z",
        ),
        (
            datetime(2024, 1, 1, tzinfo=UTC),
            "UTC",
            "2024-01-01T00:00:00+00:00 2024-01-01T00:00:00Z",
        ),
        (
            datetime(2024, 3, 10, 7, 30, 0, 1, tzinfo=UTC),
            ZoneInfo("America/New_York"),
            "2024-03-10T03:30:00.000001-04:00 2024-03-10T07:30:00.000001Z",
        ),
        (  # an instant given in another offset is the same instant
            datetime(2024, 1, 1, 9, 0, tzinfo=timezone(timedelta(hours=9))),
            "Europe/London",
            "2024-01-01T00:00:00+00:00 2024-01-01T00:00:00Z",
        ),
    ],
)
def test_formats_local_then_utc(instant: datetime, zone: str | ZoneInfo, line: str) -> None:
    assert format_preview_line(instant, zone) == line


def test_refuses_a_naive_instant_and_an_unknown_zone() -> None:
    with pytest.raises(InvalidArgument) as caught:
        format_preview_line(datetime(2024, 1, 1), "UTC")
    assert caught.value.field == "instant"
    with pytest.raises(InvalidArgument) as caught:
        format_preview_line(datetime(2024, 1, 1, tzinfo=UTC), "Nowhere/Land")
    assert caught.value.field == "spec.time_zone"
