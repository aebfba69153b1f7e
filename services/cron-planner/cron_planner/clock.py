"""The planner's sense of time, injected so schedules and the fire loop can be tested
at the speed of the code rather than of the calendar."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, an aware UTC datetime."""
        ...

    def wait(self, wake: threading.Event, until: datetime) -> bool:
        """Block until ``now() >= until`` or ``wake`` is set; true if ``wake`` was set.
        It may return early; callers re-check what they were waiting for."""
        ...


class SystemClock:
    """Wall-clock time. Waits are measured on the monotonic clock, so a wall-clock
    step only shifts when the caller next looks at ``now()``."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def wait(self, wake: threading.Event, until: datetime) -> bool:
        seconds = (until - self.now()).total_seconds()
        return wake.wait(max(0.0, seconds))


class ManualClock:
    """Time that moves only when ``advance`` or ``set`` says so (tests, simulations).

    ``parked()`` tells a test where the waiter is parked once it has seen the latest
    time, so the test can advance exactly to the next fire without sleeping.
    """

    _POLL = 0.002  # seconds of real time between looks at ``wake``

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("ManualClock needs an aware datetime")
        self._now = start.astimezone(UTC)
        self._cond = threading.Condition()
        self._changes = 0  # how often time was moved
        self._seen = -1  # the change count the parked waiter has seen
        self._until: datetime | None = None
        self._wake: threading.Event | None = None

    def now(self) -> datetime:
        with self._cond:
            return self._now

    def set(self, instant: datetime) -> None:
        with self._cond:
            self._now = instant.astimezone(UTC)
            self._changes += 1
            self._cond.notify_all()

    def advance(self, delta: timedelta) -> datetime:
        with self._cond:
            self._now += delta
            self._changes += 1
            self._cond.notify_all()
            return self._now

    def parked(self) -> datetime | None:
        """Until when the waiter waits, if it is waiting with nothing left to notice
        (it has seen the current time and has not been woken); else None."""
        with self._cond:
            if self._until is None or self._seen != self._changes:
                return None
            if self._wake is not None and self._wake.is_set():
                return None
            return self._until

    def wait(self, wake: threading.Event, until: datetime) -> bool:
        with self._cond:
            self._until, self._wake = until, wake
            try:
                while not wake.is_set() and self._now < until:
                    self._seen = self._changes
                    self._cond.wait(self._POLL)
            finally:
                self._until, self._wake, self._seen = None, None, -1
        return wake.is_set()
