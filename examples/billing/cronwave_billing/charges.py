"""The charge phase of ``billing.nightly``: every invoice of the period charged once
through the payment gateway, and the charge recorded in the job's database.

Batch by batch, in invoice id order: the invoices without a recorded charge go to the
gateway in one ``ChargeMany``, each under the key derived from its invoice; the
answers are recorded in one transaction; the checkpoint moves past the batch. One
gateway call is in flight while the previous batch is recorded and the next selected,
and the checkpoint only ever names batches already recorded. A crash after the
gateway answered and before the record leaves charges without a record; the resumed
attempt sends those invoices again with the same keys and records the first charges
the gateway hands back.

A worker that stops gracefully makes a checkpoint raise ``WorkerStopping`` (the
checkpoint is kept): the phase then sends no further batch, records the one in flight,
checkpoints past it and stops, so the run is handed back at a batch boundary with no
charge left unrecorded.
"""

from __future__ import annotations

import contextvars
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, NoReturn

import sqlalchemy as sa

from cronwave import JobContext, WorkerStopping
from cronwave_billing.bulk import any_of, insert_skipping_conflicts
from cronwave_billing.config import BillingSettings
from cronwave_billing.gateway_client import GatewayBatches, GatewayRefused, idempotency_key
from cronwave_billing.plan import BillingPlan, Progress
from cronwave_billing.schema import charges, invoices
from cronwave_billing.v1 import payment_gateway_service_pb2 as gateway_pb
from cronwave_core.telemetry.spans import hop_span
from cronwave_core.telemetry.vocabulary import Hop, Kind

_STATUS = {gateway_pb.CHARGE_STATUS_SUCCEEDED: "succeeded"}

Results = list[gateway_pb.ChargeResult]


