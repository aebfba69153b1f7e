"""The dispatcher's look-ups: where a start is routed, and whether it is a duplicate.

**Route** (every start): schedule -> job type -> queue, asked in the process, then in
Redis. The queue is passed to the store's RecordRuns, which records the run on it. A
start whose route neither tier knows (a miss) goes to the store without one: the store
routes it by its job type as it records it, or refuses it with its own error, and the
route it chose is learnt from its answer (``learn_many``). A cached route is at most
``ROUTE_LOCAL_TTL`` + ``ROUTE_REDIS_TTL`` old: a job type moved to another queue is
routed there within that time.

**De-duplication** (scheduled starts): (schedule, fire time) -> the run recorded for
it, kept after every start. A start found here is a duplicate and records nothing;
the store's unique constraint stays the authority for everything the cache does not
know (a cold cache, an evicted entry, another dispatcher's start). A duplicate comes
back with the run as it is now: from the run-status cache when the run has ended, else
read from the store (a read, never a write).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from cronwave_proto.v1 import common_pb2

from cronwave_core.caching import RUN_STATUS_TTL, CacheControl, TwoTierCache

ROUTE_LOCAL_TTL = timedelta(seconds=30)
ROUTE_REDIS_TTL = timedelta(seconds=60)
DEDUP_LOCAL_TTL = timedelta(minutes=10)
#: A duplicate start found here reads its run's end from ``run-status``: the same TTL.
DEDUP_REDIS_TTL = RUN_STATUS_TTL


@dataclass(frozen=True)
class Route:
    job_type: str
    queue: str

    def encode(self) -> bytes:
        return json.dumps({"job_type": self.job_type, "queue": self.queue}).encode()

    @classmethod
    def decode(cls, raw: bytes) -> Route | None:
        try:
            data = json.loads(raw)
            return cls(str(data["job_type"]), str(data["queue"]))
        except (ValueError, KeyError, TypeError):
            return None  # an entry written by another version: treat as a miss


class RouteCache:
    """Routes of schedules (see the module docstring)."""

    def __init__(self, cache: TwoTierCache) -> None:
        self.cache = cache

    def cached_many(
        self, schedule_ids: Sequence[str], *, control: CacheControl
    ) -> list[Route | None]:
        """The routes of a batch of starts as the cache knows them (None: a miss),
        asking nothing of the store: one look-up span, one round trip."""
        raw = self.cache.lookup_many(schedule_ids, control=control)
        return [Route.decode(value) if value is not None else None for value in raw]

    def learn_many(self, runs: Sequence[common_pb2.Run]) -> None:
        """Remember the routes the store gave ``runs`` (their job types' queues), in
        one round trip."""
        self.cache.fill_many(
            [
                (run.schedule_id, Route(run.job_type, run.queue).encode())
                for run in runs
                if run.job_type and run.queue
            ]
        )


class DedupCache:
    """Runs by (schedule, fire time), for scheduled starts."""

    def __init__(self, cache: TwoTierCache) -> None:
        self.cache = cache

    def lookup_many(
        self, keys: Sequence[str], control: CacheControl
    ) -> list[common_pb2.Run | None]:
        """The runs recorded for a batch of starts (None: unknown here): one look-up
        span, one round trip."""
        return [_run(raw) for raw in self.cache.lookup_many(keys, control=control)]

    def remember_many(self, entries: Sequence[tuple[str, common_pb2.Run]]) -> None:
        """Remember the runs recorded for a batch of starts: one round trip."""
        self.cache.fill_many([(key, run.SerializeToString()) for key, run in entries])


def _run(raw: bytes | None) -> common_pb2.Run | None:
    if raw is None:
        return None
    try:
        return common_pb2.Run.FromString(raw)
    except Exception:  # an entry written by another version: treat as a miss
        return None
