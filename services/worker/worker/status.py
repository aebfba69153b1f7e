"""``cronwave.v1.WorkerService``: what this worker runs and how busy it is."""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from cronwave_proto.v1 import worker_service_pb2 as pb
from cronwave_proto.v1 import worker_service_pb2_grpc as pb_grpc

from worker.runtime import WorkerStats


class WorkerStatusServicer(pb_grpc.WorkerServiceServicer):
    def __init__(
        self, worker_id: str, queues: Sequence[str], job_types: Sequence[str], stats: WorkerStats
    ) -> None:
        self.worker_id = worker_id
        self.queues = list(queues)
        self.job_types = list(job_types)
        self.stats = stats

    def GetWorkerStatus(
        self, request: pb.GetWorkerStatusRequest, context: grpc.ServicerContext
    ) -> pb.GetWorkerStatusResponse:
        started, finished, busy = self.stats.snapshot()
        return pb.GetWorkerStatusResponse(
            worker_id=self.worker_id,
            queues=self.queues,
            job_types=self.job_types,
            runs_started=started,
            runs_finished=finished,
            busy=busy,
        )
