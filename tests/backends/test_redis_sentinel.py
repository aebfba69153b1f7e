"""Redis through Sentinel (``redis+sentinel://HOST:PORT/SERVICE/DB``): clients reach the
master the sentinel names over the same bounded pool, follow it when it is replaced,
and a suite given only the sentinel's address completes its runs exactly once."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import redis

from cronwave_core.redis_pools import (
    BoundedSentinelPool,
    RedisPoolExhausted,
    TracedSentinelConnection,
    TracedSentinelSSLConnection,
    bounded_client,
)
from tests.backends.runs import runs_complete_exactly_once
from tests.harness.backends import SentinelRedis
from tests.harness.processes import ProcessTable
from tests.harness.suites import SuiteFactory
from tests.helpers import eventually

pytestmark = pytest.mark.slow

SECOND = timedelta(seconds=1)


@pytest.fixture
def sentinel_redis(tmp_path: Path) -> Iterator[SentinelRedis]:
    table = ProcessTable("the sentinel and its Redis")
    servers = SentinelRedis(tmp_path / "sentinel", table, replica=True)
    try:
        servers.start()
        yield servers
    finally:
        table.close([servers.stop])


@pytest.fixture
def redis_url(sentinel_redis: SentinelRedis) -> str:
    """Every service of the suite through the sentinel: queue, caches, leases."""
    return sentinel_redis.url


def test_a_client_reaches_the_master_through_the_sentinel_over_a_bounded_pool(
    sentinel_redis: SentinelRedis,
) -> None:
    # Given a client of the URL that names only the sentinel, with a pool of two
    client = bounded_client(
        sentinel_redis.url, name="sentinel", size=2, wait=SECOND, timeout=timedelta(seconds=3)
    )
    master = redis.Redis(port=sentinel_redis.master_port, socket_timeout=2)
    try:
        # When it writes
        assert client.set("cronwave-test:sentinel", "via the sentinel")
        # Then the write is the master's, reached over the bounded Sentinel pool
        assert master.get("cronwave-test:sentinel") == b"via the sentinel"
        pool = client.connection_pool
        assert isinstance(pool, BoundedSentinelPool) and pool.max_connections == 2
        assert pool.master_address == ("127.0.0.1", sentinel_redis.master_port)
        connection = pool.get_connection()
        try:
            assert isinstance(connection, TracedSentinelConnection)
        finally:
            pool.release(connection)

        # And with both connections held, a third operation waits, then fails alone
        started = threading.Barrier(3, timeout=10)

        def hold() -> None:
            started.wait()
            client.blpop(["cronwave-test:nothing"], timeout=2)

        holders = [threading.Thread(target=hold) for _ in range(2)]
        for holder in holders:
            holder.start()
        started.wait()
        eventually(lambda: master.info("clients")["blocked_clients"] == 2, what="both held")
        with pytest.raises(RedisPoolExhausted):
            client.get("cronwave-test:sentinel")
        for holder in holders:
            holder.join(timeout=10)
        assert client.get("cronwave-test:sentinel") == b"via the sentinel"
    finally:
        client.close()
        master.close()


def test_a_client_follows_the_master_the_sentinel_fails_over_to(
    sentinel_redis: SentinelRedis,
) -> None:
    # Given a client connected to the master through the sentinel
    client = bounded_client(
        sentinel_redis.url, name="sentinel", size=2, wait=SECOND, timeout=timedelta(seconds=3)
    )
    sentinel = sentinel_redis.sentinel_client()
    replica = redis.Redis(port=sentinel_redis.replica_port, socket_timeout=2)
    try:
        assert client.set("cronwave-test:failover", "before")

        # When the sentinel makes the replica the master (once it judges the replica
        # fit to promote: it has the replica's own INFO, within seconds)
        def failed_over() -> bool:
            try:
                return bool(sentinel.sentinel_failover(sentinel_redis.service))
            except redis.ResponseError as exc:
                assert str(exc).startswith("NOGOODSLAVE"), exc
                return False

        eventually(failed_over, timeout=30, interval=0.5, what="a failover the sentinel began")
        eventually(
            lambda: (
                sentinel.sentinel_get_master_addr_by_name(sentinel_redis.service)[1]
                == sentinel_redis.replica_port
            ),
            timeout=30,
            what="the sentinel naming the replica master",
        )
        named_at = time.monotonic()

        assert replica.info("replication")["role"] == "master"

        # Then the client's writes reach the new master: a connection still open to the
        # old one writes there until the old master is made a replica (and refuses
        # writes, or drops it), then the next connection asks the sentinel again
        def written_to_the_new_master() -> bool:
            value = uuid.uuid4().hex
            try:
                client.set("cronwave-test:failover", value)
            except redis.ConnectionError:
                return False
            return replica.get("cronwave-test:failover") == value.encode()

        eventually(
            written_to_the_new_master, timeout=60, interval=0.2, what="a write to the new master"
        )
        print(
            f"\nfirst write on the new master {time.monotonic() - named_at:.2f}s after its naming"
        )
        assert client.connection_pool.master_address[1] == sentinel_redis.replica_port
    finally:
        client.close()
        sentinel.close()
        replica.close()


def test_a_client_reaches_a_tls_master_through_a_tls_sentinel(tmp_path: Path) -> None:
    # Given a master and a sentinel that both speak only TLS and ask for a client
    # certificate, and the rediss+sentinel:// URL naming the CA and the certificate
    table = ProcessTable("the TLS sentinel and its Redis")
    servers = SentinelRedis(tmp_path / "tls-sentinel", table, tls=True)
    try:
        servers.start()
        client = bounded_client(servers.url, name="sentinel", size=2, wait=SECOND, timeout=SECOND)
        master = servers.client(servers.master_port)
        try:
            # When it writes, then the write is the master's, over TLS to it
            assert client.set("cronwave-test:tls-sentinel", "both over TLS")
            assert master.get("cronwave-test:tls-sentinel") == b"both over TLS"
            connection = client.connection_pool.get_connection()
            try:
                assert isinstance(connection, TracedSentinelSSLConnection)
                assert connection._sock is not None and connection._sock.version() is not None
            finally:
                client.connection_pool.release(connection)
        finally:
            client.close()
            master.close()
    finally:
        table.close([servers.stop])


def test_a_suite_runs_through_the_sentinel(
    make_suite: SuiteFactory, sentinel_redis: SentinelRedis, namespace: str
) -> None:
    # Given a suite whose every service is given only the sentinel's address
    suite = make_suite()

    # When schedules fire every second, then their runs complete exactly once
    assert runs_complete_exactly_once(suite, "sentinel")

    # And the queue and caches were the master's: it holds the suite's keys
    master = redis.Redis(port=sentinel_redis.master_port, socket_timeout=5)
    try:
        assert master.keys(f"{namespace}:*")
    finally:
        master.close()
