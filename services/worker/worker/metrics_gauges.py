"""The worker's scrape-time gauge: how many messages wait in each queue it consumes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prometheus_client.core import GaugeMetricFamily

from cronwave_core.metrics import CachedGauges, register


def queue_depth(client: Any, namespace: str, queues: Sequence[str]) -> CachedGauges:
    """``cronwave_queue_depth{queue}``: the length of each of ``queues``' Redis list
    (messages enqueued, not yet taken), one pipelined ``LLEN`` per queue every 2 s at
    most. Every worker of a pool reports the same figure: aggregate with ``max``."""

    def collect() -> list[GaugeMetricFamily]:
        pipe = client.pipeline(transaction=False)
        for queue in queues:
            pipe.llen(f"{namespace}:{queue}")
        depths = pipe.execute()
        gauge = GaugeMetricFamily(
            "cronwave_queue_depth",
            "Messages waiting in the queue (pool), not yet taken by a worker",
            labels=["queue"],
        )
        for queue, depth in zip(queues, depths, strict=True):
            gauge.add_metric([queue], int(depth))
        return [gauge]

    return CachedGauges(collect, ttl_seconds=2.0)


def install(client: Any, namespace: str, queues: Sequence[str]) -> None:
    register(queue_depth(client, namespace, queues))
