"""The store fences each shard on its own: a planner's write under a shard's scope is
refused when its token is older than the newest seen for that shard, or when the
schedule is in another shard; another shard's newer token changes nothing. The calls
are the planner's own (as `cron-planner`, through the dispatcher and the store)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import grpc
import pytest
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import dispatcher_service_pb2 as dispatcher_pb
from cronwave_proto.v1 import dispatcher_service_pb2_grpc as dispatcher_grpc
from cronwave_proto.v1 import leader_election_service_pb2 as leader_pb
from cronwave_proto.v1 import leader_election_service_pb2_grpc as leader_grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc

from cronwave_core.convert import dt_to_ts
from cronwave_core.shards import shard_of, shard_scope
from tests.harness.suites import SuiteFactory
from tests.sharding.support import RPC, create_schedules

pytestmark = pytest.mark.slow

SHARDS = 4
ENV = {"CRONWAVE_PLANNER_SHARDS": str(SHARDS)}


def _start(stub, schedule_id: str, at: datetime, scope: str, token: int):  # type: ignore[no-untyped-def]
    request = dispatcher_pb.StartRunsRequest(
        starts=[
            dispatcher_pb.StartRunRequest(
                schedule_id=schedule_id,
                fire_time=dt_to_ts(at),
                fencing_token=token,
                fencing_scope=scope,
                idempotency_key=f"{schedule_id}@{at.isoformat()}",
                trigger=common_pb2.TRIGGER_KIND_SCHEDULED,
            )
        ]
    )
    return stub.StartRuns(request, timeout=RPC).results[0]


def test_the_store_refuses_a_stale_shard_token_and_another_shards_schedule(
    make_suite: SuiteFactory,
) -> None:
    # Given a suite with 4 planner shards and no planner, and two schedules in
    # different shards
    suite = make_suite(planners=0, env=ENV)
    ids = create_schedules(suite, 12, "fenced")
    by_shard: dict[int, str] = {}
    for sid in ids:
        by_shard.setdefault(shard_of(sid, SHARDS), sid)
    assert len(by_shard) >= 2
    (shard_a, sid_a), (shard_b, sid_b) = sorted(by_shard.items())[:2]
    scope_a, scope_b = shard_scope(shard_a, SHARDS), shard_scope(shard_b, SHARDS)
    planner = suite.channel(suite.dispatcher_addr, identity="cron-planner")
    leader_channel = suite.channel(suite.leader_addr, identity="cron-planner")
    dispatcher = dispatcher_grpc.DispatcherServiceStub(planner)
    leases = leader_grpc.LeaderElectionServiceStub(leader_channel)
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=30)

    # and shard A granted to one planner, then (its lease resigned) to another, with
    # a newer token; shard B granted once
    def sync(candidate: str, want: list[int], release=()) -> dict[int, int]:  # type: ignore[no-untyped-def]
        request = leader_pb.SyncShardsRequest(
            candidate=candidate, shard_count=SHARDS, want=want, release=list(release)
        )
        reply = leases.SyncShards(request, timeout=RPC)
        return {lease.shard: lease.fencing_token for lease in reply.held}

    old = sync("planner-old", [shard_a])[shard_a]
    sync("planner-old", [], [leader_pb.ShardLease(shard=shard_a, fencing_token=old)])
    new = sync("planner-new", [shard_a, shard_b])
    assert new[shard_a] > old

    # When the new holder of A starts a run of A's schedule, and the old one tries
    first = _start(dispatcher, sid_a, at, scope_a, new[shard_a])
    stale = _start(dispatcher, sid_a, at + timedelta(seconds=1), scope_a, old)

    # Then the new holder's run is recorded and the old token is refused as stale
    assert first.HasField("started"), first
    assert stale.HasField("error")
    assert stale.error.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
    assert "older than" in stale.error.message and scope_a in stale.error.message

    # When A's token fences a schedule of shard B
    crossed = _start(dispatcher, sid_b, at, scope_a, new[shard_a])

    # Then it is refused naming fencing_scope, and B's own token records it
    assert crossed.HasField("error")
    assert crossed.error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "fencing_scope" in crossed.error.message
    own = _start(dispatcher, sid_b, at, scope_b, new[shard_b])
    assert own.HasField("started"), own

    # And the store's newest token of each shard is its own
    store = store_grpc.WorkflowStoreServiceStub(suite.channel(suite.store_addr))
    newest_a = store.GetFencingToken(store_pb.GetFencingTokenRequest(fencing_scope=scope_a))
    newest_b = store.GetFencingToken(store_pb.GetFencingTokenRequest(fencing_scope=scope_b))
    assert newest_a.fencing_token == new[shard_a]
    assert newest_b.fencing_token == new[shard_b]
    planner.close()
    leader_channel.close()
