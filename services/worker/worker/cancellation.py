"""A cancel as the worker learns it: the store's heartbeat answer says the run is to
be cancelled and how long its body has left (``CancelRun`` with a grace). One
``CancelSignal`` per attempt, set by the heartbeat (any thread), read by the job
(``JobContext.cancelled``) and by the attempt's supervisor, which stops the body once
the grace has passed.

The store is the truth: a heartbeat answer that is lost is asked again at the next
beat, and a worker that never hears of the cancel (it died) leaves the run to the
store, which ends it CANCELLED once the attempt's heartbeat lapses.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta

#: The error a cancelled run is recorded with when the request gave no reason.
CANCELLED = "cancelled"


class CancelSignal:
    """Whether the attempt's run is to be cancelled, why, and by when (on this
    process's monotonic clock) its body must have stopped. Once set, it stays set; a
    later request may bring the deadline closer, never move it away."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._deadline: float | None = None
        self._reason = ""

    def request(self, grace: timedelta, reason: str) -> None:
        """The store asked for the cancel: the body has ``grace`` left from now."""
        deadline = self._monotonic() + max(grace.total_seconds(), 0.0)
        with self._lock:
            if self._deadline is None or deadline < self._deadline:
                self._deadline = deadline
            self._reason = reason or self._reason

    def is_set(self) -> bool:
        """True once a cancel was requested (the job's ``ctx.cancelled``)."""
        return self._deadline is not None

    @property
    def deadline(self) -> float | None:
        """When the body is stopped (``time.monotonic`` seconds); None: no cancel."""
        return self._deadline

    @property
    def reason(self) -> str:
        return self._reason
