"""gRPC adapter of ``LeaderElectionService``: validate, call ``LeaseStore``, convert.

A lease is bound to its caller's authenticated identity (``owner``) as well as its
candidate name: with one certificate shared by every planner replica, the name tells
them apart, and a caller with another identity cannot act for the holder. A reply
carries the fencing token only to the lease's holder (Observe never does). Leases
exist for the suite's scopes alone (``CRONWAVE_LEASE_SCOPES``, the store's too): any
other scope is INVALID_ARGUMENT naming ``scope``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import grpc
from cronwave_proto.v1 import leader_election_service_pb2 as pb
from cronwave_proto.v1 import leader_election_service_pb2_grpc as pb_grpc

from cronwave_core.convert import dt_to_ts, duration_to_td, td_to_duration
from cronwave_core.errors import InvalidArgument
from cronwave_core.fields import lease_name, lease_scope
from cronwave_core.security import identity
from cronwave_core.settings import PLANNER_SCOPE
from cronwave_core.shards import shard_list, shard_scope
from cronwave_core.telemetry.spans import hop_span
from cronwave_core.telemetry.vocabulary import ATTR_CACHE_HIT, Hop, Kind
from leader_election.leases import MIN_TTL, Lease, LeaseStore, ShardSync

DEFAULT_SCOPE = PLANNER_SCOPE
_REDIS = {ATTR_CACHE_HIT: "redis"}


def _name(field: str, value: str, default: str | None = None) -> str:
    value = value or (default or "")
    if not value:
        raise InvalidArgument(field, "is required (a name unique per replica, e.g. planner-1@host)")
    return lease_name(value, field)


def _token(value: int) -> int:
    if value <= 0:
        raise InvalidArgument("fencing_token", "must be the positive token Campaign granted")
    return value


def _ttl(
    request: pb.CampaignRequest | pb.SyncShardsRequest, default: timedelta, maximum: timedelta
) -> timedelta:
    if not request.HasField("ttl"):
        return default
    ttl = duration_to_td(request.ttl, "ttl")
    if ttl == timedelta(0):
        return default
    if not MIN_TTL <= ttl <= maximum:
        raise InvalidArgument(
            "ttl",
            f"must be between {MIN_TTL.total_seconds()}s and {maximum.total_seconds()}s, the "
            f"longest lease granted (CRONWAVE_LEASE_MAX_TTL; 0 = the server default), got "
            f"{ttl.total_seconds()}s",
        )
    return ttl


def _owner() -> str:
    """Who calls, as a lease records its owner: ``service:cron-planner``, ``user:ann``,
    ``insecure``. A relayed person (``on_behalf_of``) is not part of it: the lease is
    the calling process's."""
    caller = identity.current()
    if caller is None:
        return "unknown"
    return "insecure" if caller.kind == "insecure" else f"{caller.kind}:{caller.name}"


class LeaderElectionServicer(pb_grpc.LeaderElectionServiceServicer):
    def __init__(
        self,
        leases: LeaseStore,
        default_ttl: timedelta,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        scopes: frozenset[str] = frozenset({DEFAULT_SCOPE}),
    ) -> None:
        self._leases = leases
        self._default_ttl = default_ttl
        self._now = now
        self._scopes = scopes

    def _scope(self, value: str) -> str:
        """The request's scope (default ``planner``), one of the suite's."""
        return lease_scope(_name("scope", value, DEFAULT_SCOPE), "scope", self._scopes)

    def _lease(self, lease: Lease) -> pb.Lease:
        msg = pb.Lease(
            scope=lease.scope,
            holder=lease.holder,
            fencing_token=lease.token,
            ttl=td_to_duration(lease.ttl),
        )
        if lease.holder:
            msg.expires_at.CopyFrom(dt_to_ts(self._now() + lease.remaining))
        return msg

    def Campaign(
        self, request: pb.CampaignRequest, context: grpc.ServicerContext
    ) -> pb.CampaignResponse:
        scope = self._scope(request.scope)
        candidate = _name("candidate", request.candidate)
        ttl = _ttl(request, self._default_ttl, self._leases.max_ttl)
        with hop_span("leader campaign", hop=Hop.LEADER, kind=Kind.CACHE, attributes=_REDIS):
            outcome = self._leases.campaign(scope, candidate, ttl, _owner())
        return pb.CampaignResponse(granted=outcome.ok, lease=self._lease(outcome.lease))

    def Renew(self, request: pb.RenewRequest, context: grpc.ServicerContext) -> pb.RenewResponse:
        scope = self._scope(request.scope)
        candidate = _name("candidate", request.candidate)
        token = _token(request.fencing_token)
        with hop_span("leader renew", hop=Hop.LEADER, kind=Kind.CACHE, attributes=_REDIS):
            outcome = self._leases.renew(scope, candidate, token, _owner())
        return pb.RenewResponse(renewed=outcome.ok, lease=self._lease(outcome.lease))

    def Resign(self, request: pb.ResignRequest, context: grpc.ServicerContext) -> pb.ResignResponse:
        scope = self._scope(request.scope)
        candidate = _name("candidate", request.candidate)
        token = _token(request.fencing_token)
        with hop_span("leader resign", hop=Hop.LEADER, kind=Kind.CACHE, attributes=_REDIS):
            resigned = self._leases.resign(scope, candidate, token, _owner())
        return pb.ResignResponse(resigned=resigned)

    def Observe(
        self, request: pb.ObserveRequest, context: grpc.ServicerContext
    ) -> pb.ObserveResponse:
        scope = self._scope(request.scope)
        with hop_span("leader observe", hop=Hop.LEADER, kind=Kind.CACHE, attributes=_REDIS):
            lease = self._leases.observe(scope)
        return pb.ObserveResponse(lease=self._lease(lease))

    def SyncShards(
        self, request: pb.SyncShardsRequest, context: grpc.ServicerContext
    ) -> pb.SyncShardsResponse:
        candidate = _name("candidate", request.candidate)
        count = request.shard_count
        if count < 2 or shard_scope(0, count) not in self._scopes:
            raise InvalidArgument(
                "shard_count",
                f"must be the suite's planner shard count (CRONWAVE_PLANNER_SHARDS, at least "
                f"2), got {count}",
            )
        ttl = _ttl(request, self._default_ttl, self._leases.max_ttl)
        held = tuple((lease.shard, _token(lease.fencing_token)) for lease in request.held)
        release = tuple((lease.shard, _token(lease.fencing_token)) for lease in request.release)
        want = tuple(request.want)
        shard_list([k for k, _ in held] + [k for k, _ in release] + list(want), count, "shards")
        sync = ShardSync(candidate, count, ttl, held, release, want)
        with hop_span("leader sync shards", hop=Hop.LEADER, kind=Kind.CACHE, attributes=_REDIS):
            found = self._leases.sync(sync, _owner())
        reply = pb.SyncShardsResponse(
            members=found.members,
            held=[pb.ShardLease(shard=k, fencing_token=t) for k, t in sorted(found.held.items())],
        )
        if found.next_lapse is not None:
            reply.next_lapse.FromTimedelta(found.next_lapse)
        return reply
