"""ScheduleIndex: heap order, changes, pause and delete, with instants passed in."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from cron_planner.schedule_index import ScheduleIndex
from cronwave_core.domain.jitter import jittered
from cronwave_core.domain.spec import DstGap, ScheduleDef, Spec

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
    index.apply(every(2, sid="two"), T0)
    index.apply(every(3, sid="three"), T0)
    index.apply(cron("0 13 * * *", sid="daily"), T0)

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
    index.apply(every(5, sid="s"), T0)
    slot = index.peek()
    assert slot is not None and slot.fire_time == datetime(2030, 1, 7, 12, 5, tzinfo=UTC)

    assert index.due(slot.fire_time - timedelta(microseconds=1)) is None
    assert index.due(slot.fire_time) == slot


def test_the_first_slot_is_the_first_occurrence_after_the_schedule_took_effect() -> None:
    # Given a schedule that took effect a month ago and fires every minute
    index = ScheduleIndex()
    index.apply(every(1, sid="s"), LONG_AGO)

    # Then its first slot is the first minute after that: the fire loop plans the
    # backlog as a catch-up (window, policy), the index never skips it silently
    slot = index.peek()
    assert slot is not None
    assert slot.fire_time == LONG_AGO.replace(second=0) + timedelta(minutes=1)


def test_a_slot_before_the_schedule_existed_is_not_fired() -> None:
    index = ScheduleIndex()
    created = T0 - timedelta(seconds=10)  # after the 12:00:00 slot
    index.apply(every(1, sid="s"), created)
    slot = index.peek()
    assert slot is not None and slot.fire_time == datetime(2030, 1, 7, 12, 1, tzinfo=UTC)


def test_advance_moves_only_that_schedule_and_never_refires_a_consumed_slot() -> None:
    index = ScheduleIndex()
    index.apply(every(1, sid="a"), LONG_AGO)
    index.apply(every(2, sid="b"), LONG_AGO)
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
    index.apply(every(10, sid="a"), T0)
    index.apply(every(30, sid="b"), T0)
    b_before = index.slot("b")

    # When a's calendar changes to every minute
    changed_at = T0 + timedelta(seconds=5)
    assert index.apply(every(1, sid="a", revision=2), changed_at)

    # Then a's next fire follows the new spec and b is untouched
    a = index.slot("a")
    assert a is not None and a.fire_time == datetime(2030, 1, 7, 12, 1, tzinfo=UTC)
    assert index.slot("b") == b_before
    assert index.peek() == a
    assert index.revision == 2


def test_an_edit_that_keeps_the_calendar_keeps_the_pending_slot() -> None:
    index = ScheduleIndex()
    index.apply(every(10, sid="a"), LONG_AGO)
    before = index.slot("a")

    edited = replace(every(10, sid="a", revision=2), payload_json='{"x": 1}')
    assert index.apply(edited, T0 + timedelta(minutes=30))

    assert index.slot("a") == before
    got = index.get("a")
    assert got is not None and got.payload_json == '{"x": 1}'


def test_an_older_change_is_ignored() -> None:
    index = ScheduleIndex()
    index.apply(every(1, sid="a", revision=5), LONG_AGO)
    before = index.slot("a")

    assert not index.apply(every(10, sid="a", revision=4), T0)

    assert index.slot("a") == before
    got = index.get("a")
    assert got is not None and got.revision == 5


def test_paused_and_deleted_schedules_leave_the_heap() -> None:
    # Given two schedules, a firing first
    index = ScheduleIndex()
    index.apply(every(1, sid="a"), T0)
    index.apply(every(5, sid="b"), T0)
    first = index.peek()
    assert first is not None and first.schedule_id == "a"

    # When a is paused, b fires next; a is still known
    index.apply(every(1, sid="a", revision=2, paused=True), T0)
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
    index.apply(every(1, sid="a", revision=4), resumed)
    slot = index.peek()
    assert slot is not None and slot.fire_time == datetime(2030, 1, 7, 12, 11, tzinfo=UTC)


def test_jitter_delays_the_act_not_the_nominal_fire_time() -> None:
    index = ScheduleIndex()
    spec = Spec(cron=("0 * * * *",), jitter=timedelta(minutes=5))
    index.apply(ScheduleDef("j", spec, revision=1), T0)

    slot = index.slot("j")

    assert slot is not None
    assert slot.fire_time == datetime(2030, 1, 7, 13, 0, tzinfo=UTC)
    assert slot.fire_time <= slot.act_at < slot.fire_time + timedelta(minutes=5)
    assert slot.act_at == jittered("j", slot.fire_time, timedelta(minutes=5))


def test_rebase_starts_after_the_newest_fire_the_store_has() -> None:
    index = ScheduleIndex()
    index.apply(every(1, sid="a"), LONG_AGO)
    index.apply(every(1, sid="b"), T0 - timedelta(minutes=5))
    a = index.slot("a")
    assert a is not None
    index.advance(a, T0)  # this planner had handled `a` up to T0

    # The store says `a` was handled up to 12:00:00; `b` has no runs at all
    index.rebase({"a": (datetime(2030, 1, 7, 12, 0, tzinfo=UTC), 3)})

    nxt_a, nxt_b = index.slot("a"), index.slot("b")
    assert nxt_a is not None and nxt_a.fire_time == datetime(2030, 1, 7, 12, 1, tzinfo=UTC)
    # nothing handled: from the instant `b` took effect
    assert nxt_b is not None and nxt_b.fire_time == datetime(2030, 1, 7, 11, 56, tzinfo=UTC)
    pos = index.position(nxt_a)
    assert pos is not None and pos.fires == 3


def test_a_dst_skipped_slot_is_a_slot_so_it_is_recorded_when_it_comes() -> None:
    index = ScheduleIndex()
    spec = Spec(cron=("30 2 * * *",), time_zone="America/New_York", dst_gap=DstGap.SKIP)
    index.apply(ScheduleDef("ny", spec, revision=1), datetime(2030, 3, 9, 12, 0, tzinfo=UTC))

    slot = index.slot("ny")

    # 2030-03-10 02:30 does not exist in New York: reported at its nominal instant + 1 us
    assert slot is not None
    assert slot.fire_time == datetime(2030, 3, 10, 7, 30, 0, 1, tzinfo=UTC)
    assert slot.act_at == slot.fire_time


def test_max_runs_without_start_counts_the_fires_handled() -> None:
    index = ScheduleIndex()
    spec = Spec(cron=("* * * * *",), max_runs=2)
    index.apply(ScheduleDef("m", spec, revision=1), T0)
    first = index.slot("m")
    assert first is not None

    second = index.advance(first, first.fire_time, fires=1)
    assert second is not None
    assert index.advance(second, second.fire_time, fires=1) is None


def test_a_schedule_past_its_end_has_no_slot() -> None:
    index = ScheduleIndex()
    spec = Spec(cron=("* * * * *",), end_at=T0 - timedelta(hours=1))
    index.apply(ScheduleDef("ended", spec, revision=1), T0)
    assert index.slot("ended") is None
    assert index.peek() is None


def test_load_replaces_everything_and_sets_the_revision() -> None:
    index = ScheduleIndex()
    index.apply(every(1, sid="gone"), LONG_AGO)

    index.load([(every(5, sid="x"), T0), (every(7, sid="y"), T0)], 42)

    assert sorted(index.ids()) == ["x", "y"]
    assert index.revision == 42
    slot = index.peek()
    assert slot is not None and slot.schedule_id == "x"


def test_a_load_remembers_what_was_handled_of_the_schedules_that_stay() -> None:
    # Given `a` handled up to T0 and a slot of `b` handed out
    index = ScheduleIndex()
    index.apply(every(1, sid="a"), LONG_AGO)
    index.apply(every(1, sid="b"), LONG_AGO)
    a, b = index.slot("a"), index.slot("b")
    assert a is not None and b is not None
    index.advance(a, T0, 3)

    # When a listing gathered one by one replaces everything
    loading = index.loading()
    loading.add(every(1, sid="a", revision=2), LONG_AGO)
    loading.add(every(1, sid="b", revision=2), LONG_AGO)
    index.load(loading, 2)

    # Then `a` goes on after T0, `b` starts again from where it took effect, and the
    # slot handed out before the load is superseded
    nxt_a, nxt_b = index.slot("a"), index.slot("b")
    assert nxt_a is not None and nxt_a.fire_time == datetime(2030, 1, 7, 12, 1, tzinfo=UTC)
    assert nxt_b is not None and nxt_b.fire_time == b.fire_time
    assert index.position(b) is None
    assert index.peek() == nxt_b


def test_many_changes_keep_the_heap_bounded() -> None:
    # Given 100 schedules changed 50 times each
    index = ScheduleIndex()
    for i in range(100):
        index.apply(every(1 + i % 7, sid=f"s{i}"), LONG_AGO)
    for rev in range(2, 52):
        for i in range(100):
            index.apply(every(1 + (i + rev) % 7, sid=f"s{i}", revision=rev), T0)

    # Then stale heap entries were compacted away and the order is still right
    assert index.heap_size() <= 2 * 100 + 64
    first = index.peek()
    assert first is not None
    assert first.fire_time == min(
        s.fire_time for s in (index.slot(f"s{i}") for i in range(100)) if s is not None
    )


def test_rebase_of_some_schedules_leaves_the_others_and_the_unchanged_as_they_stand() -> None:
    index = ScheduleIndex()
    for sid in ("a", "b", "c"):
        index.apply(every(1, sid=sid), T0 - timedelta(minutes=5))
    a, b, c = (index.slot(sid) for sid in ("a", "b", "c"))
    assert a is not None and b is not None and c is not None
    index.advance(a, T0)
    index.advance(c, T0)  # this planner had handled `a` and `c` up to T0

    # When only `a` and `b` are re-based: the store has nothing of either
    index.rebase({}, only=["a", "b", "gone"])

    # Then `a` starts again from where it took effect, `b` (nothing handled, as the store
    # says) keeps its slot as it was, and `c`, not named, keeps this planner's word
    nxt_a, nxt_c = index.slot("a"), index.slot("c")
    assert nxt_a is not None and nxt_a.fire_time == a.fire_time
    assert index.slot("b") == b
    assert nxt_c is not None and nxt_c.fire_time > T0


def test_a_parked_slot_stays_out_of_the_heap_through_changes_until_it_is_re_based() -> None:
    # Given three schedules: every 5 minutes, daily at 13:00, and a paused one
    index = ScheduleIndex()
    index.apply(cron("0 13 * * *", sid="daily"), T0)
    index.apply(every(5, sid="five"), T0)
    index.apply(every(1, sid="paused", paused=True), T0)
    five = index.slot("five")

    # When their shard is parked: the ones with a slot soonest first, then the rest
    assert index.park({0}) == ["five", "daily", "paused"]

    # Then none is handed out: not after an edit, nor after a load that keeps them
    assert index.peek() is None and index.slot("five") is None
    index.apply(every(10, sid="five", revision=2), T0)
    index.load([(cron("0 13 * * *", sid="daily"), T0), (every(10, sid="five", revision=2), T0)], 3)
    assert index.peek() is None and index.heap_size() == 0

    # When the store's word is taken for them: `five` fired 12:10 already
    index.rebase({"five": (datetime(2030, 1, 7, 12, 10, tzinfo=UTC), 1)}, only=["five", "daily"])

    # Then their slots are back, from where the store says they stand
    nxt = index.slot("five")
    assert nxt is not None and five is not None
    assert nxt.fire_time == datetime(2030, 1, 7, 12, 20, tzinfo=UTC) != five.fire_time
    daily = index.slot("daily")
    assert daily is not None and daily.fire_time == datetime(2030, 1, 7, 13, 0, tzinfo=UTC)
    assert index.peek() == nxt and index.heap_size() == 2
