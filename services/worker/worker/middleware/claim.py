"""Claim: the store decides whether this worker may run the message's run (exactly
one live attempt per run). A run that is already terminal, held by a live attempt or
not due is skipped; one the store does not know is poison (``unknown_run``).

A claim names the queues this worker consumes: the store refuses a run enqueued to
another queue, or one with no message on any queue (``workflow_store.claim_rules``).
Such a message is a stray (another queue's run, or an old message of a run replayed
since): it is skipped, and the run keeps the message the dispatcher sends it.

The claims of the runs this worker takes at once go to the store together (group
commit; see ``cronwave_core.batching``).

A claim's answer can be lost: the call fails (its deadline passed while the store was
busy, the connection dropped) after the store has committed the claim. Each claim
carries a key made for it alone, and is asked again with the same key while the store
is unreachable, for up to the job type's heartbeat timeout: the store answers a claim
asked again with the attempt it started (``workflow_store.attempt_store``), so that
attempt is this worker's after all. A claim asked again without the key would be
refused (the run is held), and the attempt, held by nobody, would wait out its
heartbeat timeout and then be taken over by a second attempt: for a job with no retry,
a second attempt its policy never allowed.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import grpc
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

from cronwave_core.batching import Coalescer, results_of
from cronwave_core.convert import ts_to_dt
from cronwave_core.telemetry.spans import hop_span
from cronwave_core.telemetry.vocabulary import Hop, Kind
from worker.chain import Delivery, Poison, RunMiddleware, Skip
from worker.jobs import Registry
from worker.middleware.dead_lettering import message_json
from worker.store_port import RunStore, with_retries

log = logging.getLogger("cronwave.worker")


def with_traceparent(request: Any, traceparent: str) -> Any:
    request.traceparent = traceparent
    return request


#: A claim's refusals that leave the message nothing to do here: the run is another
#: queue's, or has no message yet (this one is stale).
_STRAY = (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.FAILED_PRECONDITION)
#: How long a claim is asked again while the store is unreachable, when the message
#: names no job type this worker has (it is dead-lettered once the store answers).
ASK_AGAIN_WITHIN = timedelta(seconds=3)


def claim_key() -> str:
    """A new claim's key: 128 random bits, as 32 hex digits."""
    return secrets.token_hex(16)


class Claim(RunMiddleware):
    def __init__(
        self, store: RunStore, registry: Registry, worker_id: str, queues: Sequence[str]
    ) -> None:
        self.registry = registry
        self.worker_id = worker_id
        served = list(queues)
        self.claims: Coalescer[store_pb.ClaimRunRequest, store_pb.ClaimRunResponse] = Coalescer(
            "claim",
            lambda requests: results_of(
                store.ClaimRuns(store_pb.ClaimRunsRequest(claims=requests, queues=served)).results,
                "claim",
            ),
            with_traceparent,
            hop=Hop.PICKUP,
        )

    def before_claim(self, delivery: Delivery) -> None:
        message = delivery.message
        span = delivery.phase.enter_context(
            hop_span("worker.claim", Hop.PICKUP, Kind.APP, delivery.attrs)
        )
        delivery.span = span
        request = store_pb.ClaimRunRequest(
            run_id=message.run_id, worker_id=self.worker_id, claim_key=claim_key()
        )
        # An attempt the store started for a claim whose answer was lost stays this
        # worker's to take (asked again, same key) until its heartbeat lapses.
        within = ASK_AGAIN_WITHIN
        if message.job_type in self.registry:
            within = max(within, self.registry.get(message.job_type).heartbeat_timeout)
        try:
            claim: store_pb.ClaimRunResponse = with_retries(
                lambda: self.claims.call(request), f"claim run {message.run_id}", within=within
            )
        except grpc.RpcError as exc:
            if exc.code() in _STRAY:
                span.set_attribute("cronwave.claimed", False)
                log.warning("run %s not claimed from queue %s: %s", message.run_id,
                            message.queue, exc.details())  # fmt: skip
                raise Skip from None
            if exc.code() != grpc.StatusCode.NOT_FOUND:
                raise
            span.set_attribute("cronwave.claimed", False)
            raise Poison(
                "unknown_run",
                exc.details() or "the store has no such run",
                run_id=message.run_id,
                queue=message.queue,
                message_json=message_json((), message.to_kwargs()),
            ) from None
        span.set_attribute("cronwave.claimed", claim.claimed)
        if not claim.claimed:
            log.info(
                "run %s not claimed (state %s): done, held by a live attempt, or not due",
                message.run_id,
                common_pb2.RunState.Name(claim.run.state),
            )
            raise Skip
        delivery.run = claim.run
        delivery.attempt_token = claim.attempt_token
        if claim.HasField("deadline_at"):
            delivery.deadline_at = ts_to_dt(claim.deadline_at)
        if claim.run.job_type in self.registry:
            delivery.job_type = self.registry.get(claim.run.job_type)

    def close(self) -> None:
        self.claims.close()
