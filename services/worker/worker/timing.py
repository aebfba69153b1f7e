"""Starting a job body at its nominal fire time, not before.

A run may be recorded and queued ahead of its fire time, so that recording and
queueing are off the critical path; its worker then holds the body until the instant.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

#: Sleep until this close to the instant, then yield in short turns: a sleep can
#: overshoot by a scheduler tick, a turn cannot.
SPIN_MARGIN_S = 0.002


def epoch_ns(instant: datetime) -> int:
    """Nanoseconds since the epoch of an aware ``instant``, exactly."""
    delta = instant.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def wait_until_fire_time(
    fire_time: datetime,
    *,
    clock_ns: Callable[[], int] = time.time_ns,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Block until the wall clock reaches ``fire_time`` (returns at once when it has
    passed) and return the clock then, in ns: the body's start, from which fire
    lateness is counted."""
    target = epoch_ns(fire_time)
    while True:
        now = clock_ns()
        left = (target - now) / 1e9
        if left <= 0:
            return now
        sleep(left - SPIN_MARGIN_S if left > SPIN_MARGIN_S else 0)
