"""The planner's elector against a real leader-election process and real Redis."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from datetime import timedelta

import grpc
import pytest
import redis
from cronwave_proto.v1 import leader_election_service_pb2 as pb
from cronwave_proto.v1 import leader_election_service_pb2_grpc as pb_grpc

from cron_planner.elector import Elector, safety_margin
from cronwave_core.rpc import open_channel
from cronwave_core.suite import Suite
from tests.harness.tls import as_identity
from tests.harness.tls import channel as channel_as
from tests.helpers import eventually, fresh

TTL = timedelta(seconds=2)
RENEW = timedelta(seconds=0.3)


@pytest.fixture
def leader_addr(services: Suite) -> str:
    # Some tests hold a 30 s lease: above the default maximum (4 x the default TTL).
    services.config.env["CRONWAVE_LEASE_MAX_TTL"] = "60s"
    services.start_service("workflow-store")  # it issues the fencing tokens
    services.start_service("leader-election")
    return services.leader_addr


@pytest.fixture
def make_elector(leader_addr: str) -> Iterator[Callable[..., Elector]]:
    started: list[Elector] = []
    channels: list[grpc.Channel] = []

    def make(candidate: str, ttl: timedelta = TTL) -> Elector:
        channel = open_channel(
            leader_addr, timedelta(seconds=1), traced=False, tls=as_identity("cron-planner")
        )
        channels.append(channel)
        elector = Elector(
            channel,
            candidate,
            ttl=ttl,
            renew_interval=RENEW,
            retry_interval=timedelta(seconds=0.1),
            rpc_timeout=timedelta(seconds=1),
        )
        started.append(elector)
        elector.start()
        return elector

    yield make
    for elector in started:
        elector.stop(resign=False)
    for channel in channels:
        channel.close()


def observe(leader_addr: str) -> pb.Lease:
    with channel_as(leader_addr, "cron-planner") as channel:
        stub = pb_grpc.LeaderElectionServiceStub(channel)
        return stub.Observe(pb.ObserveRequest(scope="planner"), timeout=5).lease


def test_the_margin_is_at_least_a_renew_interval_and_a_fifth_of_the_ttl() -> None:
    assert safety_margin(timedelta(seconds=15), timedelta(seconds=3)) == timedelta(seconds=3)
    assert safety_margin(timedelta(seconds=15), timedelta(seconds=1)) == timedelta(seconds=3)
    assert safety_margin(timedelta(seconds=10), timedelta(seconds=4)) == timedelta(seconds=4)


def test_renewals_keep_the_lease_past_its_ttl(make_elector, leader_addr: str) -> None:
    elector = make_elector(fresh("planner"))
    eventually(elector.is_leader, timeout=10, what="leading")
    token = elector.token()

    # When it has renewed often enough to span twice the ttl (renewals are at least a
    # renew interval apart)
    renewals = 1 + int(2 * TTL / RENEW) + 1
    eventually(lambda: elector.renewals >= renewals, timeout=30, what=f"{renewals} renewals")

    # Then it still leads with the token it was granted
    assert elector.is_leader() and elector.token() == token
    assert observe(leader_addr).holder == elector.candidate


def test_stops_leading_before_the_lease_can_expire_when_renewals_hang(
    make_elector, services: Suite, redis_url: str, namespace: str
) -> None:
    # Given a leading elector
    elector = make_elector(fresh("planner"))
    eventually(elector.is_leader, timeout=10, what="leading")
    client = redis.Redis.from_url(redis_url)
    lease_key = f"{namespace}:lease:planner"

    # When leader-election freezes, so every renewal hangs until its deadline
    services.signal("leader-election", signal.SIGSTOP)
    try:
        # Then the validity it counts ends before the lease can end in Redis: the two
        # read at one moment (the time between the reads is given to the lease's side,
        # so a slow read cannot fail the comparison)
        read_from = time.monotonic()
        validity = elector.leadership().remaining.total_seconds()
        lease_ms = client.pttl(lease_key)
        holder = client.hget(lease_key, "holder")
        between = time.monotonic() - read_from
        # and it steps down once that validity is over, renewals still hanging
        eventually(lambda: not elector.is_leader(), timeout=20, what="not leading")
    finally:
        services.signal("leader-election", signal.SIGCONT)

    assert holder == elector.candidate.encode()
    assert validity <= max(lease_ms, 0) / 1000 + between, (validity, lease_ms, between)
    assert elector.token() == 0

    # And once leader-election answers again, it leads again
    eventually(elector.is_leader, timeout=10, what="leading again")
    client.close()


def test_a_refused_renewal_steps_down_at_once(
    make_elector, redis_url: str, namespace: str, leader_addr: str, caplog
) -> None:
    # Given a leading elector with a long ttl
    elector = make_elector(fresh("planner"), ttl=timedelta(seconds=30))
    eventually(elector.is_leader, timeout=10, what="leading")
    old = elector.token()

    # When its lease vanishes and a rival takes the scope. The rival's channel is open
    # first, so it campaigns right after the delete; the elector campaigns again 0.1 s
    # after a refusal and may still win that race on a loaded machine: then the lease
    # vanishes again, a bounded number of times.
    client = redis.Redis.from_url(redis_url)
    with channel_as(leader_addr, "cron-planner") as channel:
        leases = pb_grpc.LeaderElectionServiceStub(channel)
        leases.Observe(pb.ObserveRequest(scope="planner"), timeout=5)  # connected
        for _ in range(10):
            client.delete(f"{namespace}:lease:planner")
            rival = leases.Campaign(
                pb.CampaignRequest(scope="planner", candidate="rival"), timeout=5
            )
            if rival.granted:
                break
    assert rival.granted and rival.lease.fencing_token > old

    # Then the next renewal is refused and it stops leading for that reason, not because
    # its 30 s of validity ran out
    eventually(lambda: not elector.is_leader(), timeout=20, what="stepped down")

    # (a renewal that lands between the delete and the rival's campaign finds no lease
    # and is refused so; one after it is refused naming the rival). The elector says
    # why just after it stops leading, in its own thread: looked for until it has.
    def refused() -> str:
        text = caplog.text
        by_rival = "renewal refused (FAILED_PRECONDITION: candidate: " in text
        assert by_rival or "renewal refused; the lease is held by ''" in text, text
        return "by rival" if by_rival else "unheld"

    if eventually(refused, timeout=10, what="the refusal logged") == "by rival":
        assert "('rival' does)" in caplog.text
    assert "validity ran out" not in caplog.text
    client.close()


def test_resigning_hands_over_without_waiting_for_the_ttl(make_elector, leader_addr: str) -> None:
    # Given two planners with a long ttl, one leading
    a = make_elector(fresh("a"), ttl=timedelta(seconds=30))
    b = make_elector(fresh("b"), ttl=timedelta(seconds=30))
    first = eventually(
        lambda: a if a.is_leader() else b if b.is_leader() else None, what="someone leads"
    )
    second = b if first is a else a
    assert not second.is_leader()
    old = first.token()

    # When the leader stops (it resigns)
    first.stop()

    # Then the lease is released at once, not left to run out its 30 s ttl
    assert observe(leader_addr).holder != first.candidate
    # and the other leads, with a newer token
    eventually(second.is_leader, timeout=20, what="the other leads")
    assert second.token() > old
    assert observe(leader_addr).holder == second.candidate


def test_step_down_resigns_and_campaigns_for_a_newer_token(make_elector) -> None:
    elector = make_elector(fresh("planner"), ttl=timedelta(seconds=30))
    eventually(elector.is_leader, timeout=10, what="leading")
    old = elector.token()

    elector.step_down("the store refused token as stale")

    assert not elector.is_leader()
    eventually(lambda: elector.token() > old, timeout=10, what="a newer token")
