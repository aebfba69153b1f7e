"""Catch-up after an outage: every slot in (last_handled, now] runs or is MISSED
with a reason."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from cronwave_core.domain.calendar import DST_GAP_SKIP, occurrences_after
from cronwave_core.domain.catchup import (
    CATCHUP_CAP,
    CATCHUP_SKIP,
    MAX_SPACING,
    MIN_SPACING,
    OUTSIDE_CATCHUP_WINDOW,
    SUPERSEDED_BY_LATEST,
    CatchupPlan,
    check_coherent,
    plan_catchup,
)
from cronwave_core.domain.spec import Catchup, DstGap, Interval, Overlap, Policy, Spec
from cronwave_core.errors import InvalidArgument


def z(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


QUARTERLY = Spec(cron=("*/15 * * * *",))
LAST = z("2024-01-01T06:00")  # the planner handled everything through 06:00 ...
NOW = z("2024-01-01T12:00:10")  # ... and comes back six hours later
OUTSIDE = [z("2024-01-01T06:15") + timedelta(minutes=15 * i) for i in range(20)]  # .. 11:00


def policy(catchup: Catchup, max_runs: int = 2) -> Policy:
    return Policy(catchup=catchup, catchup_window=timedelta(hours=1), catchup_max_runs=max_runs)


def reasons(plan: CatchupPlan) -> dict[datetime, str]:
    return {m.fire_time: m.reason for m in plan.missed}


def assert_partition(spec: Spec, plan: CatchupPlan, last: datetime, now: datetime) -> None:
    """Every occurrence in (last, now] is run or missed, exactly once."""
    occurrences = list(itertools.takewhile(lambda o: o.at <= now, occurrences_after(spec, last)))
    outcomes = list(plan.to_run) + [m.fire_time for m in plan.missed]
    assert sorted(outcomes) == [o.at for o in occurrences]
    assert plan.handled_through == now


def test_skip_runs_only_the_due_slot() -> None:
    plan = plan_catchup(QUARTERLY, policy(Catchup.SKIP), LAST, NOW)
    assert plan.due == (z("2024-01-01T12:00"),)
    assert plan.catchup == ()
    assert reasons(plan) == {
        **{t: OUTSIDE_CATCHUP_WINDOW for t in OUTSIDE},
        z("2024-01-01T11:15"): CATCHUP_SKIP,
        z("2024-01-01T11:30"): CATCHUP_SKIP,
        z("2024-01-01T11:45"): CATCHUP_SKIP,
    }
    assert plan.min_spacing == timedelta(0)
    assert_partition(QUARTERLY, plan, LAST, NOW)


def test_latest_with_a_due_slot_supersedes_every_late_one() -> None:
    plan = plan_catchup(QUARTERLY, policy(Catchup.LATEST), LAST, NOW)
    assert plan.to_run == (z("2024-01-01T12:00"),)
    assert plan.catchup == ()
    assert reasons(plan) == {
        **{t: OUTSIDE_CATCHUP_WINDOW for t in OUTSIDE},
        z("2024-01-01T11:15"): SUPERSEDED_BY_LATEST,
        z("2024-01-01T11:30"): SUPERSEDED_BY_LATEST,
        z("2024-01-01T11:45"): SUPERSEDED_BY_LATEST,
    }
    assert_partition(QUARTERLY, plan, LAST, NOW)


def test_latest_without_a_due_slot_runs_the_newest_late_one() -> None:
    now = z("2024-01-01T11:58")  # 11:45 is 13 minutes late: not due
    plan = plan_catchup(QUARTERLY, policy(Catchup.LATEST), LAST, now)
    assert plan.due == ()
    assert plan.catchup == (z("2024-01-01T11:45"),)
    assert reasons(plan) == {
        **{t: OUTSIDE_CATCHUP_WINDOW for t in OUTSIDE[:-1]},  # 06:15 .. 10:45
        z("2024-01-01T11:00"): SUPERSEDED_BY_LATEST,
        z("2024-01-01T11:15"): SUPERSEDED_BY_LATEST,
        z("2024-01-01T11:30"): SUPERSEDED_BY_LATEST,
    }
    assert_partition(QUARTERLY, plan, LAST, now)


def test_all_runs_the_newest_late_slots_up_to_the_cap() -> None:
    plan = plan_catchup(QUARTERLY, policy(Catchup.ALL, max_runs=2), LAST, NOW)
    assert plan.due == (z("2024-01-01T12:00"),)
    assert plan.catchup == (z("2024-01-01T11:30"), z("2024-01-01T11:45"))
    assert reasons(plan) == {
        **{t: OUTSIDE_CATCHUP_WINDOW for t in OUTSIDE},
        z("2024-01-01T11:15"): CATCHUP_CAP,
    }
    # two catch-up runs share the 14m50s before 12:15: a minute apart at most
    assert plan.min_spacing == MAX_SPACING
    assert_partition(QUARTERLY, plan, LAST, NOW)


def test_all_within_the_cap_runs_every_late_slot_in_the_window() -> None:
    plan = plan_catchup(QUARTERLY, policy(Catchup.ALL, max_runs=100), LAST, NOW)
    assert plan.catchup == (z("2024-01-01T11:15"), z("2024-01-01T11:30"), z("2024-01-01T11:45"))
    assert set(reasons(plan).values()) == {OUTSIDE_CATCHUP_WINDOW}
    assert_partition(QUARTERLY, plan, LAST, NOW)


def test_a_long_catch_up_is_paced_not_stormed() -> None:
    # Given every minute, a six-hour window, ALL with a high cap
    spec = Spec(cron=("* * * * *",))
    wide = Policy(catchup=Catchup.ALL, catchup_window=timedelta(hours=6), catchup_max_runs=1000)
    plan = plan_catchup(spec, wide, LAST, NOW, grace=timedelta(0))
    # Then 360 catch-up runs come with the floor spacing, not all at once
    assert len(plan.catchup) == 360
    assert plan.min_spacing == MIN_SPACING
    assert_partition(spec, plan, LAST, NOW)


def test_grace_decides_what_counts_as_due() -> None:
    now = z("2024-01-01T11:58")  # 11:45 is 13 minutes late, and 12:00 has not come
    plan = plan_catchup(QUARTERLY, policy(Catchup.SKIP), LAST, now, grace=timedelta(minutes=20))
    assert plan.due == (z("2024-01-01T11:45"),)
    assert reasons(plan)[z("2024-01-01T11:30")] == CATCHUP_SKIP


def test_a_slot_whose_successor_has_come_is_late_however_wide_the_grace() -> None:
    plan = plan_catchup(QUARTERLY, policy(Catchup.SKIP), LAST, NOW, grace=timedelta(minutes=20))
    assert plan.due == (z("2024-01-01T12:00"),)
    assert reasons(plan)[z("2024-01-01T11:45")] == CATCHUP_SKIP


EVERY_SECOND = Spec(intervals=(Interval(timedelta(seconds=1)),))
STOPPED_AT = z("2024-01-01T12:00:00")
BACK_AT = STOPPED_AT + timedelta(seconds=13, milliseconds=200)  # 13 s stopped
OLDER = [STOPPED_AT + timedelta(seconds=s) for s in range(1, 13)]  # 12:00:01 .. 12:00:12


@pytest.mark.parametrize(
    ("catchup", "overlap", "catchup_runs", "reason"),
    [
        (Catchup.LATEST, Overlap.SKIP, [], SUPERSEDED_BY_LATEST),
        (Catchup.SKIP, Overlap.SKIP, [], CATCHUP_SKIP),
        (Catchup.ALL, Overlap.BUFFER_ALL, OLDER, None),
        (Catchup.LATEST, Overlap.ALLOW_ALL, OLDER, None),
    ],
    ids=["latest", "skip", "all", "side-by-side"],
)
def test_a_planner_back_13s_behind_a_one_second_schedule_runs_the_newest_slot_as_due(
    catchup: Catchup, overlap: Overlap, catchup_runs: list[datetime], reason: str | None
) -> None:
    # Given a 1 s schedule handled through 12:00:00 and a planner back at 12:00:13.2:
    # every slot since is within the one-minute grace
    rules = Policy(catchup=catchup, overlap=overlap, catchup_max_runs=100)

    # When it plans them
    plan = plan_catchup(EVERY_SECOND, rules, STOPPED_AT, BACK_AT)

    # Then only the newest is due (SCHEDULED, on time); the twelve before it were not
    # fired on time: catch-up runs when they may run side by side (allow_all), else
    # what the catch-up policy says
    assert plan.due == (STOPPED_AT + timedelta(seconds=13),)
    assert plan.catchup == tuple(catchup_runs)
    assert reasons(plan) == ({t: reason for t in OLDER} if reason else {})
    assert_partition(EVERY_SECOND, plan, STOPPED_AT, BACK_AT)


def test_a_jittered_successor_that_may_not_have_come_supersedes_nothing() -> None:
    # Given a 1 s schedule with 5 s of jitter, planned 2 s after a slot
    spec = Spec(intervals=(Interval(timedelta(seconds=1)),), jitter=timedelta(seconds=5))
    now = STOPPED_AT + timedelta(seconds=2, milliseconds=500)
    plan = plan_catchup(spec, policy(Catchup.SKIP), STOPPED_AT, now)
    # Then none of the slots has certainly come after another: all are due
    assert plan.due == (STOPPED_AT + timedelta(seconds=1), STOPPED_AT + timedelta(seconds=2))
    assert plan.missed == ()


def test_dst_skipped_slots_in_the_outage_are_missed_with_their_reason() -> None:
    # Given New York with SKIP, half-hourly, and an outage across the 2024 gap
    spec = Spec(cron=("*/30 * * * *",), time_zone="America/New_York", dst_gap=DstGap.SKIP)
    last, now = z("2024-03-10T05:00"), z("2024-03-10T11:00")
    plan = plan_catchup(spec, Policy(catchup=Catchup.LATEST), last, now)
    # Then 02:00 and 02:30 are missed as dst_gap_skip, not as outside the window
    skipped = [(m.slot, m.reason) for m in plan.missed if m.reason == DST_GAP_SKIP]
    assert skipped == [
        (datetime(2024, 3, 10, 2, 0), DST_GAP_SKIP),
        (datetime(2024, 3, 10, 2, 30), DST_GAP_SKIP),
    ]
    assert plan.to_run == (z("2024-03-10T11:00"),)
    assert_partition(spec, plan, last, now)


def test_past_the_limit_old_slots_are_summarised_not_enumerated() -> None:
    # Given every minute and a six-hour outage, listing at most 50 slots outside
    spec = Spec(cron=("* * * * *",))
    plan = plan_catchup(spec, policy(Catchup.LATEST), LAST, NOW, limit=50)
    outside = [m.fire_time for m in plan.missed if m.reason == OUTSIDE_CATCHUP_WINDOW]
    # Then 50 are listed, the rest up to the window's start is one span, and the
    # window itself is listed in full
    assert outside == [LAST + timedelta(minutes=i) for i in range(1, 51)]
    assert plan.unlisted is not None
    assert plan.unlisted.after == outside[-1]
    assert plan.unlisted.through == z("2024-01-01T11:00:10") - timedelta(microseconds=1)
    assert plan.unlisted.reason == OUTSIDE_CATCHUP_WINDOW
    in_window = [m.fire_time for m in plan.missed if m.reason == SUPERSEDED_BY_LATEST]
    assert in_window[0] == z("2024-01-01T11:01")
    assert plan.to_run == (z("2024-01-01T12:00"),)
    assert in_window == [z("2024-01-01T11:01") + timedelta(minutes=i) for i in range(59)]


@pytest.mark.parametrize(
    ("pol", "last", "now", "kwargs", "field"),
    [
        (policy(Catchup.ALL), NOW, LAST, {}, "now"),
        (policy(Catchup.ALL), datetime(2024, 1, 1), NOW, {}, "last_handled"),
        (Policy(catchup_window=timedelta(seconds=-1)), LAST, NOW, {}, "policy.catchup_window"),
        (Policy(catchup_max_runs=-1), LAST, NOW, {}, "policy.catchup_max_runs"),
        (policy(Catchup.ALL), LAST, NOW, {"grace": timedelta(seconds=-1)}, "grace"),
        (policy(Catchup.ALL), LAST, NOW, {"limit": 0}, "limit"),
    ],
)
def test_bad_inputs_are_refused_naming_the_field(
    pol: Policy, last: datetime, now: datetime, kwargs: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        plan_catchup(QUARTERLY, pol, last, now, **kwargs)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_nothing_to_do_when_nothing_was_due() -> None:
    plan = plan_catchup(QUARTERLY, policy(Catchup.ALL), LAST, LAST + timedelta(minutes=10))
    assert plan.to_run == () and plan.missed == () and plan.unlisted is None


@pytest.mark.parametrize("overlap", list(Overlap))
def test_catch_up_all_is_accepted_only_with_an_overlap_that_starts_every_run(
    overlap: Overlap,
) -> None:
    # Given catch-up "all" under each overlap policy
    chosen = Policy(overlap=overlap, catchup=Catchup.ALL)

    # Then only buffer_all and allow_all are coherent; the others are refused naming
    # the overlap field and the policies that would do
    if overlap in (Overlap.BUFFER_ALL, Overlap.ALLOW_ALL):
        check_coherent(chosen)
    else:
        with pytest.raises(InvalidArgument, match=r"policy\.overlap.*buffer_all or allow_all"):
            check_coherent(chosen)
    # and the other catch-up policies go with any overlap policy
    for catchup in (Catchup.SKIP, Catchup.LATEST):
        check_coherent(Policy(overlap=overlap, catchup=catchup))
