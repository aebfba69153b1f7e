"""Heartbeat: while the body runs, its supervisor tells the store the attempt is alive
(with the body's latest checkpoint) every job type's heartbeat interval. A refusal
says a newer attempt owns the run: the body is stopped and not completed."""

from __future__ import annotations

import logging

import grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

from worker.chain import Delivery, RunMiddleware
from worker.store_port import NOT_OURS, RunStore
from worker.supervisor import BeatResult

log = logging.getLogger("cronwave.worker")


class Heartbeat(RunMiddleware):
    def __init__(self, store: RunStore) -> None:
        self.store = store

    def before_execute(self, delivery: Delivery) -> None:
        run_id, token = delivery.run.run_id, delivery.attempt_token
        store = self.store

        def beat(checkpoint_json: str) -> BeatResult:
            request = store_pb.HeartbeatRequest(
                run_id=run_id, attempt_token=token, checkpoint_json=checkpoint_json
            )
            try:
                store.Heartbeat(request)
            except grpc.RpcError as exc:
                if exc.code() in NOT_OURS:
                    log.warning("run %s: heartbeat refused: %s", run_id, exc.details())
                    return BeatResult.SUPERSEDED
                return BeatResult.FAILED
            return BeatResult.OK

        delivery.beat = beat
        if delivery.job_type is not None:
            delivery.heartbeat_interval = delivery.job_type.heartbeat_interval
