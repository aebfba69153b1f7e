"""Redis clients over bounded, blocking connection pools.

redis-py's default pool opens a new connection whenever every open one is busy, with
no limit (2**31), and a client made from a URL has no socket timeout: a Redis that
hangs holds the calling thread for ever, and a burst of threads opens as many
connections. Here every client has a pool of ``size`` connections, sized by its
process to the threads that may hold one at once (``PoolSettings.redis_size``), and
socket timeouts. A thread that finds every connection taken waits up to
``wait`` for one to come back, then that operation alone fails with
``RedisPoolExhausted``: a ``redis.ConnectionError``, so every caller that already
treats an unreachable Redis as "not now" (a cache miss, a consumer's idle poll, a
lease call refused UNAVAILABLE) treats an exhausted pool the same way, and its thread
goes on.

The URL is one of ``cronwave_core.redis_urls``'s forms: one server (``redis://``,
TLS with ``rediss://`` and redis-py's ``ssl_*`` query parameters) or the master a
Sentinel service names (``redis+sentinel://``, ``rediss+sentinel://``), through
redis-py's ``Sentinel(...).master_for`` over the same bounded pool, with the same
timeouts for the sentinels as for the master.

A connection to a server is opened inside a ``connect`` span, its server's name
looked up by the pool's ``Resolver`` inside a ``dns`` span
(``cronwave_core.telemetry.setup``); a connection already open costs one attribute
check. Through Sentinel the master's address is asked first, outside the span.
"""

from __future__ import annotations

import queue
import socket
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import redis
from redis.connection import Connection, SSLConnection
from redis.sentinel import Sentinel, SentinelConnectionPool, SentinelManagedConnection

from cronwave_core import redis_urls
from cronwave_core.settings_pools import PoolSettings
from cronwave_core.telemetry.setup import (
    Resolver,
    connecting,
    is_address,
    resolve,
    system_resolver,
)

__all__ = [
    "BoundedPool",
    "BoundedSentinelPool",
    "RedisPoolExhausted",
    "bounded_client",
    "process_client",
]


class RedisPoolExhausted(redis.ConnectionError):
    """Every connection of a Redis pool stayed in use past the pool's timeout; the
    operation that waited was not done. Retry it; if it recurs, the pool is smaller
    than the threads that use it, or Redis is slow to answer."""

    def __init__(self, pool: str, size: int, wait: timedelta) -> None:
        super().__init__(
            f"Redis pool '{pool}' exhausted: all {size} connection(s) stayed in use for "
            f"{wait.total_seconds():g}s; this operation was not done, retry it. If this "
            "recurs, raise CRONWAVE_REDIS_POOL_SIZE (or unset it to size the pool to the "
            "threads) or CRONWAVE_REDIS_POOL_TIMEOUT, or find what slows Redis"
        )
        self.pool = pool
        self.size = size
        self.wait = wait


