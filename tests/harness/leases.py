"""The planner lease's fencing token, for a test that acts on the leader's behalf (a
start the store must accept): leader-election shows nobody but the holder its token,
so it is read from the leading planner's own status."""

from __future__ import annotations

import grpc
from cronwave_proto.v1 import cron_planner_service_pb2 as planner_pb
from cronwave_proto.v1 import cron_planner_service_pb2_grpc as planner_grpc

from cronwave_core.suite import Suite
from tests.harness.tls import channel
from tests.helpers import eventually


def leading_token(suite: Suite, timeout: float = 30) -> int:
    """The token of the planner replica of ``suite`` that leads, waited for."""

    def token() -> int:
        for name, proc in list(suite.procs.items()):
            if not name.startswith("cron-planner") or not proc.alive():
                continue
            with channel(proc.address) as to_planner:
                stub = planner_grpc.CronPlannerServiceStub(to_planner)
                try:
                    status = stub.GetPlannerStatus(planner_pb.GetPlannerStatusRequest(), timeout=5)
                except grpc.RpcError:
                    continue
            if status.leader and status.fencing_token > 0:
                return int(status.fencing_token)
        return 0

    return eventually(token, timeout=timeout, what="a planner leading")
