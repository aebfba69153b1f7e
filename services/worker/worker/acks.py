"""Message acknowledgements in batches: one pipelined round trip to Redis for all the
acks the worker's threads made while the previous batch was in flight.

dramatiq acknowledges each message on its own, from the thread that handled it: one
call of the broker's dispatch script per message, each a round trip. Here a handled
message is taken off the consumer's count of outstanding messages at once (so it
fetches more), and its acknowledgement is queued for the ``AckBatcher`` thread, which
sends what is queued as one pipeline of the same script calls.

Deferring an ack is safe for exactly-once: the run's claim in the store, not the
broker, decides whether a message runs a job. A worker that dies with acks still
queued leaves those messages unacknowledged; the broker gives them to another worker
once this one's heartbeat lapses, and their claims are refused (the runs are done).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import redis
from dramatiq.brokers.redis import RedisBroker, _RedisConsumer
from dramatiq.common import current_millis
from dramatiq.errors import ConnectionClosed

log = logging.getLogger("cronwave.worker")

#: At most this many acks go in one pipeline.
MAX_BATCH = 512
#: After a failed send, wait this long before trying again.
RETRY_DELAY = 0.5
#: While Redis is unreachable a consumer looks again at most this many ms apart.
MAX_DOWN_POLL_MS = 100


class AckBatcher:
    """Sends queued acknowledgements in pipelined batches from one thread."""

    def __init__(self, broker: RedisBroker, max_batch: int = MAX_BATCH) -> None:
        self._broker = broker
        self._max_batch = max_batch
        self._queue: list[tuple[str, str]] = []
        self._cond = threading.Condition()
        self._closed = False
        self.sent = 0  # acknowledgements delivered so far
        self._thread = threading.Thread(target=self._loop, name="ack-batcher", daemon=True)
        self._thread.start()

    def add(self, queue_name: str, redis_message_id: str) -> None:
        """Queue the ack of a message taken from ``queue_name``."""
        with self._cond:
            self._queue.append((queue_name, redis_message_id))
            self._cond.notify()

    def close(self, timeout: float = 5.0) -> None:
        """Send what is queued (one try each batch), then stop."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout=timeout)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return  # closed and drained
                batch = self._queue[: self._max_batch]
                del self._queue[: self._max_batch]
                closing = self._closed
            try:
                self._send(batch)
            except redis.RedisError as exc:
                if closing:
                    # Their messages go back to the queue when this worker's
                    # heartbeat lapses; their claims are refused then.
                    log.warning("%d acks not sent at shutdown: %s", len(batch), exc)
                    continue
                log.warning("%d acks not sent (%s); retrying", len(batch), exc)
                with self._cond:
                    self._queue[:0] = batch
                time.sleep(RETRY_DELAY)

    def _send(self, batch: list[tuple[str, str]]) -> None:
        """The broker's own ack (``RedisBroker.do_ack``), once per message, in one
        pipeline."""
        broker = self._broker
        dispatch = broker.scripts["dispatch"]
        pipe = broker.client.pipeline(transaction=False)
        now = current_millis()
        for queue_name, message_id in batch:
            args = [
                "ack",
                now,
                queue_name,
                broker.broker_id,
                broker.heartbeat_timeout,
                broker.dead_message_ttl,
                0,  # no maintenance: the consumer's fetches do it now and then
                broker._max_unpack_size(),
                message_id,
            ]
            dispatch(keys=[broker.namespace], args=args, client=pipe)
        pipe.execute()
        self.sent += len(batch)


class _BatchAckConsumer(_RedisConsumer):
    """dramatiq's Redis consumer with its acks handed to an ``AckBatcher``.

    Redis away is an idle poll, not an error: dramatiq's worker would close the
    consumer and restart it only after ``dramatiq_restart_delay`` (3 s), which a
    restarted Redis would add to the pickup of every run it had lost. Here a fetch
    that cannot reach Redis waits one idle poll (``timeout``) and yields nothing, so
    the consumer takes messages again within a poll of Redis answering."""

    def __init__(self, broker: BatchAckBroker, queue_name: str, prefetch: int, timeout: int):
        super().__init__(broker, queue_name, prefetch, timeout)
        self._acks = broker.acks
        self._down_since: float | None = None

    def __next__(self) -> Any:
        try:
            message = super().__next__()
        except ConnectionClosed as exc:
            now = time.monotonic()
            if self._down_since is None:
                self._down_since = now
                log.warning("queue %s: Redis unreachable (%s); polling on", self.queue_name, exc)
            time.sleep(min(self.timeout, MAX_DOWN_POLL_MS) / 1000)
            return None
        if self._down_since is not None:
            log.info(
                "queue %s: Redis answers again after %.3fs",
                self.queue_name,
                time.monotonic() - self._down_since,
            )
            self._down_since = None
        return message

    def ack(self, message: Any) -> None:
        try:
            # As dramatiq does: on the queue consumed, which differs from the
            # message's own when it came through a delay queue.
            self._acks.add(self.queue_name, message.options["redis_message_id"])
        finally:
            self.queued_message_ids.discard(message.message_id)


class BatchAckBroker(RedisBroker):
    """A Redis broker whose consumers acknowledge messages in batches (``AckBatcher``,
    started with the first consumer). ``close`` sends the queued acks first."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._acks: AckBatcher | None = None
        self._acks_lock = threading.Lock()

    @property
    def acks(self) -> AckBatcher:
        with self._acks_lock:
            if self._acks is None:
                self._acks = AckBatcher(self)
            return self._acks

    def consume(self, queue_name: str, prefetch: int = 1, timeout: int = 5000) -> Any:
        return _BatchAckConsumer(self, queue_name, prefetch, timeout)

    def close(self) -> None:
        with self._acks_lock:
            acks, self._acks = self._acks, None
        if acks is not None:
            acks.close()
        super().close()
