"""``PoolSettings``: how many connections each Redis and database client of a process
may open, and how long an operation waits for a free one.

Every pool is bounded. An operation that finds its pool full waits up to the pool's
timeout for a connection to come back, then fails, that operation alone, with an
error that names the pool and these variables (``cronwave_core.redis_pools``, the
workflow-store's ``db``); the thread that asked goes on. Unset, a Redis pool is sized
by its process to the threads that use it (docs/operations/deployment.md,
*Connection pools*, has the table)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from cronwave_core.config import Choice, Duration, Integer, setting
from cronwave_core.errors import ConfigurationError
from cronwave_core.settings_base import PREFIX, FromEnv

#: The workflow-store's gRPC handler threads unless set (``CRONWAVE_STORE_THREADS``);
#: every other service serves with ``cronwave_core.bootstrap.Service.max_workers``.
STORE_THREADS = 64


@dataclass(frozen=True, kw_only=True)
class PoolSettings(FromEnv):
    """Connection pools of a process: Redis (broker, leases, caches) and the
    workflow-store's database."""

    #: None (unset): each pool sized to the threads that use it.
    redis_pool_size: int | None = setting(
        PREFIX + "REDIS_POOL_SIZE",
        Integer(1, 10_000),
        None,
        "connections each Redis pool of a process may open (its broker's, its caches', "
        "the leases'); unset: sized by the process to the threads that use the pool "
        "(see *Connection pools*)",
    )
    redis_pool_timeout: timedelta = setting(
        PREFIX + "REDIS_POOL_TIMEOUT",
        Duration(positive=True, maximum=timedelta(seconds=60)),
        timedelta(seconds=2),
        "how long a Redis operation waits for a free connection of its pool; then it "
        "fails with `RedisPoolExhausted`, naming the pool, and its thread goes on",
    )
    redis_timeout: timedelta = setting(
        PREFIX + "REDIS_TIMEOUT",
        Duration(positive=True, maximum=timedelta(seconds=60)),
        timedelta(seconds=5),
        "connect and reply timeout of one broker command (the caches keep 500 ms: a slow "
        "cache is a miss; leader-election at most half `CRONWAVE_RPC_TIMEOUT`)",
    )
    database_pool_size: int = setting(
        PREFIX + "DATABASE_POOL_SIZE",
        Integer(1, 1_000),
        8,
        "database connections the workflow-store keeps open",
    )
    database_pool_overflow: int = setting(
        PREFIX + "DATABASE_POOL_OVERFLOW",
        Integer(0, 1_000),
        24,
        "connections the workflow-store may open beyond `CRONWAVE_DATABASE_POOL_SIZE` "
        "under load, closed when handed back; the sum is the most it holds (size "
        "PostgreSQL's `max_connections` for every replica's sum)",
    )
    database_pool_timeout: timedelta = setting(
        PREFIX + "DATABASE_POOL_TIMEOUT",
        Duration(positive=True, maximum=timedelta(seconds=60)),
        timedelta(seconds=2),
        "how long a workflow-store call waits for a free database connection; then "
        "that call fails UNAVAILABLE (nothing written, retry) and the store goes on",
    )
    database_pooler: str = setting(
        PREFIX + "DATABASE_POOLER",
        Choice("none", "transaction"),
        "none",
        "`transaction`: the store reaches PostgreSQL through a pooler in transaction mode "
        "(PgBouncer's `pool_mode = transaction`), so it prepares no statement on the "
        "server (psycopg's `prepare_threshold` off), the one session state it would "
        "otherwise keep; `none`: directly, or through a pooler in session mode",
    )
    store_threads: int = setting(
        PREFIX + "STORE_THREADS",
        Integer(4, 10_000),
        STORE_THREADS,
        "the workflow-store's gRPC handler threads (watch streams hold one each while "
        "their callers listen); calls beyond them wait for one until their deadline",
    )

    @property
    def database_connections(self) -> int:
        """The most connections the workflow-store's engine opens."""
        return self.database_pool_size + self.database_pool_overflow

    def redis_size(self, users: int) -> int:
        """A Redis pool's size: ``CRONWAVE_REDIS_POOL_SIZE``, else ``users`` (the
        threads that may hold one of its connections at once)."""
        if users < 1:
            raise ConfigurationError(f"a Redis pool needs at least one user, got {users}")
        return self.redis_pool_size if self.redis_pool_size is not None else users


__all__ = ["STORE_THREADS", "PoolSettings"]
