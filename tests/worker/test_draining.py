"""The worker's stop as the runs it handles see it: each is asked back, waited for up to
the grace period, then stopped; a run that arrives while the worker stops is asked back
as it enters."""

from __future__ import annotations

import threading
from datetime import timedelta

from tests.helpers import eventually
from worker.draining import Draining


class Target:
    """A supervisor stand-in that records what the worker's stop asked of it."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def release(self) -> None:
        self.calls.append("release")

    def force_release(self) -> None:
        self.calls.append("force")


def test_drain_asks_every_run_back_and_waits_for_its_hand_back() -> None:
    # Given a run with its attempt under way
    draining = Draining()
    stop = draining.enter("run-1")
    target = Target()
    stop.attach(target)

    # When the worker drains, and the attempt hands its run back soon after
    threading.Timer(0.1, draining.leave, args=(stop,)).start()
    left = draining.drain(timedelta(seconds=10), timedelta(seconds=10))

    # Then it was asked to stop, not forced, and nothing is left
    assert target.calls == ["release"]
    assert left == []
    assert draining.stopping


def test_a_run_still_running_after_the_grace_is_forced_then_reported() -> None:
    draining = Draining()
    stop = draining.enter("run-stuck")
    target = Target()
    stop.attach(target)

    left = draining.drain(timedelta(milliseconds=50), timedelta(milliseconds=50))

    assert target.calls == ["release", "force"]
    assert left == ["run-stuck"]


def test_a_run_entering_while_the_worker_stops_is_asked_back_at_once() -> None:
    draining = Draining()
    draining.begin()

    stop = draining.enter("run-late")
    target = Target()
    stop.attach(target)  # its supervisor, created after the stop began

    assert stop.requested
    assert target.calls == ["release"]
    draining.leave(stop)
    assert draining.drain(timedelta(seconds=1), timedelta(seconds=1)) == []


def test_a_consumer_waits_for_room_until_a_run_leaves_or_the_worker_stops() -> None:
    # Given a worker holding as many runs as it may (2)
    draining = Draining()
    held = [draining.enter("run-1"), draining.enter("run-2")]
    entered: list[str] = []

    def consume(run_id: str) -> None:
        draining.enter(run_id, limit=2)
        entered.append(run_id)

    # When two more messages arrive, each waits for room
    waiters = [threading.Thread(target=consume, args=(f"run-{i}",), daemon=True) for i in (3, 4)]
    for waiter in waiters:
        waiter.start()
    waiters[0].join(0.2)
    assert entered == []

    # Then one run leaving lets exactly one in (room for one more) ...
    draining.leave(held[0])
    eventually(lambda: len(entered) == 1, timeout=5, what="one run in")
    still_waiting = [w for w in waiters if w.is_alive()]
    still_waiting[0].join(0.2)
    assert len(entered) == 1 and still_waiting[0].is_alive()
    # ... and the worker's stop lets the other through (its message goes back)
    draining.begin()
    still_waiting[0].join(5)
    assert not still_waiting[0].is_alive() and len(entered) == 2
