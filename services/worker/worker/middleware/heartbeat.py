"""Heartbeat: while the body runs, its supervisor tells the store the attempt is alive
(with the body's latest checkpoint) every job type's heartbeat interval, or every
``cancel_check`` when that is shorter. A refusal says a newer attempt owns the run
(or it was cancelled at once): the body is stopped and not completed. An answer that
says the run is being cancelled sets the attempt's ``CancelSignal``: the job sees
``ctx.cancelled``, and its supervisor stops the body when the grace has passed. So a
cancel reaches a running body within ``cancel_check`` plus one heartbeat call.

Once, while the body runs, a heartbeat also carries when it began, so the store
shows the run started while it is still running (``report_start``)."""

from __future__ import annotations

import logging
from datetime import timedelta

import grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

from cronwave_core.convert import duration_to_td
from worker.cancellation import CancelSignal
from worker.chain import Delivery, RunMiddleware
from worker.store_port import NOT_OURS, RunStore
from worker.supervisor import BeatResult

log = logging.getLogger("cronwave.worker")


class Heartbeat(RunMiddleware):
    def __init__(self, store: RunStore, cancel_check: timedelta = timedelta(seconds=1)) -> None:
        self.store = store
        self.cancel_check = cancel_check

    def before_execute(self, delivery: Delivery) -> None:
        run_id, token = delivery.run.run_id, delivery.attempt_token
        store = self.store
        cancel = delivery.cancel = CancelSignal()

        def send(request: store_pb.HeartbeatRequest) -> BeatResult:
            try:
                response = store.Heartbeat(request)
            except grpc.RpcError as exc:
                if exc.code() in NOT_OURS:
                    log.warning("run %s: heartbeat refused: %s", run_id, exc.details())
                    return BeatResult.SUPERSEDED
                return BeatResult.FAILED
            if response.cancel_requested:
                if not cancel.is_set():
                    log.info("run %s: cancel requested: %s", run_id, response.cancel_reason)
                cancel.request(
                    duration_to_td(response.cancel_grace, "cancel_grace"), response.cancel_reason
                )
            return BeatResult.OK

        def beat(checkpoint_json: str) -> BeatResult:
            return send(
                store_pb.HeartbeatRequest(
                    run_id=run_id, attempt_token=token, checkpoint_json=checkpoint_json
                )
            )

        def report_start(started_ns: int) -> BeatResult:
            request = store_pb.HeartbeatRequest(run_id=run_id, attempt_token=token)
            request.body_started_at.FromNanoseconds(started_ns)
            return send(request)

        delivery.beat = beat
        delivery.report_start = report_start
        if delivery.job_type is not None:
            delivery.heartbeat_interval = min(
                delivery.job_type.heartbeat_interval, self.cancel_check
            )
