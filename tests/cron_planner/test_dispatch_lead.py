"""The dispatch lead: a slot is acted on ``lead`` before its fire time (at most half
the gap since the schedule's previous slot), its run carries the nominal fire time,
and an overlap decision that would see a run still in flight waits for the instant.

Manual clock, in-process recorders for the dispatcher and the store."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from cron_planner.app import Planner
from cron_planner.clock import ManualClock
from cron_planner.fire_loop import FireLoop
from cron_planner.ports import Start
from cron_planner.schedule_index import ScheduleIndex
from cron_planner.work import InFlight, Missed, Trigger
from cronwave_core.domain.spec import Interval, Overlap, Policy, ScheduleDef, Spec
from cronwave_core.errors import CronwaveError
from tests.cron_planner.fakes import start_each
from tests.helpers import eventually

NOON = datetime(2030, 1, 7, 12, 0, tzinfo=UTC)
LEAD = timedelta(seconds=2)


def _daily(sid: str = "daily", jitter: timedelta = timedelta(0)) -> ScheduleDef:
    return ScheduleDef(sid, Spec(cron=("0 12 * * *",), jitter=jitter), revision=1)


def test_a_slot_is_acted_on_the_lead_before_its_fire_time() -> None:
    index = ScheduleIndex(lead=LEAD)

    index.apply(_daily(), NOON - timedelta(hours=1))

    slot = index.peek()
    assert slot is not None
    assert (slot.fire_time, slot.act_at) == (NOON, NOON - LEAD)


def test_the_lead_is_at_most_half_the_gap_since_the_previous_slot() -> None:
    index = ScheduleIndex(lead=LEAD)
    every_second = ScheduleDef("s", Spec(intervals=(Interval(timedelta(seconds=1)),)), revision=1)
    index.apply(every_second, NOON - timedelta(seconds=10))
    first = index.peek()
    assert first is not None

    second = index.advance(first, first.fire_time, 1)

    assert second is not None
    assert second.fire_time == first.fire_time + timedelta(seconds=1)
    assert second.act_at == second.fire_time - timedelta(milliseconds=500)


def test_no_lead_for_a_jittered_schedule_nor_with_lead_zero() -> None:
    jittered = ScheduleIndex(lead=LEAD)
    jittered.apply(_daily(jitter=timedelta(minutes=5)), NOON - timedelta(hours=1))
    plain = ScheduleIndex()
    plain.apply(_daily(), NOON - timedelta(hours=1))

    slot = jittered.peek()
    assert slot is not None and slot.act_at >= slot.fire_time  # the jittered instant
    slot = plain.peek()
    assert slot is not None and slot.act_at == slot.fire_time


def test_a_negative_lead_is_refused() -> None:
    with pytest.raises(ValueError, match="lead"):
        ScheduleIndex(lead=-LEAD)


# the fire loop --------------------------------------------------------------------


@dataclass
class Leading:
    def token(self) -> int:
        return 3

    def step_down(self, reason: str) -> None:
        raise AssertionError(f"stepped down: {reason}")


@dataclass
class Recorder:
    """The dispatcher and the store, as the fire loop sees them."""

    clock: ManualClock
    starts: list[tuple[datetime, datetime]] = field(default_factory=list)  # (when, fire time)
    missed: list[tuple[datetime, str]] = field(default_factory=list)
    running: list[InFlight] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    calls: list[list[datetime]] = field(default_factory=list)  # fire times per call

    def start_runs(self, starts: Sequence[Start], token: int) -> list[str | CronwaveError]:
        with self.lock:
            self.calls.append([s.fire_time for s in starts])
        return start_each(self.start_run, starts, token)

    def start_run(
        self,
        schedule_id: str,
        fire_time: datetime,
        token: int,
        trigger: Trigger = Trigger.SCHEDULED,
    ) -> str:
        with self.lock:
            self.starts.append((self.clock.now(), fire_time))
        return f"run-{fire_time:%H%M%S}"

    def record_missed(self, slots: Sequence[Missed], token: int) -> list[str]:
        with self.lock:
            self.missed.extend((m.fire_time, m.reason) for m in slots if "pending" not in m.reason)
        return []

    def latest_fire_times(
        self, schedule_ids: Sequence[str] | None = None, until: datetime | None = None
    ) -> dict[str, tuple[datetime, int]]:
        return {}

    def pending_fires(self) -> list[Missed]:
        return []

    def in_flight_many(self, schedule_ids: Sequence[str]) -> dict[str, list[InFlight]]:
        return {sid: self.in_flight(sid) for sid in schedule_ids}

    def in_flight(self, schedule_id: str) -> list[InFlight]:
        with self.lock:
            return list(self.running)

    def cancel_run(self, run: InFlight, reason: str) -> bool:
        return True


@dataclass
class Rig:
    clock: ManualClock
    index: ScheduleIndex
    store: Recorder
    loop: FireLoop

    def run_until(self, instant: datetime) -> None:
        """Move time to ``instant``, stopping wherever the loop waits."""
        for _ in range(1000):
            until = eventually(self.clock.parked, timeout=5, what="loop parked")
            if until >= instant:
                self.clock.set(instant)
                eventually(self.clock.parked, timeout=5, what="loop parked")
                return
            self.clock.set(until)
        raise AssertionError("loop did not settle")


def _rig(lead: timedelta) -> Rig:
    clock = ManualClock(NOON - timedelta(minutes=1))
    index = ScheduleIndex(lead=lead)
    store = Recorder(clock)
    loop = FireLoop(index, clock, Leading(), store, store, idle=timedelta(seconds=30))
    loop.start()
    return Rig(clock, index, store, loop)


@pytest.fixture
def rig() -> Iterator[Rig]:
    rig = _rig(LEAD)
    yield rig
    rig.loop.stop()


def test_the_run_is_started_ahead_with_its_nominal_fire_time(rig: Rig) -> None:
    rig.index.apply(_daily(), rig.clock.now())
    rig.loop.wake()

    rig.run_until(NOON - timedelta(seconds=1))

    assert rig.store.starts == [(NOON - LEAD, NOON)]
    assert rig.store.missed == []


def test_an_overlap_seen_ahead_is_decided_at_the_fire_time(rig: Rig) -> None:
    earlier = InFlight("run-earlier", "running", 1, NOON - timedelta(days=1))
    rig.store.running.append(earlier)
    rig.index.apply(_daily(), rig.clock.now())
    rig.loop.wake()

    rig.run_until(NOON - timedelta(seconds=1))
    assert rig.store.starts == [] and rig.store.missed == []  # not decided yet

    rig.store.running.clear()  # the earlier run ends before the instant
    rig.run_until(NOON + timedelta(seconds=1))
    assert rig.store.starts == [(NOON, NOON)]


def test_an_overlap_still_there_at_the_fire_time_is_skipped(rig: Rig) -> None:
    rig.store.running.append(InFlight("run-earlier", "running", 1, NOON - timedelta(days=1)))
    schedule = ScheduleDef("daily", Spec(cron=("0 12 * * *",)), Policy(overlap=Overlap.SKIP))
    rig.index.apply(schedule, rig.clock.now())
    rig.loop.wake()

    rig.run_until(NOON + timedelta(seconds=1))

    assert rig.store.starts == []
    assert [t for t, _ in rig.store.missed] == [NOON]
    assert "overlap" in rig.store.missed[0][1]


def _every_ten_seconds(sid: str, phase: timedelta) -> ScheduleDef:
    return ScheduleDef(sid, Spec(intervals=(Interval(timedelta(seconds=10), phase),)), revision=1)


@pytest.mark.parametrize("lead", [LEAD, timedelta(0)], ids=["lead", "no-lead"])
def test_fires_of_the_next_moment_go_ahead_in_one_call_only_with_a_lead(lead: timedelta) -> None:
    """With a lead, a fire due 50 ms after another is sent with it, in one call, still
    ahead of its fire time; with none, each fire waits for its own instant."""
    rig = _rig(lead)
    try:
        phases = [timedelta(0), timedelta(milliseconds=50), timedelta(milliseconds=500)]
        for i, phase in enumerate(phases):
            rig.index.apply(_every_ten_seconds(f"s{i}", phase), rig.clock.now())
        rig.loop.wake()

        rig.run_until(NOON + timedelta(seconds=1))

        at = [NOON + phase for phase in phases]
        calls = [c for c in rig.store.calls if c[0] >= NOON]
        starts = [s for s in rig.store.starts if s[1] >= NOON]
        if lead:
            assert calls == [at[:2], at[2:]]  # 500 ms later: a call of its own
            assert starts == [(NOON - lead, t) for t in at[:2]] + [(at[2] - lead, at[2])]
        else:
            assert calls == [[t] for t in at]
            assert starts == [(t, t) for t in at]
    finally:
        rig.loop.stop()


# Crowded instants: past the first lead x rate slots of an instant, the rest are acted
# on the most ahead.
CROWD = dict(lead=LEAD, lead_max=timedelta(seconds=10), crowd_rate=10)  # 20 at the lead


def _leads(index: ScheduleIndex, ids: Sequence[str]) -> list[float]:
    leads = []
    for sid in ids:
        slot = index.slot(sid)
        assert slot is not None
        leads.append((slot.fire_time - slot.act_at).total_seconds())
    return leads


def test_a_crowded_instant_past_its_first_slots_is_acted_on_the_most_ahead() -> None:
    index = ScheduleIndex(**CROWD)  # type: ignore[arg-type]
    ids = [f"s{i:03d}" for i in range(120)]

    for sid in ids:
        index.apply(_daily(sid), NOON - timedelta(hours=1))

    assert _leads(index, ids) == [2.0] * 20 + [10.0] * 100
    first = index.peek()
    assert first is not None and first.schedule_id == "s020"  # acted on first


def test_a_slot_handled_or_deleted_leaves_its_instant_s_crowd() -> None:
    index = ScheduleIndex(**CROWD)  # type: ignore[arg-type]
    ids = [f"s{i:03d}" for i in range(60)]
    for sid in ids:
        index.apply(_daily(sid), NOON - timedelta(hours=1))
    for sid in ids[:30]:  # 30 fire and move on to the next day's noon
        slot = index.slot(sid)
        assert slot is not None
        index.advance(slot, slot.fire_time, 1)
    for sid in ids[30:50]:
        index.remove(sid)

    # 10 left at noon: one more there is the 11th, at the lead
    index.apply(_daily("late"), NOON - timedelta(hours=1))
    assert _leads(index, ["late"]) == [2.0]
    # the next day's noon has the 30 moved on, counted in the order they moved
    assert _leads(index, ids[:30]) == [2.0] * 20 + [10.0] * 10


def test_a_loaded_index_keeps_the_crowd_of_its_schedules() -> None:
    index = ScheduleIndex(**CROWD)  # type: ignore[arg-type]
    ids = [f"s{i:03d}" for i in range(40)]

    index.load(((_daily(sid), NOON - timedelta(hours=1)) for sid in ids), revision=1)
    index.apply(_daily("new"), NOON - timedelta(hours=1))

    assert _leads(index, ids) == [2.0] * 20 + [10.0] * 20
    assert _leads(index, ["new"]) == [10.0]


def test_a_crowded_frequent_schedule_keeps_half_its_gap_and_lead_max_below_the_lead_is_it() -> None:
    crowded = ScheduleIndex(**CROWD)  # type: ignore[arg-type]
    for i in range(100):
        crowded.apply(_daily(f"d{i}"), NOON - timedelta(hours=1))
    every_minute = ScheduleDef("m", Spec(cron=("* * * * *",)), revision=1)
    crowded.apply(every_minute, NOON - timedelta(seconds=30))
    # the 101st at noon asks 10 s; half the 30 s since the schedule took effect allows 15
    assert _leads(crowded, ["m"]) == [10.0]
    edited = ScheduleDef("m", Spec(cron=("*/1 * * * *",)), revision=2)  # a new calendar
    crowded.apply(edited, NOON - timedelta(seconds=8))
    assert _leads(crowded, ["m"]) == [4.0]  # half the 8 s since the change

    below = ScheduleIndex(lead=LEAD, lead_max=timedelta(seconds=1), crowd_rate=10)
    for i in range(100):
        below.apply(_daily(f"d{i}"), NOON - timedelta(hours=1))
    assert set(_leads(below, [f"d{i}" for i in range(100)])) == {2.0}


def test_a_planners_lead_max_is_its_setting_25s_by_default_and_0_turns_it_off() -> None:
    # its channels open lazily: nothing is called
    default = Planner.from_env({"CRONWAVE_INSECURE": "1"})
    longer = Planner.from_env({"CRONWAVE_INSECURE": "1", "CRONWAVE_DISPATCH_LEAD_MAX": "28s"})
    off = Planner.from_env({"CRONWAVE_INSECURE": "1", "CRONWAVE_DISPATCH_LEAD_MAX": "0"})

    assert (default.index.lead, default.index.lead_max) == (
        timedelta(seconds=5),
        timedelta(seconds=25),
    )
    assert longer.index.lead_max == timedelta(seconds=28)
    assert off.index.lead_max == off.index.lead == timedelta(seconds=5)
