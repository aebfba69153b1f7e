"""Each ``SyncShards`` answer says when the soonest membership of another planner lapses
unless renewed, so a planner can call again just after a dead one's leases lapse
rather than a renew interval later. The calls are a planner's own (as `cron-planner`)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from cronwave_proto.v1 import leader_election_service_pb2 as leader_pb
from cronwave_proto.v1 import leader_election_service_pb2_grpc as leader_grpc

from cron_planner.shard_elector import ShardElector
from tests.harness.suites import SuiteFactory
from tests.helpers import eventually
from tests.sharding.support import RPC

pytestmark = pytest.mark.slow

SHARDS = 4
TTL = timedelta(seconds=2)


def test_the_answer_says_when_another_member_lapses_and_its_shards_are_free_then(
    make_suite: SuiteFactory,
) -> None:
    # Given a suite with 4 planner shards and no planner of its own
    suite = make_suite(planners=0, env={"CRONWAVE_PLANNER_SHARDS": str(SHARDS)})
    channel = suite.channel(suite.leader_addr, identity="cron-planner")
    leases = leader_grpc.LeaderElectionServiceStub(channel)

    def sync(candidate: str, want: list[int]) -> leader_pb.SyncShardsResponse:
        request = leader_pb.SyncShardsRequest(candidate=candidate, shard_count=SHARDS, want=want)
        request.ttl.FromTimedelta(TTL)
        reply: leader_pb.SyncShardsResponse = leases.SyncShards(request, timeout=RPC)
        return reply

    # When planner A joins holding shard 0, alone
    alone = sync("planner-a", [0])

    # Then its answer names no other member to lapse
    assert list(alone.members) == ["planner-a"]
    assert [lease.shard for lease in alone.held] == [0]
    assert not alone.HasField("next_lapse")

    # When planner B joins after it, and A never calls again (it died)
    joined_at = time.monotonic()
    first = sync("planner-b", [])

    # Then B's answer says A lapses within its ttl, and a later answer says so again,
    # nearer by the time that passed
    assert list(first.members) == ["planner-a", "planner-b"]
    lapse = first.next_lapse.ToTimedelta()
    assert timedelta(0) < lapse <= TTL
    time.sleep(0.5)
    second = sync("planner-b", [])
    later = second.next_lapse.ToTimedelta()
    assert later <= lapse - timedelta(seconds=0.4)

    # and once that time has passed, A is gone and B is granted A's shard at once
    time.sleep(max(0.0, joined_at + lapse.total_seconds() + 0.05 - time.monotonic()))
    after = eventually(
        lambda: (reply := sync("planner-b", [0])).held and reply,
        timeout=10,
        what="shard 0 granted to planner B",
    )
    assert list(after.members) == ["planner-b"]
    assert not after.HasField("next_lapse")
    assert [lease.shard for lease in after.held] == [0]
    channel.close()


def test_a_planner_calls_as_a_dead_member_lapses_not_a_renew_interval_later(
    make_suite: SuiteFactory,
) -> None:
    # Given planner A holding shard 0 with a 1-s membership, which never calls again
    # (leader-election grants up to 60 s here, so B's lease outlasts its long interval)
    env = {"CRONWAVE_PLANNER_SHARDS": str(SHARDS), "CRONWAVE_LEASE_MAX_TTL": "60s"}
    suite = make_suite(planners=0, env=env)
    channel = suite.channel(suite.leader_addr, identity="cron-planner")
    leases = leader_grpc.LeaderElectionServiceStub(channel)
    request = leader_pb.SyncShardsRequest(candidate="planner-a", shard_count=SHARDS, want=[0])
    request.ttl.FromTimedelta(timedelta(seconds=1))
    assert [lease.shard for lease in leases.SyncShards(request, timeout=RPC).held] == [0]

    # When planner B starts, calling once per 8-s renew interval
    elector = ShardElector(
        channel,
        "planner-b",
        SHARDS,
        ttl=timedelta(seconds=20),
        renew_interval=timedelta(seconds=8),
        rpc_timeout=timedelta(seconds=RPC),
        loaded=lambda: frozenset(range(SHARDS)),
        on_assignment=lambda _shards, _paced: None,
    )
    elector.start()
    try:
        # Then B holds A's shard well before its next renew interval, in a few calls:
        # it called again as A's membership (and lease) lapsed
        eventually(lambda: 0 in elector.held(), timeout=6, what="shard 0 held by planner B")
        assert elector.members == ("planner-b",)
        assert elector.syncs <= 5, elector.syncs
    finally:
        elector.stop()
        channel.close()
