"""Reconciling a billing period: the billing job's own database against the payment
gateway's charges, the way a finance team would check a night's billing.

Read-only on both sides. The gateway is the truth about money moved: an invoice of
the period charged more than once there is a duplicate charge, one not charged at all
is a missing charge. The job's own record of a charge must name the gateway's charge.

``reconcile_suite`` is what the demo's driver (``cronwave_billing.demo.driver``: ``cronwave
demo billing`` and the bench) calls after a run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import grpc
import sqlalchemy as sa

from cronwave_billing.settings import BillingDemoSettings
from cronwave_billing.v1 import payment_gateway_service_pb2 as gateway_pb
from cronwave_billing.v1 import payment_gateway_service_pb2_grpc as gateway_grpc

PAGE = 10_000


@dataclass(frozen=True)
class Reconciliation:
    period: str
    customers: int
    invoices: int
    gateway_charges: int  # charges at the gateway for the period's invoices
    duplicates: int  # charges beyond the first for an invoice
    missing: int  # invoices with no charge at the gateway
    unrecorded: int  # charged invoices whose record in the job's database is absent or wrong

    @property
    def ok(self) -> bool:
        """No invoice charged twice and none left uncharged."""
        return self.duplicates == 0 and self.missing == 0


def billing_engine(url: str) -> sa.Engine:
    parsed = sa.make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return sa.create_engine(parsed)


def gateway_charges(gateway: Any, timeout: timedelta) -> list[gateway_pb.Charge]:
    """Every charge the gateway made, page by page."""
    found: list[gateway_pb.Charge] = []
    after = 0
    while True:
        page = gateway.ListCharges(
            gateway_pb.ListChargesRequest(after_seq=after, limit=PAGE),
            timeout=timeout.total_seconds(),
        )
        found.extend(page.charges)
        if not page.next_after_seq:
            return found
        after = page.next_after_seq


def reconcile(
    billing_url: str,
    gateway: Any,  # PaymentGatewayServiceStub
    period: str,
    timeout: timedelta = timedelta(seconds=30),
) -> Reconciliation:
    """Compare ``period``'s invoices in the billing database at ``billing_url`` with
    the charges of ``gateway``."""
    engine = billing_engine(billing_url)
    try:
        with engine.connect() as conn:
            customers = conn.execute(sa.text("SELECT count(*) FROM customers")).scalar_one()
            invoice_ids = set(
                conn.execute(
                    sa.text("SELECT id FROM invoices WHERE period = :period"), {"period": period}
                ).scalars()
            )
            rows = conn.execute(
                sa.text(
                    "SELECT c.invoice_id, c.gateway_charge_id FROM charges c "
                    "JOIN invoices i ON i.id = c.invoice_id WHERE i.period = :period"
                ),
                {"period": period},
            ).all()
            recorded: dict[int, str] = {int(row[0]): str(row[1]) for row in rows}
    finally:
        engine.dispose()
    per_invoice: Counter[int] = Counter()
    charge_ids: dict[int, set[str]] = {}
    for charge in gateway_charges(gateway, timeout):
        if not charge.invoice_id.isdigit() or int(charge.invoice_id) not in invoice_ids:
            continue  # another period's, or another biller's
        invoice_id = int(charge.invoice_id)
        per_invoice[invoice_id] += 1
        charge_ids.setdefault(invoice_id, set()).add(charge.charge_id)
    return Reconciliation(
        period=period,
        customers=int(customers),
        invoices=len(invoice_ids),
        gateway_charges=sum(per_invoice.values()),
        duplicates=sum(n - 1 for n in per_invoice.values() if n > 1),
        missing=sum(1 for i in invoice_ids if per_invoice[i] == 0),
        unrecorded=sum(1 for i, ids in charge_ids.items() if recorded.get(i) not in ids),
    )


def reconcile_suite(
    env: Mapping[str, str], gateway: grpc.Channel, period: str, timeout: timedelta
) -> Reconciliation:
    """``reconcile`` the billing database a suite's workers use (from its environment
    ``env``) against the gateway reached through ``gateway``."""
    url = BillingDemoSettings.from_env(env).billing_database_url
    return reconcile(url, gateway_grpc.PaymentGatewayServiceStub(gateway), period, timeout)
