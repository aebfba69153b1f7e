"""Two-tier caches: in the process, then Redis, then whatever the caller falls back to.

A cache never decides anything the store decides: it only short-cuts repeated
look-ups. Every look-up is a span of kind ``cache`` in the caller's hop, with
``cronwave.cache.name`` and ``cronwave.cache.hit`` = ``local`` (found in the process),
``redis`` (found in Redis, now also kept in the process) or ``miss`` (the caller
falls back to the store, outside the span). Redis being away is a miss, never an
error: the look-up then costs one short timeout, and the span says why
(``cronwave.cache.error``).

A caller may ask a look-up to skip tiers (``CacheControl``): ``no-local`` starts at
Redis, ``no-cache`` goes straight to the fallback. A gRPC client asks for it with the
``cronwave-cache-control`` metadata, as HTTP's ``Cache-Control: no-cache`` does; the
load generator uses it to steer runs down one path (``cronwave load --scenario``).

Keys live under ``<namespace>:cache:<name>:`` in Redis, with a TTL per cache.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from enum import Enum

import redis
from cachetools import TTLCache
from cronwave_proto.v1 import common_pb2 as pb
from opentelemetry.trace import Span

from cronwave_core.redis_pools import bounded_client
from cronwave_core.telemetry.spans import hop_span
from cronwave_core.telemetry.vocabulary import ATTR_CACHE_HIT, ATTR_CACHE_NAME, Hop, Kind

log = logging.getLogger("cronwave.cache")

METADATA_KEY = "cronwave-cache-control"
LOCAL, REDIS, MISS = "local", "redis", "miss"
_ERROR_LOG_EVERY = 30.0  # seconds between two log lines about an unreachable Redis


class CacheControl(Enum):
    """Which tiers a look-up may use."""

    DEFAULT = ""
    NO_LOCAL = "no-local"
    NO_CACHE = "no-cache"

    @classmethod
    def from_metadata(cls, metadata: Iterable[tuple[str, object]] | None) -> CacheControl:
        """From a call's invocation metadata; an unknown value means ``DEFAULT``."""
        for key, value in metadata or ():
            if key == METADATA_KEY:
                try:
                    return cls(str(value))
                except ValueError:
                    return cls.DEFAULT
        return cls.DEFAULT


class LocalTier:
    """An LRU map with a TTL per entry (``cachetools.TTLCache``), thread-safe: an entry
    lives ``ttl`` from when it was put, and a full map forgets the least recently used."""

    def __init__(self, ttl: timedelta, max_entries: int) -> None:
        if ttl <= timedelta(0) or max_entries < 1:
            raise ValueError("LocalTier needs a positive ttl and max_entries")
        self._lock = threading.Lock()
        self._entries: TTLCache[str, bytes] = TTLCache(max_entries, ttl.total_seconds())

    def get(self, key: str) -> bytes | None:
        with self._lock:
            try:  # one look-up on a hit (``TTLCache.get`` makes two)
                return self._entries[key]
            except KeyError:
                return None

    def put(self, key: str, value: bytes) -> None:
        with self._lock:
            self._entries[key] = value

    def __len__(self) -> int:
        with self._lock:
            self._entries.expire()
            return len(self._entries)


#: A cache command's connect and reply timeout: a slow cache is a miss.
CACHE_TIMEOUT = timedelta(milliseconds=500)


def redis_client(
    url: str,
    timeout: timedelta = CACHE_TIMEOUT,
    *,
    size: int = 4,
    wait: timedelta = CACHE_TIMEOUT,
) -> redis.Redis:
    """A Redis client for caches: short timeouts, because a slow cache is a miss; a
    pool of ``size`` connections (``cronwave_core.redis_pools``), the threads that use
    it, which an operation waits up to ``wait`` for (then it is a miss too)."""
    return bounded_client(url, name="cache", size=size, wait=wait, timeout=timeout)


class _Warnings:
    def __init__(self) -> None:
        self._last = 0.0

    def redis_down(self, name: str, exc: Exception) -> None:
        now = time.monotonic()
        if now - self._last >= _ERROR_LOG_EVERY:
            self._last = now
            log.warning("cache %s: Redis unavailable (%s); falling back to the store", name, exc)


