"""The dispatcher's look-ups: where a start is routed, and whether it is a duplicate.

**Route** (every start): schedule -> job type -> queue, asked in the process, then in
Redis, then of the store (GetSchedule and ListJobTypes; a miss). The queue is passed
to the store's RecordRun, which records the run on it. A cached route is at most
``ROUTE_LOCAL_TTL`` + ``ROUTE_REDIS_TTL`` old: a job type moved to another queue is
routed there within that time. A route that cannot be found (the store is away, the
schedule unknown) is no route: the store then picks the queue itself, or refuses the
start with its own error.

**De-duplication** (scheduled starts): (schedule, fire time) -> the run recorded for
it, kept after every start. A start found here is a duplicate and records nothing;
the store's unique constraint stays the authority for everything the cache does not
know (a cold cache, an evicted entry, another dispatcher's start). A duplicate comes
back with the run as it is now: from the run-status cache when the run has ended, else
read from the store (a read, never a write).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import grpc

from cronwave.v1 import common_pb2
from cronwave.v1 import workflow_store_service_pb2 as store_pb
from cronwave_core.caching import CacheControl, TwoTierCache

log = logging.getLogger("cronwave.dispatcher.caches")

ROUTE_LOCAL_TTL = timedelta(seconds=30)
ROUTE_REDIS_TTL = timedelta(seconds=60)
DEDUP_LOCAL_TTL = timedelta(minutes=10)
DEDUP_REDIS_TTL = timedelta(minutes=15)


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

    def __init__(self, cache: TwoTierCache, store: Any) -> None:
        self.cache = cache
        self.store = store  # WorkflowStoreServiceStub

    def route(self, schedule_id: str, *, control: CacheControl) -> tuple[Route | None, str]:
        """The schedule's route and where it was found (``local``, ``redis``, ``miss``)."""
        route, hit = self.cached(schedule_id, control=control)
        if route is not None:
            return route, hit
        route = self._from_store(schedule_id)
        if route is not None:
            self.cache.fill(schedule_id, route.encode())
        return route, "miss"

    def cached(self, schedule_id: str, *, control: CacheControl) -> tuple[Route | None, str]:
        """The route as the cache knows it, asking nothing of the store on a miss (a
        batch of starts lets the store route what the cache does not know, and
        ``learn_many``s the route from its answer)."""
        raw, hit = self.cache.lookup(schedule_id, control=control)
        route = Route.decode(raw) if raw is not None else None
        return route, hit if route is not None else "miss"

    def cached_many(
        self, schedule_ids: Sequence[str], *, control: CacheControl
    ) -> list[Route | None]:
        """``cached`` for a batch of starts: one look-up span, one round trip."""
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

    def _from_store(self, schedule_id: str) -> Route | None:
        try:
            schedule = self.store.GetSchedule(
                store_pb.GetScheduleRequest(schedule_id=schedule_id)
            ).schedule
            job_types = self.store.ListJobTypes(store_pb.ListJobTypesRequest()).job_types
        except grpc.RpcError as exc:
            # Not found, or the store is away: the start goes on, and RecordRun
            # answers with the store's own verdict.
            log.debug("no route for %s: %s", schedule_id, exc)
            return None
        queue = next((j.queue for j in job_types if j.name == schedule.job_type), "")
        if not queue:
            return None
        return Route(schedule.job_type, queue)


class DedupCache:
    """Runs by (schedule, fire time), for scheduled starts."""

    def __init__(self, cache: TwoTierCache) -> None:
        self.cache = cache

    def lookup(self, key: str, control: CacheControl) -> common_pb2.Run | None:
        raw, _ = self.cache.lookup(key, control=control)
        return _run(raw)

    def lookup_many(
        self, keys: Sequence[str], control: CacheControl
    ) -> list[common_pb2.Run | None]:
        """``lookup`` for a batch of starts: one look-up span, one round trip."""
        return [_run(raw) for raw in self.cache.lookup_many(keys, control=control)]

    def remember_many(self, entries: Sequence[tuple[str, common_pb2.Run]]) -> None:
        """``remember`` for a batch of runs: one round trip."""
        self.cache.fill_many([(key, run.SerializeToString()) for key, run in entries])

    def remember(self, key: str, run: common_pb2.Run) -> None:
        self.remember_many([(key, run)])


def _run(raw: bytes | None) -> common_pb2.Run | None:
    if raw is None:
        return None
    try:
        return common_pb2.Run.FromString(raw)
    except Exception:  # an entry written by another version: treat as a miss
        return None
