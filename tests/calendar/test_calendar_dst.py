"""DST policies in four zones, with every expected instant written out.

New York and London move by an hour, Lord Howe by thirty minutes, and Apia skipped
the whole of 2011-12-30 when it crossed the date line (-10:00 -> +14:00).
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from cronwave_core.domain.calendar import (
    DST_GAP_SKIP,
    fire_times,
    next_fire_time,
    occurrences_after,
    skipped_slots,
)
from cronwave_core.domain.spec import DstGap, DstRepeat, Spec

POLICIES = list(itertools.product(DstGap, DstRepeat))
US = timedelta(microseconds=1)


def z(text: str) -> datetime:
    """An instant written in UTC ISO form."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def fires_between(spec: Spec, after: datetime, until: datetime) -> list[datetime]:
    return list(itertools.takewhile(lambda t: t <= until, fire_times(spec, after)))


def skipped_between(spec: Spec, after: datetime, until: datetime) -> list[datetime]:
    return [o.at for o in skipped_slots(spec, after, until)]


# (zone, cron, window start, window end, fires under SHIFT, fires under SKIP,
#  skipped slots reported under SKIP)
GAPS = [
    pytest.param(
        "America/New_York",
        "30 2 * * *",
        z("2024-03-09T00:00"),
        z("2024-03-12T00:00"),
        # 03-09 02:30 EST; 03-10 02:30 does not exist -> 03:00 EDT; 03-11 02:30 EDT
        [z("2024-03-09T07:30"), z("2024-03-10T07:00"), z("2024-03-11T06:30")],
        [z("2024-03-09T07:30"), z("2024-03-11T06:30")],
        [z("2024-03-10T07:30") + US],  # 02:30 read as EST
        id="new_york_daily_0230",
    ),
    pytest.param(
        "America/New_York",
        "*/30 1-3 * * *",
        z("2024-03-10T05:00"),
        z("2024-03-10T09:00"),
        # 01:00 01:30 EST; 02:00 02:30 and 03:00 all at 03:00 EDT (one fire); 03:30 EDT
        [
            z("2024-03-10T06:00"),
            z("2024-03-10T06:30"),
            z("2024-03-10T07:00"),
            z("2024-03-10T07:30"),
        ],
        [
            z("2024-03-10T06:00"),
            z("2024-03-10T06:30"),
            z("2024-03-10T07:00"),
            z("2024-03-10T07:30"),
        ],
        # 02:00 and 02:30 read as EST are 03:00 and 03:30 EDT, one microsecond on
        [z("2024-03-10T07:00") + US, z("2024-03-10T07:30") + US],
        id="new_york_half_hourly",
    ),
    pytest.param(
        "Europe/London",
        "30 1 * * *",
        z("2024-03-30T00:00"),
        z("2024-04-02T00:00"),
        # 03-30 01:30 GMT; 03-31 01:30 does not exist -> 02:00 BST; 04-01 01:30 BST
        [z("2024-03-30T01:30"), z("2024-03-31T01:00"), z("2024-04-01T00:30")],
        [z("2024-03-30T01:30"), z("2024-04-01T00:30")],
        [z("2024-03-31T01:30") + US],
        id="london_daily_0130",
    ),
    pytest.param(
        "Australia/Lord_Howe",
        "15 2 * * *",
        z("2024-10-04T00:00"),
        z("2024-10-07T00:00"),
        # 10-05 02:15 +10:30; 10-06 02:15 does not exist (02:00 -> 02:30) -> 02:30 +11;
        # 10-07 02:15 +11
        [z("2024-10-04T15:45"), z("2024-10-05T15:30"), z("2024-10-06T15:15")],
        [z("2024-10-04T15:45"), z("2024-10-06T15:15")],
        [z("2024-10-05T15:45") + US],
        id="lord_howe_daily_0215",
    ),
    pytest.param(
        "Pacific/Apia",
        "0 9 * * *",
        z("2011-12-29T00:00"),
        z("2011-12-31T12:00"),
        # 12-29 09:00 -10; 12-30 never happened -> 12-31 00:00 +14; 12-31 09:00 +14
        [z("2011-12-29T19:00"), z("2011-12-30T10:00"), z("2011-12-30T19:00")],
        [z("2011-12-29T19:00"), z("2011-12-30T19:00")],
        # 12-30 09:00 read at -10 is 12-31 09:00 +14: the fire just before it
        [z("2011-12-30T19:00") + US],
        id="apia_daily_0900",
    ),
    pytest.param(
        "Pacific/Apia",
        "0 0,12 * * *",
        z("2011-12-29T00:00"),
        z("2011-12-31T09:00"),
        # 12-29 00:00 and 12:00 -10; both 12-30 slots and 12-31 00:00 are one fire at the
        # end of the gap; 12-31 12:00 +14
        [
            z("2011-12-29T10:00"),
            z("2011-12-29T22:00"),
            z("2011-12-30T10:00"),
            z("2011-12-30T22:00"),
        ],
        [
            z("2011-12-29T10:00"),
            z("2011-12-29T22:00"),
            z("2011-12-30T10:00"),
            z("2011-12-30T22:00"),
        ],
        [z("2011-12-30T10:00") + US, z("2011-12-30T22:00") + US],
        id="apia_twice_daily",
    ),
]


