"""leader-election as a real process on real Redis: grants, renewals, expiry, and
fencing tokens that only ever increase."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest
import redis
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import leader_election_service_pb2 as pb
from cronwave_proto.v1 import leader_election_service_pb2_grpc as pb_grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc

from cronwave_core.suite import Suite
from tests.harness.processes import ProcessTable
from tests.harness.suites import services_suite
from tests.harness.tls import hop_channel
from tests.helpers import eventually, fresh, record_one, stored_spans


def stub(suite: Suite) -> pb_grpc.LeaderElectionServiceStub:
    channel = hop_channel(suite, "leader-election")
    return pb_grpc.LeaderElectionServiceStub(channel)


def campaign(
    le: pb_grpc.LeaderElectionServiceStub, scope: str, candidate: str, ttl: float = 10.0
) -> pb.CampaignResponse:
    request = pb.CampaignRequest(scope=scope, candidate=candidate)
    request.ttl.FromMilliseconds(int(ttl * 1000))
    return le.Campaign(request, timeout=10)


#: The lease scopes the tests' suites have besides the planners' (a closed set that
#: leader-election and the store share): each test takes its own, so that the tests
#: sharing the module's leader-election never meet another's lease.
SCOPES = tuple(f"scope-{i}" for i in range(40))
_scopes = itertools.cycle(SCOPES)


def a_scope() -> str:
    """A lease scope of the suite, another than the one before."""
    return next(_scopes)


#: The longest lease the tests' leader-elections grant: the default (4 x the default
#: 1.5 s TTL) is shorter than some tests take on a loaded machine while they hold one.
TESTS_MAX_TTL = {"CRONWAVE_LEASE_MAX_TTL": "60s"}


@pytest.fixture(autouse=True)
def scoped(services: Suite) -> Suite:
    """The test's suite, configured with ``SCOPES`` and ``TESTS_MAX_TTL``."""
    services.config.env["CRONWAVE_LEASE_SCOPES"] = ",".join(("planner", *SCOPES))
    services.config.env.update(TESTS_MAX_TTL)
    return services


@pytest.fixture(scope="module")
def leader(
    tmp_path_factory: pytest.TempPathFactory, redis_url: str
) -> Iterator[pb_grpc.LeaderElectionServiceStub]:
    """A running leader-election, with the workflow-store that issues its tokens,
    shared by the module's tests that neither restart nor reconfigure it (each
    campaigns in scopes of its own)."""
    table = ProcessTable("the module's leader-election and store")
    env = {
        "CRONWAVE_NAMESPACE": fresh("leader"),
        "CRONWAVE_LEASE_SCOPES": ",".join(("planner", *SCOPES)),
        **TESTS_MAX_TTL,
    }
    suite = services_suite(table, tmp_path_factory.mktemp("leader"), redis_url, env)
    try:
        suite.start_service("workflow-store")
        suite.start_service("leader-election")
        yield stub(suite)
    finally:
        table.close([suite.stop])


@pytest.fixture
def own_leader(services: Suite) -> pb_grpc.LeaderElectionServiceStub:
    """A leader-election of the test's own (to restart), with its workflow-store."""
    services.start_service("workflow-store")
    services.start_service("leader-election")
    return stub(services)


def test_two_candidates_one_is_granted(
    leader: pb_grpc.LeaderElectionServiceStub, redis_url: str, namespace: str
) -> None:
    scope = a_scope()

    first = campaign(leader, scope, "a")
    second = campaign(leader, scope, "b")

    assert first.granted and first.lease.holder == "a" and first.lease.fencing_token >= 1
    assert not second.granted
    assert second.lease.holder == "a"
    assert second.lease.fencing_token == 0  # the holder's token is the holder's alone
    assert second.lease.HasField("expires_at")


def test_concurrent_campaigns_grant_exactly_one(
    leader: pb_grpc.LeaderElectionServiceStub, redis_url: str, namespace: str
) -> None:
    scope = a_scope()
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
    scope = a_scope()
    first = campaign(leader, scope, "a")

    again = campaign(leader, scope, "a")

    assert again.granted and again.lease.fencing_token == first.lease.fencing_token


