"""The fire gate: bodies held for one instant wake together at it, never before, and
the work after a body waits until every body of its instant has started."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from cronwave_core.domain.instants import SpinBudget, epoch_ns, wait_until_fire_time
from tests.worker.test_supervisor import ctx_for
from worker.supervisor import BeatResult, Outcome, Supervisor
from worker.timing import FireGate

BODIES = 200


def _wait_all(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join(timeout=30)
    assert not any(t.is_alive() for t in threads)


def test_bodies_held_for_an_instant_start_at_it_not_before() -> None:
    gate = FireGate()
    fire = datetime.now(UTC) + timedelta(milliseconds=400)
    later = fire + timedelta(milliseconds=200)
    started: dict[str, list[int]] = {"fire": [], "later": []}
    lock = threading.Lock()

    def body(name: str, instant: datetime) -> None:
        at = gate.wait(instant)
        with lock:
            started[name].append(at)

    instants = [("later", later) if i % 4 == 0 else ("fire", fire) for i in range(BODIES)]
    threads = [threading.Thread(target=body, args=instant) for instant in instants]
    for thread in threads:
        thread.start()
    _wait_all(threads)
    assert len(started["fire"]) + len(started["later"]) == BODIES
    assert min(started["fire"]) >= epoch_ns(fire)
    assert min(started["later"]) >= epoch_ns(later)


def test_an_instant_that_has_passed_does_not_wait() -> None:
    gate = FireGate()
    past = datetime.now(UTC) - timedelta(seconds=1)
    assert gate.wait(past) >= epoch_ns(past)
    gate.after_start(past)  # nothing waited for it: returns at once


def test_the_work_after_a_body_waits_for_every_body_of_its_instant() -> None:
    gate = FireGate()
    started: list[int] = []
    after: list[int] = []
    lock = threading.Lock()
    # Every body thread is running before the instant is set, and the instant leaves
    # them time to reach the gate on a loaded machine: a body that came after it would
    # not be one of its bodies.
    ready = threading.Barrier(BODIES + 1, timeout=60)
    instant: list[datetime] = []

    def body() -> None:
        ready.wait()
        fire = instant[0]
        at = gate.wait(fire)
        with lock:
            started.append(at)
        gate.after_start(fire, timeout=30)
        with lock:
            after.append(len(started))

    threads = [threading.Thread(target=body) for _ in range(BODIES)]
    for thread in threads:
        thread.start()
    instant.append(datetime.now(UTC) + timedelta(seconds=2))
    ready.wait()
    _wait_all(threads)
    # Every body's follow-up saw all the bodies of the instant started.
    assert after == [BODIES] * BODIES


def test_a_supervised_body_starts_at_its_fire_time_and_its_limit_counts_from_it() -> None:
    fire = datetime.now(UTC) + timedelta(milliseconds=300)
    # A duration limit shorter than the wait for the fire time: it counts from the
    # fire time, so the body is not stopped while it waits.
    supervisor = Supervisor(
        lambda _: BeatResult.OK, timedelta(seconds=10), timedelta(milliseconds=200)
    )
    result = supervisor.run(lambda ctx: {"ok": True}, ctx_for(supervisor), fire)
    assert result.outcome is Outcome.SUCCEEDED, result
    assert result.body_started_ns >= epoch_ns(fire)


class _FakeClock:
    """A wall clock that moves only when slept on; a real sleep overshoots a little."""

    def __init__(self, now_ns: int) -> None:
        self.now_ns = now_ns
        self.sleeps: list[float] = []

    def clock(self) -> int:
        return self.now_ns

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now_ns += int(seconds * 1e9) + 100_000


def test_the_last_moment_is_spun_only_within_the_spin_budget() -> None:
    # Given a budget of 3 ms of turns a second and instants 2.5 ms apart
    budget = SpinBudget(per_second_ns=3_000_000)
    second = datetime(2030, 1, 1, 2, 0, tzinfo=UTC)
    clock = _FakeClock(epoch_ns(second))
    first = second + timedelta(milliseconds=10)
    nxt = first + timedelta(milliseconds=2, microseconds=500)

    # When the first is waited for, its last 2 ms are turns (sleeps of 0)
    assert wait_until_fire_time(first, clock_ns=clock.clock, sleep=clock.sleep, budget=budget) >= (
        epoch_ns(first)
    )
    assert 0 in clock.sleeps
    # And the next one, past the budget, sleeps its last moment in one go
    clock.sleeps.clear()
    started = wait_until_fire_time(nxt, clock_ns=clock.clock, sleep=clock.sleep, budget=budget)
    assert started >= epoch_ns(nxt)
    assert 0 not in clock.sleeps and len(clock.sleeps) <= 2

    # And in the next second the budget is whole again
    later = second + timedelta(seconds=1, milliseconds=10)
    clock.now_ns = epoch_ns(later) - 1_000_000_000 // 2
    clock.sleeps.clear()
    wait_until_fire_time(later, clock_ns=clock.clock, sleep=clock.sleep, budget=budget)
    assert 0 in clock.sleeps
