"""Properties of the calendar over generated specs and instants."""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, available_timezones

from croniter import croniter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronwave_core.domain.calendar import (
    fire_times,
    next_fire_time,
    occurrences_after,
    skipped_slots,
    validate,
)
from cronwave_core.domain.spec import DstGap, DstRepeat, Interval, Spec
from cronwave_core.errors import InvalidArgument

from .oracle import expected

ZONES = sorted(available_timezones())
GAPS = st.sampled_from(list(DstGap))
REPEATS = st.sampled_from(list(DstRepeat))

# Instants near transitions of the four zones the DST suite is about.
TRANSITIONS = [
    ("America/New_York", datetime(2024, 3, 10, 7, tzinfo=UTC)),
    ("America/New_York", datetime(2024, 11, 3, 6, tzinfo=UTC)),
    ("Europe/London", datetime(2024, 3, 31, 1, tzinfo=UTC)),
    ("Europe/London", datetime(2024, 10, 27, 1, tzinfo=UTC)),
    ("Australia/Lord_Howe", datetime(2024, 4, 6, 15, tzinfo=UTC)),
    ("Australia/Lord_Howe", datetime(2024, 10, 5, 15, 30, tzinfo=UTC)),
    ("Pacific/Apia", datetime(2011, 9, 24, 14, tzinfo=UTC)),
    ("Pacific/Apia", datetime(2011, 12, 30, 10, tzinfo=UTC)),
    ("Pacific/Apia", datetime(2012, 3, 31, 14, tzinfo=UTC)),
]

