"""The delays between a failed call and its next attempt, for the fire loop's starts,
its MISSED rows and the beginning of a term."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


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
        return min(self.maximum, self.initial * (self.multiplier ** min(attempts, 32)))
