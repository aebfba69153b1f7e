"""Entry point: ``python -m cron_planner``."""

from __future__ import annotations

import grpc
from cronwave_proto.v1 import cron_planner_service_pb2 as pb
from cronwave_proto.v1 import cron_planner_service_pb2_grpc as pb_grpc

from cron_planner import metrics
from cron_planner.app import Planner
from cron_planner.servicer import CronPlannerServicer
from cronwave_core.bootstrap import Service, full_names, serve
from cronwave_core.entry import entry_point
from cronwave_core.limits import MIB
from cronwave_core.settings import NetworkSettings, ProcessSettings, TelemetrySettings
from cronwave_core.telemetry.tracing import init_tracing


@entry_point("cron-planner")
def main() -> None:
    process = ProcessSettings.from_env()
    network = NetworkSettings.from_env()
    telemetry = TelemetrySettings.from_env()
    provider = init_tracing("cron-planner", telemetry)
    planner = Planner.from_env()
    metrics.install(planner.elector.scope, planner.elector.is_leader)
    servicer = CronPlannerServicer(planner.status, planner.clock.now, planner.backfill)

    def register(server: grpc.Server) -> None:
        pb_grpc.add_CronPlannerServiceServicer_to_server(servicer, server)

    def on_stop() -> None:
        try:
            planner.stop()
        finally:
            provider.shutdown()

    serve(
        Service(
            name="cron-planner",
            address=network.planner_addr,
            register=register,
            service_names=full_names([pb.DESCRIPTOR]),
            on_start=planner.start,
            on_stop=on_stop,
            # Its largest request is a spec at its limits (about 1 MiB).
            max_receive_bytes=4 * MIB,
        ),
        process.grace,
        traced=telemetry.tracing,
    )