class BoundedPool(redis.BlockingConnectionPool):
    """A blocking pool of at most ``max_connections`` that fails a wait past
    ``timeout`` seconds with ``RedisPoolExhausted`` naming the pool ``name``."""

    def __init__(self, *, name: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.name = name

    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().get_connection(*args, **kwargs)
        except redis.ConnectionError as exc:
            # redis-py raises its plain ConnectionError from inside ``except Empty``
            # when the wait ran out; a connect failure has another cause.
            if isinstance(exc.__context__, queue.Empty) and not isinstance(exc, RedisPoolExhausted):
                wait = timedelta(seconds=self.timeout or 0)
                raise RedisPoolExhausted(self.name, self.max_connections, wait) from None
            raise


class TracedConnection(Connection):
    """A TCP connection opened in a ``connect`` span, its host looked up by
    ``resolver`` in a ``dns`` span, then each address it was answered tried in turn
    (as redis-py tries getaddrinfo's answers). TLS (``TracedSSLConnection``) is
    handshaken inside the same ``connect`` span, with the host's name."""

    def __init__(self, *args: Any, resolver: Resolver = system_resolver, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._resolver = resolver

    def connect_check_health(self, *args: Any, **kwargs: Any) -> None:
        if self._sock:  # already open: the path every command takes
            return
        with connecting("redis", f"{self.host}:{self.port}"):
            super().connect_check_health(*args, **kwargs)

    def _connect(self) -> socket.socket:
        name = self.host
        if is_address(name):
            return super()._connect()
        answers = resolve(name, self.port, self._resolver, "redis")
        if not answers:
            raise OSError(f"no address for {name}")
        failure: OSError | None = None
        try:
            for answer in answers:
                self.host = str(answer[4][0])  # redis-py connects to self.host
                try:
                    return super()._connect()
                except OSError as exc:
                    failure = exc
        finally:
            self.host = name
        assert failure is not None
        raise failure


class TracedSSLConnection(SSLConnection, TracedConnection):
    """``TracedConnection`` with TLS: SSLConnection's ``_connect`` wraps the socket
    ``TracedConnection._connect`` opened (by address), checking the host's name."""


class TracedSentinelConnection(SentinelManagedConnection, TracedConnection):
    """A connection to the master a Sentinel service names, opened as
    ``TracedConnection`` once the sentinels said where the master is."""


class TracedSentinelSSLConnection(TracedSentinelConnection, TracedSSLConnection):
    """``TracedSentinelConnection`` with TLS."""


class BoundedSentinelPool(SentinelConnectionPool, BoundedPool):
    """``BoundedPool`` of connections to a Sentinel service's master: a new connection
    asks the sentinels where the master is, and one still open to a master that was
    replaced is closed when handed back (redis-py's ``SentinelConnectionPool``)."""


_TRACED = {"redis": TracedConnection, "rediss": TracedSSLConnection}


def bounded_client(
    url: str,
    *,
    name: str,
    size: int,
    wait: timedelta,
    timeout: timedelta,
    resolver: Resolver = system_resolver,
) -> redis.Redis:
    """A client for ``url`` over a pool named ``name`` of at most ``size``
    connections; an operation waits up to ``wait`` for one, and each command up to
    ``timeout`` to connect and for its reply. Its connections are opened in
    ``connect`` spans, a host name looked up by ``resolver`` (``dns`` spans)."""
    if size < 1:
        raise ValueError(f"Redis pool '{name}' needs at least one connection, got {size}")
    target = redis_urls.parse(url)  # RedisUrlError: what is wrong with it
    seconds = timeout.total_seconds()
    sockets = {"socket_timeout": seconds, "socket_connect_timeout": seconds}
    bounds = {"name": name, "max_connections": size, "timeout": wait.total_seconds()}
    if target.sentinel:
        return _sentinel_client(target, bounds, sockets, resolver)
    traced = _TRACED.get(urlsplit(url).scheme.lower())
    setup: dict[str, Any] = {}
    if traced is not None:
        setup = {"connection_class": traced, "resolver": resolver}
    # redis-py reads the URL itself: host, port, db, password and the ssl_* options.
    pool = BoundedPool.from_url(url, **bounds, **sockets, health_check_interval=30, **setup)
    return redis.Redis(connection_pool=pool)


def _sentinel_client(
    target: redis_urls.RedisTarget,
    bounds: dict[str, Any],
    sockets: dict[str, Any],
    resolver: Resolver,
) -> redis.Redis:
    """A client of the master ``target``'s sentinels name, over a ``BoundedSentinelPool``.
    The sentinels are asked with the same socket timeouts (and TLS options) as the
    master; each sentinel's client holds at most one connection per thread that is
    opening a master connection at that moment, so at most the pool's size."""
    tls = dict(target.tls_options, ssl=True) if target.tls else {}
    sentinel = Sentinel(
        list(target.sentinels),
        sentinel_kwargs={**sockets, **tls},
    )
    return sentinel.master_for(
        target.service,
        connection_pool_class=BoundedSentinelPool,
        connection_class=TracedSentinelSSLConnection if target.tls else TracedSentinelConnection,
        resolver=resolver,
        db=target.db,
        username=target.username,
        password=target.password,
        health_check_interval=30,
        **bounds,
        **sockets,
        **target.tls_options,
    )


def process_client(
    url: str,
    settings: PoolSettings,
    *,
    name: str,
    users: int,
    timeout: timedelta | None = None,
) -> redis.Redis:
    """``bounded_client`` with this process's pool settings: ``users`` threads may
    hold a connection at once (unless ``CRONWAVE_REDIS_POOL_SIZE`` says otherwise),
    each command times out after ``timeout`` (default ``CRONWAVE_REDIS_TIMEOUT``)."""
    return bounded_client(
        url,
        name=name,
        size=settings.redis_size(users),
        wait=settings.redis_pool_timeout,
        timeout=timeout if timeout is not None else settings.redis_timeout,
    )
