"""The fire loop on a manual clock: what is started, when, with which token and
trigger, what is recorded MISSED, and what happens when the dispatcher fails or the
planner does not lead.

The dispatcher and store here are in-process recorders of what the loop asks for;
the real ones are exercised in tests/schedules/ and test_planner_process.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from cron_planner import fire_loop, starts
from cron_planner.backoff import Backoff
from cron_planner.clock import ManualClock
from cron_planner.fire_loop import FireLoop
from cron_planner.ports import Start
from cron_planner.schedule_index import ScheduleIndex
from cron_planner.work import Fire, InFlight, Missed, Trigger
from cronwave_core.domain.spec import Catchup, Interval, Overlap, Policy, ScheduleDef, Spec
from cronwave_core.errors import (
    CronwaveError,
    InvalidArgument,
    StaleFencingToken,
    Unavailable,
    UnissuedFencingToken,
)
from tests.cron_planner.fakes import start_each
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
    calls: list[tuple[str, datetime, int, Trigger]] = field(default_factory=list)
    times: list[datetime] = field(default_factory=list)  # when each call came
    batches: list[list[str]] = field(default_factory=list)  # schedule ids per call
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start_runs(self, starts: Sequence[Start], token: int) -> list[str | CronwaveError]:
        with self.lock:
            self.batches.append([s.schedule_id for s in starts])
        return start_each(self.start_run, starts, token)

    def start_run(
        self,
        schedule_id: str,
        fire_time: datetime,
        token: int,
        trigger: Trigger = Trigger.SCHEDULED,
    ) -> str:
        with self.lock:
            self.calls.append((schedule_id, fire_time, token, trigger))
            self.times.append(self.clock.now())
            if self.failures:
                raise self.failures.pop(0)
        return f"run-{schedule_id}-{fire_time:%H%M}"

    def started(self) -> list[tuple[str, str]]:
        with self.lock:
            return [(sid, f"{t:%H:%M}") for sid, t, _, _ in self.calls]


@dataclass
class Ledger:
    newest: dict[str, tuple[datetime, int]] = field(default_factory=dict)
    pending: list[Missed] = field(default_factory=list)
    running: dict[str, list[InFlight]] = field(default_factory=dict)
    missed: list[tuple[str, datetime, str, int]] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    unavailable: int = 0  # record_missed calls to refuse first
    latest_asked: list[list[str] | None] = field(default_factory=list)  # None: all
    latest_until: list[datetime | None] = field(default_factory=list)  # the bound asked
    latest_unavailable: int = 0  # latest_fire_times calls to refuse first

    def record_missed(self, slots: Sequence[Missed], token: int) -> list[str]:
        if self.unavailable:
            self.unavailable -= 1
            raise Unavailable("store away")
        self.missed.extend((m.schedule_id, m.fire_time, m.reason, token) for m in slots)
        return []

    def final(self) -> list[tuple[str, str, str]]:
        """MISSED rows with final reasons, as (schedule, HH:MM, reason)."""
        return [
            (sid, f"{t:%H:%M}", reason)
            for sid, t, reason, _ in self.missed
            if not reason.startswith("pending:")
        ]

    def latest_fire_times(
        self, schedule_ids: Sequence[str] | None = None, until: datetime | None = None
    ) -> dict[str, tuple[datetime, int]]:
        self.latest_asked.append(None if schedule_ids is None else sorted(schedule_ids))
        self.latest_until.append(until)
        if self.latest_unavailable:
            self.latest_unavailable -= 1
            raise Unavailable("store away")
        newest = {sid: v for sid, v in self.newest.items() if until is None or v[0] <= until}
        if schedule_ids is None:
            return newest
        return {sid: v for sid, v in newest.items() if sid in schedule_ids}

    def pending_fires(self) -> list[Missed]:
        return list(self.pending)

    def in_flight_many(self, schedule_ids: Sequence[str]) -> dict[str, list[InFlight]]:
        return {sid: self.in_flight(sid) for sid in schedule_ids}

    def in_flight(self, schedule_id: str) -> list[InFlight]:
        return list(self.running.get(schedule_id, []))

    def cancel_run(self, run: InFlight, reason: str) -> bool:
        self.cancelled.append(run.run_id)
        return True


@dataclass
class QueueLoss:
    """When the queue last lost its messages (None: no loss known)."""

    at: datetime | None = None
    asked: int = 0

    def lost_at(self, now: datetime) -> datetime | None:
        self.asked += 1
        return self.at

    def held_before(self, now: datetime) -> datetime | None:
        return self.at


@dataclass
class Rig:
    clock: ManualClock
    index: ScheduleIndex
    lead: Lead
    dispatcher: Dispatcher
    ledger: Ledger
    loop: FireLoop
    loss: QueueLoss = field(default_factory=QueueLoss)

    def add(
        self,
        sid: str,
        expr: str,
        *,
        paused: bool = False,
        since: datetime | None = None,
        policy: Policy | None = None,
    ) -> None:
        """Add a schedule that took effect at ``since`` (default: now)."""
        schedule = ScheduleDef(
            sid, Spec(cron=(expr,)), policy or Policy(), paused=paused, revision=1
        )
        self.index.apply(schedule, since or self.clock.now())
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


@dataclass
class HeldShards:
    """The shards held, with their tokens; a schedule ``s<k>...`` is in shard ``k``."""

    now: dict[int, int] = field(default_factory=dict)

    def held(self) -> dict[int, int]:
        return dict(self.now)

    def shard(self, schedule_id: str) -> int:
        return int(schedule_id[1])

    def holds(self, schedule_id: str) -> bool:
        return self.shard(schedule_id) in self.now


def make_rig(
    give_up_after: timedelta = timedelta(seconds=60),
    holds: Callable[[str], bool] = lambda _schedule_id: True,
    shards: HeldShards | None = None,
) -> Rig:
    """A started loop on a manual clock at ``T0``; the caller stops ``rig.loop``.
    ``holds``: which schedules are this planner's (sharded planning); ``shards``: the
    shards held (then ``holds`` follows them)."""
    clock = ManualClock(T0)
    index = ScheduleIndex() if shards is None else ScheduleIndex(shard=shards.shard)
    lead, dispatcher, ledger, loss = Lead(), Dispatcher(clock), Ledger(), QueueLoss()
    loop = FireLoop(
        index,
        clock,
        lead,
        dispatcher,
        ledger,
        give_up_after=give_up_after,
        backoff=Backoff(timedelta(seconds=1), timedelta(seconds=8)),
        idle=timedelta(seconds=30),
        queue_loss=loss,
        holds=holds if shards is None else shards.holds,
        shards=shards,
    )
    loop.start()
    return Rig(clock, index, lead, dispatcher, ledger, loop, loss)


@pytest.fixture
def rig() -> Iterator[Rig]:
    r = make_rig()
    yield r
    r.loop.stop()


def test_fires_each_due_slot_once_in_order_with_the_token(rig: Rig) -> None:
    rig.clock.set(T0 - timedelta(minutes=5))  # when the schedules are created
    rig.add("two", "*/2 * * * *")
    rig.add("three", "*/3 * * * *")

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
    assert {token for _, _, token, _ in rig.dispatcher.calls} == {7}
    assert {trigger for _, _, _, trigger in rig.dispatcher.calls} == {Trigger.SCHEDULED}
    assert rig.loop.stats.fired == 10
    assert rig.ledger.missed == []


def test_wakes_for_a_new_schedule_without_waiting_out_its_idle_time(rig: Rig) -> None:
    assert rig.parked_until() == T0 + timedelta(seconds=30)  # nothing scheduled: idle

    rig.add("s", "* * * * *", since=T0 - timedelta(seconds=40))

    # the 12:00:00 slot came after the schedule took effect: fired at once
    eventually(lambda: rig.dispatcher.started() == [("s", "12:00")], what="fired")
    assert rig.parked_until() == datetime(2030, 1, 7, 12, 1, tzinfo=UTC)


def test_not_leading_fires_nothing_and_a_new_term_catches_up_from_the_store(rig: Rig) -> None:
    rig.lead.current = 0
    rig.add("s", "* * * * *", since=T0 - timedelta(seconds=40))
    rig.run_until(T0 + timedelta(seconds=20))
    assert rig.dispatcher.calls == []
    terms = rig.loop.stats.terms

    rig.lead.current = 9  # elected: a new term
    rig.loop.wake()

    eventually(lambda: rig.dispatcher.started() == [("s", "12:00")], what="fired once leading")
    assert rig.dispatcher.calls[0][2] == 9
    assert rig.loop.stats.terms == terms + 1


def test_a_new_term_takes_no_fire_time_further_ahead_than_it_records_itself(rig: Rig) -> None:
    # Given a run a day ahead in the store (a leader whose clock ran a day ahead)
    rig.lead.current = 0
    rig.add("s", "* * * * *", since=T0 - timedelta(minutes=10))
    rig.ledger.newest["s"] = (T0 + timedelta(days=1), 1)

    # When a term begins on a right clock
    rig.lead.current = 11
    rig.loop.wake()
    rig.run_until(T0 + timedelta(seconds=70))

    # Then it asked for fire times up to its clock plus the furthest it records ahead
    # (a placeholder, 60 s, past the dispatch lead here) and skew, and fires the slots
    assert rig.ledger.latest_until[0] is not None
    assert rig.ledger.latest_until[0] - T0 == timedelta(seconds=61)
    assert rig.dispatcher.started() == [("s", "12:00"), ("s", "12:01")]


def test_a_new_term_starts_after_the_newest_run_in_the_store(rig: Rig) -> None:
    rig.lead.current = 0
    rig.add("s", "* * * * *", since=T0 - timedelta(minutes=10))
    # another leader handled everything up to 12:00:00 already
    rig.ledger.newest["s"] = (datetime(2030, 1, 7, 12, 0, tzinfo=UTC), 10)

    rig.lead.current = 11
    rig.loop.wake()
    rig.run_until(T0 + timedelta(seconds=40))

    assert rig.dispatcher.started() == [("s", "12:01")]
    assert rig.ledger.missed == []


def test_a_new_term_resumes_the_placeholders_of_the_last_one(rig: Rig) -> None:
    # Given placeholders a previous leader left: a paced catch-up run and a backfill
    rig.lead.current = 0
    rig.add("s", "0 3 * * *", since=T0 - timedelta(days=3))
    rig.ledger.newest["s"] = (datetime(2030, 1, 7, 3, 0, tzinfo=UTC), 3)
    rig.ledger.pending = [
        Missed("s", datetime(2030, 1, 6, 3, 0, tzinfo=UTC), "pending:catchup", Trigger.CATCHUP),
        Missed("s", datetime(2030, 1, 5, 3, 0, tzinfo=UTC), "pending:backfill", Trigger.BACKFILL),
    ]

    # When this planner begins its term
    rig.lead.current = 12
    rig.loop.wake()
    rig.run_until(T0 + timedelta(seconds=10))

    # Then both are started with their triggers, and nothing else
    assert sorted((f"{t:%d}", trig) for _, t, _, trig in rig.dispatcher.calls) == [
        ("05", Trigger.BACKFILL),
        ("06", Trigger.CATCHUP),
    ]


def test_a_fire_put_off_for_its_pace_stands_in_the_store_before_its_shard_moves() -> None:
    # Given two catch-up runs of one schedule due now, neither with a placeholder (the
    # retried one of the term before, carried over, and the term's own first one)
    held = {"s"}
    rig = make_rig(holds=lambda sid: sid in held)
    try:
        rig.add("s", "0 3 * * *", since=T0 - timedelta(days=3))
        rig.run_until(T0 + timedelta(seconds=1))
        first, second = (datetime(2030, 1, d, 3, 0, tzinfo=UTC) for d in (5, 6))
        now = rig.clock.now()
        pace, deadline = timedelta(seconds=30), now + timedelta(minutes=1)
        fires = [Fire("s", t, Trigger.CATCHUP, now, deadline, pace=pace) for t in (first, second)]
        rig.loop.submit(fires)

        # When the first starts, the second waits for its pace
        rig.run_until(T0 + timedelta(seconds=5))
        assert (second, "pending:catchup") in [(t, r) for _, t, r, _ in rig.ledger.missed]

        # Then, when the shard moves to another planner before the second starts, the
        # store holds its placeholder for the next holder to resume: the slot is neither
        # lost nor started here
        held.clear()
        rig.lead.current = 8
        rig.loop.wake()
        rig.run_until(T0 + timedelta(minutes=2))
        assert [t for _, t, _, trig in rig.dispatcher.calls if trig is Trigger.CATCHUP] == [first]
    finally:
        rig.loop.stop()


def test_a_schedule_loaded_for_a_shard_not_held_yet_is_left_to_its_holder() -> None:
    # Given a schedule whose shard's schedules are loaded while its lease is not won
    rig = make_rig(holds=lambda sid: sid != "elsewhere")
    try:
        rig.add("mine", "* * * * *", since=T0 - timedelta(minutes=3))
        rig.add("elsewhere", "* * * * *", since=T0 - timedelta(minutes=3))

        rig.run_until(T0 + timedelta(minutes=2))

        # Then only this planner's schedule is planned: nothing is started, put off or
        # recorded for the other one (its holder plans it from the store)
        assert {sid for sid, _, _, _ in rig.dispatcher.calls} == {"mine"}
        assert {sid for sid, _, _, _ in rig.ledger.missed} <= {"mine"}
    finally:
        rig.loop.stop()


def _at(hh_mm: str) -> datetime:
    hours, minutes = hh_mm.split(":")
    return datetime(2030, 1, 7, int(hours), int(minutes), tzinfo=UTC)


def test_a_term_begun_for_a_gained_shard_re_bases_and_resumes_that_shard_alone() -> None:
    # Given a planner holding shard 0 that has loaded shard 1 ahead (a standby shard)
    shards = HeldShards({0: 1})
    rig = make_rig(shards=shards)
    try:
        rig.add("s0", "* * * * *", since=T0 - timedelta(seconds=40))
        rig.add("s1", "* * * * *", since=T0 - timedelta(seconds=40))
        rig.run_until(T0 + timedelta(minutes=1))
        assert rig.dispatcher.started() == [("s0", "12:00"), ("s0", "12:01")]
        assert rig.ledger.latest_asked == [None]  # the first term: everything

        # When shard 1's holder, which fired it through 12:01 and left a paced catch-up
        # run, dies and this planner wins shard 1 (the store's word for shard 0 is
        # not asked for: this planner's own is as new)
        rig.ledger.newest["s1"] = (_at("12:01"), 2)
        rig.ledger.newest["s0"] = (_at("12:05"), 6)  # would skip s0's slots if taken
        rig.ledger.pending = [
            Missed("s1", _at("11:58"), "pending:catchup", Trigger.CATCHUP),
            Missed("s0", _at("11:57"), "pending:catchup", Trigger.CATCHUP),
        ]
        shards.now = {0: 1, 1: 4}
        rig.lead.current = 8
        rig.loop.wake()
        rig.run_until(T0 + timedelta(minutes=3))

        # Then only shard 1's schedules are re-based and only its placeholder resumed
        assert rig.ledger.latest_asked == [None, ["s1"]]
        assert sorted(rig.dispatcher.started()[2:]) == [
            ("s0", "12:02"),
            ("s0", "12:03"),
            ("s1", "11:58"),
            ("s1", "12:02"),
            ("s1", "12:03"),
        ]
        assert rig.ledger.final() == []
    finally:
        rig.loop.stop()


def test_a_takeover_re_bases_page_by_page_soonest_first_and_fires_nothing_from_a_guess(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a planner holding shard 0 with shard 1 loaded ahead, one schedule a page
    monkeypatch.setattr(fire_loop, "REBASE_PAGE", 1)
    monkeypatch.setattr(fire_loop, "REBASE_FIRST_PAGE", 1)
    shards = HeldShards({0: 1})
    rig = make_rig(shards=shards)
    try:
        since = T0 - timedelta(minutes=10)
        every_slot = Policy(catchup=Catchup.ALL)
        rig.add("s0", "* * * * *", since=since)
        rig.add("s1-daily", "0 13 * * *", since=since)
        rig.add("s1-half", "30 12 * * *", since=since)
        rig.add("s1-minute", "* * * * *", since=since, policy=every_slot)
        rig.run_until(T0 + timedelta(minutes=1))

        # When shard 1's holder, which fired s1-minute through 12:00, dies, this planner
        # wins shard 1 and the store does not answer for two minutes
        rig.ledger.newest["s1-minute"] = (_at("12:00"), 10)
        rig.ledger.latest_unavailable = 10**6
        shards.now = {0: 1, 1: 4}
        rig.lead.current = 8
        rig.loop.wake()
        rig.run_until(T0 + timedelta(minutes=3))

        # Then shard 0 fires on and shard 1 fires nothing it has not re-based
        assert rig.dispatcher.started() == [
            ("s0", "12:00"),
            ("s0", "12:01"),
            ("s0", "12:02"),
            ("s0", "12:03"),
        ]

        # When the store answers again
        rig.ledger.latest_unavailable = 0
        asked = len(rig.ledger.latest_asked)
        rig.run_until(T0 + timedelta(minutes=4))

        # Then the schedules are re-based a page at a time, soonest slot first, and
        # s1-minute catches up the slots its holder left (12:01 to 12:03, one of them
        # paced as a placeholder) before it fires on
        assert rig.ledger.latest_asked[asked:] == [["s1-minute"], ["s1-half"], ["s1-daily"]]
        caught_up = [t for sid, t in rig.dispatcher.started() if sid == "s1-minute"]
        assert sorted(caught_up) == ["12:01", "12:02", "12:03", "12:04"]
        assert [row for row in rig.ledger.final() if row[0] != "s0"] == []
    finally:
        rig.loop.stop()


def test_a_term_begun_for_a_lost_shard_drops_its_work_and_re_bases_nothing() -> None:
    # Given a planner holding shards 0 and 1, with a fire of shard 1 queued for later
    shards = HeldShards({0: 1, 1: 1})
    rig = make_rig(shards=shards)
    try:
        rig.add("s0", "* * * * *", since=T0 - timedelta(seconds=40))
        rig.run_until(T0 + timedelta(seconds=1))
        later = rig.clock.now() + timedelta(seconds=20)
        fire = Fire("s1", _at("11:00"), Trigger.BACKFILL, later, later + timedelta(minutes=1))
        rig.loop.submit([fire])
        rig.run_until(T0 + timedelta(seconds=2))

        # When shard 1 is given up
        shards.now = {0: 1}
        rig.lead.current = 8
        rig.loop.wake()
        rig.run_until(T0 + timedelta(minutes=2))

        # Then its fire is dropped, nothing is asked of the store, and shard 0 fires on
        assert rig.ledger.latest_asked == [None]
        assert rig.loop.stats.terms == 2
        assert rig.dispatcher.started() == [("s0", "12:00"), ("s0", "12:01"), ("s0", "12:02")]
    finally:
        rig.loop.stop()


def test_a_shard_held_again_under_a_new_token_is_re_based() -> None:
    # Given a planner holding shard 0
    shards = HeldShards({0: 1})
    rig = make_rig(shards=shards)
    try:
        rig.add("s0", "* * * * *", since=T0 - timedelta(seconds=40))
        rig.run_until(T0 + timedelta(seconds=1))

        # When it holds shard 0 under a newer token (another planner may have held it
        # between) and the store says 12:01 was handled
        rig.ledger.newest["s0"] = (_at("12:01"), 2)
        shards.now = {0: 2}
        rig.lead.current = 8
        rig.loop.wake()
        rig.run_until(T0 + timedelta(minutes=2))

        # Then the shard is re-based: 12:01 is not fired again
        assert rig.ledger.latest_asked == [None, ["s0"]]
        assert rig.dispatcher.started() == [("s0", "12:00"), ("s0", "12:02")]
    finally:
        rig.loop.stop()


@pytest.mark.parametrize(
    "refusal",
    [
        StaleFencingToken("planner", 7, 8),
        UnissuedFencingToken("planner", 7, scope_known=True),
    ],
    ids=["stale", "unissued"],
)
def test_a_stale_token_steps_down(rig: Rig, refusal: CronwaveError) -> None:
    rig.dispatcher.failures.append(refusal)
    rig.add("s", "* * * * *", since=T0 - timedelta(seconds=40))

    eventually(lambda: rig.lead.reasons, what="stepped down")
    assert rig.lead.reasons[0].startswith("fencing_token")
    assert rig.ledger.missed == []  # the slot is the next leader's


def test_transient_failures_are_retried_with_backoff_then_fired(rig: Rig) -> None:
    rig.dispatcher.failures.extend([Unavailable("dispatcher away")] * 3)
    rig.add("s", "* * * * *", since=T0 - timedelta(seconds=40))

    rig.run_until(T0 + timedelta(seconds=20))

    attempts = [t for _, t, _, _ in rig.dispatcher.calls]
    assert len(attempts) == 4  # 3 failures, then the start
    assert rig.loop.stats.fired == 1 and rig.loop.stats.retries == 3
    # While it was retried the slot stood in the store as a placeholder (the run
    # replaces it), so a planner taking over meanwhile would have started it.
    assert rig.ledger.final() == []
    assert [(sid, reason) for sid, _, reason, _ in rig.ledger.missed] == [("s", "pending:retry")]
    assert {f"{t:%H:%M}" for t in attempts} == {"12:00"}


def test_giving_up_after_60s_records_missed_and_moves_on(rig: Rig) -> None:
    # Given a dispatcher that keeps failing
    rig.dispatcher.failures.extend([Unavailable("dispatcher away")] * 1000)
    rig.clock.set(datetime(2030, 1, 7, 11, 59, 30, tzinfo=UTC))
    rig.add("s", "*/5 * * * *")
    rig.run_until(datetime(2030, 1, 7, 12, 0, 0, tzinfo=UTC))

    # When more than a minute passes
    rig.run_until(datetime(2030, 1, 7, 12, 1, 30, tzinfo=UTC))

    # Then the slot was retried up to the 60 s mark, then recorded MISSED with the reason
    assert {f"{t:%H:%M:%S}" for _, t, _, _ in rig.dispatcher.calls} == {"12:00:00"}
    assert [f"{t:%M:%S}" for t in rig.dispatcher.times] == [
        "00:00", "00:01", "00:03", "00:07", "00:15", "00:23",
        "00:31", "00:39", "00:47", "00:55", "01:00",
    ]  # fmt: skip
    # (first its placeholder while it was retried, then its final reason)
    placeholder, final = rig.ledger.missed
    assert placeholder[2] == "pending:retry"
    sid, fire, reason, token = final
    assert (sid, fire, token) == ("s", datetime(2030, 1, 7, 12, 0, tzinfo=UTC), 7)
    assert "not started within 60s" in reason and "dispatcher away" in reason
    slot = rig.index.slot("s")
    assert slot is not None and f"{slot.fire_time:%H:%M}" == "12:05"


def test_a_missed_record_is_retried_until_the_store_takes_it(rig: Rig) -> None:
    rig.dispatcher.failures.append(InvalidArgument("schedule_id", "no such schedule"))
    rig.ledger.unavailable = 2
    rig.add("s", "*/5 * * * *", since=T0 - timedelta(seconds=40))

    rig.run_until(T0 + timedelta(seconds=20))

    assert len(rig.ledger.missed) == 1
    assert "dispatcher refused the start" in rig.ledger.missed[0][2]
    assert rig.loop.pending_missed == 0


def test_a_paused_schedule_is_not_fired(rig: Rig) -> None:
    rig.add("s", "* * * * *", paused=True, since=T0 - timedelta(minutes=5))
    rig.add("t", "*/2 * * * *", since=T0 - timedelta(minutes=5))

    rig.run_until(T0 + timedelta(minutes=3))

    assert {sid for sid, _ in rig.dispatcher.started()} == {"t"}
    # a paused schedule's slots are not runs, nor recorded
    assert [m for m in rig.ledger.missed if m[0] == "s"] == []


@pytest.mark.parametrize(
    ("policy", "cap", "started", "missed"),
    [
        (Catchup.SKIP, 100, [], [(t, "catchup_skip") for t in ("11:48", "11:51", "11:54")]),
        (Catchup.LATEST, 100, ["11:54"], [(t, "superseded_by_latest") for t in ("11:48", "11:51")]),
        (Catchup.ALL, 100, ["11:48", "11:51", "11:54"], []),
        (Catchup.ALL, 2, ["11:51", "11:54"], [("11:48", "catchup_cap")]),
    ],
)
def test_a_late_slot_follows_the_catchup_policy(
    rig: Rig, policy: Catchup, cap: int, started: list[str], missed: list[tuple[str, str]]
) -> None:
    # Given a schedule every 3 minutes, handled through 11:39, with a 10-minute window
    # (and, for ALL, at most ``cap`` catch-up runs, the newest; older ones are MISSED)
    rig.lead.current = 0
    window = Policy(catchup=policy, catchup_window=timedelta(minutes=10), catchup_max_runs=cap)
    rig.add("s", "*/3 * * * *", since=T0 - timedelta(hours=1), policy=window)
    rig.clock.set(datetime(2030, 1, 7, 11, 56, 0, tzinfo=UTC))
    rig.ledger.newest["s"] = (datetime(2030, 1, 7, 11, 39, tzinfo=UTC), 20)

    # When this planner leads at 11:56
    rig.lead.current = 8
    rig.loop.wake()
    rig.run_until(datetime(2030, 1, 7, 11, 56, 45, tzinfo=UTC))

    # Then 11:42 and 11:45 were outside the window; the others follow the policy,
    # catch-up runs 15 s apart (the minute to the next fire, shared out)
    assert [t for _, t in rig.dispatcher.started()] == started
    assert {trig for *_, trig in rig.dispatcher.calls} <= {Trigger.CATCHUP}
    spacing = {1: ["00"], 2: ["00", "20"], 3: ["00", "15", "30"]}
    assert [f"{t:%S}" for t in rig.dispatcher.times] == spacing.get(len(started), [])
    outside = [("s", t, "outside_catchup_window") for t in ("11:42", "11:45")]
    assert rig.ledger.final() == outside + [("s", t, r) for t, r in missed]


@pytest.mark.parametrize(
    ("overlap", "started", "missed", "cancelled"),
    [
        (Overlap.SKIP, [], [("12:00", "overlap_skip")], []),
        (Overlap.ALLOW_ALL, ["12:00"], [], []),
        (Overlap.CANCEL_OTHER, ["12:00"], [], ["run-old"]),
        (Overlap.BUFFER_ONE, [], [], []),
    ],
)
def test_overlap_with_a_run_in_flight(
    rig: Rig,
    overlap: Overlap,
    started: list[str],
    missed: list[tuple[str, str]],
    cancelled: list[str],
) -> None:
    old = InFlight("run-old", "running", 1, datetime(2030, 1, 7, 11, 59, tzinfo=UTC))
    rig.ledger.running["s"] = [old]
    rig.add("s", "* * * * *", since=T0 - timedelta(seconds=40), policy=Policy(overlap=overlap))

    rig.run_until(T0 + timedelta(seconds=10))

    assert [t for _, t in rig.dispatcher.started()] == started
    assert rig.ledger.final() == [("s", t, r) for t, r in missed]
    assert rig.ledger.cancelled == cancelled


@pytest.mark.parametrize("overlap", [Overlap.SKIP, Overlap.CANCEL_OTHER, Overlap.BUFFER_ONE])
def test_a_run_recorded_beyond_a_planners_reach_is_not_in_flight_for_overlap(
    rig: Rig, overlap: Overlap
) -> None:
    # Given a run a day ahead, PENDING (a leader whose clock ran ahead started it)
    ahead = InFlight("run-ahead", "pending", 0, T0 + timedelta(days=1))
    rig.ledger.running["s"] = [ahead]
    rig.add("s", "* * * * *", since=T0 - timedelta(seconds=40), policy=Policy(overlap=overlap))

    rig.run_until(T0 + timedelta(seconds=10))

    # Then the slot at 12:00 starts as if nothing were in flight, and the run stands
    assert [t for _, t in rig.dispatcher.started()] == ["12:00"]
    assert rig.ledger.final() == []
    assert rig.ledger.cancelled == []


LOST_AT = datetime(2030, 1, 7, 11, 59, 40, tzinfo=UTC)


def _lost_run(
    state: str = "pending",
    recorded: datetime = LOST_AT - timedelta(seconds=1),
    started: datetime | None = None,
) -> InFlight:
    """The 11:59 run of ``s``: by default recorded before the loss, never claimed."""
    at = datetime(2030, 1, 7, 11, 59, tzinfo=UTC)
    return InFlight("run-lost", state, 0, at, recorded, started)


def test_a_skip_only_for_a_run_lost_in_the_queue_waits_for_it_then_starts(rig: Rig) -> None:
    # Given a skip schedule whose 11:59 run is PENDING, recorded before the queue lost
    # its messages
    rig.loss.at = LOST_AT
    rig.ledger.running["s"] = [_lost_run()]
    rig.add("s", "* * * * *", since=T0 - timedelta(seconds=40), policy=Policy(Overlap.SKIP))

    # When the 12:00 slot comes while the run waits for its new message
    rig.run_until(T0 + timedelta(seconds=2))

    # Then the slot is neither skipped nor started: it is decided again and again
    assert rig.dispatcher.calls == [] and rig.ledger.final() == []
    assert rig.loop.stats.lost_waits >= 10

    # When a worker claims the re-sent run (its late run is the recovery)
    rig.ledger.running["s"] = [_lost_run("running", started=T0 + timedelta(seconds=2))]
    rig.run_until(T0 + timedelta(seconds=3))

    # Then the slot still waits for it, and does not start beside it
    assert rig.dispatcher.calls == [] and rig.ledger.final() == []

    # When the re-sent run has ended
    rig.ledger.running["s"] = []
    rig.run_until(T0 + timedelta(seconds=4))

    # Then the slot starts, late, and nothing was recorded MISSED
    assert rig.dispatcher.started() == [("s", "12:00")]
    assert rig.ledger.final() == []

    # When the next slot comes while that late run is still in flight
    late = InFlight("run-1200", "pending", 0, datetime(2030, 1, 7, 12, 0, tzinfo=UTC), T0)
    rig.ledger.running["s"] = [late]
    rig.run_until(datetime(2030, 1, 7, 12, 1, 1, tzinfo=UTC))

    # Then it waits for it too (the recovery goes on), and starts once it has ended
    assert rig.ledger.final() == [] and len(rig.dispatcher.calls) == 1
    rig.ledger.running["s"] = []
    rig.run_until(datetime(2030, 1, 7, 12, 1, 2, tzinfo=UTC))
    assert rig.dispatcher.started() == [("s", "12:00"), ("s", "12:01")]
    assert rig.ledger.final() == []


@pytest.mark.parametrize(
    ("lost_at", "run"),
    [
        (None, _lost_run()),  # no loss known
        (LOST_AT, _lost_run("running", started=LOST_AT - timedelta(seconds=1))),  # held
        (LOST_AT, _lost_run(recorded=LOST_AT + timedelta(seconds=5))),  # sent after the loss
        (LOST_AT, InFlight("run-lost", "pending", 0, T0, None)),  # recorded when: unknown
    ],
    ids=["no-loss", "held-through-the-loss", "recorded-after-the-loss", "unknown-record-time"],
)
def test_a_run_in_flight_that_was_not_lost_in_the_queue_skips_the_slot_at_once(
    rig: Rig, lost_at: datetime | None, run: InFlight
) -> None:
    rig.loss.at = lost_at
    rig.ledger.running["s"] = [run]
    rig.add("s", "* * * * *", since=T0 - timedelta(seconds=40), policy=Policy(Overlap.SKIP))

    rig.run_until(T0 + timedelta(seconds=1))

    assert rig.ledger.final() == [("s", "12:00", "overlap_skip")]
    assert rig.loop.stats.lost_waits == 0 and rig.dispatcher.calls == []


def test_a_slot_waits_for_a_run_lost_in_the_queue_until_its_deadline_at_most() -> None:
    # Given a run lost in the queue that is never sent again (no dispatcher runs), and
    # fires given up 2 s after they were due to start
    rig = make_rig(give_up_after=timedelta(seconds=2))
    try:
        rig.loss.at = LOST_AT
        rig.ledger.running["s"] = [_lost_run()]
        rig.add("s", "* * * * *", since=T0 - timedelta(seconds=40), policy=Policy(Overlap.SKIP))

        # When the 12:00 slot has waited past its deadline
        rig.run_until(T0 + timedelta(seconds=1))
        assert rig.ledger.final() == []
        rig.run_until(T0 + timedelta(seconds=3))

        # Then it is skipped for the overlap after all
        assert rig.ledger.final() == [("s", "12:00", "overlap_skip")]
        assert rig.dispatcher.calls == []
    finally:
        rig.loop.stop()


def test_a_buffered_fire_starts_when_the_run_in_flight_ends(rig: Rig) -> None:
    # Given a run in flight and buffer_one
    old = InFlight("run-old", "running", 1, datetime(2030, 1, 7, 11, 59, tzinfo=UTC))
    rig.ledger.running["s"] = [old]
    rig.add("s", "* * * * *", since=T0 - timedelta(seconds=40), policy=Policy(Overlap.BUFFER_ONE))
    rig.run_until(datetime(2030, 1, 7, 12, 1, 10, tzinfo=UTC))

    # Then 12:00 waits in the buffer (with a placeholder), 12:01 finds the buffer full
    assert rig.dispatcher.calls == []
    assert ("s", datetime(2030, 1, 7, 12, 0, tzinfo=UTC), "pending:overlap_buffer", 7) in (
        rig.ledger.missed
    )
    assert rig.ledger.final() == [("s", "12:01", "overlap_buffer_full")]

    # When the run in flight ends
    rig.ledger.running["s"] = []
    rig.run_until(datetime(2030, 1, 7, 12, 1, 20, tzinfo=UTC))

    # Then the buffered fire starts, with its own nominal fire time
    assert rig.dispatcher.started() == [("s", "12:00")]


def test_a_pause_cancels_runs_dispatched_ahead_of_a_later_fire_time(rig: Rig) -> None:
    # Given runs of a schedule in flight: one for a past slot, one dispatched ahead
    before = InFlight("run-before", "running", 1, T0 - timedelta(minutes=1))
    ahead = InFlight("run-ahead", "pending", 0, T0 + timedelta(seconds=2))
    rig.ledger.running["s"] = [ahead, before]

    # When the schedule is paused now
    rig.loop.paused("s", T0)

    # Then only the run whose fire time lies after the pause is cancelled
    eventually(lambda: rig.ledger.cancelled == ["run-ahead"], what="cancelled ahead")
    assert rig.loop.stats.cancelled == 1


def test_fires_due_together_go_to_the_dispatcher_in_one_call(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (a step collects for BATCH_COLLECT, 100 ms: with eight tests on two cores, 41
    # fires once took five; the window here is long enough for any machine)
    monkeypatch.setattr(starts, "BATCH_COLLECT", timedelta(seconds=10))
    rig.clock.set(T0 - timedelta(minutes=5))
    for n in range(40):
        rig.add(f"s{n:02d}", "*/2 * * * *")
    rig.add("guarded", "*/2 * * * *", policy=Policy(overlap=Overlap.SKIP))

    rig.run_until(datetime(2030, 1, 7, 11, 56, 30, tzinfo=UTC))

    # The 41 fires due at 11:56 went together, in one call
    assert [len(b) for b in rig.dispatcher.batches] == [41]
    assert sorted(rig.dispatcher.started()) == sorted(
        [(f"s{n:02d}", "11:56") for n in range(40)] + [("guarded", "11:56")]
    )


@pytest.mark.parametrize(
    ("catchup", "overlap", "catchup_runs", "reason"),
    [
        (Catchup.LATEST, Overlap.SKIP, 0, "superseded_by_latest"),
        (Catchup.ALL, Overlap.BUFFER_ALL, 12, None),
        (Catchup.LATEST, Overlap.ALLOW_ALL, 12, None),
    ],
    ids=["latest", "all", "side-by-side"],
)
def test_a_term_begun_13s_behind_a_one_second_schedule_labels_the_late_slots(
    rig: Rig, catchup: Catchup, overlap: Overlap, catchup_runs: int, reason: str | None
) -> None:
    # Given a 1 s schedule another leader handled through 12:00:00, and this planner
    # elected 13.2 s later: every slot since is within the one-minute grace
    stopped = datetime(2030, 1, 7, 12, 0, 0, tzinfo=UTC)
    rig.lead.current = 0
    spec = Spec(intervals=(Interval(timedelta(seconds=1)),))
    rules = Policy(catchup=catchup, overlap=overlap)
    rig.index.apply(ScheduleDef("s", spec, rules, revision=1), stopped - timedelta(hours=1))
    rig.ledger.newest["s"] = (stopped, 3600)
    rig.clock.set(stopped + timedelta(seconds=13, milliseconds=200))

    # When it begins its term
    rig.lead.current = 5
    rig.loop.wake()
    rig.run_until(stopped + timedelta(seconds=30))

    # Then the newest slot starts on time as SCHEDULED; the twelve before it were not
    # fired on time: catch-up runs (CATCHUP) or MISSED for the catch-up policy, never
    # SCHEDULED runs late nor overlap skips
    older = [stopped + timedelta(seconds=s) for s in range(1, 13)]
    started = {(t, trig) for _, t, _, trig in rig.dispatcher.calls}
    assert (stopped + timedelta(seconds=13), Trigger.SCHEDULED) in started
    assert {(t, trig) for t, trig in started if t in older} == (
        {(t, Trigger.CATCHUP) for t in older[-catchup_runs:]} if catchup_runs else set()
    )
    expected = [("s", t, reason) for t in older] if reason else []
    assert [(sid, t, r) for sid, t, r, _ in rig.ledger.missed if r != "pending:catchup"] == (
        expected
    )


@dataclass
class FencedStore:
    """The store and dispatcher as the loop meets them, with the store's rules that
    decide whether a slot is lost across terms: one row per slot (a start turns a
    placeholder into the run; a final reason is never overwritten), the newest fire
    time and the placeholders as a new term reads them, and fencing (a write under a
    token older than the newest seen is refused, whoever sends it). ``fail``: slots
    whose start fails (the queue is away) under a token below the one given;
    ``away``: how many MISSED-row calls fail first (the store is away)."""

    fail: dict[datetime, int] = field(default_factory=dict)
    away: int = 0
    newest_token: int = 0
    rows: dict[tuple[str, datetime], str] = field(default_factory=dict)  # "run" or reason
    refused: list[tuple[str, datetime, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _fence(self, token: int, slots: Sequence[tuple[str, datetime]]) -> None:
        if token < self.newest_token:
            self.refused.extend((sid, at, token) for sid, at in slots)
            raise StaleFencingToken("planner", token, self.newest_token)
        self.newest_token = token

    def start_runs(self, starts: Sequence[Start], token: int) -> list[str | CronwaveError]:
        return start_each(self.start_run, starts, token)

    def start_run(self, schedule_id: str, fire_time: datetime, token: int, trigger: Trigger) -> str:
        with self.lock:
            self._fence(token, [(schedule_id, fire_time)])
            if token < self.fail.get(fire_time, 0):
                raise Unavailable("the queue is away")
            key = (schedule_id, fire_time)
            if self.rows.get(key, "pending:").startswith("pending:"):
                self.rows[key] = "run"
            return f"run-{fire_time:%M%S}"

    def record_missed(self, slots: Sequence[Missed], token: int) -> list[str]:
        with self.lock:
            if self.away:
                self.away -= 1
                raise Unavailable("the store is away")
            self._fence(token, [(m.schedule_id, m.fire_time) for m in slots])
            for m in slots:
                current = self.rows.get((m.schedule_id, m.fire_time))
                if current is None or (current.startswith("pending:") and current != m.reason):
                    self.rows[(m.schedule_id, m.fire_time)] = m.reason
            return []

    def latest_fire_times(
        self, schedule_ids: Sequence[str] | None = None, until: datetime | None = None
    ) -> dict[str, tuple[datetime, int]]:
        with self.lock:
            latest: dict[str, tuple[datetime, int]] = {}
            for sid, at in self.rows:
                if until is not None and at > until:
                    continue
                newest, count = latest.get(sid, (at, 0))
                latest[sid] = (max(newest, at), count + 1)
            return latest

    def pending_fires(self) -> list[Missed]:
        with self.lock:
            return [
                Missed(sid, at, reason)
                for (sid, at), reason in self.rows.items()
                if reason.startswith("pending:")
            ]

    def in_flight_many(self, schedule_ids: Sequence[str]) -> dict[str, list[InFlight]]:
        return {sid: [] for sid in schedule_ids}

    def in_flight(self, schedule_id: str) -> list[InFlight]:
        return []

    def cancel_run(self, run: InFlight, reason: str) -> bool:
        return False


@pytest.mark.parametrize("between", ["renewed late", "lost, then granted again"])
def test_a_fire_put_off_while_the_store_was_away_outlives_its_term(between: str) -> None:
    # Given a 2-s schedule dispatched ahead, whose 12:00:32 start keeps failing in
    # this term (the queue is away) and whose placeholder the store, away for a
    # moment, did not take; meanwhile the next slot, 12:00:34, is recorded
    first, second = T0 + timedelta(seconds=2), T0 + timedelta(seconds=4)
    store = FencedStore(fail={first: 8}, away=1)
    clock, lead = ManualClock(T0), Lead()
    index = ScheduleIndex(lead=timedelta(seconds=5))
    loop = FireLoop(
        index, clock, lead, store, store,
        backoff=Backoff(timedelta(seconds=4), timedelta(seconds=8)),
        idle=timedelta(seconds=30), queue_loss=QueueLoss(),
    )  # fmt: skip
    rig = Rig(clock, index, lead, Dispatcher(clock), Ledger(), loop)
    loop.start()
    try:
        spec = Spec(intervals=(Interval(timedelta(seconds=2)),))
        index.apply(ScheduleDef("s", spec, Policy(), revision=1), T0)
        loop.wake()
        rig.run_until(T0 + timedelta(seconds=3, milliseconds=500))
        assert store.rows.get(("s", second)) == "run" and ("s", first) not in store.rows
        assert store.away == 0  # the store was away when the placeholder was sent

        # When this planner's term ends before the placeholder is sent again, and its
        # next term begins (the lease renewed late, or lost with Redis and granted again)
        if between != "renewed late":
            lead.current = 0
            loop.wake()
            rig.run_until(T0 + timedelta(seconds=3, milliseconds=600))
        lead.current = 8
        loop.wake()
        rig.run_until(T0 + timedelta(seconds=12))

        # Then the new term starts the slot put off, nothing was refused as stale, and
        # every slot through 12:00:40 has its run
        assert store.refused == []
        slots = [T0 + timedelta(seconds=s) for s in range(2, 11, 2)]
        assert {at: store.rows.get(("s", at)) for at in slots} == {at: "run" for at in slots}
    finally:
        loop.stop()
