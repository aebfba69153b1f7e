"""Which runs a worker may claim: only one sent to a queue it consumes, and only once a
message for it is on that queue.

Every worker presents the same ``worker`` certificate, which leaks with any worker's
pod. Without these rules its holder could claim any PENDING run by its id (``ListRuns``
shows them) and complete it with a made-up result. With them a claim names the queues
its worker consumes (``ClaimRunsRequest.queues``), and the store refuses a run
enqueued to another (``QueueNotServed``) and a run with no message on any queue
(``RunNotEnqueued``: recorded without one, or replayed and not yet sent again; its
``due_at`` and ``next_sweep_at`` are both unset until the dispatcher sends one). So a
worker's claim follows the message it was given, and a misconfigured or stray worker
cannot take another pool's runs.

What they do not stop: the worker says which queues it consumes, so a thief who names
a run's queue may still claim that run while its message waits (racing the worker it
was sent to); the run still executes once, under the attempt that won.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cronwave_core.errors import CronwaveError, InvalidArgument, QueueNotServed, RunNotEnqueued
from workflow_store.records import DEFAULT_QUEUE, RunState

#: The most queues a claim may name (a worker consumes a handful).
MAX_QUEUES = 100


def served(queues: Sequence[str]) -> frozenset[str]:
    """The queues a claiming worker consumes, as a set. Raises ``InvalidArgument``
    (``queues``) when none is named, or too many."""
    if not queues:
        raise InvalidArgument(
            "queues",
            "required: the queues this worker consumes (CRONWAVE_WORKER_QUEUES); a run "
            "is claimed only by a worker of the queue it was enqueued to",
        )
    if len(queues) > MAX_QUEUES:
        raise InvalidArgument("queues", f"at most {MAX_QUEUES}, got {len(queues)}")
    return frozenset(queues)


def refusal(run: Mapping[str, Any], queues: frozenset[str]) -> CronwaveError | None:
    """Why a worker consuming ``queues`` may not claim ``run`` (a row's columns), or
    None: it may ask (the claim then decides whether an attempt starts)."""
    queue = run["queue"] or DEFAULT_QUEUE
    if queue not in queues:
        return QueueNotServed(run["run_id"], queue, sorted(queues))
    never_sent = run["due_at"] is None and run["next_sweep_at"] is None
    if run["state"] == RunState.PENDING.value and never_sent:
        return RunNotEnqueued(run["run_id"])
    return None
