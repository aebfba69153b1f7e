"""One dramatiq actor per consumed queue, all handing their messages to the same
``RunProcessor``."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from cronwave_core.queueing import actor_name_for
from worker.jobs import Registry
from worker.runtime import RunProcessor

# dramatiq's own time limit is only a backstop: the supervisor enforces each job
# type's duration limit, and claims and completions may wait out a store restart.
_BACKSTOP_MARGIN = timedelta(minutes=5)
_DEFAULT_LIMIT = timedelta(hours=1)


def declare_actors(
    broker: RedisBroker, queues: Iterable[str], processor: RunProcessor, registry: Registry
) -> list[dramatiq.Actor[..., None]]:
    """Declare the actor of each queue on ``broker``. ``max_retries=0``: retrying a
    run is the store's decision (its retry policy), never the broker's. Among messages
    this worker holds at once, the queue whose job types have the lowest priority
    number goes first (dramatiq's actor priority)."""
    actors = []
    for queue in queues:
        types = [t for t in registry if t.queue == queue]
        backstop = max((t.duration_limit for t in types), default=_DEFAULT_LIMIT)
        priority = min((t.priority for t in types), default=0)

        actors.append(
            dramatiq.actor(
                actor_name=actor_name_for(queue),
                queue_name=queue,
                broker=broker,
                max_retries=0,
                priority=priority,
                time_limit=int((backstop + _BACKSTOP_MARGIN).total_seconds() * 1000),
            )(_handler(processor, queue))
        )
    return actors


def _handler(processor: RunProcessor, queue: str) -> Any:
    # Positional arguments are accepted so that a malformed message reaches the
    # processor, which dead-letters it, instead of failing inside dramatiq.
    def handle(*args: Any, **kwargs: Any) -> None:
        processor.process(kwargs, args, queue=queue)

    return handle
