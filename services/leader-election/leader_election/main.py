"""Entry point: ``python -m leader_election``."""

from __future__ import annotations

import grpc
import redis
from cronwave_proto.v1 import leader_election_service_pb2 as pb
from cronwave_proto.v1 import leader_election_service_pb2_grpc as pb_grpc

from cronwave_core.bootstrap import Service, full_names, serve
from cronwave_core.entry import entry_point
from cronwave_core.limits import MIB
from cronwave_core.rpc import open_channel
from cronwave_core.settings import (
    LeaseSettings,
    NetworkSettings,
    ProcessSettings,
    RedisSettings,
    TelemetrySettings,
    TestHooks,
)
from cronwave_core.telemetry.tracing import init_tracing
from leader_election.leases import LeaseStore
from leader_election.servicer import LeaderElectionServicer
from leader_election.store_tokens import StoreTokens


@entry_point("leader-election")
def main() -> None:
    process = ProcessSettings.from_env()
    network = NetworkSettings.from_env()
    redis_settings = RedisSettings.from_env()
    lease = LeaseSettings.from_env()
    telemetry = TelemetrySettings.from_env()
    TestHooks.from_env()  # no drill here; one that leaked into its environment stops it
    provider = init_tracing("leader-election", telemetry)
    # A Redis that hangs must fail the call well inside the caller's deadline.
    redis_timeout = min(2.0, network.rpc_timeout.total_seconds() / 2)
    client = redis.Redis.from_url(
        redis_settings.redis_url,
        socket_timeout=redis_timeout,
        socket_connect_timeout=redis_timeout,
        health_check_interval=30,
    )
    store_channel = open_channel(network.store_addr, network.rpc_timeout)
    leases = LeaseStore(
        client,
        redis_settings.namespace,
        StoreTokens(store_channel, network.store_addr, network.rpc_timeout / 2),
        lease.max_ttl,
    )
    servicer = LeaderElectionServicer(leases, lease.ttl, scopes=frozenset(lease.scopes))

    def register(server: grpc.Server) -> None:
        pb_grpc.add_LeaderElectionServiceServicer_to_server(servicer, server)

    def on_stop() -> None:
        store_channel.close()
        client.close()
        provider.shutdown()

    serve(
        Service(
            name="leader-election",
            address=network.leader_addr,
            register=register,
            service_names=full_names([pb.DESCRIPTOR]),
            on_stop=on_stop,
            # A scope, a candidate's name and a TTL: a few hundred bytes at most.
            max_receive_bytes=1 * MIB,
        ),
        process.grace,
        traced=telemetry.tracing,
    )
