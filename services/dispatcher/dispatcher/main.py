"""The dispatcher process."""

from __future__ import annotations

from cronwave.v1 import dispatcher_service_pb2
from cronwave.v1 import dispatcher_service_pb2_grpc as pb_grpc
from cronwave.v1 import workflow_store_service_pb2_grpc as store_grpc
from cronwave_core.bootstrap import Service, full_names, serve
from cronwave_core.caching import RunStatusCache, TwoTierCache, redis_client
from cronwave_core.faults import fault_hooks
from cronwave_core.queue_epoch import EpochWatch
from cronwave_core.queueing import make_broker
from cronwave_core.rpc import open_channel
from cronwave_core.settings import Settings
from cronwave_core.telemetry import init_tracing
from dispatcher import caches
from dispatcher.servicer import DispatcherServicer
from dispatcher.sweeper import Sweeper, SweepSettings


def main() -> None:
    settings = Settings.from_env()
    provider = init_tracing("dispatcher", settings)
    broker = make_broker(settings)
    channel = open_channel(settings.store_addr, settings.rpc_timeout)
    store = store_grpc.WorkflowStoreServiceStub(channel)
    faults = fault_hooks(settings)
    cache_redis = redis_client(settings.redis_url)
    routes = TwoTierCache(
        "route",
        "dispatch",
        client=cache_redis,
        namespace=settings.namespace,
        local_ttl=caches.ROUTE_LOCAL_TTL,
        redis_ttl=caches.ROUTE_REDIS_TTL,
        faults=faults,
    )
    dedup = TwoTierCache(
        "dedup",
        "dispatch",
        client=cache_redis,
        namespace=settings.namespace,
        local_ttl=caches.DEDUP_LOCAL_TTL,
        redis_ttl=caches.DEDUP_REDIS_TTL,
    )
    servicer = DispatcherServicer(
        store,
        broker,
        routes=caches.RouteCache(routes),
        dedup=caches.DedupCache(dedup),
        run_status=RunStatusCache(cache_redis, settings.namespace),
        faults=faults,
    )
    watch = EpochWatch(broker.client, settings.namespace)
    sweeper = Sweeper(store, broker, SweepSettings.from_env(settings.extra), watch=watch)
    sweeper.start()

    def on_stop() -> None:
        sweeper.stop()
        broker.close()
        cache_redis.close()
        channel.close()
        provider.shutdown()  # flush the spans still buffered

    serve(
        Service(
            name="dispatcher",
            address=settings.dispatcher_addr,
            register=lambda server: pb_grpc.add_DispatcherServiceServicer_to_server(
                servicer, server
            ),
            service_names=full_names([dispatcher_service_pb2.DESCRIPTOR]),
            on_stop=on_stop,
        ),
        settings,
    )
