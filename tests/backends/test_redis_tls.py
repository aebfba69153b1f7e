"""A suite whose Redis speaks only TLS and asks clients for a certificate
(``rediss://`` with redis-py's ``ssl_*`` query parameters): every service's pools
connect, and runs complete exactly once."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import redis

from cronwave_core.redis_pools import TracedSSLConnection, bounded_client
from tests.backends.runs import runs_complete_exactly_once
from tests.harness.backends import TlsRedis
from tests.harness.processes import ProcessTable
from tests.harness.suites import SuiteFactory

pytestmark = pytest.mark.slow

SECOND = timedelta(seconds=1)


@pytest.fixture
def tls_redis(tmp_path: Path) -> Iterator[TlsRedis]:
    table = ProcessTable("the TLS redis-server")
    server = TlsRedis(tmp_path / "tls-redis", table)
    try:
        server.start()
        yield server
    finally:
        table.close([server.stop])


@pytest.fixture
def redis_url(tls_redis: TlsRedis) -> str:
    """Every service of the suite on the TLS Redis: queue, caches, leases."""
    return tls_redis.url()


def test_a_pool_speaks_tls_with_the_urls_ca_and_client_certificate(tls_redis: TlsRedis) -> None:
    # Given a rediss:// URL naming the CA and a client certificate
    client = bounded_client(tls_redis.url(), name="tls", size=2, wait=SECOND, timeout=SECOND)
    try:
        # When a command goes through the bounded pool
        assert client.set("cronwave-test:tls", "yes")
        # Then it went over TLS, on a connection of the pool's traced TLS class
        connection = client.connection_pool.get_connection()
        try:
            assert isinstance(connection, TracedSSLConnection)
            assert connection._sock is not None and connection._sock.version() is not None
        finally:
            client.connection_pool.release(connection)
        assert client.connection_pool.max_connections == 2
    finally:
        client.close()


def test_the_server_refuses_a_client_without_its_certificate(tls_redis: TlsRedis) -> None:
    # Given the same URL without the client certificate
    url = tls_redis.url(client_cert=False)
    client = bounded_client(url, name="tls", size=1, wait=SECOND, timeout=SECOND)
    try:
        # Then the server (tls-auth-clients yes) does not serve it
        with pytest.raises(redis.ConnectionError):
            client.ping()
    finally:
        client.close()


def test_a_suite_runs_on_a_redis_that_speaks_only_tls(
    make_suite: SuiteFactory, tls_redis: TlsRedis, namespace: str
) -> None:
    # Given a suite whose every service is given only the rediss:// URL
    suite = make_suite()

    # When schedules fire every second, then their runs complete exactly once
    audits = runs_complete_exactly_once(suite, "tls")
    assert audits

    # And the queue and caches were that Redis's: it holds the suite's keys
    client = redis.Redis.from_url(tls_redis.url(), socket_timeout=5)
    try:
        assert client.keys(f"{namespace}:*")
    finally:
        client.close()
