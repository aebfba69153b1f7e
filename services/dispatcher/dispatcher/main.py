"""The dispatcher process."""

from __future__ import annotations

from cronwave.v1 import dispatcher_service_pb2
from cronwave.v1 import dispatcher_service_pb2_grpc as pb_grpc
from cronwave.v1 import workflow_store_service_pb2_grpc as store_grpc
from cronwave_core.bootstrap import Service, full_names, serve
from cronwave_core.queueing import make_broker
from cronwave_core.rpc import open_channel
from cronwave_core.settings import Settings
from cronwave_core.telemetry import init_tracing
from dispatcher.servicer import DispatcherServicer


def main() -> None:
    settings = Settings.from_env()
    provider = init_tracing("dispatcher", settings)
    broker = make_broker(settings)
    channel = open_channel(settings.store_addr, settings.rpc_timeout)
    servicer = DispatcherServicer(store_grpc.WorkflowStoreServiceStub(channel), broker)

    def on_stop() -> None:
        broker.close()
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
