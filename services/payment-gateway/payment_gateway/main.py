"""The payment-gateway process."""

from __future__ import annotations

from cronwave.v1 import payment_gateway_service_pb2
from cronwave.v1 import payment_gateway_service_pb2_grpc as pb_grpc
from cronwave_core.bootstrap import Service, full_names, serve
from cronwave_core.errors import ConfigurationError
from cronwave_core.settings import Settings
from cronwave_core.telemetry import init_tracing
from payment_gateway.faults import NO_FAULTS, FaultHooks, Faults
from payment_gateway.ledger import Ledger, create_gateway_engine
from payment_gateway.servicer import PaymentGatewayServicer

TIMEOUT_AFTER_COMMIT_VAR = "CRONWAVE_GATEWAY_TIMEOUT_AFTER_COMMIT"


def faults_from_settings(settings: Settings) -> FaultHooks:
    """The drills of a gateway started for tests (``settings.test_hooks``), armed at
    start-up by ``CRONWAVE_GATEWAY_TIMEOUT_AFTER_COMMIT=N``: the answers of the first N
    charge calls are held past their callers' deadlines. ``NO_FAULTS`` in any other."""
    if not settings.test_hooks:
        return NO_FAULTS
    raw = settings.extra.get(TIMEOUT_AFTER_COMMIT_VAR) or "0"
    try:
        count = int(raw)
    except ValueError as exc:
        raise ConfigurationError(
            f"{TIMEOUT_AFTER_COMMIT_VAR}: expected a whole number of calls, got {raw!r}"
        ) from exc
    if count < 0:
        raise ConfigurationError(f"{TIMEOUT_AFTER_COMMIT_VAR}: must not be negative, got {count}")
    return Faults(timeout_after_commit=count)


def main() -> None:
    settings = Settings.from_env()
    faults = faults_from_settings(settings)
    provider = init_tracing("payment-gateway", settings)
    ledger = Ledger(create_gateway_engine(settings.gateway_database_url))
    servicer = PaymentGatewayServicer(ledger, faults)

    def on_stop() -> None:
        ledger.dispose()
        provider.shutdown()  # flush the spans still buffered

    serve(
        Service(
            name="payment-gateway",
            address=settings.gateway_addr,
            register=lambda server: pb_grpc.add_PaymentGatewayServiceServicer_to_server(
                servicer, server
            ),
            service_names=full_names([payment_gateway_service_pb2.DESCRIPTOR]),
            on_stop=on_stop,
        ),
        settings,
    )