@pytest.mark.parametrize(("gap", "repeat"), POLICIES)
@pytest.mark.parametrize(("tz", "cron", "start", "end", "shift", "skip", "skipped"), GAPS)
def test_spring_forward_gap(
    tz: str,
    cron: str,
    start: datetime,
    end: datetime,
    shift: list[datetime],
    skip: list[datetime],
    skipped: list[datetime],
    gap: DstGap,
    repeat: DstRepeat,
) -> None:
    # Given a schedule whose slots fall into a gap
    spec = Spec(cron=(cron,), time_zone=tz, dst_gap=gap, dst_repeat=repeat)
    # When its fire times and skipped slots are listed
    fires = fires_between(spec, start, end)
    reported = skipped_between(spec, start, end)
    # Then the gap policy decides, and the repeat policy plays no part
    if gap == DstGap.SHIFT:
        assert fires == shift
        assert reported == []
    else:
        assert fires == skip
        assert reported == skipped
        assert all(o.skipped == DST_GAP_SKIP for o in skipped_slots(spec, start, end))


# (zone, cron, window start, window end, fires under ONCE, LAST, TWICE)
OVERLAPS = [
    pytest.param(
        "America/New_York",
        "*/30 1-2 * * *",
        z("2024-11-03T04:00"),
        z("2024-11-03T08:00"),
        # 01:00 01:30 EDT | 01:00 01:30 EST | both; then 02:00 02:30 EST once
        [
            z("2024-11-03T05:00"),
            z("2024-11-03T05:30"),
            z("2024-11-03T07:00"),
            z("2024-11-03T07:30"),
        ],
        [
            z("2024-11-03T06:00"),
            z("2024-11-03T06:30"),
            z("2024-11-03T07:00"),
            z("2024-11-03T07:30"),
        ],
        [
            z("2024-11-03T05:00"),
            z("2024-11-03T05:30"),
            z("2024-11-03T06:00"),
            z("2024-11-03T06:30"),
            z("2024-11-03T07:00"),
            z("2024-11-03T07:30"),
        ],
        id="new_york_half_hourly",
    ),
    pytest.param(
        "Europe/London",
        "30 1 * * *",
        z("2024-10-26T00:00"),
        z("2024-10-29T00:00"),
        # 10-26 01:30 BST; 10-27 01:30 BST | GMT | both; 10-28 01:30 GMT
        [z("2024-10-26T00:30"), z("2024-10-27T00:30"), z("2024-10-28T01:30")],
        [z("2024-10-26T00:30"), z("2024-10-27T01:30"), z("2024-10-28T01:30")],
        [
            z("2024-10-26T00:30"),
            z("2024-10-27T00:30"),
            z("2024-10-27T01:30"),
            z("2024-10-28T01:30"),
        ],
        id="london_daily_0130",
    ),
    pytest.param(
        "Australia/Lord_Howe",
        "45 1 * * *",
        z("2024-04-05T00:00"),
        z("2024-04-08T00:00"),
        # 01:30-02:00 repeats (+11 then +10:30): 04-06 01:45 +11; 04-07 01:45 +11 | +10:30
        # | both; 04-08 01:45 +10:30
        [z("2024-04-05T14:45"), z("2024-04-06T14:45"), z("2024-04-07T15:15")],
        [z("2024-04-05T14:45"), z("2024-04-06T15:15"), z("2024-04-07T15:15")],
        [
            z("2024-04-05T14:45"),
            z("2024-04-06T14:45"),
            z("2024-04-06T15:15"),
            z("2024-04-07T15:15"),
        ],
        id="lord_howe_daily_0145",
    ),
]


