"""What the sharded-planning tests share: a suite's shard leases as leader-election
shows them, and every slot of a set of schedules audited from the store's runs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import leader_election_service_pb2 as leader_pb
from cronwave_proto.v1 import leader_election_service_pb2_grpc as leader_grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc

from cronwave_bench.failover import NOOP, wait_for
from cronwave_bench.sharded_planners import SlotAudit, audit_slots
from cronwave_core.shards import shard_of, shard_scope
from cronwave_core.suite import Suite

RPC = 10.0
__all__ = ["RPC", "SlotAudit", "audit_slots", "create_schedules", "holders", "runs_of"]


def holders(suite: Suite, count: int) -> dict[int, str]:
    """Each shard's holder as leader-election observes it (its planner's process
    name; "" when nobody holds it)."""
    with suite.channel(suite.leader_addr) as channel:
        stub = leader_grpc.LeaderElectionServiceStub(channel)
        found = {}
        for shard in range(count):
            request = leader_pb.ObserveRequest(scope=shard_scope(shard, count))
            lease = stub.Observe(request, timeout=RPC).lease
            found[shard] = lease.holder.split("@", 1)[0]
        return found


def create_schedules(suite: Suite, count: int, prefix: str) -> list[str]:
    """``count`` schedules of the no-op job firing every second (overlap allow_all:
    what is audited is one run per slot, not overlap)."""
    with suite.channel(suite.store_addr) as channel:
        stub = store_grpc.WorkflowStoreServiceStub(channel)
        wait_for(
            lambda: any(
                j.name == NOOP
                for j in stub.ListJobTypes(store_pb.ListJobTypesRequest(), timeout=RPC).job_types
            ),
            30,
            f"job type {NOOP} registered by the worker",
            poll=0.1,
        )
        ids = []
        for i in range(count):
            spec = common_pb2.ScheduleSpec()
            spec.intervals.add().every.FromTimedelta(timedelta(seconds=1))
            schedule = common_pb2.Schedule(
                schedule_id=f"{prefix}-{i:04d}",
                spec=spec,
                policy=common_pb2.SchedulePolicy(overlap=common_pb2.OVERLAP_POLICY_ALLOW_ALL),
                job_type=NOOP,
            )
            request = store_pb.CreateScheduleRequest(schedule=schedule)
            ids.append(stub.CreateSchedule(request, timeout=RPC).schedule.schedule_id)
        return ids


def runs_of(suite: Suite, ids: Sequence[str]) -> list[common_pb2.Run]:
    with suite.channel(suite.store_addr) as channel:
        stub = store_grpc.WorkflowStoreServiceStub(channel)
        runs: list[common_pb2.Run] = []
        for start in range(0, len(ids), 100):
            page = list(ids[start : start + 100])
            request = store_pb.ListRunsRequest(schedule_ids=page, limit=100_000, lean=True)
            runs.extend(stub.ListRuns(request, timeout=RPC).runs)
        return runs


def shards_of(ids: Sequence[str], count: int) -> dict[str, int]:
    return {sid: shard_of(sid, count) for sid in ids}
