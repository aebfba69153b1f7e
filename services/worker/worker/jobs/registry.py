"""The job types one worker process runs, by name."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from cronwave import JobType
from cronwave_core.errors import AlreadyExists, NotFound


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
