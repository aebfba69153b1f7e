"""``python -m workflow_store``: migrate the database, then serve until SIGTERM."""

from __future__ import annotations

import grpc
from cronwave_proto.v1 import api_key_service_pb2 as keys_pb
from cronwave_proto.v1 import api_key_service_pb2_grpc as keys_grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as api
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as api_grpc

from cronwave_core.bootstrap import Service, full_names, serve
from cronwave_core.entry import entry_point
from cronwave_core.settings import (
    DeadlineSettings,
    LeaseSettings,
    LimitSettings,
    NetworkSettings,
    ProcessSettings,
    StoreSettings,
    TelemetrySettings,
    TestHooks,
    TlsSettings,
)
from cronwave_core.settings_pools import PoolSettings
from cronwave_core.telemetry.tracing import init_tracing
from workflow_store import metrics, validate
from workflow_store.api_keys import ApiKeys, ApiKeyServicer
from workflow_store.db import Database, create_engine, migrate
from workflow_store.deadline_sweep import DeadlineSweep
from workflow_store.delivery_outbox import DeliveryOutbox
from workflow_store.delivery_relay import DeliveryRelay
from workflow_store.guards import GUARDS, Guards
from workflow_store.limits import Limits
from workflow_store.notifier import Notifications
from workflow_store.servicer import WorkflowStoreServicer
from workflow_store.store import Store

NAME = "workflow-store"


@entry_point(NAME)
def main() -> None:
    process = ProcessSettings.from_env()
    network = NetworkSettings.from_env()
    telemetry = TelemetrySettings.from_env()
    store_settings = StoreSettings.from_env()
    hooks = TestHooks.from_env()
    limits = LimitSettings.from_env().limits()
    validate.use(limits)
    deadlines = DeadlineSettings.from_env()
    provider = init_tracing(NAME, telemetry)
    pools = PoolSettings.from_env()
    engine = create_engine(store_settings.database_url, pools=pools)
    migrate(engine)
    db = Database(engine)
    store = Store(
        db,
        limits=Limits(payload_bytes=limits.payload_bytes),
        guards=Guards(
            missed_slot_ahead=GUARDS.missed_slot_ahead + hooks.missed_slots_ahead,
            placeholder_ahead=GUARDS.placeholder_ahead + hooks.missed_slots_ahead,
            lease_scopes=LeaseSettings.from_env().fenced_scopes(),
        ),
    )
    metrics.install(db)
    servicer = WorkflowStoreServicer(store)
    # Beside the store, not in it: each over the narrow port it uses.
    outbox = DeliveryOutbox(db)
    notifications = Notifications(
        outbox,
        timeout=deadlines.notify_timeout,
        attempts=deadlines.notify_attempts,
        backoff=deadlines.notify_backoff,
    )
    sweep = DeadlineSweep(store.deadlines, notifications, deadlines)
    relay = DeliveryRelay(outbox, notifications)
    api_keys = ApiKeys(db)
    tls = TlsSettings.from_env()

    def register(server: grpc.Server) -> None:
        api_grpc.add_WorkflowStoreServiceServicer_to_server(servicer, server)
        keys_grpc.add_ApiKeyServiceServicer_to_server(ApiKeyServicer(api_keys), server)

    def on_stopping() -> None:
        # Both told first, so that their waits for a tick in progress overlap within
        # the grace period rather than add up; the notifications they feed stop last.
        sweep.stop(wait=False)
        relay.stop(wait=False)
        sweep.stop()
        relay.stop()
        notifications.stop()
        store.changes.close_watchers()

    def on_stop() -> None:
        store.changes.wake_watchers()
        db.dispose()
        provider.shutdown()

    def on_start() -> None:
        notifications.start()
        relay.start()  # resumes what a stopped or crashed store left pending
        sweep.start()

    serve(
        Service(
            name=NAME,
            address=network.store_addr,
            register=register,
            service_names=full_names([api.DESCRIPTOR, keys_pb.DESCRIPTOR]),
            check_key=api_keys.key_check(tls.auth_cache_ttl),
            on_start=on_start,
            on_stopping=on_stopping,
            on_stop=on_stop,
            # Watch streams hold a thread each for as long as their callers listen.
            max_workers=pools.store_threads,
            max_receive_bytes=limits.receive_bytes,
        ),
        process.grace,
        traced=telemetry.tracing,
        hooks=hooks,
    )


if __name__ == "__main__":
    main()
