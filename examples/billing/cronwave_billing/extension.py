"""What the billing example adds to cronwave, declared by its entry point ``billing``
of the group ``cronwave.extensions`` (``cronwave_core.extensions``), as a user's job
package declares its own: its settings and drills, the payment gateway's identity and
the rules of the gateway's RPCs."""

from __future__ import annotations

from cronwave_billing.settings import BillingDemoSettings, BillingDrills
from cronwave_core.extensions import Extension
from cronwave_core.security.rules import rule

#: The gateway's service, as its proto declares it (cronwave_billing/v1).
GATEWAY_SERVICE = "cronwave_billing.v1.PaymentGatewayService"
#: The gateway's identity: the name in its certificate, its process and its Deployment.
GATEWAY_IDENTITY = "payment-gateway"

EXTENSION = Extension(
    settings=(BillingDemoSettings,),
    drills=(BillingDrills,),
    identities=(GATEWAY_IDENTITY,),
    rules={
        # only the worker's jobs charge
        f"/{GATEWAY_SERVICE}/Charge": rule("worker"),
        f"/{GATEWAY_SERVICE}/ChargeMany": rule("worker"),
        f"/{GATEWAY_SERVICE}/ListCharges": rule(role="viewer"),
        f"/{GATEWAY_SERVICE}/CountCharges": rule(role="viewer"),
        f"/{GATEWAY_SERVICE}/SetFaults": rule(role="admin"),
    },
)
