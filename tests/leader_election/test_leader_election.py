"""leader-election as a real process on real Redis: grants, renewals, expiry, and
fencing tokens that only ever increase."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest
import redis

from cronwave.v1 import common_pb2
from cronwave.v1 import leader_election_service_pb2 as pb
from cronwave.v1 import leader_election_service_pb2_grpc as pb_grpc
from cronwave.v1 import workflow_store_service_pb2 as store_pb
from cronwave.v1 import workflow_store_service_pb2_grpc as store_grpc
from cronwave_core.suite import Suite
from tests.helpers import eventually, fresh, stored_spans


def stub(suite: Suite) -> pb_grpc.LeaderElectionServiceStub:
    channel = grpc.insecure_channel(suite.leader_addr)
    return pb_grpc.LeaderElectionServiceStub(channel)


def campaign(
    le: pb_grpc.LeaderElectionServiceStub, scope: str, candidate: str, ttl: float = 10.0
) -> pb.CampaignResponse:
    request = pb.CampaignRequest(scope=scope, candidate=candidate)
    request.ttl.FromMilliseconds(int(ttl * 1000))
    return le.Campaign(request, timeout=10)


@pytest.fixture
def leader(services: Suite) -> pb_grpc.LeaderElectionServiceStub:
    """A running leader-election. No store runs, so each test seeds its scope's
    fencing counter (a missing one would refuse every campaign)."""
    services.start_service("leader-election")
    return stub(services)


def seed_counter(redis_url: str, namespace: str, scope: str, value: int = 0) -> None:
    client = redis.Redis.from_url(redis_url)
    client.set(f"{namespace}:fence:{scope}", value)
    client.close()


def test_two_candidates_one_is_granted(
    leader: pb_grpc.LeaderElectionServiceStub, redis_url: str, namespace: str
) -> None:
    scope = fresh("scope")
    seed_counter(redis_url, namespace, scope)

    first = campaign(leader, scope, "a")
    second = campaign(leader, scope, "b")

    assert first.granted and first.lease.holder == "a" and first.lease.fencing_token >= 1
    assert not second.granted
    assert second.lease.holder == "a"
    assert second.lease.fencing_token == first.lease.fencing_token
    assert second.lease.HasField("expires_at")


def test_concurrent_campaigns_grant_exactly_one(
    leader: pb_grpc.LeaderElectionServiceStub, redis_url: str, namespace: str
) -> None:
    scope = fresh("scope")
    seed_counter(redis_url, namespace, scope)
    replies: list[pb.CampaignResponse] = []
    lock = threading.Lock()

    def run(name: str) -> None:
        reply = campaign(leader, scope, name)
        with lock:
            replies.append(reply)

    threads = [threading.Thread(target=run, args=(f"c{i}",)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)

    granted = [r for r in replies if r.granted]
    assert len(replies) == 12
    assert len(granted) == 1
    assert {r.lease.holder for r in replies} == {granted[0].lease.holder}


def test_the_holder_campaigning_again_keeps_its_token(
    leader: pb_grpc.LeaderElectionServiceStub, redis_url: str, namespace: str
) -> None:
    scope = fresh("scope")
    seed_counter(redis_url, namespace, scope)
    first = campaign(leader, scope, "a")

    again = campaign(leader, scope, "a")

    assert again.granted and again.lease.fencing_token == first.lease.fencing_token


def test_renew_by_the_holder_only(
    leader: pb_grpc.LeaderElectionServiceStub, redis_url: str, namespace: str
) -> None:
    scope = fresh("scope")
    seed_counter(redis_url, namespace, scope)
    token = campaign(leader, scope, "a").lease.fencing_token

    by_holder = leader.Renew(pb.RenewRequest(scope=scope, candidate="a", fencing_token=token))
    by_other = leader.Renew(pb.RenewRequest(scope=scope, candidate="b", fencing_token=token))
    wrong_token = leader.Renew(pb.RenewRequest(scope=scope, candidate="a", fencing_token=token + 1))

    assert by_holder.renewed
    assert not by_other.renewed and by_other.lease.holder == "a"
    assert not wrong_token.renewed


def test_after_expiry_another_is_granted_with_a_larger_token(
    leader: pb_grpc.LeaderElectionServiceStub, redis_url: str, namespace: str
) -> None:
    scope = fresh("scope")
    seed_counter(redis_url, namespace, scope)
    first = campaign(leader, scope, "a", ttl=1.0)
    assert first.granted

    second = _wait_granted(leader, scope, "b")

    assert second.lease.fencing_token > first.lease.fencing_token
    # the old holder's renewal is refused: its lease is lost
    late = leader.Renew(
        pb.RenewRequest(scope=scope, candidate="a", fencing_token=first.lease.fencing_token)
    )
    assert not late.renewed and late.lease.holder == "b"


def _wait_granted(
    le: pb_grpc.LeaderElectionServiceStub, scope: str, candidate: str
) -> pb.CampaignResponse:
    def granted() -> pb.CampaignResponse | None:
        reply = campaign(le, scope, candidate, ttl=1.0)
        return reply if reply.granted else None

    result = eventually(granted, timeout=5, what=f"{candidate} granted")
    assert result is not None
    return result


def test_resign_frees_the_lease_for_the_holder_only(
    leader: pb_grpc.LeaderElectionServiceStub, redis_url: str, namespace: str
) -> None:
    scope = fresh("scope")
    seed_counter(redis_url, namespace, scope)
    token = campaign(leader, scope, "a").lease.fencing_token

    assert not leader.Resign(
        pb.ResignRequest(scope=scope, candidate="b", fencing_token=token)
    ).resigned
    assert leader.Resign(pb.ResignRequest(scope=scope, candidate="a", fencing_token=token)).resigned

    observed = leader.Observe(pb.ObserveRequest(scope=scope)).lease
    assert observed.holder == ""
    nxt = campaign(leader, scope, "b")
    assert nxt.granted and nxt.lease.fencing_token > token


def test_observe_shows_the_current_lease(
    leader: pb_grpc.LeaderElectionServiceStub, redis_url: str, namespace: str
) -> None:
    scope = fresh("scope")
    seed_counter(redis_url, namespace, scope)
    assert leader.Observe(pb.ObserveRequest(scope=scope)).lease.holder == ""
    granted = campaign(leader, scope, "a", ttl=30)

    lease = leader.Observe(pb.ObserveRequest(scope=scope)).lease

    assert (lease.holder, lease.fencing_token) == ("a", granted.lease.fencing_token)
    assert lease.ttl.ToMilliseconds() == 30_000


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (pb.CampaignRequest(candidate=""), "candidate"),
        (pb.CampaignRequest(candidate="a b"), "candidate"),
        (pb.CampaignRequest(candidate="a", ttl={"seconds": 301}), "ttl"),
        (pb.CampaignRequest(candidate="a", ttl={"nanos": 500_000_000}), "ttl"),
    ],
)
def test_bad_campaigns_name_the_field(
    leader: pb_grpc.LeaderElectionServiceStub, request_: pb.CampaignRequest, field: str
) -> None:
    with pytest.raises(grpc.RpcError) as info:
        leader.Campaign(request_, timeout=10)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details().startswith(f"{field}: ")


def test_renew_without_a_token_is_invalid(leader: pb_grpc.LeaderElectionServiceStub) -> None:
    with pytest.raises(grpc.RpcError) as info:
        leader.Renew(pb.RenewRequest(candidate="a"), timeout=10)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details().startswith("fencing_token: ")


def test_tokens_increase_across_a_restart(
    leader: pb_grpc.LeaderElectionServiceStub,
    services: Suite,
    redis_url: str,
    namespace: str,
) -> None:
    scope = fresh("scope")
    seed_counter(redis_url, namespace, scope)
    before = campaign(leader, scope, "a", ttl=1.0).lease.fencing_token

    services.restart("leader-election")
    after = _wait_granted(stub(services), scope, "b")

    assert after.lease.fencing_token > before


def test_a_missing_counter_with_no_store_refuses_rather_than_restart_at_one(
    services: Suite, redis_url: str, namespace: str
) -> None:
    # Given tokens were issued, then Redis lost the counter; no store answers
    scope = fresh("scope")
    seed_counter(redis_url, namespace, scope, value=41)
    services.start_service("leader-election")
    le = stub(services)
    assert campaign(le, scope, "a", ttl=1.0).lease.fencing_token == 42
    client = redis.Redis.from_url(redis_url)
    client.delete(f"{namespace}:fence:{scope}", f"{namespace}:lease:{scope}")

    # When a candidate campaigns
    with pytest.raises(grpc.RpcError) as info:
        campaign(le, scope, "b")

    # Then no token is issued (it could be older than 42)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "fencing counter is missing" in info.value.details()
    assert client.get(f"{namespace}:fence:{scope}") is None
    assert client.exists(f"{namespace}:lease:{scope}") == 0
    client.close()


def test_each_rpc_is_a_leader_cache_span_answered_by_redis(
    services: Suite, redis_url: str, namespace: str
) -> None:
    scope = fresh("scope")
    seed_counter(redis_url, namespace, scope)
    services.start_service("leader-election")
    le = stub(services)
    token = campaign(le, scope, "a").lease.fencing_token
    le.Renew(pb.RenewRequest(scope=scope, candidate="a", fencing_token=token))
    le.Observe(pb.ObserveRequest(scope=scope))
    le.Resign(pb.ResignRequest(scope=scope, candidate="a", fencing_token=token))

    services.stop()  # flushes the span files

    spans = _spans(services.config.data_dir / "spans")
    ours = {s["name"]: s["attributes"] for s in spans if s["attributes"].get("cronwave.hop")}
    for name in ("leader campaign", "leader renew", "leader observe", "leader resign"):
        assert ours[name]["cronwave.kind"] == "cache"
        assert ours[name]["cronwave.hop"] == "leader"
        assert ours[name]["cronwave.cache.hit"] == "redis"


def _spans(directory: Path) -> list[dict[str, object]]:
    return stored_spans(directory, "leader-election-*.jsonl")


def _store_saw_token(suite: Suite, scope: str, token: int) -> None:
    """Make the workflow-store see ``token`` for ``scope``: record a run with it."""
    store = store_grpc.WorkflowStoreServiceStub(grpc.insecure_channel(suite.store_addr))
    job = fresh("job")
    job_type = common_pb2.JobType(name=job)
    job_type.duration_limit.FromSeconds(60)
    store.RegisterJobType(store_pb.RegisterJobTypeRequest(job_type=job_type), timeout=10)
    schedule_id = fresh("sched")
    schedule = common_pb2.Schedule(
        schedule_id=schedule_id, spec=common_pb2.ScheduleSpec(cron=["0 0 1 1 *"]), job_type=job
    )
    store.CreateSchedule(store_pb.CreateScheduleRequest(schedule=schedule), timeout=10)
    request = store_pb.RecordRunRequest(
        schedule_id=schedule_id,
        trigger=common_pb2.TRIGGER_KIND_SCHEDULED,
        fencing_token=token,
        fencing_scope=scope,
    )
    request.fire_time.FromDatetime(datetime(2031, 1, 1, tzinfo=UTC))
    store.RecordRun(request, timeout=10)
    seen = store.GetFencingToken(store_pb.GetFencingTokenRequest(fencing_scope=scope), timeout=10)
    assert seen.fencing_token == token


def test_tokens_increase_across_losing_redis_data_floored_by_the_store(
    services: Suite, redis_url: str, namespace: str
) -> None:
    # Given a real store and leader-election; a first token issued from scratch
    services.start_service("workflow-store")
    services.start_service("leader-election")
    le = stub(services)
    scope = fresh("scope")
    first = campaign(le, scope, "a", ttl=1.0)
    assert first.granted
    # ...and the store has since seen a much newer token (another leader's run)
    newest = first.lease.fencing_token + 100
    _store_saw_token(services, scope, newest)

    # When Redis loses every key of the namespace
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(f"{namespace}:*"))
    assert keys
    client.delete(*keys)
    client.close()

    # Then the next token is newer than anything the store has seen
    after = campaign(le, scope, "b")
    assert after.granted
    assert after.lease.fencing_token == newest + 1

    # And across a restart of leader-election, tokens keep increasing
    services.restart("leader-election")
    le = stub(services)
    le.Resign(pb.ResignRequest(scope=scope, candidate="b", fencing_token=after.lease.fencing_token))
    again = campaign(le, scope, "c")
    assert again.granted and again.lease.fencing_token > after.lease.fencing_token
