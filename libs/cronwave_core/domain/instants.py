"""Waiting for an instant of the wall clock, exactly: a sleep, then short turns.

The worker's job bodies wait with ``wait_until_fire_time``, and the benchmark's
machine-floor probe (``cronwave_bench.floor``) waits with the very same function, so
that the two latenesses compare.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

#: Sleep until this close to the instant, then yield in short turns: a sleep can
#: overshoot by a scheduler tick, a turn cannot.
SPIN_MARGIN_S = 0.002
#: Turns cost CPU. A process spends at most this much of each second in them; past
#: that, the last moment before an instant is slept too (a tick late at worst). One
#: schedule a second, or a burst at one instant, is far inside it; runs due every
#: few milliseconds (hundreds of instants a second) are not, and would otherwise keep
#: a core turning.
SPIN_BUDGET_NS_PER_S = 50_000_000


class SpinBudget:
    """How much time may still be spent in turns this second (shared by the threads
    of a process; approximate under races, which only moves the bound a little)."""

    def __init__(self, per_second_ns: int = SPIN_BUDGET_NS_PER_S) -> None:
        self._per_second = per_second_ns
        self._second = -1
        self._used = 0

    def take(self, now_ns: int, spin_ns: int) -> bool:
        """True, and ``spin_ns`` counted, if that much spinning fits this second."""
        second = now_ns // 1_000_000_000
        if second != self._second:
            self._second, self._used = second, 0
        if self._used + spin_ns > self._per_second:
            return False
        self._used += spin_ns
        return True


#: The spin budget of this process's waits.
SPIN = SpinBudget()


def epoch_ns(instant: datetime) -> int:
    """Nanoseconds since the epoch of an aware ``instant``, exactly."""
    delta = instant.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def wait_until_fire_time(
    fire_time: datetime,
    *,
    clock_ns: Callable[[], int] = time.time_ns,
    sleep: Callable[[float], None] = time.sleep,
    budget: SpinBudget | None = None,
) -> int:
    """Block until the wall clock reaches ``fire_time`` (returns at once when it has
    passed) and return the clock then, in ns: the body's start, from which fire
    lateness is counted. The last moment is spun while ``budget`` (default: the
    process's) allows."""
    return wait_until_ns(epoch_ns(fire_time), clock_ns, sleep, budget or SPIN)


def wait_until_ns(
    target: int,
    clock_ns: Callable[[], int],
    sleep: Callable[[float], None],
    budget: SpinBudget,
) -> int:
    """Block until ``clock_ns`` reaches ``target`` (ns since the epoch) and return the
    clock then."""
    spinning = False
    while True:
        now = clock_ns()
        left = (target - now) / 1e9
        if left <= 0:
            return now
        if left > SPIN_MARGIN_S:
            sleep(left - SPIN_MARGIN_S)
        elif spinning or budget.take(now, target - now):
            spinning = True
            sleep(0)
        else:
            sleep(left)
