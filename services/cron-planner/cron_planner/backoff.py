"""The delays between a failed call and its next attempt, for the fire loop's starts,
its MISSED rows and the beginning of a term."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from cronwave_core.backoff import exponential, nth_wait


@dataclass(frozen=True)
class Backoff:
    """Delays between attempts: ``initial * multiplier**n``, at most ``maximum``."""

    initial: timedelta = timedelta(seconds=0.2)
    maximum: timedelta = timedelta(seconds=5)
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        if self.initial <= timedelta(0) or self.maximum < self.initial or self.multiplier < 1:
            raise ValueError("Backoff needs 0 < initial <= maximum and multiplier >= 1")

    def delay(self, attempts: int) -> timedelta:
        """The wait before the next try of a call that failed ``attempts`` times, for
        the loop to schedule (it never sleeps: other fires are due meanwhile)."""
        wait = exponential(self.initial, self.maximum, self.multiplier)
        return nth_wait(wait, attempts + 1)
