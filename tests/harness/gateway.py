"""The billing demo's processes: a payment gateway on its own, and a billing suite
(store, gateway, dispatcher with its sweeper, workers started at will), each recorded in
a ``ProcessTable``; and the checks the billing tests make of the gateway's ledger."""

from __future__ import annotations

import signal
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
import sqlalchemy as sa

from cronwave._client import Client
from cronwave._models import Run
from cronwave_billing.reconcile import Reconciliation, reconcile
from cronwave_billing.v1 import payment_gateway_service_pb2 as gateway_pb
from cronwave_billing.v1 import payment_gateway_service_pb2_grpc as gateway_grpc
from cronwave_core.suite import Proc, SuiteConfig
from tests.harness.clients import client_for
from tests.harness.processes import ProcessTable
from tests.harness.suites import TrackedSuite
from tests.harness.tls import hop_channel
from tests.helpers import eventually, fresh

#: The gateway's process, as the billing example declares it (group cronwave.processes).
GATEWAY = "payment-gateway"

GRACE = timedelta(seconds=2)


def item(key: str, invoice: str = "1", amount: int = 1000, **fields: Any) -> gateway_pb.ChargeItem:
    return gateway_pb.ChargeItem(
        idempotency_key=key,
        customer_id=fields.get("customer_id", "c1"),
        invoice_id=invoice,
        amount_cents=amount,
        currency=fields.get("currency", "eur"),
    )


def charged_twice(gateway_url: str) -> list[tuple[str, int]]:
    """Straight from the gateway's database: invoices with more than one charge."""
    engine = sa.create_engine(gateway_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT invoice_id, count(*) FROM gateway_charges "
                    "GROUP BY invoice_id HAVING count(*) > 1"
                )
            ).all()
    finally:
        engine.dispose()
    return [(str(r[0]), int(r[1])) for r in rows]


class GatewayProcess:
    """``python -m cronwave_billing.gateway`` on a free port, with its own database; its drills
    (``SetFaults``) work only when it is started with ``test_hooks``."""

    def __init__(
        self,
        data_dir: Path,
        database_url: str,
        env: dict[str, str] | None = None,
        test_hooks: bool = False,
        table: ProcessTable | None = None,
    ):
        self.database_url = database_url
        self.table = table or ProcessTable("the payment-gateway process")
        self.suite = TrackedSuite(
            SuiteConfig(
                data_dir=data_dir,
                redis_url="redis://127.0.0.1:9/0",  # unused: no redis, no other service
                ports={},
                processes=(GATEWAY,),
                env={
                    "CRONWAVE_GATEWAY_DATABASE_URL": database_url,
                    "CRONWAVE_TRACING": "off",
                    **(env or {}),
                },
                grace=GRACE,
                test_hooks=test_hooks,
            ),
            self.table,
        )
        self.channel: grpc.Channel | None = None
        self.stub: Any = None

    @property
    def addr(self) -> str:
        return self.suite.address(GATEWAY)

    @property
    def proc(self) -> Proc:
        return self.suite.procs[GATEWAY]

    def start(self) -> GatewayProcess:
        self.suite.start_service(GATEWAY)
        self.channel = hop_channel(self.suite, self.addr)
        self.stub = gateway_grpc.PaymentGatewayServiceStub(self.channel)
        return self

    def count(self) -> gateway_pb.CountChargesResponse:
        return self.stub.CountCharges(gateway_pb.CountChargesRequest(), timeout=10)

    def stop(self) -> None:
        if self.channel is not None:
            self.channel.close()
        self.suite.stop()


class BillingSuite:
    """workflow-store, payment-gateway and dispatcher as real processes; workers are
    started (and killed) by the test. The billing job's heartbeat timeout is short so
    a killed worker's run is taken over within about a second and a half."""

    def __init__(
        self,
        data_dir: Path,
        *,
        database_url: str,
        redis_url: str,
        namespace: str,
        billing_url: str,
        gateway_url: str,
        env: dict[str, str],
        test_hooks: bool = False,
        table: ProcessTable | None = None,
    ) -> None:
        self.billing_url = billing_url
        self.gateway_url = gateway_url
        self.table = table or ProcessTable("the billing suite's processes")
        self.suite = TrackedSuite(
            SuiteConfig(
                data_dir=data_dir,
                database_url=database_url,
                redis_url=redis_url,
                ports={},
                processes=(GATEWAY,),
                env={
                    "CRONWAVE_NAMESPACE": namespace,
                    "CRONWAVE_BILLING_DATABASE_URL": billing_url,
                    "CRONWAVE_GATEWAY_DATABASE_URL": gateway_url,
                    "CRONWAVE_BILLING_HEARTBEAT_TIMEOUT": "1",
                    "CRONWAVE_SWEEP_INTERVAL": "0.2",
                    "CRONWAVE_JOB_WARM_PROCESSES": "1",
                    "CRONWAVE_TRACING": "off",
                    **env,
                },
                grace=GRACE,
                test_hooks=test_hooks,
            ),
            self.table,
        )
        self.client: Client | None = None
        self.channel: grpc.Channel | None = None
        self.gateway: Any = None
        self._workers = 0

    def start(self) -> BillingSuite:
        for service in ("workflow-store", GATEWAY, "dispatcher"):
            self.suite.start_service(service)
        self.client = client_for(self.suite)
        self.channel = hop_channel(self.suite, "payment-gateway")
        self.gateway = gateway_grpc.PaymentGatewayServiceStub(self.channel)
        return self

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
        if self.channel is not None:
            self.channel.close()
        self.suite.stop()

    @property
    def api(self) -> Client:
        assert self.client is not None, "start() the suite first"
        return self.client

    # workers -------------------------------------------------------------------
    def start_worker(self, wait: bool = True, **env: str) -> Proc:
        """A new worker process (its own name, port and log), with ``env`` on top."""
        index = self._workers
        self._workers += 1
        return self.suite.start_service("worker", index=index, wait=wait, extra_env=env)

    def kill(self, proc: Proc) -> None:
        """kill -9, and reap it."""
        if proc.popen is not None and proc.alive():
            proc.popen.send_signal(signal.SIGKILL)
            proc.popen.wait(timeout=10)

    def live_workers(self) -> list[Proc]:
        return [p for n, p in self.suite.procs.items() if n.startswith("worker") and p.alive()]

    # runs ------------------------------------------------------------------------
    def schedule(self, **payload: Any) -> str:
        schedule_id = fresh("billing")
        self.api.create_schedule(
            schedule_id, cron="0 2 * * *", time_zone="UTC", job_type="billing.nightly",
            payload=payload,
        )  # fmt: skip
        return schedule_id

    def trigger(self, schedule_id: str) -> Run:
        return self.api.trigger(schedule_id)

    def run(self, run_id: str) -> Run:
        return self.api.get_run(run_id)

    def finished(self, run_id: str, timeout: float = 60) -> Run:
        def done() -> Run:
            run = self.run(run_id)
            assert run.terminal, f"{run.state} attempt {run.attempt}"
            return run

        return eventually(done, timeout=timeout, interval=0.05, what=f"run {run_id} finished")

    def gateway_count(self) -> gateway_pb.CountChargesResponse:
        """The gateway's ledger totals, every period together."""
        response: gateway_pb.CountChargesResponse = self.gateway.CountCharges(
            gateway_pb.CountChargesRequest(), timeout=10
        )
        return response

    def reconcile(self, period: str) -> Reconciliation:
        return reconcile(self.billing_url, self.gateway, period)