def test_renew_by_the_holder_only(
    leader: pb_grpc.LeaderElectionServiceStub, redis_url: str, namespace: str
) -> None:
    scope = a_scope()
    token = campaign(leader, scope, "a").lease.fencing_token

    by_holder = leader.Renew(pb.RenewRequest(scope=scope, candidate="a", fencing_token=token))
    wrong_token = leader.Renew(pb.RenewRequest(scope=scope, candidate="a", fencing_token=token + 1))

    assert by_holder.renewed and by_holder.lease.fencing_token == token
    assert not wrong_token.renewed and wrong_token.lease.fencing_token == 0


def test_renew_and_resign_naming_another_candidate_are_refused(
    leader: pb_grpc.LeaderElectionServiceStub, redis_url: str, namespace: str
) -> None:
    # Given "a" holds the lease
    scope = a_scope()
    token = campaign(leader, scope, "a").lease.fencing_token

    # When "b" renews or resigns it, even with a's token
    for call, request in (
        (leader.Renew, pb.RenewRequest(scope=scope, candidate="b", fencing_token=token)),
        (leader.Resign, pb.ResignRequest(scope=scope, candidate="b", fencing_token=token)),
    ):
        with pytest.raises(grpc.RpcError) as info:
            call(request, timeout=10)

        # Then it is refused, naming the field
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert info.value.details().startswith("candidate: 'b' does not hold")

    # And a's lease is as it was
    assert leader.Observe(pb.ObserveRequest(scope=scope)).lease.holder == "a"
    assert leader.Renew(pb.RenewRequest(scope=scope, candidate="a", fencing_token=token)).renewed


def test_after_expiry_another_is_granted_with_a_larger_token(
    leader: pb_grpc.LeaderElectionServiceStub, redis_url: str, namespace: str
) -> None:
    scope = a_scope()
    first = campaign(leader, scope, "a", ttl=1.0)
    assert first.granted

    second = _wait_granted(leader, scope, "b")

    assert second.lease.fencing_token > first.lease.fencing_token
    # the old holder's renewal is refused: its lease is lost
    with pytest.raises(grpc.RpcError) as info:
        leader.Renew(
            pb.RenewRequest(scope=scope, candidate="a", fencing_token=first.lease.fencing_token)
        )
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "'b' does" in info.value.details()


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
    scope = a_scope()
    token = campaign(leader, scope, "a").lease.fencing_token

    with pytest.raises(grpc.RpcError) as info:
        leader.Resign(pb.ResignRequest(scope=scope, candidate="b", fencing_token=token))
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert leader.Resign(pb.ResignRequest(scope=scope, candidate="a", fencing_token=token)).resigned

    observed = leader.Observe(pb.ObserveRequest(scope=scope)).lease
    assert observed.holder == ""
    nxt = campaign(leader, scope, "b")
    assert nxt.granted and nxt.lease.fencing_token > token


def test_observe_shows_the_current_lease_but_not_its_token(
    leader: pb_grpc.LeaderElectionServiceStub, redis_url: str, namespace: str
) -> None:
    scope = a_scope()
    assert leader.Observe(pb.ObserveRequest(scope=scope)).lease.holder == ""
    granted = campaign(leader, scope, "a", ttl=30)
    assert granted.lease.fencing_token > 0

    lease = leader.Observe(pb.ObserveRequest(scope=scope)).lease

    assert (lease.holder, lease.fencing_token) == ("a", 0)
    assert lease.ttl.ToMilliseconds() == 30_000
    assert lease.HasField("expires_at")


