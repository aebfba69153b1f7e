"""Job types: what a worker can run, and the limits the store enforces on it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from cronwave_core.errors import AlreadyExists, InvalidArgument, NotFound
from cronwave_core.queueing import validate_queue_name
from worker.jobs.context import JobContext
from worker.jobs.retry import NO_RETRY, RetryPolicy

JobFn = Callable[[JobContext], Mapping[str, Any]]


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
    goes first.
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
        if not self.name or self.name != self.name.strip():
            raise InvalidArgument("job_type.name", "required, without surrounding spaces")
        if self.duration_limit <= timedelta(0):
            raise InvalidArgument("job_type.duration_limit", "must be a positive duration")
        if self.heartbeat_timeout <= timedelta(0):
            raise InvalidArgument("job_type.heartbeat_timeout", "must be a positive duration")
        validate_queue_name(self.queue, "job_type.queue")

    @property
    def retry_policy(self) -> RetryPolicy:
        assert self.retry is not None  # set in __post_init__
        return self.retry

    @property
    def heartbeat_interval(self) -> timedelta:
        """How often a running attempt beats: a third of the timeout, so two lost
        beats in a row still do not make the store give up on it."""
        return self.heartbeat_timeout / 3


class Registry:
    """The job types one worker process runs, by name."""

    def __init__(self, job_types: Iterable[JobType] = ()) -> None:
        self._by_name: dict[str, JobType] = {}
        for job_type in job_types:
            self.register(job_type)

    def register(self, job_type: JobType) -> JobType:
        if job_type.name in self._by_name:
            raise AlreadyExists(f"job_type.name: '{job_type.name}' is already registered")
        self._by_name[job_type.name] = job_type
        return job_type

    def get(self, name: str) -> JobType:
        try:
            return self._by_name[name]
        except KeyError:
            known = ", ".join(sorted(self._by_name)) or "none"
            raise NotFound(
                f"job_type: this worker has no job type '{name}' (it runs: {known}); "
                "start a worker that registers it on the job type's queue"
            ) from None

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def queues(self) -> list[str]:
        """The queues these job types run on."""
        return sorted({t.queue for t in self._by_name.values()})

    def serving(self, queues: Iterable[str]) -> Registry:
        """The job types whose queue is one of ``queues``: what a worker of those pools
        registers and runs."""
        wanted = set(queues)
        return Registry(t for t in self if t.queue in wanted)

    def __iter__(self) -> Iterator[JobType]:
        return iter(self._by_name[name] for name in sorted(self._by_name))

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name
