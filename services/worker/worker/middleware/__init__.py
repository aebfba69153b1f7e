"""The worker's run middleware, one concern each, and the chain they make in their
declared order (``ORDER``; why this order: ``worker.chain``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from dramatiq.brokers.redis import RedisBroker

from cronwave_core.caching import RunStatusCache
from cronwave_core.limits import DEFAULT_LIMITS
from worker.chain import RunMiddleware
from worker.jobs import Registry
from worker.liveness import Liveness
from worker.middleware.claim import Claim
from worker.middleware.completion import Completion
from worker.middleware.dead_lettering import DeadLettering
from worker.middleware.heartbeat import Heartbeat
from worker.middleware.metrics import Metrics
from worker.middleware.time_limit import TimeLimit
from worker.middleware.tracing import Tracing
from worker.store_port import RunStore

__all__ = [
    "ORDER",
    "Claim",
    "Completion",
    "DeadLettering",
    "Heartbeat",
    "Metrics",
    "TimeLimit",
    "Tracing",
    "standard",
]

ORDER: tuple[type[RunMiddleware], ...] = (
    Tracing,
    Metrics,
    DeadLettering,
    Claim,
    Heartbeat,
    TimeLimit,
    Completion,
)


def standard(
    store: RunStore,
    registry: Registry,
    worker_id: str,
    *,
    queues: Sequence[str],
    broker: RedisBroker | None = None,
    run_status: RunStatusCache | None = None,
    kill_grace: timedelta = timedelta(seconds=2),
    cancel_check: timedelta = timedelta(seconds=1),
    test_hooks: Sequence[RunMiddleware] = (),
    result_bytes: int = DEFAULT_LIMITS.result_bytes,
    liveness: Liveness | None = None,
    tracing: Tracing | None = None,
) -> list[RunMiddleware]:
    """The worker's middleware in ``ORDER``, then ``test_hooks`` (innermost: see
    ``worker.chain``). ``queues``: the queues the worker consumes, named with its claims.
    ``liveness``: the worker's heartbeats (default: one over ``store``). ``tracing``:
    the tracing hook (default: one that records nothing of runs not sampled)."""
    chain: list[RunMiddleware] = [
        tracing or Tracing(worker_id),
        Metrics(),
        DeadLettering(store, registry),
        Claim(store, registry, worker_id, queues),
        Heartbeat(liveness or Liveness(lambda request: store.Heartbeats(request)), cancel_check),
        TimeLimit(kill_grace),
        Completion(store, registry, broker, run_status, result_bytes),
    ]
    assert tuple(type(m) for m in chain) == ORDER
    return [*chain, *test_hooks]
