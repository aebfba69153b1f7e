"""Entry point: ``python -m leader_election``."""

from __future__ import annotations

from datetime import timedelta

import grpc
from cronwave_proto.v1 import leader_election_service_pb2 as pb
from cronwave_proto.v1 import leader_election_service_pb2_grpc as pb_grpc

from cronwave_core.bootstrap import SERVER_THREADS, Service, full_names, serve
from cronwave_core.entry import entry_point
from cronwave_core.limits import MIB
from cronwave_core.redis_pools import process_client
from cronwave_core.rpc import open_channel
from cronwave_core.settings import (
    LeaseSettings,
    NetworkSettings,
    ProcessSettings,
    RedisSettings,
    TelemetrySettings,
    TestHooks,
)
from cronwave_core.settings_pools import PoolSettings
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
    pools = PoolSettings.from_env()
    TestHooks.from_env()  # no drill here; one that leaked into its environment stops it
    provider = init_tracing("leader-election", telemetry)
    # A Redis that hangs must fail the call well inside the caller's deadline; every
    # handler thread may hold a connection, and the store-token refresh one more.
    client = process_client(
        redis_settings.redis_url,
        pools,
        name="leases",
        users=SERVER_THREADS + 1,
        timeout=min(pools.redis_timeout, timedelta(seconds=2), network.rpc_timeout / 2),
    )
    store_channel = open_channel(network.store_addr, network.rpc_timeout)
    leases = LeaseStore(
        client,
        redis_settings.namespace,
        StoreTokens(store_channel, network.store_addr, network.rpc_timeout / 2),
        lease.max_ttl,
    )
    servicer = LeaderElectionServicer(leases, lease.ttl, scopes=lease.fenced_scopes())

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
