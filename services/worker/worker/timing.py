"""Starting a job body at its nominal fire time, not before.

A run may be recorded and queued ahead of its fire time, so that recording and
queueing are off the critical path; its worker then holds the body until the instant.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from cronwave_core.domain.instants import (
    SPIN,
    SPIN_MARGIN_S,
    SpinBudget,
    epoch_ns,
    wait_until_ns,
)


@dataclass
class _Instant:
    """The bodies held for one instant: a lock each, which the gate releases, and
    how many have passed it."""

    waiters: list[threading.Lock] = field(default_factory=list)
    started: threading.Event = field(default_factory=threading.Event)
    passed: Iterator[int] = field(default_factory=lambda: itertools.count(1))


class FireGate:
    """One waker for the bodies of one process that are held for the same instant.

    A thousand runs due at one instant, each sleeping and then spinning in its own
    thread, put a thousand threads in line for the interpreter in the last moment:
    that line is what makes the last of them late. Behind a gate every body waits on
    a lock of its own, and one thread (the gate's) sleeps and spins until the
    instant, then releases the locks of that instant: the bodies wake together and
    none of them spins.

    The work that follows a body (its completion) waits until every body of its
    instant has started (``after_start``), so that the bodies of a burst are not in
    line behind the completions of the first of them."""

    def __init__(
        self,
        clock_ns: Callable[[], int] = time.time_ns,
        sleep: Callable[[float], None] = time.sleep,
        budget: SpinBudget | None = None,
    ) -> None:
        self._clock_ns = clock_ns
        self._sleep = sleep
        self._budget = budget or SPIN
        self._cond = threading.Condition()
        self._held: dict[int, _Instant] = {}  # instants not yet opened, by epoch ns
        self._starting: dict[int, _Instant] = {}  # opened, with bodies still to pass
        self._instants: list[int] = []  # a heap of the keys of _held
        self._thread: threading.Thread | None = None

    def wait(self, fire_time: datetime) -> int:
        """Block until the wall clock reaches ``fire_time`` (at once when it has passed)
        and return the clock then, in ns: the body's start."""
        target = epoch_ns(fire_time)
        if (target - self._clock_ns()) / 1e9 <= SPIN_MARGIN_S:
            return wait_until_ns(target, self._clock_ns, self._sleep, self._budget)
        # A lock of its own, not an event: a thousand waiters woken from one event
        # would queue again for the event's lock.
        lock = threading.Lock()
        lock.acquire()
        with self._cond:
            instant = self._held.get(target)
            if instant is None:
                instant = self._held[target] = _Instant()
                heapq.heappush(self._instants, target)
                self._cond.notify()
            instant.waiters.append(lock)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._open_gates, name="fire-gate", daemon=True
                )
                self._thread.start()
        lock.acquire()
        started = self._clock_ns()
        if next(instant.passed) == len(instant.waiters):  # the last of the instant
            with self._cond:
                self._starting.pop(target, None)
            instant.started.set()
        return started

    def after_start(self, fire_time: datetime, timeout: float = 1.0) -> None:
        """Block until every body held for ``fire_time`` has started (at most
        ``timeout`` seconds); at once for an instant no body waited for."""
        with self._cond:
            instant = self._starting.get(epoch_ns(fire_time))
        if instant is not None:
            instant.started.wait(timeout)

    def _open_gates(self) -> None:
        while True:
            with self._cond:
                while not self._instants:
                    self._cond.wait()
                target = self._instants[0]
                left = (target - self._clock_ns()) / 1e9
                if left > SPIN_MARGIN_S:
                    # A nearer instant, or the timeout, wakes the wait: look again.
                    self._cond.wait(left - SPIN_MARGIN_S)
                    continue
            now = wait_until_ns(target, self._clock_ns, self._sleep, self._budget)
            with self._cond:
                due: list[_Instant] = []
                while self._instants and self._instants[0] <= now:
                    key = heapq.heappop(self._instants)
                    due.append(self._held.pop(key))
                    self._starting[key] = due[-1]
            for instant in due:
                for lock in instant.waiters:
                    lock.release()


#: The gate of this process's held bodies.
GATE = FireGate()
