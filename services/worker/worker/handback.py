"""Handing a run back: a worker that stops gives the runs it holds back to the store
(``ReleaseRun``), so another worker resumes them at once."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta

import grpc
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from dramatiq.brokers.redis import RedisBroker
from opentelemetry.trace import Status, StatusCode

from cronwave_core.queueing import RunMessage
from cronwave_core.telemetry.spans import hop_span
from cronwave_core.telemetry.vocabulary import Hop, Kind
from worker.store_port import RunStore, with_retries

log = logging.getLogger("cronwave.worker")

#: The reason a stopping worker gives the store when it hands a run back.
RELEASE_REASON = "worker_shutdown"
#: A hand-back is retried this long while the store is unreachable (the stop has
#: a deadline; a run not handed back is re-sent by the sweeper once its heartbeat
#: lapses).
RELEASE_WITHIN = timedelta(seconds=0.5)


def hand_back(
    store: RunStore,
    broker: RedisBroker | None,
    run: common_pb2.Run,
    attempt_token: str,
    checkpoint_json: str,
    attrs: Mapping[str, str],
) -> None:
    """Give a run this worker holds back to the store (``ReleaseRun``: PENDING, due
    now, ``checkpoint_json`` kept when given), then put a message for it on its
    queue, so another worker resumes it at once. A run that ended meanwhile, or
    that a newer attempt took, is left as it is; one the store cannot be told about
    is re-sent by the sweeper once its heartbeat lapses."""
    request = store_pb.ReleaseRunRequest(
        run_id=run.run_id,
        attempt_token=attempt_token,
        checkpoint_json=checkpoint_json,
        reason=RELEASE_REASON,
    )
    # In execute's time, as the store files a release's database work.
    with hop_span("worker.release", Hop.EXECUTE, Kind.APP, attrs) as span:
        try:
            response = with_retries(
                lambda: store.ReleaseRun(request),
                f"release run {run.run_id}",
                within=RELEASE_WITHIN,
            )
        except grpc.RpcError as exc:
            span.set_status(Status(StatusCode.ERROR, exc.details() or exc.code().name))
            log.warning("run %s: not handed back: %s", run.run_id, exc.details())
            return
        span.set_attribute("cronwave.released", response.released)
        if not response.released:
            return  # it ended meanwhile
        log.info("run %s attempt %d: handed back (worker stopping)", run.run_id, run.attempt)
        if broker is None:
            return
        message = RunMessage.for_run(response.run)
        try:
            broker.enqueue(message.to_message())
        except Exception as exc:  # the sweeper re-sends it once overdue
            log.error("run %s: message not enqueued after its release: %s", run.run_id, exc)
