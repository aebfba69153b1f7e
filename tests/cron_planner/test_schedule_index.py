"""ScheduleIndex: heap order, changes, pause and delete, with instants passed in."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from cron_planner.schedule_index import ScheduleIndex
from cronwave_core.spec import ScheduleDef, Spec

T0 = datetime(2030, 1, 7, 12, 0, 30, tzinfo=UTC)  # a Monday
LONG_AGO = T0 - timedelta(days=30)


def every(minutes: int, *, sid: str, revision: int = 1, paused: bool = False) -> ScheduleDef:
    return ScheduleDef(
        schedule_id=sid,
        spec=Spec(cron=(f"*/{minutes} * * * *",)),
        paused=paused,
        revision=revision,
    )


def cron(expr: str, *, sid: str, revision: int = 1) -> ScheduleDef:
    return ScheduleDef(schedule_id=sid, spec=Spec(cron=(expr,)), revision=revision)


def test_peek_returns_the_earliest_fire_across_schedules() -> None:
    # Given schedules every 2 and every 3 minutes, and a daily one
    index = ScheduleIndex()
    index.apply(every(2, sid="two"), T0, T0)
    index.apply(every(3, sid="three"), T0, T0)
    index.apply(cron("0 13 * * *", sid="daily"), T0, T0)

    # When each slot is consumed in turn
    seen = []
    for _ in range(7):
        slot = index.peek()
        assert slot is not None
        seen.append((slot.fire_time.strftime("%H:%M"), slot.schedule_id))
        index.advance(slot, slot.fire_time)

    # Then they come in fire-time order (ties by schedule id)
    assert seen == [
        ("12:02", "two"),
        ("12:03", "three"),
        ("12:04", "two"),
        ("12:06", "three"),
        ("12:06", "two"),
        ("12:08", "two"),
        ("12:09", "three"),
    ]


def test_due_only_when_the_fire_time_has_come() -> None:
    index = ScheduleIndex()
    index.apply(every(5, sid="s"), T0, T0)
    slot = index.peek()
    assert slot is not None and slot.fire_time == datetime(2030, 1, 7, 12, 5, tzinfo=UTC)

    assert index.due(slot.fire_time - timedelta(microseconds=1)) is None
    assert index.due(slot.fire_time) == slot


def test_a_new_schedule_fires_a_slot_from_the_last_minute_but_no_older_backlog() -> None:
    # Given a schedule that has existed for a month and fires every minute
    index = ScheduleIndex()
    index.apply(every(1, sid="s"), LONG_AGO, T0)

    # Then its first slot is the one 30 s ago (within the 60 s lookback), not older
    slot = index.peek()
    assert slot is not None
    assert slot.fire_time == datetime(2030, 1, 7, 12, 0, tzinfo=UTC)


def test_a_slot_before_the_schedule_existed_is_not_fired() -> None:
    index = ScheduleIndex()
    created = T0 - timedelta(seconds=10)  # after the 12:00:00 slot
    index.apply(every(1, sid="s"), created, T0)
    slot = index.peek()
    assert slot is not None and slot.fire_time == datetime(2030, 1, 7, 12, 1, tzinfo=UTC)


def test_advance_moves_only_that_schedule_and_never_refires_a_consumed_slot() -> None:
    index = ScheduleIndex()
    index.apply(every(1, sid="a"), LONG_AGO, T0)
    index.apply(every(2, sid="b"), LONG_AGO, T0)
    a = index.slot("a")
    b = index.slot("b")
    assert a is not None and b is not None

    nxt = index.advance(a, a.fire_time)

    assert nxt is not None and nxt.fire_time == a.fire_time + timedelta(minutes=1)
    assert index.slot("b") == b
    # advancing the same (now superseded) slot again changes nothing
    assert index.advance(a, a.fire_time) == nxt


def test_a_spec_change_recomputes_that_schedule_only() -> None:
    # Given two schedules
    index = ScheduleIndex()
    index.apply(every(10, sid="a"), T0, T0)
    index.apply(every(30, sid="b"), T0, T0)
    b_before = index.slot("b")

    # When a's calendar changes to every minute
    changed_at = T0 + timedelta(seconds=5)
    assert index.apply(every(1, sid="a", revision=2), changed_at, changed_at)

    # Then a's next fire follows the new spec and b is untouched
    a = index.slot("a")
    assert a is not None and a.fire_time == datetime(2030, 1, 7, 12, 1, tzinfo=UTC)
    assert index.slot("b") == b_before
    assert index.peek() == a
    assert index.revision == 2


def test_an_edit_that_keeps_the_calendar_keeps_the_pending_slot() -> None:
    index = ScheduleIndex()
    index.apply(every(10, sid="a"), LONG_AGO, T0)
    before = index.slot("a")

    edited = replace(every(10, sid="a", revision=2), payload_json='{"x": 1}')
    assert index.apply(edited, T0 + timedelta(minutes=30), T0 + timedelta(minutes=30))

    assert index.slot("a") == before
    got = index.get("a")
    assert got is not None and got.payload_json == '{"x": 1}'


def test_an_older_change_is_ignored() -> None:
    index = ScheduleIndex()
    index.apply(every(1, sid="a", revision=5), LONG_AGO, T0)
    before = index.slot("a")

    assert not index.apply(every(10, sid="a", revision=4), T0, T0)

    assert index.slot("a") == before
    got = index.get("a")
    assert got is not None and got.revision == 5


def test_paused_and_deleted_schedules_leave_the_heap() -> None:
    # Given two schedules, a firing first
    index = ScheduleIndex()
    index.apply(every(1, sid="a"), T0, T0)
    index.apply(every(5, sid="b"), T0, T0)
    first = index.peek()
    assert first is not None and first.schedule_id == "a"

    # When a is paused, b fires next; a is still known
    index.apply(every(1, sid="a", revision=2, paused=True), T0, T0)
    nxt = index.peek()
    assert nxt is not None and nxt.schedule_id == "b"
    assert index.slot("a") is None
    assert len(index) == 2

    # When b is deleted, nothing is scheduled
    assert index.remove("b", revision=3)
    assert index.peek() is None
    assert len(index) == 1
    assert index.revision == 3

    # When a resumes later, it fires after the resume, not the slots it paused through
    resumed = T0 + timedelta(minutes=10)
    index.apply(every(1, sid="a", revision=4), resumed, resumed)
    slot = index.peek()
    assert slot is not None and slot.fire_time == datetime(2030, 1, 7, 12, 11, tzinfo=UTC)


def test_a_deferred_slot_keeps_its_fire_time_and_lets_others_go_first() -> None:
    index = ScheduleIndex()
    index.apply(every(1, sid="a"), LONG_AGO, T0)
    index.apply(every(1, sid="b"), LONG_AGO, T0)
    first = index.peek()
    assert first is not None
    fire = first.fire_time

    retried = index.defer(first, fire + timedelta(seconds=3))

    assert retried is not None
    assert (retried.fire_time, retried.act_at, retried.attempts) == (
        fire,
        fire + timedelta(seconds=3),
        1,
    )
    other = index.peek()
    assert other is not None and other.schedule_id != first.schedule_id
    assert index.due(fire + timedelta(seconds=1)) == other
    index.advance(other, fire)
    assert index.due(fire + timedelta(seconds=3)) == retried


def test_rebase_starts_after_the_newest_fire_the_store_has() -> None:
    index = ScheduleIndex()
    index.apply(every(1, sid="a"), LONG_AGO, T0 - timedelta(minutes=5))
    stale = index.slot("a")
    assert stale is not None and stale.fire_time < T0 - timedelta(minutes=3)

    # newest run in the store: 12:00:00; so the next is 12:01:00
    nxt = index.rebase("a", datetime(2030, 1, 7, 12, 0, tzinfo=UTC), T0)
    assert nxt is not None and nxt.fire_time == datetime(2030, 1, 7, 12, 1, tzinfo=UTC)

    # no run at all: the last minute's slot (12:00:00) is still fired
    index.apply(every(1, sid="b"), LONG_AGO, T0 - timedelta(minutes=5))
    nxt_b = index.rebase("b", None, T0)
    assert nxt_b is not None and nxt_b.fire_time == datetime(2030, 1, 7, 12, 0, tzinfo=UTC)


def test_a_schedule_past_its_end_has_no_slot() -> None:
    index = ScheduleIndex()
    spec = Spec(cron=("* * * * *",), end_at=T0 - timedelta(hours=1))
    index.apply(ScheduleDef("ended", spec, revision=1), LONG_AGO, T0)
    assert index.slot("ended") is None
    assert index.peek() is None


def test_load_replaces_everything_and_sets_the_revision() -> None:
    index = ScheduleIndex()
    index.apply(every(1, sid="gone"), LONG_AGO, T0)

    index.load([(every(5, sid="x"), LONG_AGO), (every(7, sid="y"), LONG_AGO)], 42, T0)

    assert sorted(index.ids()) == ["x", "y"]
    assert index.revision == 42
    slot = index.peek()
    assert slot is not None and slot.schedule_id == "x"


def test_many_changes_keep_the_heap_bounded() -> None:
    # Given 100 schedules changed 50 times each
    index = ScheduleIndex()
    for i in range(100):
        index.apply(every(1 + i % 7, sid=f"s{i}"), LONG_AGO, T0)
    for rev in range(2, 52):
        for i in range(100):
            index.apply(every(1 + (i + rev) % 7, sid=f"s{i}", revision=rev), T0, T0)

    # Then stale heap entries were compacted away and the order is still right
    assert index.heap_size() <= 2 * 100 + 64
    first = index.peek()
    assert first is not None
    assert first.fire_time == min(
        s.fire_time for s in (index.slot(f"s{i}") for i in range(100)) if s is not None
    )
