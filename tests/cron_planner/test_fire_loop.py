"""The fire loop on a manual clock: what is fired, when, with which token, and what
happens to a slot when the dispatcher fails or the planner does not lead.

The dispatcher and store here are in-process recorders of what the loop asks for;
the real ones are exercised in test_planner_process.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from cron_planner.clock import ManualClock
from cron_planner.fire_loop import Backoff, FireLoop
from cron_planner.schedule_index import ScheduleIndex
from cronwave_core.errors import CronwaveError, FailedPrecondition, InvalidArgument, Unavailable
from cronwave_core.spec import ScheduleDef, Spec
from tests.helpers import eventually

T0 = datetime(2030, 1, 7, 12, 0, 30, tzinfo=UTC)


@dataclass
class Lead:
    current: int = 7
    reasons: list[str] = field(default_factory=list)

    def token(self) -> int:
        return self.current

    def step_down(self, reason: str) -> None:
        self.reasons.append(reason)
        self.current = 0


@dataclass
class Dispatcher:
    """Records every start; ``failures`` are raised first, in order."""

    clock: ManualClock
    failures: list[CronwaveError] = field(default_factory=list)
    calls: list[tuple[str, datetime, int]] = field(default_factory=list)
    times: list[datetime] = field(default_factory=list)  # when each call came
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start_run(self, schedule_id: str, fire_time: datetime, token: int) -> str:
        with self.lock:
            self.calls.append((schedule_id, fire_time, token))
            self.times.append(self.clock.now())
            if self.failures:
                raise self.failures.pop(0)
        return f"run-{schedule_id}-{fire_time:%H%M}"

    def started(self) -> list[tuple[str, str]]:
        with self.lock:
            return [(sid, f"{t:%H:%M}") for sid, t, _ in self.calls]


@dataclass
class Ledger:
    newest: dict[str, datetime] = field(default_factory=dict)
    missed: list[tuple[str, datetime, str, int]] = field(default_factory=list)
    unavailable: int = 0  # record_missed calls to refuse first

    def record_missed(self, schedule_id: str, fire_time: datetime, reason: str, token: int) -> None:
        if self.unavailable:
            self.unavailable -= 1
            raise Unavailable("store away")
        self.missed.append((schedule_id, fire_time, reason, token))

    def newest_fire_time(self, schedule_id: str) -> datetime | None:
        return self.newest.get(schedule_id)


@dataclass
class Rig:
    clock: ManualClock
    index: ScheduleIndex
    lead: Lead
    dispatcher: Dispatcher
    ledger: Ledger
    loop: FireLoop

    def add(self, sid: str, expr: str, *, paused: bool = False, new: bool = False) -> None:
        """Add a schedule that has existed for a day (or, when ``new``, since now)."""
        schedule = ScheduleDef(sid, Spec(cron=(expr,)), paused=paused, revision=1)
        now = self.clock.now()
        self.index.apply(schedule, now if new else now - timedelta(days=1), now)
        self.loop.wake()

    def parked_until(self) -> datetime:
        """Wait for the loop to park, and say until when it waits."""
        return eventually(self.clock.parked, timeout=5, what="loop parked")

    def run_until(self, instant: datetime) -> None:
        """Move time to ``instant`` step by step, letting the loop act at each wait."""
        for _ in range(10_000):
            until = self.parked_until()
            if until >= instant:
                self.clock.set(instant)
                self.parked_until()
                return
            self.clock.set(until)
        raise AssertionError("loop did not settle")


@pytest.fixture
def rig() -> Iterator[Rig]:
    clock = ManualClock(T0)
    index = ScheduleIndex()
    lead, dispatcher, ledger = Lead(), Dispatcher(clock), Ledger()
    loop = FireLoop(
        index,
        clock,
        lead,
        dispatcher,
        ledger,
        backoff=Backoff(timedelta(seconds=1), timedelta(seconds=8)),
        idle=timedelta(seconds=30),
    )
    r = Rig(clock, index, lead, dispatcher, ledger, loop)
    loop.start()
    yield r
    loop.stop()


def test_fires_each_due_slot_once_in_order_with_the_token(rig: Rig) -> None:
    rig.clock.set(T0 - timedelta(minutes=5))  # before the schedules exist
    rig.add("two", "*/2 * * * *", new=True)
    rig.add("three", "*/3 * * * *", new=True)

    rig.run_until(datetime(2030, 1, 7, 12, 6, 30, tzinfo=UTC))

    assert rig.dispatcher.started() == [
        ("two", "11:56"),
        ("three", "11:57"),
        ("two", "11:58"),
        ("three", "12:00"),
        ("two", "12:00"),
        ("two", "12:02"),
        ("three", "12:03"),
        ("two", "12:04"),
        ("three", "12:06"),
        ("two", "12:06"),
    ]
    assert {token for _, _, token in rig.dispatcher.calls} == {7}
    assert rig.loop.stats.fired == 10


def test_wakes_for_a_new_schedule_without_waiting_out_its_idle_time(rig: Rig) -> None:
    assert rig.parked_until() == T0 + timedelta(seconds=30)  # nothing scheduled: idle

    rig.add("s", "* * * * *")

    # the 12:00:00 slot is within the last minute: fired at once
    eventually(lambda: rig.dispatcher.started() == [("s", "12:00")], what="fired")
    assert rig.parked_until() == datetime(2030, 1, 7, 12, 1, tzinfo=UTC)


def test_not_leading_keeps_the_slot_and_fires_it_once_leading(rig: Rig) -> None:
    rig.lead.current = 0
    rig.add("s", "* * * * *")
    rig.run_until(T0 + timedelta(seconds=20))
    assert rig.dispatcher.calls == []

    rig.lead.current = 9  # elected: a new term
    rig.loop.wake()

    eventually(lambda: rig.dispatcher.started() == [("s", "12:00")], what="fired once leading")
    assert rig.dispatcher.calls[0][2] == 9


def test_a_new_term_starts_after_the_newest_run_in_the_store(rig: Rig) -> None:
    rig.lead.current = 0
    rig.clock.set(T0 - timedelta(minutes=10))
    rig.add("s", "* * * * *")
    rig.clock.set(T0)
    # another leader fired up to 12:00:00 already
    rig.ledger.newest["s"] = datetime(2030, 1, 7, 12, 0, tzinfo=UTC)

    rig.lead.current = 11
    rig.loop.wake()
    rig.run_until(T0 + timedelta(seconds=40))

    assert rig.dispatcher.started() == [("s", "12:01")]


def test_a_stale_token_steps_down_and_keeps_the_slot(rig: Rig) -> None:
    rig.dispatcher.failures.append(
        FailedPrecondition("fencing_token: 7 is older than 8, the newest seen")
    )
    rig.add("s", "* * * * *")

    eventually(lambda: rig.lead.reasons, what="stepped down")
    assert rig.lead.reasons[0].startswith("fencing_token")
    assert rig.ledger.missed == []
    slot = rig.index.slot("s")
    assert slot is not None and f"{slot.fire_time:%H:%M}" == "12:00"  # kept for the next leader


def test_transient_failures_are_retried_with_backoff_then_fired(rig: Rig) -> None:
    rig.dispatcher.failures.extend([Unavailable("dispatcher away")] * 3)
    rig.add("s", "* * * * *")

    rig.run_until(T0 + timedelta(seconds=20))

    attempts = [t for sid, t, _ in rig.dispatcher.calls]
    assert len(attempts) == 4  # 3 failures, then the start
    assert rig.loop.stats.fired == 1 and rig.loop.stats.retries == 3
    assert rig.ledger.missed == []
    assert {f"{t:%H:%M}" for t in attempts} == {"12:00"}


def test_giving_up_after_60s_records_missed_and_moves_on(rig: Rig) -> None:
    # Given a dispatcher that keeps failing
    rig.dispatcher.failures.extend([Unavailable("dispatcher away")] * 1000)
    rig.clock.set(datetime(2030, 1, 7, 12, 0, 0, tzinfo=UTC))
    rig.add("s", "*/5 * * * *")  # due right now

    # When more than a minute passes
    rig.run_until(datetime(2030, 1, 7, 12, 1, 30, tzinfo=UTC))

    # Then the slot was retried up to the 60 s mark, then recorded MISSED with the reason
    assert {f"{t:%H:%M:%S}" for _, t, _ in rig.dispatcher.calls} == {"12:00:00"}
    assert [f"{t:%M:%S}" for t in rig.dispatcher.times] == [
        "00:00", "00:01", "00:03", "00:07", "00:15", "00:23",
        "00:31", "00:39", "00:47", "00:55", "01:00",
    ]  # fmt: skip
    assert len(rig.ledger.missed) == 1
    sid, fire, reason, token = rig.ledger.missed[0]
    assert (sid, fire, token) == ("s", datetime(2030, 1, 7, 12, 0, tzinfo=UTC), 7)
    assert "not started within 60s" in reason and "dispatcher away" in reason
    slot = rig.index.slot("s")
    assert slot is not None and f"{slot.fire_time:%H:%M}" == "12:05"


def test_a_missed_record_is_retried_until_the_store_takes_it(rig: Rig) -> None:
    rig.dispatcher.failures.append(InvalidArgument("schedule_id", "no such schedule"))
    rig.ledger.unavailable = 2
    rig.add("s", "*/5 * * * *")

    rig.run_until(T0 + timedelta(seconds=20))

    assert len(rig.ledger.missed) == 1
    assert "dispatcher refused the start" in rig.ledger.missed[0][2]
    assert rig.loop.pending_missed == 0


def test_a_paused_schedule_is_not_fired(rig: Rig) -> None:
    rig.add("s", "* * * * *", paused=True)
    rig.add("t", "*/2 * * * *")

    rig.run_until(T0 + timedelta(minutes=3))

    assert {sid for sid, _ in rig.dispatcher.started()} == {"t"}