MINUTE_WISE = st.builds(
    lambda m, h, dow: f"{m} {h} * * {dow}",
    st.sampled_from(["0", "30", "*/15", "*/20", "45", "0,30", "*/7", "5-55/25", "*"]),
    st.sampled_from(["*", "0-3", "1", "2", "1,2", "*/2", "0,9,12,23", "22-4"]),
    st.sampled_from(["*", "*", "0", "1-5"]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    where=st.sampled_from(TRANSITIONS),
    shift=st.integers(min_value=-36 * 60, max_value=36 * 60),
    seconds=st.integers(min_value=0, max_value=59),
    cron=MINUTE_WISE,
    gap=GAPS,
    repeat=REPEATS,
)
def test_matches_brute_force_around_transitions(
    where: tuple[str, datetime],
    shift: int,
    seconds: int,
    cron: str,
    gap: DstGap,
    repeat: DstRepeat,
) -> None:
    # Given any instant within a day and a half of a transition
    name, transition = where
    after = transition + timedelta(minutes=shift, seconds=seconds)
    until = after + timedelta(hours=8)
    spec = Spec(cron=(cron,), time_zone=name, dst_gap=gap, dst_repeat=repeat)
    # When the calendar lists the next eight hours
    fires = list(itertools.takewhile(lambda t: t <= until, fire_times(spec, after)))
    skipped = [o.at for o in skipped_slots(spec, after, until)]
    # Then it agrees with a minute-by-minute scan of the zone
    want_fires, want_skipped = expected(cron, ZoneInfo(name), gap, repeat, after, until)
    assert fires == want_fires
    assert skipped == want_skipped
    if want_fires:
        assert next_fire_time(spec, after) == want_fires[0]


SECOND = st.sampled_from(["0", "*/15", "30", "5,45"])
MINUTE = st.sampled_from(["*", "*/5", "0", "15,45", "10-20", "*/13", "59"])
HOUR = st.sampled_from(["*", "0", "*/6", "9-17", "23", "22-2"])
MONTH = st.sampled_from(["*", "jan", "*/3", "feb-apr", "12", "JUN,dec", "Jan-Mar/2"])
PLAIN_DOM = st.sampled_from(["1", "15", "L", "1,15", "10-L", "29", "31"])
PLAIN_DOW = st.sampled_from(["mon-fri", "0", "7", "sat,sun", "TUE"])
SPECIAL_DOM = st.sampled_from(["15W", "1W", "31W"])
SPECIAL_DOW = st.sampled_from(["5#3", "L5", "1#1,3#2", "fri#2", "L0"])
ANY = st.sampled_from(["*", "?"])
DAYS = st.one_of(
    st.tuples(ANY, ANY),
    st.tuples(PLAIN_DOM, ANY),
    st.tuples(ANY, PLAIN_DOW),
    st.tuples(PLAIN_DOM, PLAIN_DOW),
    st.tuples(SPECIAL_DOM, ANY),
    st.tuples(ANY, SPECIAL_DOW),
)


@st.composite
def cron_texts(draw: st.DrawFn) -> str:
    dom, dow = draw(DAYS)
    body = f"{draw(MINUTE)} {draw(HOUR)} {dom} {draw(MONTH)} {dow}"
    return f"{draw(SECOND)} {body}" if draw(st.booleans()) else body


INSTANTS = st.datetimes(
    min_value=datetime(1990, 1, 1), max_value=datetime(2040, 1, 1), timezones=st.just(UTC)
)


@settings(max_examples=200, deadline=None)
@given(cron=cron_texts(), after=INSTANTS)
def test_agrees_with_croniter_in_utc(cron: str, after: datetime) -> None:
    # Given a UTC spec, 5 or 6 fields (seconds first), with names, L, W and #
    spec = Spec(cron=(cron,))
    # When we and croniter list the next fire times
    ours = list(itertools.islice(fire_times(spec, after), 6))
    reference = croniter(cron, after, second_at_beginning=True)
    theirs = [reference.get_next(datetime).astimezone(UTC) for _ in range(6)]
    # Then they are the same instants
    assert ours == theirs


@settings(max_examples=150, deadline=None)
@given(
    name=st.sampled_from(ZONES),
    crons=st.lists(MINUTE_WISE, min_size=1, max_size=3),
    every=st.integers(min_value=1, max_value=7200),
    one_off=st.lists(INSTANTS, max_size=3),
    after=st.datetimes(
        min_value=datetime(1970, 1, 2), max_value=datetime(2037, 12, 1), timezones=st.just(UTC)
    ),
    gap=GAPS,
    repeat=REPEATS,
)
def test_fire_times_strictly_increase_and_each_slot_fires_once(
    name: str,
    crons: list[str],
    every: int,
    one_off: list[datetime],
    after: datetime,
    gap: DstGap,
    repeat: DstRepeat,
) -> None:
    # Given a union of cron expressions, an interval and one-off times in any zone
    spec = Spec(
        cron=tuple(crons),
        intervals=(Interval(timedelta(seconds=every * 60)),),
        one_off=tuple(one_off),
        time_zone=name,
        dst_gap=gap,
        dst_repeat=repeat,
    )
    seen = list(itertools.islice(occurrences_after(spec, after), 80))
    # Then instants strictly increase and lie after `after`
    instants = [o.at for o in seen]
    assert all(a < b for a, b in itertools.pairwise(instants))
    assert all(t > after for t in instants)
    # And a wall-clock slot fires at most once (twice only under TWICE)
    per_slot = Counter(o.slot for o in seen if o.slot is not None and not o.skipped)
    assert max(per_slot.values(), default=0) <= (2 if repeat == DstRepeat.TWICE else 1)
    # And a slot fires at its own wall-clock time, unless it lies in a gap: then it
    # fires at the first instant after the gap (SHIFT) or not at all (SKIP)
    tz = ZoneInfo(name)
    for occ in seen:
        if occ.slot is None:
            continue
        exists = wall(occ.slot.replace(tzinfo=tz).astimezone(UTC), tz) == occ.slot
        if occ.skipped:
            assert gap == DstGap.SKIP and not exists
        elif wall(occ.at, tz) != occ.slot:
            assert gap == DstGap.SHIFT and not exists
            assert wall(occ.at - timedelta(seconds=1), tz) < occ.slot < wall(occ.at, tz)


def wall(instant: datetime, tz: ZoneInfo) -> datetime:
    return instant.astimezone(tz).replace(tzinfo=None)


SPARSE = st.builds(
    lambda m, h: f"{m} {h} * * *",
    st.sampled_from(["0", "30", "*/15", "*/20", "45", "0,30", "*/7"]),
    st.sampled_from(["*", "0-3", "1", "2", "1,2", "*/2", "22-4"]),
)


@settings(max_examples=100, deadline=None)
@given(
    name=st.sampled_from(ZONES),
    cron=SPARSE,
    after=st.datetimes(
        min_value=datetime(1970, 1, 5), max_value=datetime(2037, 12, 1), timezones=st.just(UTC)
    ),
    gap=GAPS,
    repeat=REPEATS,
)
def test_the_answer_does_not_depend_on_where_the_walk_starts(
    name: str, cron: str, after: datetime, gap: DstGap, repeat: DstRepeat
) -> None:
    # Given any zone, and the same spec asked from `after` and from 27 hours earlier
    # (further back than any gap or overlap is wide)
    spec = Spec(cron=(cron,), time_zone=name, dst_gap=gap, dst_repeat=repeat)
    until = after + timedelta(hours=3)
    early = occurrences_after(spec, after - timedelta(hours=27))
    from_early = [o for o in itertools.takewhile(lambda o: o.at <= until, early) if o.at > after]
    # Then what follows `after` is the same either way, skipped slots included
    direct = list(itertools.takewhile(lambda o: o.at <= until, occurrences_after(spec, after)))
    assert direct == from_early
    fired = [o.at for o in direct if not o.skipped]
    if fired:
        assert next_fire_time(spec, after) == fired[0]


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=40))
def test_any_text_is_either_a_cron_expression_or_an_invalid_argument(text: str) -> None:
    try:
        validate(Spec(cron=(text,)))
    except InvalidArgument as exc:
        assert exc.field == "spec.cron[0]"
