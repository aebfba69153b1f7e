"""The held-runs heap: runs claimed ahead of their fire time leave it in the order
they are due, never before their release instant, and are all handed back at once
when the worker stops."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

from tests.helpers import eventually
from worker.held_runs import HeldRuns


class Log:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: list[tuple[str, datetime]] = []

    def run(self, name: str) -> None:
        with self.lock:
            self.entries.append((name, datetime.now(UTC)))

    def names(self) -> list[str]:
        with self.lock:
            return [name for name, _ in self.entries]


def test_runs_leave_in_the_order_they_are_due_and_not_before() -> None:
    held = HeldRuns(threads=4, release_ahead=timedelta(0))
    log = Log()
    now = datetime.now(UTC)
    due = {"a": now + timedelta(seconds=0.6), "b": now + timedelta(seconds=0.2)}
    due["c"] = now + timedelta(seconds=0.4)

    for name, at in due.items():
        held.hold(at, lambda name=name: log.run(name))

    eventually(lambda: len(log.names()) == 3, timeout=10, what="all released")
    assert log.names() == ["b", "c", "a"]
    assert all(ran >= due[name] for name, ran in log.entries)
    held.stop()
    assert held.join(timedelta(seconds=5))


def test_release_ahead_hands_a_run_over_before_its_instant() -> None:
    held = HeldRuns(threads=2, release_ahead=timedelta(hours=1))
    log = Log()

    held.hold(datetime.now(UTC) + timedelta(minutes=30), lambda: log.run("early"))

    eventually(lambda: log.names() == ["early"], timeout=10, what="released ahead")
    held.stop()
    assert held.join(timedelta(seconds=5))


def test_stop_hands_back_everything_still_held_and_a_failure_stops_nothing() -> None:
    # Given two runs held for hours, one of whose hand-backs fails
    held = HeldRuns(threads=2, release_ahead=timedelta(0))
    log = Log()

    def fails() -> None:
        raise RuntimeError("the store refused")

    held.hold(datetime.now(UTC) + timedelta(hours=1), lambda: log.run("first"), on_stop=fails)
    held.hold(
        datetime.now(UTC) + timedelta(hours=2),
        lambda: log.run("later"),
        on_stop=lambda: log.run("later handed back"),
    )
    assert len(held) == 2

    # When the worker stops
    started = time.monotonic()
    assert held.stop() == 2
    assert held.join(timedelta(seconds=5))

    # Then each is handed back at once, and none of them runs
    assert log.names() == ["later handed back"]
    assert time.monotonic() - started < 5  # not held until its hour came
    assert len(held) == 0


def test_a_run_held_after_the_stop_is_handed_back_at_once() -> None:
    held = HeldRuns(threads=1, release_ahead=timedelta(0))
    log = Log()
    held.stop()

    held.hold(
        datetime.now(UTC) + timedelta(hours=1), lambda: log.run("ran"), lambda: log.run("back")
    )

    eventually(lambda: log.names() == ["back"], timeout=5, what="handed back")
    assert held.join(timedelta(seconds=5))
