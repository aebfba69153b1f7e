"""``console.calendar_view``: upcoming slots and the DST days ahead, with the policy."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from console.calendar_view import dst_days, upcoming
from cronwave_core.domain.spec import DstGap, DstRepeat, Spec

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def test_a_spring_forward_day_with_skip_shows_the_slot_recorded_missed() -> None:
    spec = Spec(cron=("30 2 * * *",), time_zone="Europe/Berlin", dst_gap=DstGap.SKIP)
    days = dst_days(spec, NOW, horizon=timedelta(days=365))
    spring, autumn = days
    assert (spring.day, spring.change, spring.policy) == (
        date(2030, 3, 31),
        "spring forward",
        "dst_gap=skip",
    )
    assert [u.skipped for u in spring.slots] == ["dst_gap_skip"]
    assert (autumn.day, autumn.change, autumn.policy) == (
        date(2030, 10, 27),
        "fall back",
        "dst_repeat=once",
    )
    assert [u.at.strftime("%H:%MZ") for u in autumn.slots] == ["00:30Z"]


def test_a_fall_back_day_with_twice_fires_both_occurrences() -> None:
    spec = Spec(cron=("30 2 * * *",), time_zone="Europe/Berlin", dst_repeat=DstRepeat.TWICE)
    autumn = dst_days(spec, NOW, horizon=timedelta(days=365))[1]
    assert [u.at.strftime("%H:%MZ") for u in autumn.slots] == ["00:30Z", "01:30Z"]
    assert [u.local.strftime("%H:%M %Z") for u in autumn.slots] == ["02:30 CEST", "02:30 CET"]


def test_a_spring_forward_day_with_shift_fires_after_the_gap() -> None:
    spec = Spec(cron=("30 2 * * *",), time_zone="Europe/Berlin")
    spring = dst_days(spec, NOW, horizon=timedelta(days=365))[0]
    assert [(u.local.strftime("%H:%M %Z"), u.skipped) for u in spring.slots] == [("03:00 CEST", "")]


def test_a_zone_without_dst_has_no_dst_days_and_upcoming_is_in_both_zones() -> None:
    spec = Spec(cron=("0 9 * * *",), time_zone="Asia/Tokyo")
    assert dst_days(spec, NOW) == []
    first = upcoming(spec, NOW, count=2)  # strictly after NOW, which is 09:00 in Tokyo
    assert [u.at for u in first] == [
        datetime(2030, 1, 2, 0, 0, tzinfo=UTC),
        datetime(2030, 1, 3, 0, 0, tzinfo=UTC),
    ]
    assert first[0].local.strftime("%H:%M %Z") == "09:00 JST"
