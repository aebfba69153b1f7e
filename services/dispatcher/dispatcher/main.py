"""The dispatcher process."""

from __future__ import annotations

from cronwave_proto.v1 import dispatcher_service_pb2
from cronwave_proto.v1 import dispatcher_service_pb2_grpc as pb_grpc
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc

from cronwave_core.bootstrap import SERVER_THREADS, Service, full_names, serve
from cronwave_core.caching import RunStatusCache, TwoTierCache, redis_client
from cronwave_core.entry import entry_point
from cronwave_core.fault_interceptors import fault_channel
from cronwave_core.limits import MIB
from cronwave_core.queue_epoch import EpochWatch
from cronwave_core.queueing import make_broker
from cronwave_core.redis_pools import process_client
from cronwave_core.rpc import open_channel
from cronwave_core.settings import (
    DispatcherSettings,
    LimitSettings,
    NetworkSettings,
    ProcessSettings,
    RedisSettings,
    TelemetrySettings,
    TestHooks,
)
from cronwave_core.settings_pools import PoolSettings
from cronwave_core.telemetry.tracing import init_tracing
from cronwave_core.telemetry.vocabulary import Hop
from dispatcher import caches
from dispatcher.servicer import DispatcherServicer
from dispatcher.sweeper import Sweeper


@entry_point("dispatcher")
def main() -> None:
    process = ProcessSettings.from_env()
    network = NetworkSettings.from_env()
    redis_settings = RedisSettings.from_env()
    dispatcher = DispatcherSettings.from_env()
    telemetry = TelemetrySettings.from_env()
    hooks = TestHooks.from_env()
    pools = PoolSettings.from_env()
    provider = init_tracing("dispatcher", telemetry)
    # Its handler threads enqueue; the sweeper and the queue-epoch watch use it too.
    broker = make_broker(
        redis_settings,
        process_client(
            redis_settings.redis_url, pools, name="dispatcher broker", users=SERVER_THREADS + 2
        ),
    )
    # A process started for tests slows its starts there (cronwave_core.fault_interceptors).
    channel = fault_channel(open_channel(network.store_addr, network.rpc_timeout), hooks)
    store = store_grpc.WorkflowStoreServiceStub(channel)
    cache_redis = redis_client(
        redis_settings.redis_url,
        size=pools.redis_size(SERVER_THREADS + 1),  # its handler threads and the sweeper
    )
    routes = TwoTierCache(
        "route",
        Hop.DISPATCH,
        client=cache_redis,
        namespace=redis_settings.namespace,
        local_ttl=caches.ROUTE_LOCAL_TTL,
        redis_ttl=caches.ROUTE_REDIS_TTL,
    )
    dedup = TwoTierCache(
        "dedup",
        Hop.DISPATCH,
        client=cache_redis,
        namespace=redis_settings.namespace,
        local_ttl=caches.DEDUP_LOCAL_TTL,
        redis_ttl=caches.DEDUP_REDIS_TTL,
    )
    queues: set[str] = set()  # sent to by the servicer, whose backlog the sweeper reads
    servicer = DispatcherServicer(
        store,
        broker,
        routes=caches.RouteCache(routes),
        dedup=caches.DedupCache(dedup),
        run_status=RunStatusCache(cache_redis, redis_settings.namespace),
        limits=LimitSettings.from_env().limits(),
        queues=queues,
    )
    watch = EpochWatch(broker.client, redis_settings.namespace)
    sweeper = Sweeper(store, broker, dispatcher, watch=watch, queues=queues)

    def on_stop() -> None:
        sweeper.stop()
        broker.close()
        cache_redis.close()
        channel.close()
        provider.shutdown()  # flush the spans still buffered

    serve(
        Service(
            name="dispatcher",
            address=network.dispatcher_addr,
            register=lambda server: pb_grpc.add_DispatcherServiceServicer_to_server(
                servicer, server
            ),
            service_names=full_names([dispatcher_service_pb2.DESCRIPTOR]),
            on_start=sweeper.start,
            on_stop=on_stop,
            # Its requests carry ids and keys (at most 500 starts of a few hundred bytes).
            max_receive_bytes=4 * MIB,
        ),
        process.grace,
        traced=telemetry.tracing,
    )
