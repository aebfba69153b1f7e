"""Whose lease it is: leader-election's servicer and ``LeaseStore`` on real Redis, called
in-process as one identity or another (over the wire only cron-planner may campaign,
renew or resign, so every planner shares one identity and the candidate name tells
them apart; the binding to the identity is what stops any other caller)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import timedelta

import pytest
import redis
from cronwave_proto.v1 import leader_election_service_pb2 as pb

from cronwave_core.errors import FailedPrecondition, InvalidArgument, PermissionDenied
from cronwave_core.security.identity import INSECURE, Identity, serving
from leader_election.leases import LeaseStore
from leader_election.servicer import LeaderElectionServicer
from tests.helpers import fresh

PLANNER = Identity("service", "cron-planner")
OTHER = Identity("service", "console")
SCOPE = "planner"


@pytest.fixture
def servicer(redis_url: str, namespace: str) -> Iterator[LeaderElectionServicer]:
    client = redis.Redis.from_url(redis_url)
    tokens = itertools.count(1)
    leases = LeaseStore(client, namespace, lambda _scope: next(tokens), timedelta(minutes=1))
    yield LeaderElectionServicer(leases, timedelta(seconds=15))
    client.close()


def _as(caller: Identity):  # type: ignore[no-untyped-def]
    return serving(caller, "ipv4:127.0.0.1:1")


def _campaign(servicer: LeaderElectionServicer, candidate: str) -> pb.CampaignResponse:
    return servicer.Campaign(pb.CampaignRequest(scope=SCOPE, candidate=candidate), None)  # type: ignore[arg-type]


def test_renew_and_resign_from_another_identity_are_refused(
    servicer: LeaderElectionServicer,
) -> None:
    # Given a planner holds the lease as candidate "a"
    candidate = fresh("a")
    with _as(PLANNER):
        token = _campaign(servicer, candidate).lease.fencing_token
    assert token > 0

    # When another identity renews or resigns it, naming "a" and its token
    renew = pb.RenewRequest(scope=SCOPE, candidate=candidate, fencing_token=token)
    resign = pb.ResignRequest(scope=SCOPE, candidate=candidate, fencing_token=token)
    with _as(OTHER):
        with pytest.raises(PermissionDenied) as renewed:
            servicer.Renew(renew, None)  # type: ignore[arg-type]
        with pytest.raises(PermissionDenied) as resigned:
            servicer.Resign(resign, None)  # type: ignore[arg-type]
        # nor does campaigning as "a" extend it or show its token
        again = _campaign(servicer, candidate)

    # Then both are refused, naming the field
    for refusal in (renewed.value, resigned.value):
        assert refusal.message.startswith(f"candidate: '{candidate}' holds the lease")
        assert "another identity" in refusal.message
    assert not again.granted and again.lease.fencing_token == 0
    # And the planner still holds it with its token
    with _as(PLANNER):
        assert servicer.Renew(renew, None).renewed  # type: ignore[arg-type]
        assert servicer.Resign(resign, None).resigned  # type: ignore[arg-type]


def test_the_same_identity_naming_another_candidate_is_refused(
    servicer: LeaderElectionServicer,
) -> None:
    # Given planner "a" holds the lease; planner "b" shares its certificate
    a, b = fresh("a"), fresh("b")
    with _as(PLANNER):
        token = _campaign(servicer, a).lease.fencing_token

        # When b renews or resigns with a's token
        with pytest.raises(FailedPrecondition) as renewed:
            servicer.Renew(pb.RenewRequest(scope=SCOPE, candidate=b, fencing_token=token), None)  # type: ignore[arg-type]
        with pytest.raises(FailedPrecondition) as resigned:
            servicer.Resign(pb.ResignRequest(scope=SCOPE, candidate=b, fencing_token=token), None)  # type: ignore[arg-type]

        # Then both are refused, naming the field, and a keeps the lease
        for refusal in (renewed.value, resigned.value):
            assert refusal.message.startswith(f"candidate: '{b}' does not hold")
        assert servicer.Observe(pb.ObserveRequest(scope=SCOPE), None).lease.holder == a  # type: ignore[arg-type]


def test_insecure_callers_are_one_identity(servicer: LeaderElectionServicer) -> None:
    # In insecure mode nobody is authenticated: the candidate alone tells holders apart
    candidate = fresh("a")
    with _as(INSECURE):
        token = _campaign(servicer, candidate).lease.fencing_token
        renew = pb.RenewRequest(scope=SCOPE, candidate=candidate, fencing_token=token)
        assert servicer.Renew(renew, None).renewed  # type: ignore[arg-type]


def test_a_lease_granted_under_a_larger_maximum_is_not_renewed_past_it(
    redis_url: str, namespace: str
) -> None:
    # Given a lease of 2 minutes, granted while the maximum allowed it
    client = redis.Redis.from_url(redis_url)
    tokens = itertools.count(1)
    generous = LeaseStore(client, namespace, lambda _s: next(tokens), timedelta(minutes=5))
    candidate = fresh("a")
    granted = generous.campaign(SCOPE, candidate, timedelta(minutes=2), "service:cron-planner")
    assert granted.ok

    # When leader-election restarts with a maximum of one minute
    strict = LeaseStore(client, namespace, lambda _s: next(tokens), timedelta(minutes=1))

    # Then the renewal is refused, naming the ttl and the limit
    with pytest.raises(InvalidArgument) as info:
        strict.renew(SCOPE, candidate, granted.lease.token, "service:cron-planner")
    assert info.value.field == "ttl" and "60.0s" in info.value.message
    # and the holder may campaign again for a shorter lease, keeping its token
    again = strict.campaign(SCOPE, candidate, timedelta(seconds=15), "service:cron-planner")
    assert again.ok and again.lease.token == granted.lease.token
    client.close()