def kill_worker(worker_pid: int) -> NoReturn:
    """SIGKILL the worker this attempt runs for (``worker_pid``, when the job body runs
    in a job process of the worker) and this process: a crash that runs no cleanup."""
    if worker_pid:
        os.kill(worker_pid, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("SIGKILL returned")


def _answered(value: Results) -> Future[Results]:
    future: Future[Results] = Future()
    future.set_result(value)
    return future


class ChargePhase:
    """Phase 3 of one attempt. ``checkpoint`` reports progress to cronwave."""

    def __init__(
        self,
        ctx: JobContext,
        plan: BillingPlan,
        engine: sa.Engine,
        gateway: GatewayBatches,
        config: BillingSettings,
        checkpoint: Callable[[Progress], Progress],
        attrs: Mapping[str, Any],
    ) -> None:
        self.ctx = ctx
        self.plan = plan
        self.engine = engine
        self.gateway = gateway
        self.config = config
        self.checkpoint = checkpoint
        self.attrs = dict(attrs)
        self.recorded = 0  # charges this attempt recorded
        self.replayed = 0  # answers that were a key's earlier charge
        self.answers = 0  # gateway calls answered
        self.stopping = False  # the worker is stopping: finish the batch in flight, stop

    def run(self, progress: Progress) -> Progress:
        # The invoices were just bulk-loaded: without fresh statistics PostgreSQL
        # plans the batch query as a scan of every remaining invoice.
        with self.engine.begin() as conn:
            conn.execute(sa.text(f"ANALYZE {invoices.name}"))
        selected = progress.last_invoice_id
        inflight: tuple[Sequence[Any], list[Any], Future[Results]] | None = None
        with ThreadPoolExecutor(1, thread_name_prefix=f"gateway-{self.ctx.run_id}") as pool:
            while True:
                batch, due = ([], []) if self.stopping else self.next_batch(selected)
                if batch:
                    selected = batch[-1].id
                    call = contextvars.copy_context().run  # the job's trace, in the thread
                    request = pool.submit(call, self.submit, due) if due else _answered([])
                if inflight is not None:
                    progress = self.settle(progress, *inflight)
                if not batch:
                    if self.stopping:
                        raise WorkerStopping()
                    return progress
                inflight = (batch, due, request)

    def next_batch(self, last: int) -> tuple[Sequence[Any], list[Any]]:
        """The period's next invoices after ``last`` in id order, and those of them
        without a recorded charge. Two index look-ups, not one anti-join: a join's
        plan can walk every charge recorded so far, on each batch."""
        with self.engine.connect() as conn:
            batch = conn.execute(
                sa.select(
                    invoices.c.id,
                    invoices.c.customer_id,
                    invoices.c.amount_cents,
                    invoices.c.currency,
                )
                .where(invoices.c.period == self.plan.period, invoices.c.id > last)
                .order_by(invoices.c.id)
                .limit(self.plan.charge_batch)
            ).all()
            if not batch:
                return batch, []
            ids = [row.id for row in batch]
            recorded = set(
                conn.execute(
                    sa.select(charges.c.invoice_id).where(
                        any_of(charges.c.invoice_id, ids, self.engine.dialect.name)
                    )
                ).scalars()
            )
        return batch, [row for row in batch if row.id not in recorded]

    def submit(self, due: Sequence[Any]) -> Results:
        """Ask the gateway to charge each invoice, with the invoice's key."""
        with hop_span("billing.gateway", Hop.EXECUTE, Kind.APP, {**self.attrs, "n": len(due)}):
            return self.gateway.charge(
                [
                    gateway_pb.ChargeItem(
                        idempotency_key=idempotency_key(row.id),
                        customer_id=str(row.customer_id),
                        invoice_id=str(row.id),
                        amount_cents=row.amount_cents,
                        currency=row.currency,
                    )
                    for row in due
                ]
            )

    def settle(
        self, progress: Progress, batch: Sequence[Any], due: list[Any], request: Future[Results]
    ) -> Progress:
        """Wait for a batch's gateway answers, record them, and checkpoint past it."""
        if due:
            results = request.result()
            self.answers += 1
            if self.answers == self.config.crash_after_charges:
                self.ctx.logger.warning(
                    "failure drill: killing the worker after gateway answer %d, before "
                    "recording it",
                    self.answers,
                )
                kill_worker(self.config.worker_pid)
            new = self.record(due, results)
            self.recorded += new
            progress = replace(progress, charged=progress.charged + new)
        progress = replace(progress, last_invoice_id=batch[-1].id)
        try:
            return self.checkpoint(progress)
        except WorkerStopping:  # the checkpoint is kept; the batch in flight goes first
            self.stopping = True
            return progress

    def record(self, due: Sequence[Any], results: Sequence[gateway_pb.ChargeResult]) -> int:
        """Record the gateway's answers in one transaction; returns how many were new
        (an answer a concurrent attempt recorded first is skipped)."""
        now = datetime.now(UTC)
        rows = []
        for invoice, result in zip(due, results, strict=True):
            charge = result.charge
            if charge.invoice_id != str(invoice.id) or charge.amount_cents != invoice.amount_cents:
                raise GatewayRefused(
                    f"payment gateway answered charge {charge.charge_id} for invoice "
                    f"{charge.invoice_id} ({charge.amount_cents}) to the request for invoice "
                    f"{invoice.id} ({invoice.amount_cents})"
                )
            self.replayed += result.replayed
            rows.append(
                {
                    "invoice_id": invoice.id,
                    "gateway_charge_id": charge.charge_id,
                    "idempotency_key": charge.idempotency_key,
                    "amount_cents": charge.amount_cents,
                    "currency": charge.currency,
                    "status": _STATUS.get(charge.status, "unknown"),
                    "run_id": self.ctx.run_id,
                    "attempt": self.ctx.attempt,
                    "recorded_at": now,
                }
            )
        with (
            hop_span("billing.record", Hop.EXECUTE, Kind.DATABASE, self.attrs),
            self.engine.begin() as conn,
        ):
            return insert_skipping_conflicts(conn, charges, rows, ["invoice_id"])
