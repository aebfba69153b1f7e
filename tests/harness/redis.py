"""Redis for the tests: the configured one (``CRONWAVE_TEST_REDIS_URL``), else an
embedded redis-server for the session, and a server a test owns and may kill
(``cronwave_bench.faults.OwnRedis``, the one the fault drills use), every one recorded
in a ``ProcessTable``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from cronwave_bench.faults import OwnRedis
from tests.harness.processes import ProcessTable

REDIS_URL = os.environ.get("CRONWAVE_TEST_REDIS_URL", "")


class TrackedRedis(OwnRedis):
    """An ``OwnRedis`` whose every start is recorded in ``table``."""

    def __init__(self, workdir: Path, table: ProcessTable) -> None:
        super().__init__(workdir)
        self.table = table

    def start(self) -> None:
        try:
            super().start()
        finally:
            if self._proc is not None:
                self.table.track(self._proc)


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Redis for the session: the configured one, or an embedded redis-server."""
    if REDIS_URL:
        client = redis.Redis.from_url(REDIS_URL, socket_timeout=5)
        client.ping()  # down = failure, not a skip
        client.close()
        yield REDIS_URL
        return
    table = ProcessTable("the session's redis-server")
    server = TrackedRedis(tmp_path_factory.mktemp("redis"), table)
    try:
        server.start()
        yield server.url
    finally:
        table.close([server.stop])


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    """A redis-server of the test's own, which it may kill and start again empty."""
    table = ProcessTable("own_redis's redis-server")
    server = TrackedRedis(tmp_path / "own-redis", table)
    try:
        server.start()
        yield server
    finally:
        table.close([server.stop])
