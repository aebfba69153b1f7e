"""Job types: a named job function and the limits the store enforces on it, and the
``@cronwave.job`` decorator that makes one.

A worker runs the job types of the modules it is started with (``cronwave worker
--jobs MODULE``, ``CRONWAVE_JOB_MODULES``, or an installed package's entry point in
the group ``cronwave.jobs``): every module attribute that is a ``JobType``. Defining
one registers nothing anywhere; the worker finds it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from cronwave._job_context import JobContext
from cronwave._retry import NO_RETRY, RetryPolicy
from cronwave_core.errors import InvalidArgument
from cronwave_core.fields import validate_queue_name
from cronwave_core.limits import DEFAULT_LIMITS

JobFn = Callable[[JobContext], Mapping[str, Any] | None]


def _positive(value: object, field: str) -> None:
    if not isinstance(value, timedelta):
        raise InvalidArgument(
            field, f"required, a datetime.timedelta such as timedelta(minutes=30); got {value!r}"
        )
    if value <= timedelta(0):
        raise InvalidArgument(field, f"must be a positive duration, got {value}")


@dataclass(frozen=True)
class JobType:
    """A named job function and its limits.

    ``duration_limit`` bounds one attempt: past it the worker kills the attempt and
    records it TIMED_OUT. ``heartbeat_timeout`` is how long the store waits without a
    heartbeat before it considers the attempt dead and lets a new attempt resume the
    run from its checkpoint; the worker beats three times per timeout. ``retry`` says
    how an attempt that raised is retried (None: the default policy, or no retry for a
    ``financial`` job type, whose effects move money). ``queue`` is the pool whose
    workers run it; among runs a worker took at the same time, a lower ``priority``
    goes first. A bad value is refused here, naming the field.

    The function returns a JSON object (or None for ``{}``): the run's result.
    """

    name: str
    fn: JobFn
    duration_limit: timedelta
    heartbeat_timeout: timedelta = timedelta(seconds=30)
    queue: str = "default"
    financial: bool = False
    retry: RetryPolicy | None = None
    priority: int = 0

    def __post_init__(self) -> None:
        if self.retry is None:
            object.__setattr__(self, "retry", NO_RETRY if self.financial else RetryPolicy())
        if not isinstance(self.name, str) or not self.name or self.name != self.name.strip():
            raise InvalidArgument("job_type.name", "required, without surrounding spaces")
        if len(self.name) > DEFAULT_LIMITS.id_chars:
            raise InvalidArgument(
                "job_type.name",
                f"must be at most {DEFAULT_LIMITS.id_chars} characters, got {len(self.name)}",
            )
        if not callable(self.fn):
            raise InvalidArgument("job_type.fn", "must be a function taking a JobContext")
        _positive(self.duration_limit, "job_type.duration_limit")
        _positive(self.heartbeat_timeout, "job_type.heartbeat_timeout")
        validate_queue_name(self.queue, "job_type.queue")
        if not isinstance(self.retry, RetryPolicy):
            raise InvalidArgument("job_type.retry", "must be a cronwave.RetryPolicy or None")
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise InvalidArgument("job_type.priority", "must be an integer")

    @property
    def retry_policy(self) -> RetryPolicy:
        assert self.retry is not None  # set in __post_init__
        return self.retry

    @property
    def heartbeat_interval(self) -> timedelta:
        """How often a running attempt beats: a third of the timeout, so two lost
        beats in a row still do not make the store give up on it."""
        return self.heartbeat_timeout / 3

    def __call__(self, ctx: JobContext) -> Mapping[str, Any] | None:
        """Run the function: a decorated job can still be called directly (a test of
        the job's own, with a ``JobContext`` it built)."""
        return self.fn(ctx)


def _error_names(errors: Iterable[type[BaseException] | str]) -> tuple[str, ...]:
    if isinstance(errors, str | type):
        errors = (errors,)
    names = []
    for i, error in enumerate(errors):
        if isinstance(error, type) and issubclass(error, BaseException):
            names.append(error.__name__)
        elif isinstance(error, str) and error.strip():
            names.append(error)
        else:
            raise InvalidArgument(
                f"job.non_retryable[{i}]", f"must be an exception class or its name, got {error!r}"
            )
    return tuple(names)


def job(
    name: str,
    *,
    duration_limit: timedelta | None = None,
    retry: RetryPolicy | None = None,
    queue: str = "default",
    heartbeat_timeout: timedelta = timedelta(seconds=30),
    non_retryable: Iterable[type[BaseException] | str] = (),
    financial: bool = False,
    priority: int = 0,
) -> Callable[[JobFn], JobType]:
    """Make the decorated function a ``JobType`` named ``name`` (the module attribute
    becomes the job type; calling it still runs the function)::

        @cronwave.job("acme.invoices", duration_limit=timedelta(minutes=30))
        def invoices(ctx: cronwave.JobContext) -> dict:
            ...

    ``non_retryable`` adds error types (classes or their names) to the retry policy's
    non-retryable errors: such an error ends the run FAILED at once. The other
    arguments are ``JobType``'s. A bad argument (a missing or non-positive
    ``duration_limit``, say) is refused at decoration time, naming it.
    """
    names = _error_names(non_retryable)
    if names:
        base = retry or (NO_RETRY if financial else RetryPolicy())
        retry = replace(
            base, non_retryable_errors=tuple(dict.fromkeys((*base.non_retryable_errors, *names)))
        )

    def decorate(fn: JobFn) -> JobType:
        _positive(duration_limit, "job_type.duration_limit")
        assert duration_limit is not None  # refused above
        return JobType(
            name,
            fn,
            duration_limit=duration_limit,
            heartbeat_timeout=heartbeat_timeout,
            queue=queue,
            financial=financial,
            retry=retry,
            priority=priority,
        )

    # Checked now, on a stand-in function: a bad argument fails where it is written,
    # not when the decorated function is defined (nor, worse, when a worker loads it).
    decorate(_check_only)
    return decorate


def _check_only(ctx: JobContext) -> None:
    return None
