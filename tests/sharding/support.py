"""What the sharded-planning tests share: a suite's shard leases as leader-election
shows them, and every slot of a set of schedules audited from the store's runs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import grpc
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import leader_election_service_pb2 as leader_pb
from cronwave_proto.v1 import leader_election_service_pb2_grpc as leader_grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc

from cronwave_bench.failover import NOOP, wait_for
from cronwave_core.convert import ts_to_dt
from cronwave_core.shards import shard_of, shard_scope
from cronwave_core.suite import Suite

RPC = 10.0


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


@dataclass
class SlotAudit:
    """Every whole second in ``(since, through]`` of every schedule: its runs."""

    duplicates: list[tuple[str, datetime]] = field(default_factory=list)
    missing: list[tuple[str, datetime]] = field(default_factory=list)
    missed: list[tuple[str, datetime, str]] = field(default_factory=list)
    slots: int = 0


def audit_slots(
    runs: Sequence[common_pb2.Run], ids: Sequence[str], since: datetime, through: datetime
) -> SlotAudit:
    per_slot = Counter((r.schedule_id, ts_to_dt(r.fire_time)) for r in runs)
    missed = {
        (r.schedule_id, ts_to_dt(r.fire_time)): r.error
        for r in runs
        if r.state == common_pb2.RUN_STATE_MISSED
    }
    result = SlotAudit()
    first = since.replace(microsecond=0) + timedelta(seconds=1)
    for sid in ids:
        at = first
        while at <= through:
            result.slots += 1
            n = per_slot.get((sid, at), 0)
            if n == 0:
                result.missing.append((sid, at))
            elif n > 1:
                result.duplicates.append((sid, at))
            if (sid, at) in missed:
                result.missed.append((sid, at, missed[(sid, at)]))
            at += timedelta(seconds=1)
    return result


def shards_of(ids: Sequence[str], count: int) -> dict[str, int]:
    return {sid: shard_of(sid, count) for sid in ids}


def no_rpc_error(call):  # type: ignore[no-untyped-def]
    try:
        return call()
    except grpc.RpcError:
        return None
