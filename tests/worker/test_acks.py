"""Batched acknowledgements on real Redis: every handled message is acknowledged,
from many threads at once, and acks made while Redis is away are sent when it is back."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import dramatiq
import redis

from cronwave_bench.faults import TcpProxy
from cronwave_core.queueing import actor_name_for
from tests.helpers import eventually
from worker.acks import BatchAckBroker

QUEUE = "default"


@contextmanager
def _broker(url: str, namespace: str) -> Iterator[BatchAckBroker]:
    broker = BatchAckBroker(url=url, namespace=namespace)
    try:
        yield broker
    finally:
        broker.close()


def _enqueue(broker: BatchAckBroker, n: int) -> None:
    for i in range(n):
        broker.enqueue(
            dramatiq.Message(
                queue_name=QUEUE,
                actor_name=actor_name_for(QUEUE),
                args=(),
                kwargs={"i": i},
                options={},
            )
        )


def _take(broker: BatchAckBroker, n: int) -> tuple[Any, list[Any]]:
    """A consumer, and ``n`` messages it took off the queue (bounded by count and time)."""
    consumer = broker.consume(QUEUE, prefetch=n, timeout=100)
    taken: list[Any] = []
    deadline = time.monotonic() + 20
    while len(taken) < n and time.monotonic() < deadline:
        message = next(consumer)
        if message is not None:
            taken.append(message)
    assert len(taken) == n
    return consumer, taken


def _unacked(client: redis.Redis, namespace: str, broker: BatchAckBroker) -> int:
    return int(client.scard(f"{namespace}:__acks__.{broker.broker_id}.{QUEUE}"))


def test_messages_acked_from_many_threads_all_leave_redis(redis_url: str, namespace: str) -> None:
    client = redis.Redis.from_url(redis_url)
    with _broker(redis_url, namespace) as broker:
        # Given 200 messages taken off the queue
        _enqueue(broker, 200)
        consumer, messages = _take(broker, 200)
        assert _unacked(client, namespace, broker) == 200
        # When eight threads acknowledge them at once
        threads = [
            threading.Thread(target=lambda part=messages[k::8]: [consumer.ack(m) for m in part])
            for k in range(8)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=20)
        # Then the consumer counts none outstanding at once, and every ack reaches Redis
        assert consumer.outstanding_message_count == 0
        eventually(lambda: broker.acks.sent == 200)
        assert _unacked(client, namespace, broker) == 0
        assert client.hlen(f"{namespace}:{QUEUE}.msgs") == 0
    client.close()


def test_acks_made_while_redis_is_away_are_sent_when_it_is_back(
    redis_url: str, namespace: str
) -> None:
    client = redis.Redis.from_url(redis_url)
    target = redis_url.removeprefix("redis://").split("/", 1)[0]
    db = redis_url.rsplit("/", 1)[-1]
    proxy = TcpProxy(target)
    port = int(proxy.address.rsplit(":", 1)[1])
    try:
        with _broker(f"redis://{proxy.address}/{db}", namespace) as broker:
            # Given 20 messages taken off the queue through a proxy
            _enqueue(broker, 20)
            consumer, messages = _take(broker, 20)
            # When Redis is cut off and they are acknowledged
            proxy.close()
            for message in messages:
                consumer.ack(message)
            # Then the acks wait, the messages still unacknowledged in Redis
            time.sleep(0.3)
            assert broker.acks.sent == 0
            assert _unacked(client, namespace, broker) == 20
            # And once Redis is reachable again, they are all sent
            proxy = TcpProxy(target, port=port)
            eventually(lambda: broker.acks.sent == 20)
            assert _unacked(client, namespace, broker) == 0
    finally:
        proxy.close()
        client.close()


def test_a_consumer_polls_on_while_redis_is_away_and_takes_messages_once_it_is_back(
    redis_url: str, namespace: str
) -> None:
    target = redis_url.removeprefix("redis://").split("/", 1)[0]
    db = redis_url.rsplit("/", 1)[-1]
    proxy = TcpProxy(target)
    port = int(proxy.address.rsplit(":", 1)[1])
    try:
        with (
            _broker(f"redis://{proxy.address}/{db}", namespace) as broker,
            _broker(redis_url, namespace) as sender,
        ):
            # Given a consumer that has taken and handled a message through a proxy
            _enqueue(sender, 1)
            consumer, taken = _take(broker, 1)
            consumer.ack(taken[0])
            eventually(lambda: broker.acks.sent == 1, what="the ack sent")
            # When Redis cannot be reached
            proxy.close()
            # Then the consumer polls on, as if idle, rather than failing (which would
            # make dramatiq's worker restart it only seconds later)
            assert [next(consumer) for _ in range(3)] == [None, None, None]
            # And once Redis is reachable again, the same consumer takes the next message
            proxy = TcpProxy(target, port=port)
            _enqueue(sender, 1)
            message = eventually(lambda: next(consumer), timeout=10, what="a message")
            assert message.kwargs == {"i": 0}
    finally:
        proxy.close()
