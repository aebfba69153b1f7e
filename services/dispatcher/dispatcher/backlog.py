"""How long the oldest message still waiting on each queue has waited.

The sweeper re-sends the message of a PENDING run no worker claimed within
``CRONWAVE_SWEEP_PENDING_AFTER``, taking its message for lost. A message is not lost
while it waits in its queue's backlog: when the workers fall behind by more than that
bound (a busy suite, a crowded instant), every run in the backlog looked lost, and each
re-send added a message that its workers then had to take and see refused, so the
backlog grew and more runs looked lost (docs/benchmarks.md, *The defaults*: a
10,000-run instant under a steady 510 runs/s).

So each sweep first reads, per queue, the oldest message waiting on it: a queue is a
Redis list in enqueue order (``RPUSH``; workers take from its head), so its head is its
oldest message, and every message sent after that one is still in the list. The store
then holds each queue's runs to ``pending_for`` past that wait (``queue_waits`` of
``RequeueStalledRuns``): a lost message is still re-sent, once it is older than the
backlog and the bound. Two pipelined round trips to Redis a sweep, whatever the number
of queues.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import timedelta

import dramatiq
import redis
from dramatiq.brokers.redis import RedisBroker
from dramatiq.common import current_millis

log = logging.getLogger("cronwave.dispatcher")


def queue_waits(broker: RedisBroker, queues: Iterable[str]) -> dict[str, timedelta]:
    """Per queue of ``queues`` that holds a message waiting for a worker, how long the
    oldest such message has waited (from its enqueue, the message's own timestamp).
    An empty queue, or one whose head cannot be read, is left out (it waits nothing
    beyond the bound); Redis away leaves every queue out."""
    names = sorted(set(queues))
    if not names:
        return {}
    namespace = broker.namespace
    try:
        pipe = broker.client.pipeline(transaction=False)
        for name in names:
            pipe.lindex(f"{namespace}:{name}", 0)
        heads = pipe.execute()
        waiting = [(name, head) for name, head in zip(names, heads, strict=True) if head]
        if not waiting:
            return {}
        pipe = broker.client.pipeline(transaction=False)
        for name, head in waiting:
            pipe.hget(f"{namespace}:{name}.msgs", head)
        bodies = pipe.execute()
    except redis.RedisError as exc:
        log.warning("queue backlog not read (%s): every queue waits the bound alone", exc)
        return {}
    now = current_millis()
    waits: dict[str, timedelta] = {}
    for (name, _head), body in zip(waiting, bodies, strict=True):
        if body is None:  # taken by a worker since the first round trip
            continue
        try:
            enqueued = dramatiq.Message.decode(body).message_timestamp
        except Exception:  # not a message this broker wrote: no backlog to credit
            continue
        waits[name] = timedelta(milliseconds=max(0, now - enqueued))
    return waits
