"""Failure drills the gateway plays on purpose, armed by ``SetFaults`` (or
``CRONWAVE_GATEWAY_TIMEOUT_AFTER_COMMIT`` at start-up) in a gateway started for tests
(``CRONWAVE_TEST_HOOKS=1``) only: any other has ``NO_FAULTS``, which never holds an
answer and refuses ``SetFaults`` (UNIMPLEMENTED).

"Timeout after commit" is the failure that makes idempotency keys necessary: the
charge is committed, but the answer arrives after the caller gave up, so the caller
cannot tell a charge that happened from one that did not and must ask again with the
same key.
"""

from __future__ import annotations

import threading
from datetime import timedelta

from cronwave_core.errors import InvalidArgument, Unimplemented
from cronwave_core.settings import TEST_HOOKS

MAX_HOLD = timedelta(seconds=120)
#: How far past the caller's deadline an answer is held, so the caller surely gave up.
PAST_DEADLINE = timedelta(milliseconds=200)
#: The hold of an answer to a caller that set no deadline.
NO_DEADLINE_HOLD = timedelta(seconds=5)


class DrillsOff(Unimplemented):
    """``SetFaults`` called on a gateway not started for tests."""

    def __init__(self) -> None:
        super().__init__(
            "SetFaults: failure drills exist only in a payment-gateway started for tests "
            f"or drills ({TEST_HOOKS}=1); this one was not, so none can be armed"
        )


class FaultHooks:
    """What a gateway not started for tests has: no drill, nothing to arm."""

    def set(self, timeout_after_commit: int, hold: timedelta | None = None) -> None:
        """Arm the next ``timeout_after_commit`` charge calls (0 disarms); refused
        (``DrillsOff``, UNIMPLEMENTED) unless the gateway was started for tests."""
        raise DrillsOff()

    def take_timeout(self, time_remaining: float | None) -> float | None:
        """Seconds to hold the answer of the call that just committed, or None when
        no drill is armed. ``time_remaining`` is the caller's remaining deadline."""
        return None

    def state(self) -> tuple[int, int]:
        """(calls still armed, answers held so far)."""
        return 0, 0


NO_FAULTS = FaultHooks()


class Faults(FaultHooks):
    """The armed drills of a gateway started for tests; safe to use from every server
    thread."""

    def __init__(self, timeout_after_commit: int = 0, hold: timedelta | None = None) -> None:
        self._lock = threading.Lock()
        self._timeouts = 0
        self._hold: timedelta | None = None
        self._served = 0
        self.set(timeout_after_commit, hold)

    def set(self, timeout_after_commit: int, hold: timedelta | None = None) -> None:
        if timeout_after_commit < 0:
            raise InvalidArgument("timeout_after_commit", "must not be negative")
        if hold is not None and not timedelta(0) <= hold <= MAX_HOLD:
            raise InvalidArgument("hold", f"must be between 0 and {MAX_HOLD}")
        with self._lock:
            self._timeouts = timeout_after_commit
            self._hold = hold

    def take_timeout(self, time_remaining: float | None) -> float | None:
        with self._lock:
            if self._timeouts <= 0:
                return None
            self._timeouts -= 1
            self._served += 1
            hold = self._hold
        if hold is not None:
            return hold.total_seconds()
        if time_remaining is None:
            return NO_DEADLINE_HOLD.total_seconds()
        return max(0.0, time_remaining) + PAST_DEADLINE.total_seconds()

    def state(self) -> tuple[int, int]:
        with self._lock:
            return self._timeouts, self._served
