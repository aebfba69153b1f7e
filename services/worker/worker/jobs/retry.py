"""How a job type retries an attempt that raised: a frozen policy that checks itself.

Only an error the job raised is retried. A worker that crashed, or paused past its
heartbeat timeout, is not a failed attempt: the run is re-dispatched and resumes from
its checkpoint under a new attempt token, and that does not count against
``maximum_attempts``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from cronwave_proto.v1 import common_pb2

from cronwave_core.convert import td_to_duration
from cronwave_core.errors import InvalidArgument

#: Every run ends: on the dead-letter list at worst, never in an endless retry loop.
MAX_ATTEMPTS_CAP = 100


@dataclass(frozen=True)
class RetryPolicy:
    """Delays grow from ``initial_interval`` by ``backoff_coefficient`` per failed
    attempt, up to ``maximum_interval``; a run gets at most ``maximum_attempts``
    attempts that raised (1 = no retry). An error whose type (or a base type) is named
    in ``non_retryable_errors`` ends the run at once.

    The default gives 1 s, 5 s, 25 s and 2 min (capped) between five attempts.
    """

    initial_interval: timedelta = timedelta(seconds=1)
    backoff_coefficient: float = 5.0
    maximum_interval: timedelta = timedelta(minutes=2)
    maximum_attempts: int = 5
    non_retryable_errors: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.initial_interval <= timedelta(0):
            raise InvalidArgument("retry.initial_interval", "must be a positive duration")
        if not self.backoff_coefficient >= 1.0:  # also refuses NaN
            raise InvalidArgument("retry.backoff_coefficient", "must be at least 1.0")
        if self.maximum_interval < self.initial_interval:
            raise InvalidArgument(
                "retry.maximum_interval", "must be at least retry.initial_interval"
            )
        if not 1 <= self.maximum_attempts <= MAX_ATTEMPTS_CAP:
            raise InvalidArgument(
                "retry.maximum_attempts",
                f"must be in [1, {MAX_ATTEMPTS_CAP}] (1 means no retry), "
                f"got {self.maximum_attempts}",
            )
        names = tuple(self.non_retryable_errors)
        if any(not isinstance(n, str) or not n.strip() for n in names):
            raise InvalidArgument("retry.non_retryable_errors", "must be non-empty type names")
        object.__setattr__(self, "non_retryable_errors", names)

    def delay(self, attempt: int) -> timedelta:
        """The wait after failed attempt number ``attempt`` (1-based) before the next."""
        if attempt < 1:
            raise InvalidArgument("attempt", f"must be at least 1, got {attempt}")
        cap = self.maximum_interval.total_seconds()
        try:
            seconds = self.initial_interval.total_seconds() * self.backoff_coefficient ** (
                attempt - 1
            )
        except OverflowError:
            seconds = cap
        return timedelta(seconds=min(seconds, cap))

    def retryable(self, error_types: Iterable[str]) -> bool:
        """False when any of ``error_types`` (an error's type and base type names) is
        listed as non-retryable."""
        return not set(error_types) & set(self.non_retryable_errors)

    def retry_after(self, attempt: int, error_types: Iterable[str]) -> timedelta | None:
        """The delay before retrying failed attempt ``attempt``, or None when the run
        must not be retried (the error is non-retryable or the attempts are spent)."""
        if not self.retryable(error_types) or attempt >= self.maximum_attempts:
            return None
        return self.delay(attempt)

    @classmethod
    def from_proto(cls, msg: common_pb2.RetryPolicy) -> RetryPolicy:
        """A zero field means the default, as in the proto's wire form."""
        default = cls()
        initial = msg.initial_interval.ToTimedelta() or default.initial_interval
        return cls(
            initial_interval=initial,
            backoff_coefficient=msg.backoff_coefficient or default.backoff_coefficient,
            maximum_interval=msg.maximum_interval.ToTimedelta()
            or max(default.maximum_interval, initial),
            maximum_attempts=msg.maximum_attempts or default.maximum_attempts,
            non_retryable_errors=tuple(msg.non_retryable_errors),
        )

    def to_proto(self) -> common_pb2.RetryPolicy:
        return common_pb2.RetryPolicy(
            initial_interval=td_to_duration(self.initial_interval),
            backoff_coefficient=self.backoff_coefficient,
            maximum_interval=td_to_duration(self.maximum_interval),
            maximum_attempts=self.maximum_attempts,
            non_retryable_errors=list(self.non_retryable_errors),
        )


#: For jobs that move money: an error ends the attempt on the dead-letter list, for a
#: person to look at and replay, instead of repeating a charge automatically.
NO_RETRY = RetryPolicy(maximum_attempts=1)