def test_an_observer_cannot_resign_for_the_holder(
    leader: pb_grpc.LeaderElectionServiceStub, redis_url: str, namespace: str
) -> None:
    # Given "a" holds the lease
    scope = a_scope()
    campaign(leader, scope, "a")

    # When a caller resigns in a's name with what Observe shows
    observed = leader.Observe(pb.ObserveRequest(scope=scope)).lease
    with pytest.raises(grpc.RpcError) as info:
        leader.Resign(
            pb.ResignRequest(
                scope=scope, candidate=observed.holder, fencing_token=observed.fencing_token
            ),
            timeout=10,
        )

    # Then it has no token to resign with, and a keeps the lease
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details().startswith("fencing_token: ")
    assert not campaign(leader, scope, "attacker", ttl=60).granted


def test_a_stale_resign_by_the_holder_leaves_its_newer_lease_alone(
    leader: pb_grpc.LeaderElectionServiceStub, redis_url: str, namespace: str
) -> None:
    # Given "a" held the lease, resigned, and campaigned again for a newer token
    scope = a_scope()
    old = campaign(leader, scope, "a").lease.fencing_token
    assert leader.Resign(pb.ResignRequest(scope=scope, candidate="a", fencing_token=old)).resigned
    new = campaign(leader, scope, "a").lease.fencing_token
    assert new > old

    # When a resignation with the old token arrives late
    late = leader.Resign(pb.ResignRequest(scope=scope, candidate="a", fencing_token=old))

    # Then it changes nothing: a still holds the lease with the new token
    assert not late.resigned
    assert leader.Observe(pb.ObserveRequest(scope=scope)).lease.holder == "a"
    assert leader.Renew(pb.RenewRequest(scope=scope, candidate="a", fencing_token=new)).renewed
    assert not campaign(leader, scope, "b").granted


def test_a_ttl_above_the_configured_maximum_is_refused(services: Suite) -> None:
    # Given leader-election grants leases of at most 20 s
    services.start_service("workflow-store")
    services.start_service("leader-election", extra_env={"CRONWAVE_LEASE_MAX_TTL": "20s"})
    le = stub(services)
    scope = a_scope()

    # When a candidate campaigns for 21 s (or the 5 minutes once allowed)
    for ttl in (21.0, 300.0):
        with pytest.raises(grpc.RpcError) as info:
            campaign(le, scope, "a", ttl=ttl)

        # Then it is refused, naming the field and the limit, and nothing is granted
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert info.value.details().startswith("ttl: ")
        assert "20.0s" in info.value.details() and "CRONWAVE_LEASE_MAX_TTL" in info.value.details()
    assert le.Observe(pb.ObserveRequest(scope=scope)).lease.holder == ""
    # And the maximum itself is granted
    assert campaign(le, scope, "a", ttl=20.0).granted


def test_the_default_maximum_ttl_is_a_few_default_leases(services: Suite) -> None:
    # Given leader-election with the default maximum (4 x the default 1.5 s lease)
    services.config.env.pop("CRONWAVE_LEASE_MAX_TTL")
    services.start_service("workflow-store")
    services.start_service("leader-election")
    le = stub(services)

    # Then 6 s is granted and a millisecond more refused, naming the limit
    assert campaign(le, a_scope(), "a", ttl=6.0).granted
    with pytest.raises(grpc.RpcError) as info:
        campaign(le, a_scope(), "a", ttl=6.001)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "6.0s" in info.value.details()


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
    own_leader: pb_grpc.LeaderElectionServiceStub,
    services: Suite,
    redis_url: str,
    namespace: str,
) -> None:
    scope = a_scope()
    before = campaign(own_leader, scope, "a", ttl=1.0).lease.fencing_token

    services.restart("leader-election")
    after = _wait_granted(stub(services), scope, "b")

    assert after.lease.fencing_token > before


def test_with_no_store_no_lease_is_granted(services: Suite) -> None:
    # Given leader-election runs, but no workflow-store answers it
    services.start_service("leader-election")
    le = stub(services)

    # When a candidate campaigns for a free lease
    with pytest.raises(grpc.RpcError) as info:
        campaign(le, a_scope(), "a")

    # Then no token is issued, since only the store issues the tokens it accepts
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "did not issue a fencing token" in info.value.details()


def test_each_rpc_is_a_leader_cache_span_answered_by_redis(
    services: Suite, redis_url: str, namespace: str
) -> None:
    scope = a_scope()
    services.start_service("workflow-store")
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


