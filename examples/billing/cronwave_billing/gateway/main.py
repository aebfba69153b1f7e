"""The payment-gateway process."""

from __future__ import annotations

from cronwave_billing.gateway.faults import NO_FAULTS, FaultHooks, Faults
from cronwave_billing.gateway.ledger import Ledger, create_gateway_engine
from cronwave_billing.gateway.servicer import PaymentGatewayServicer
from cronwave_billing.settings import BillingDemoSettings, BillingDrills
from cronwave_billing.v1 import payment_gateway_service_pb2
from cronwave_billing.v1 import payment_gateway_service_pb2_grpc as pb_grpc
from cronwave_core.bootstrap import Service, full_names, serve
from cronwave_core.entry import entry_point
from cronwave_core.settings import ProcessSettings, TelemetrySettings, TestHooks
from cronwave_core.telemetry.tracing import init_tracing


def faults_from_settings(hooks: TestHooks, drills: BillingDrills) -> FaultHooks:
    """The drills of a gateway started for tests (``hooks.enabled``), armed at
    start-up by ``CRONWAVE_GATEWAY_TIMEOUT_AFTER_COMMIT=N``: the answers of the first N
    charge calls are held past their callers' deadlines. ``NO_FAULTS`` in any other."""
    if not hooks.enabled:
        return NO_FAULTS
    return Faults(timeout_after_commit=drills.gateway_timeout_after_commit)


@entry_point("payment-gateway")
def main() -> None:
    process = ProcessSettings.from_env()
    demo = BillingDemoSettings.from_env()
    telemetry = TelemetrySettings.from_env()
    faults = faults_from_settings(TestHooks.from_env(), BillingDrills.from_env())
    provider = init_tracing("payment-gateway", telemetry)
    ledger = Ledger(create_gateway_engine(demo.gateway_database_url))
    servicer = PaymentGatewayServicer(ledger, faults)

    def on_stop() -> None:
        ledger.dispose()
        provider.shutdown()  # flush the spans still buffered

    serve(
        Service(
            name="payment-gateway",
            address=demo.gateway_addr,
            register=lambda server: pb_grpc.add_PaymentGatewayServiceServicer_to_server(
                servicer, server
            ),
            service_names=full_names([payment_gateway_service_pb2.DESCRIPTOR]),
            on_stopping=servicer.stop_holding,
            on_stop=on_stop,
        ),
        process.grace,
        traced=telemetry.tracing,
    )
