"""How a job type retries an attempt that raised: a frozen policy that checks itself.

Only an error the job raised is retried. A worker that crashed, or paused past its
heartbeat timeout, is not a failed attempt: the run is re-dispatched and resumes from
its checkpoint under a new attempt token, and that does not count against
``maximum_attempts``. An error that is a ``cronwave.NonRetryable`` is never retried,
whatever the policy lists.

The worker turns a policy into its wire form (``worker.jobs.wire``) when it registers
the job type; this module knows nothing of protobuf.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from cronwave_core.errors import InvalidArgument

#: The error type every policy treats as non-retryable (``cronwave.NonRetryable``, and
#: so every subclass of it: an error's base type names are matched too).
ALWAYS_NON_RETRYABLE = "NonRetryable"
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
        for name in ("initial_interval", "maximum_interval"):
            if not isinstance(getattr(self, name), timedelta):
                raise InvalidArgument(
                    f"retry.{name}", "must be a datetime.timedelta, e.g. timedelta(seconds=5)"
                )
        if self.initial_interval <= timedelta(0):
            raise InvalidArgument("retry.initial_interval", "must be a positive duration")
        if not isinstance(self.backoff_coefficient, int | float) or not (
            self.backoff_coefficient >= 1.0  # also refuses NaN
        ):
            raise InvalidArgument("retry.backoff_coefficient", "must be at least 1.0")
        if self.maximum_interval < self.initial_interval:
            raise InvalidArgument(
                "retry.maximum_interval", "must be at least retry.initial_interval"
            )
        if (
            not isinstance(self.maximum_attempts, int)
            or not 1 <= self.maximum_attempts <= MAX_ATTEMPTS_CAP
        ):
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
        # Imported here: tenacity is a fifth of ``import cronwave``'s time (6.7 of 32 ms,
        # python -X importtime), and only the worker asks a policy for a delay.
        from cronwave_core.backoff import exponential, nth_wait

        wait = exponential(
            self.initial_interval, self.maximum_interval, float(self.backoff_coefficient)
        )
        return nth_wait(wait, attempt)

    def retryable(self, error_types: Iterable[str]) -> bool:
        """False when any of ``error_types`` (an error's type and base type names) is
        listed as non-retryable, or is ``NonRetryable``."""
        return not set(error_types) & {*self.non_retryable_errors, ALWAYS_NON_RETRYABLE}

    def retry_after(self, attempt: int, error_types: Iterable[str]) -> timedelta | None:
        """The delay before retrying failed attempt ``attempt``, or None when the run
        must not be retried (the error is non-retryable or the attempts are spent)."""
        if not self.retryable(error_types) or attempt >= self.maximum_attempts:
            return None
        return self.delay(attempt)


#: For jobs that move money: an error ends the attempt on the dead-letter list, for a
#: person to look at and replay, instead of repeating a charge automatically.
NO_RETRY = RetryPolicy(maximum_attempts=1)
