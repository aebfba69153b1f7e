"""Dead-lettering: a message or run this worker cannot use goes to the store's
dead-letter list with the reason, and the message is acknowledged.

Poison is an undecodable message (``undecodable``), one naming no run the store knows
(``unknown_run``), a run of a job type this worker does not have
(``unknown_job_type``), and a run out of retries (``retries_exhausted``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

import grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

from worker.chain import Delivery, Poison, RunMiddleware
from worker.jobs import Registry
from worker.store_port import RunStore, with_retries

log = logging.getLogger("cronwave.worker")


class DeadLettering(RunMiddleware):
    def __init__(self, store: RunStore, registry: Registry) -> None:
        self.store = store
        self.registry = registry

    def after_claim(self, delivery: Delivery) -> None:
        if delivery.job_type is not None:
            return
        run = delivery.run
        known = ", ".join(self.registry.names()) or "none"
        raise Poison(
            "unknown_job_type",
            f"this worker (queues {delivery.message.queue}) has no job type "
            f"'{run.job_type}'; it runs: {known}",
            run_id=run.run_id,
            attempt_token=delivery.attempt_token,
            queue=delivery.message.queue,
        )

    def on_poison(self, poison: Poison) -> None:
        answer = self.dead_letter(
            poison.run_id,
            poison.attempt_token,
            poison.reason,
            poison.error,
            queue=poison.queue,
            message_json=poison.message_json,
        )
        if answer is not None and answer.changed and answer.HasField("run"):
            poison.ended_run = answer.run  # the run span is recorded (tracing)

    def dead_letter(
        self,
        run_id: str,
        attempt_token: str,
        reason: str,
        error: str,
        *,
        queue: str = "",
        message_json: str = "",
    ) -> store_pb.DeadLetterRunResponse | None:
        """Put the run (or the message) on the store's dead-letter list; a store that
        cannot be reached is logged (None), the message is dropped either way."""
        log.warning("dead-lettering run %r: %s: %s", run_id, reason, error)
        request = store_pb.DeadLetterRunRequest(
            run_id=run_id,
            attempt_token=attempt_token,
            reason=reason,
            error=error,
            queue=queue,
            message_json=message_json,
        )
        try:
            answer: store_pb.DeadLetterRunResponse = with_retries(
                lambda: self.store.DeadLetterRun(request), f"dead-letter {run_id!r}"
            )
        except grpc.RpcError as exc:
            log.error("run %r: dead letter not recorded: %s", run_id, exc.details())
            return None
        return answer


def message_json(args: Sequence[Any], kwargs: Any) -> str:
    """A poison message as it arrived, for the dead-letter list (never executed)."""
    return json.dumps({"args": list(args), "kwargs": kwargs}, default=repr)[:10_000]