def _store(suite: Suite) -> store_grpc.WorkflowStoreServiceStub:
    return store_grpc.WorkflowStoreServiceStub(hop_channel(suite, "workflow-store"))


def _record_with_token(suite: Suite, scope: str, token: int) -> None:
    """A scheduled run recorded in the store with ``token`` (raises when refused)."""
    store = _store(suite)
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
    record_one(store, request, timeout=10)


def test_tokens_increase_across_losing_redis_data(
    services: Suite, redis_url: str, namespace: str
) -> None:
    # Given a real store and leader-election; a leader whose token fenced a write
    services.start_service("workflow-store")
    services.start_service("leader-election")
    le = stub(services)
    scope = a_scope()
    first = campaign(le, scope, "a", ttl=1.0)
    assert first.granted
    _record_with_token(services, scope, first.lease.fencing_token)

    # When Redis loses every key of the namespace
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(f"{namespace}:*"))
    assert keys
    client.delete(*keys)
    client.close()

    # Then the next holder's token is newer than every token issued before
    after = campaign(le, scope, "b")
    assert after.granted
    assert after.lease.fencing_token == first.lease.fencing_token + 1
    _record_with_token(services, scope, after.lease.fencing_token)

    # And across a restart of leader-election, tokens keep increasing
    services.restart("leader-election")
    le = stub(services)
    le.Resign(pb.ResignRequest(scope=scope, candidate="b", fencing_token=after.lease.fencing_token))
    again = campaign(le, scope, "c")
    assert again.granted and again.lease.fencing_token > after.lease.fencing_token


@pytest.mark.parametrize("forged", ["max", "next", "scope"])
def test_a_forged_token_is_refused_and_elections_go_on(services: Suite, forged: str) -> None:
    # Given a leader whose token the store has seen
    services.start_service("workflow-store")
    services.start_service("leader-election")
    le = stub(services)
    scope = a_scope()
    first = campaign(le, scope, "a", ttl=1.0)
    _record_with_token(services, scope, first.lease.fencing_token)

    # When a caller records a scheduled run with a token leader-election never granted:
    # the largest int64, the next token, or in a scope the suite does not have
    token, target = {
        "max": (2**63 - 1, scope),
        "next": (first.lease.fencing_token + 1, scope),
        "scope": (1, fresh("made-up")),
    }[forged]
    with pytest.raises(grpc.RpcError) as info:
        _record_with_token(services, target, token)

    # Then the store refuses it, naming the rule, and remembers nothing of it
    if forged == "scope":
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert info.value.details().startswith("fencing_scope: ")
    else:
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert info.value.details().startswith("fencing_token: ")
        assert "issued" in info.value.details()
    seen = _store(services).GetFencingToken(
        store_pb.GetFencingTokenRequest(fencing_scope=scope), timeout=10
    )
    assert seen.fencing_token == first.lease.fencing_token
    # And the next leader is granted a newer token, across a restart as well
    services.restart("leader-election")
    after = _wait_granted(stub(services), scope, "b")
    assert after.lease.fencing_token > first.lease.fencing_token
    _record_with_token(services, scope, after.lease.fencing_token)


def test_a_made_up_scope_gets_no_lease(leader: pb_grpc.LeaderElectionServiceStub) -> None:
    # When a planner's certificate campaigns for, or observes, a scope the suite lacks
    made_up = fresh("made-up")
    with pytest.raises(grpc.RpcError) as campaigned:
        campaign(leader, made_up, "a")
    with pytest.raises(grpc.RpcError) as observed:
        leader.Observe(pb.ObserveRequest(scope=made_up), timeout=10)

    # Then both are refused, naming the field and the scopes there are
    for info in (campaigned, observed):
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert info.value.details() == (
            f"scope: '{made_up}' is not a lease scope of this suite; the scopes are "
            f"{', '.join(sorted(('planner', *SCOPES)))} (CRONWAVE_LEASE_SCOPES)"
        )