@pytest.mark.parametrize(("gap", "repeat"), POLICIES)
@pytest.mark.parametrize(("tz", "cron", "start", "end", "once", "last", "twice"), OVERLAPS)
def test_fall_back_overlap(
    tz: str,
    cron: str,
    start: datetime,
    end: datetime,
    once: list[datetime],
    last: list[datetime],
    twice: list[datetime],
    gap: DstGap,
    repeat: DstRepeat,
) -> None:
    # Given a schedule whose slots fall into an overlap
    spec = Spec(cron=(cron,), time_zone=tz, dst_gap=gap, dst_repeat=repeat)
    # When its fire times are listed
    fires = fires_between(spec, start, end)
    # Then the repeat policy decides, and nothing is skipped
    assert fires == {DstRepeat.ONCE: once, DstRepeat.LAST: last, DstRepeat.TWICE: twice}[repeat]
    assert skipped_between(spec, start, end) == []


def test_next_fire_time_from_inside_an_overlap_finds_second_occurrences() -> None:
    # Given the planner stands at 01:40 EDT, the first pass through 01:00-02:00
    after = z("2024-11-03T05:40")
    base = Spec(cron=("*/30 1-2 * * *",), time_zone="America/New_York")
    # Then ONCE has nothing left in the hour; LAST and TWICE still owe 01:00 EST
    assert next_fire_time(base, after) == z("2024-11-03T07:00")
    for repeat in (DstRepeat.LAST, DstRepeat.TWICE):
        spec = Spec(cron=base.cron, time_zone=base.time_zone, dst_repeat=repeat)
        assert next_fire_time(spec, after) == z("2024-11-03T06:00")


def test_next_fire_time_from_the_second_pass_does_not_repeat_first_occurrences() -> None:
    # Given the planner stands at 01:10 EST, the second pass through the hour
    after = z("2024-11-03T06:10")
    for repeat, expected in [
        (DstRepeat.ONCE, z("2024-11-03T07:00")),
        (DstRepeat.LAST, z("2024-11-03T06:30")),
        (DstRepeat.TWICE, z("2024-11-03T06:30")),
    ]:
        spec = Spec(cron=("*/30 1-2 * * *",), time_zone="America/New_York", dst_repeat=repeat)
        assert next_fire_time(spec, after) == expected


def test_skipped_slot_is_reported_by_the_window_holding_its_instant() -> None:
    # Given SKIP in New York, the planner handles (07:10Z, 09:00Z] after the gap
    spec = Spec(cron=("*/30 * * * *",), time_zone="America/New_York", dst_gap=DstGap.SKIP)
    # Then 02:30 (reported at 07:30Z + 1 us) is in it and 02:00 (07:00Z + 1 us) is not
    reported = skipped_slots(spec, z("2024-03-10T07:10"), z("2024-03-10T09:00"))
    assert [(o.at, o.slot) for o in reported] == [
        (z("2024-03-10T07:30") + US, datetime(2024, 3, 10, 2, 30))
    ]


def test_skipped_and_fired_slots_interleave_by_instant() -> None:
    spec = Spec(cron=("*/30 * * * *",), time_zone="America/New_York", dst_gap=DstGap.SKIP)
    seen = list(itertools.islice(occurrences_after(spec, z("2024-03-10T06:45")), 5))
    assert [(o.at, o.skipped) for o in seen] == [
        (z("2024-03-10T07:00"), ""),  # 03:00 EDT
        (z("2024-03-10T07:00") + US, DST_GAP_SKIP),  # 02:00
        (z("2024-03-10T07:30"), ""),  # 03:30 EDT
        (z("2024-03-10T07:30") + US, DST_GAP_SKIP),  # 02:30
        (z("2024-03-10T08:00"), ""),  # 04:00 EDT
    ]


def test_intervals_and_one_offs_ignore_the_dst_policy() -> None:
    # Given an hourly interval and a one-off across New York's gap, with SKIP
    one_off = z("2024-03-10T07:30")  # 03:30 EDT
    from cronwave_core.domain.spec import Interval

    spec = Spec(
        intervals=(Interval(timedelta(hours=1)),),
        one_off=(one_off,),
        time_zone="America/New_York",
        dst_gap=DstGap.SKIP,
    )
    # Then they fire at their absolute instants, every one of them
    assert fires_between(spec, z("2024-03-10T05:30"), z("2024-03-10T08:00")) == [
        z("2024-03-10T06:00"),
        z("2024-03-10T07:00"),
        one_off,
        z("2024-03-10T08:00"),
    ]
    assert skipped_between(spec, z("2024-03-10T05:30"), z("2024-03-10T08:00")) == []
