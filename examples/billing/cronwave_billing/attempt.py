"""One attempt of ``billing.nightly`` (see ``cronwave_billing.job`` for the phases and
why a repeated attempt charges no invoice twice)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from cronwave import JobContext
from cronwave_billing.charges import ChargePhase
from cronwave_billing.config import BillingSettings
from cronwave_billing.gateway_client import GatewayBatches
from cronwave_billing.plan import CHARGES, DONE, INVOICES, BillingPlan, Progress
from cronwave_billing.schema import (
    charges,
    create_billing_engine,
    customers,
    insert,
    invoices,
    seed_statement,
)
from cronwave_billing.v1 import payment_gateway_service_pb2_grpc as gateway_grpc
from cronwave_core.rpc import open_channel
from cronwave_core.telemetry.spans import hop_span
from cronwave_core.telemetry.vocabulary import Hop, Kind

SEED_CHUNK = 100_000


def run_attempt(ctx: JobContext, config: BillingSettings) -> Mapping[str, Any]:
    """Bill ``ctx.payload["customers"]`` customers (seeded once) for the run's period
    with its own database engine and gateway channel, closed at the end."""
    plan = BillingPlan.from_payload(ctx.payload, ctx.fire_time)
    # Its tables are created when missing, so the first attempt's engine takes a while.
    with hop_span("billing.connect", Hop.EXECUTE, Kind.DATABASE):
        engine = create_billing_engine(config.database_url)
        channel = open_channel(config.gateway_addr, plan.gateway_timeout)
    try:
        gateway = GatewayBatches(
            gateway_grpc.PaymentGatewayServiceStub(channel),
            config.gateway_addr,
            plan.gateway_timeout,
            plan.gateway_attempts,
            between=lambda: ctx.heartbeat(None),
        )
        return _Attempt(ctx, plan, engine, gateway, config).run()
    finally:
        channel.close()
        engine.dispose()


class _Attempt:
    def __init__(
        self,
        ctx: JobContext,
        plan: BillingPlan,
        engine: sa.Engine,
        gateway: GatewayBatches,
        config: BillingSettings,
    ) -> None:
        self.ctx = ctx
        self.plan = plan
        self.engine = engine
        self.gateway = gateway
        self.config = config
        self.attrs = {"cronwave.run_id": ctx.run_id, "billing.period": plan.period}
        self.invoices_created = 0

    def checkpoint(self, progress: Progress) -> Progress:
        """Save where the attempt is, and tell people watching the run how far it got:
        customers invoiced, then customers charged (one invoice per customer)."""
        self.ctx.checkpoint.save(progress.to_checkpoint())
        if progress.phase == INVOICES:
            done = min(progress.last_customer_id, progress.customers)
            self.ctx.progress(done, progress.customers, "customers invoiced")
        else:
            self.ctx.progress(progress.charged, progress.invoices, "customers charged")
        return progress

    def run(self) -> Mapping[str, Any]:
        started = time.monotonic()
        progress = Progress.resume(self.ctx.checkpoint.load(), self.plan.period)
        resumed = progress.phase != INVOICES or progress.last_customer_id > 0
        if resumed:
            self.ctx.logger.info("resuming %s from %s", self.plan.period, progress)
        progress = replace(progress, customers=self.seed())
        if progress.phase == INVOICES:
            progress = self.invoice_phase(progress)
        invoice_count, charged = self.period_counts()
        progress = self.checkpoint(
            replace(
                progress,
                phase=CHARGES if progress.phase == INVOICES else progress.phase,
                invoices=invoice_count,
                charged=charged,
            )
        )
        phase = ChargePhase(
            self.ctx, self.plan, self.engine, self.gateway, self.config, self.checkpoint, self.attrs
        )
        progress = phase.run(progress)
        invoice_count, charged = self.period_counts()
        progress = self.checkpoint(
            replace(progress, phase=DONE, invoices=invoice_count, charged=charged)
        )
        return {
            "period": self.plan.period,
            "customers": progress.customers,
            "invoices": invoice_count,
            "charges": charged,
            "invoices_created": self.invoices_created,
            "charges_recorded": phase.recorded,
            "gateway_replays": phase.replayed,
            "gateway_retries": self.gateway.retries,
            "resumed": resumed,
            "seconds": round(time.monotonic() - started, 3),
        }

    # phase 0 ------------------------------------------------------------------
    def seed(self) -> int:
        """Customers 1..N exist (created once, in bulk, inside the database); returns
        how many customers there are."""
        with (
            hop_span("billing.customers", Hop.EXECUTE, Kind.DATABASE, self.attrs),
            self.engine.connect() as conn,
        ):
            have = conn.execute(sa.select(sa.func.count()).select_from(customers)).scalar_one()
        if have < self.plan.customers:
            with hop_span("billing.seed", Hop.EXECUTE, Kind.DATABASE, self.attrs):
                for low in range(1, self.plan.customers + 1, SEED_CHUNK):
                    high = min(low + SEED_CHUNK - 1, self.plan.customers)
                    with self.engine.begin() as conn:
                        conn.execute(seed_statement(self.engine, low, high))
                    self.ctx.heartbeat(None)
            with self.engine.connect() as conn:
                have = conn.execute(sa.select(sa.func.count()).select_from(customers)).scalar_one()
        return int(have)

    # phase 1 ------------------------------------------------------------------
    def invoice_phase(self, progress: Progress) -> Progress:
        with self.engine.connect() as conn:
            top = conn.execute(sa.select(sa.func.max(customers.c.id))).scalar_one() or 0
        now = datetime.now(UTC)
        last = progress.last_customer_id
        while last < top:
            upto = min(last + self.plan.invoice_batch, top)
            source = sa.select(
                customers.c.id,
                sa.literal(self.plan.period, sa.String),
                customers.c.monthly_cents,
                sa.literal(self.plan.currency, sa.String),
                sa.literal(self.ctx.run_id, sa.String),
                sa.literal(now, sa.DateTime(timezone=True)),
            ).where(customers.c.id > last, customers.c.id <= upto)
            statement = (
                insert(self.engine, invoices)
                .from_select(
                    ["customer_id", "period", "amount_cents", "currency", "run_id", "created_at"],
                    source,
                )
                .on_conflict_do_nothing(index_elements=["customer_id", "period"])
            )
            with (
                hop_span("billing.invoices", Hop.EXECUTE, Kind.DATABASE, self.attrs),
                self.engine.begin() as conn,
            ):
                result = conn.execution_options(preserve_rowcount=True).execute(statement)
                self.invoices_created += result.rowcount
            last = upto
            progress = self.checkpoint(replace(progress, last_customer_id=last))
        return progress

    def period_counts(self) -> tuple[int, int]:
        """(invoices of the period, of which with a recorded charge)."""
        with self.engine.connect() as conn:
            invoiced = conn.execute(
                sa.select(sa.func.count())
                .select_from(invoices)
                .where(invoices.c.period == self.plan.period)
            ).scalar_one()
            charged = conn.execute(
                sa.select(sa.func.count())
                .select_from(charges.join(invoices, charges.c.invoice_id == invoices.c.id))
                .where(invoices.c.period == self.plan.period)
            ).scalar_one()
        return int(invoiced), int(charged)