class TwoTierCache:
    """``name`` values by key: in the process (``local_ttl``), then in Redis
    (``redis_ttl``; none when ``client`` is None). Values are bytes."""

    def __init__(
        self,
        name: str,
        hop: Hop,
        *,
        client: redis.Redis | None,
        namespace: str,
        local_ttl: timedelta,
        redis_ttl: timedelta,
        max_entries: int = 100_000,
    ) -> None:
        self.name = name
        self.hop = hop
        self.local = LocalTier(local_ttl, max_entries)
        self._client = client
        self._prefix = f"{namespace}:cache:{name}:"
        self._redis_ttl_ms = int(redis_ttl.total_seconds() * 1000)
        self._warnings = _Warnings()
        self._span_name = f"{name} cache lookup"
        self._fill_name = f"{name} cache fill"

    def lookup(
        self,
        key: str,
        *,
        control: CacheControl = CacheControl.DEFAULT,
        attributes: Mapping[str, object] | None = None,
    ) -> tuple[bytes | None, str]:
        """The value of ``key`` and where it was found (``local``, ``redis``, or
        ``miss`` with ``None``)."""
        attrs: dict[str, object] = {ATTR_CACHE_NAME: self.name}
        if attributes:
            attrs.update(attributes)
        with hop_span(self._span_name, self.hop, Kind.CACHE, attrs) as span:
            values, hit = self._find_many([key], control, span)
            span.set_attribute(ATTR_CACHE_HIT, hit)
            return values[0], hit

    def lookup_many(
        self,
        keys: Sequence[str],
        *,
        control: CacheControl = CacheControl.DEFAULT,
    ) -> list[bytes | None]:
        """The values of ``keys`` (None where neither tier has one), in one span and at
        most one round trip to Redis (MGET). The span's ``cronwave.cache.hit`` is the
        farthest any key had to go: ``local`` when the process had every one,
        ``redis`` when some were only in Redis, ``miss`` when some were in neither
        (those go to the store, which the whole batch waits for)."""
        attrs: dict[str, object] = {ATTR_CACHE_NAME: self.name, "cronwave.cache.keys": len(keys)}
        with hop_span(self._span_name, self.hop, Kind.CACHE, attrs) as span:
            values, hit = self._find_many(keys, control, span)
            span.set_attribute(ATTR_CACHE_HIT, hit)
            return values

    def _find_many(
        self, keys: Sequence[str], control: CacheControl, span: Span
    ) -> tuple[list[bytes | None], str]:
        """The values of ``keys`` and the farthest tier any of them needed."""
        values: list[bytes | None] = [None] * len(keys)
        if control is CacheControl.NO_CACHE:
            return values, MISS
        if control is not CacheControl.NO_LOCAL:
            values = [self.local.get(key) for key in keys]
        absent = [i for i, value in enumerate(values) if value is None]
        hit = LOCAL
        if absent and self._client is not None:
            hit = REDIS
            try:
                found = self._client.mget([self._prefix + keys[i] for i in absent])
            except redis.RedisError as exc:
                self._warnings.redis_down(self.name, exc)
                span.set_attribute("cronwave.cache.error", f"{type(exc).__name__}: {exc}")
                found = [None] * len(absent)
            for i, raw in zip(absent, found, strict=True):
                if raw is not None:
                    value = raw if isinstance(raw, bytes) else str(raw).encode()
                    self.local.put(keys[i], value)
                    values[i] = value
        if any(value is None for value in values):
            hit = MISS
        return values, hit

    def fill_many(self, entries: Sequence[tuple[str, bytes]]) -> None:
        """``fill`` for many keys: in the process, and in Redis in one round trip."""
        for key, value in entries:
            self.local.put(key, value)
        if self._client is None or not entries:
            return
        with hop_span(self._fill_name, self.hop, Kind.CACHE, {ATTR_CACHE_NAME: self.name}):
            pipe = self._client.pipeline(transaction=False)
            for key, value in entries:
                pipe.set(self._prefix + key, value, px=self._redis_ttl_ms)
            try:
                pipe.execute()
            except redis.RedisError as exc:
                self._warnings.redis_down(self.name, exc)

    def fill(self, key: str, value: bytes, *, redis_too: bool = True) -> None:
        """Keep ``value`` in the process and (``redis_too``) in Redis. A Redis that is
        away is skipped: the store stays the authority, the cache only goes colder."""
        if redis_too:
            self.fill_many([(key, value)])
        else:
            self.local.put(key, value)


