"""Bounded pools on real Redis and the real scheduler database: an operation that finds
every connection taken waits the pool's timeout, then fails alone with an error naming
the pool and the settings, and the thread that asked goes on and is served once a
connection is back (``cronwave_core.redis_pools``, ``workflow_store.db``)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import dramatiq
import pytest
import sqlalchemy as sa

from cronwave_core.errors import Unavailable
from cronwave_core.queueing import actor_name_for
from cronwave_core.redis_pools import RedisPoolExhausted, process_client
from cronwave_core.settings_pools import PoolSettings
from tests.helpers import eventually
from worker.acks import BatchAckBroker
from workflow_store.db import Database, create_engine

QUEUE = "default"
ONE_CONNECTION = {
    "CRONWAVE_REDIS_POOL_SIZE": "1",
    "CRONWAVE_REDIS_POOL_TIMEOUT": "200ms",
    "CRONWAVE_DATABASE_POOL_SIZE": "1",
    "CRONWAVE_DATABASE_POOL_OVERFLOW": "0",
    "CRONWAVE_DATABASE_POOL_TIMEOUT": "200ms",
}


def _message(i: int) -> dramatiq.Message[Any]:
    return dramatiq.Message(
        queue_name=QUEUE, actor_name=actor_name_for(QUEUE), args=(), kwargs={"i": i}, options={}
    )


def test_unset_the_redis_pool_is_sized_to_its_users_and_set_it_is_the_setting() -> None:
    assert PoolSettings.from_env({}).redis_size(68) == 68
    assert PoolSettings.from_env(ONE_CONNECTION).redis_size(68) == 1
    defaults = PoolSettings.from_env({})
    assert (defaults.database_connections, defaults.store_threads) == (32, 64)


def test_an_exhausted_redis_pool_fails_one_operation_and_the_consumer_thread_goes_on(
    redis_url: str, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a worker's broker over a pool of one connection, which the test holds
    pools = PoolSettings.from_env(ONE_CONNECTION)
    client = process_client(redis_url, pools, name="worker broker", users=68)
    broker = BatchAckBroker(client=client, namespace=namespace)
    other = BatchAckBroker(url=redis_url, namespace=namespace)
    held = client.connection_pool.get_connection()
    try:
        # When an operation needs a connection
        # Then it fails after the pool's timeout, naming the pool, its size and the fix
        with pytest.raises(RedisPoolExhausted) as raised:
            client.ping()
        text = str(raised.value)
        assert "Redis pool 'worker broker' exhausted: all 1 connection(s)" in text
        assert "stayed in use for 0.2s" in text and "CRONWAVE_REDIS_POOL_SIZE" in text

        # And a consumer's fetching thread that meets it goes on polling
        taken: list[Any] = []
        errors: list[BaseException] = []

        def fetch() -> None:
            consumer = broker.consume(QUEUE, prefetch=1, timeout=50)
            deadline = time.monotonic() + 30
            try:
                while not taken and time.monotonic() < deadline:
                    message = next(consumer)
                    if message is not None:
                        taken.append(message)
                        consumer.ack(message)
            except BaseException as exc:
                errors.append(exc)

        other.enqueue(_message(1))
        with caplog.at_level(logging.WARNING, logger="cronwave.worker"):
            thread = threading.Thread(target=fetch, name="fetcher", daemon=True)
            thread.start()
            eventually(
                lambda: "Redis pool 'worker broker' exhausted" in caplog.text,
                what="the fetcher's warning",
            )
            assert thread.is_alive() and not taken and not errors
        # and once the connection is back it takes the message waiting for it
    finally:
        client.connection_pool.release(held)
    thread.join(timeout=30)
    assert not thread.is_alive() and not errors, errors
    assert [m.kwargs for m in taken] == [{"i": 1}]
    assert client.ping()
    broker.close()
    other.close()


def test_an_exhausted_database_pool_fails_one_call_unavailable_and_the_thread_goes_on(
    database_url: str,
) -> None:
    # Given the store's database over a pool of one connection, which the test holds
    pools = PoolSettings.from_env(ONE_CONNECTION)
    engine = create_engine(database_url, instrument=False, pools=pools)
    db = Database(engine)
    answers: list[object] = []
    go_again = threading.Event()

    def handler() -> None:  # as a gRPC handler thread of the store would
        for _ in range(2):
            try:
                with db.read() as session:
                    answers.append(session.execute(sa.text("SELECT 1")).scalar())
            except Unavailable as exc:
                answers.append(exc)
            go_again.wait(timeout=30)

    try:
        with engine.connect():
            # When a call needs a connection
            thread = threading.Thread(target=handler, name="store-handler", daemon=True)
            thread.start()
            eventually(lambda: answers, what="the first call's answer")
        # Then that call failed UNAVAILABLE, saying the store is busy and nothing was written
        [first] = answers
        assert isinstance(first, Unavailable)
        assert str(first) == (
            "the workflow-store is busy: every database connection stayed in use past "
            "its pool timeout; nothing was written, retry"
        )
        # and the same thread's next call, with the connection back, is served
        go_again.set()
        thread.join(timeout=30)
        assert not thread.is_alive()
        assert answers[1:] == [1]
    finally:
        go_again.set()
        engine.dispose()
