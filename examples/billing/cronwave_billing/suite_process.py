"""The payment gateway as a suite runs it (``SuiteConfig(processes=("payment-gateway",))``):
declared to cronwave by this package's entry point ``payment-gateway`` of the group
``cronwave.processes``, as any package declares a server of its own."""

from __future__ import annotations

from cronwave_billing.extension import GATEWAY_SERVICE
from cronwave_billing.settings import GATEWAY_PORT
from cronwave_core.suite_processes import SuiteProcess

GATEWAY = SuiteProcess(
    module="cronwave_billing.gateway",
    grpc_service=GATEWAY_SERVICE,
    addr_var="GATEWAY_ADDR",
    port_key="gateway",
    default_port=GATEWAY_PORT,
)