TERMINAL_STATES = frozenset(
    {
        pb.RUN_STATE_SUCCEEDED,
        pb.RUN_STATE_FAILED,
        pb.RUN_STATE_TIMED_OUT,
        pb.RUN_STATE_MISSED,
        pb.RUN_STATE_CANCELLED,
        pb.RUN_STATE_DEAD_LETTERED,
    }
)


#: How long a terminal run stays in Redis: as long as a start stays in the dispatcher's
#: ``dedup`` cache there, since the run is read only for a duplicate start found in it.
#: Longer holds memory and serves nobody: a whole day was 43 million entries at 500 runs
#: a second.
RUN_STATUS_TTL = timedelta(minutes=15)


class RunStatusCache:
    """Runs in their terminal state, in Redis, written once a completion is durable.

    A terminal run never changes ("a second completion changes nothing"), so an
    entry is never stale; a run that is not in the cache may still have ended (some
    other way, or its entry expired) and is read from the store."""

    NAME = "run-status"

    def __init__(
        self, client: redis.Redis, namespace: str, ttl: timedelta = RUN_STATUS_TTL
    ) -> None:
        self._client = client
        self._prefix = f"{namespace}:cache:{self.NAME}:"
        self._ttl_ms = int(ttl.total_seconds() * 1000)
        self._warnings = _Warnings()

    def put(self, run: pb.Run, hop: Hop = Hop.COMPLETE) -> None:
        """Keep ``run`` if it is terminal (a run going back to PENDING for a retry is
        not); a span of kind ``cache`` in ``hop``."""
        self.put_many([run], hop)

    def put_many(self, runs: Sequence[pb.Run], hop: Hop = Hop.COMPLETE) -> None:
        """``put`` for the runs of a batch of completions: one span, one round trip."""
        terminal = [run for run in runs if run.state in TERMINAL_STATES]
        if not terminal:
            return
        attrs = {ATTR_CACHE_NAME: self.NAME, "cronwave.cache.keys": len(terminal)}
        with hop_span("run-status cache fill", hop, Kind.CACHE, attrs):
            pipe = self._client.pipeline(transaction=False)
            for run in terminal:
                pipe.set(self._prefix + run.run_id, run.SerializeToString(), px=self._ttl_ms)
            try:
                pipe.execute()
            except redis.RedisError as exc:
                self._warnings.redis_down(self.NAME, exc)

    def lookup(self, run_id: str, hop: Hop) -> pb.Run | None:
        """The terminal run, if cached; a look-up span (``redis`` or ``miss``) in ``hop``."""
        with hop_span(
            "run-status cache lookup", hop, Kind.CACHE, {ATTR_CACHE_NAME: self.NAME}
        ) as span:
            found = self.get_many([run_id]).get(run_id)
            span.set_attribute(ATTR_CACHE_HIT, REDIS if found is not None else MISS)
            return found

    def get_many(self, run_ids: Sequence[str]) -> dict[str, pb.Run]:
        """The terminal runs the cache holds among ``run_ids``, in one round trip."""
        if not run_ids:
            return {}
        try:
            values = self._client.mget([self._prefix + r for r in run_ids])
        except redis.RedisError as exc:
            self._warnings.redis_down(self.NAME, exc)
            return {}
        found: dict[str, pb.Run] = {}
        for run_id, value in zip(run_ids, values, strict=True):
            if isinstance(value, bytes):
                found[run_id] = pb.Run.FromString(value)
        return found
