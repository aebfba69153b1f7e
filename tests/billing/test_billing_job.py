"""billing.nightly over its own database and a real payment-gateway process: each
invoice charged once however often, and wherever, the job is cut short and resumed."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from cronwave import Checkpoint, JobContext
from cronwave_billing.config import BillingSettings
from cronwave_billing.gateway_client import idempotency_key
from cronwave_billing.job import BillingJob, billing_job_type
from cronwave_billing.schema import charges, create_billing_engine, customers, invoices
from cronwave_billing.v1 import payment_gateway_service_pb2 as gateway_pb
from cronwave_core.errors import ConfigurationError, InvalidArgument, Unavailable
from tests.billing.conftest import NewDatabase
from tests.harness.beats import Beats
from tests.harness.gateway import GatewayProcess, charged_twice
from tests.harness.tls import process_identity

pytestmark = pytest.mark.slow

FIRE = datetime(2024, 5, 1, 2, 0, tzinfo=UTC)


def context(
    payload: dict[str, Any],
    beats: Beats | None = None,
    *,
    run_id: str = "run-1",
    fire_time: datetime = FIRE,
    checkpoint: dict[str, Any] | None = None,
    attempt: int = 1,
) -> JobContext:
    return JobContext(
        run_id=run_id,
        schedule_id="nightly-billing",
        fire_time=fire_time,
        attempt=attempt,
        payload=payload,
        checkpoint=Checkpoint(checkpoint),
        job_type="billing.nightly",
        on_heartbeat=beats or Beats(),
    )


@pytest.fixture
def billing_url(new_database: NewDatabase) -> str:
    return new_database("billing")


@pytest.fixture
def job(billing_url: str, gateway: GatewayProcess) -> Iterator[BillingJob]:
    # The job runs in this process, which calls the gateway as a worker would.
    with process_identity("worker"):
        yield BillingJob(BillingSettings(database_url=billing_url, gateway_addr=gateway.addr))


@pytest.fixture
def db(billing_url: str) -> Iterator[sa.Engine]:
    engine = create_billing_engine(billing_url)
    yield engine
    engine.dispose()


def rows(db: sa.Engine, table: sa.Table) -> int:
    with db.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


def test_a_period_is_billed_once_however_often_it_runs(
    job: BillingJob, gateway: GatewayProcess, db: sa.Engine
) -> None:
    # Given a fresh billing database, when the nightly run for 2024-05-01 runs
    beats = Beats()
    first = job(context({"customers": 250, "charge_batch": 100, "invoice_batch": 100}, beats))
    # Then every customer has one invoice, charged once at the gateway and recorded
    assert first["period"] == "2024-05-01"
    assert (first["customers"], first["invoices"], first["charges"]) == (250, 250, 250)
    assert (first["invoices_created"], first["charges_recorded"]) == (250, 250)
    assert first["gateway_replays"] == 0 and not first["resumed"]
    assert gateway.count().charges == 250
    # and progress was checkpointed per batch, phase by phase
    phases = [c["phase"] for c in beats.checkpoints]
    assert phases[0] == "invoices" and phases[-1] == "done"
    assert [c["last_customer_id"] for c in beats.checkpoints[:3]] == [100, 200, 250]
    assert [c["last_invoice_id"] for c in beats.checkpoints if c["phase"] == "charges"][-3:] == [
        100, 200, 250,
    ]  # fmt: skip

    # When the same period runs again (a duplicate run, or a retry from scratch)
    again = job(context({"customers": 250}, run_id="run-2"))
    # Then nothing new is invoiced, charged or recorded
    assert (again["invoices_created"], again["charges_recorded"]) == (0, 0)
    assert gateway.count().charges == 250
    assert (rows(db, invoices), rows(db, charges)) == (250, 250)

    # When the next night runs, it bills the new period only
    night = job(context({"customers": 250}, fire_time=FIRE + timedelta(days=1)))
    assert night["period"] == "2024-05-02" and night["charges_recorded"] == 250
    assert gateway.count().charges == 500
    assert rows(db, customers) == 250  # seeded once


def test_a_crash_between_the_charge_and_its_record_heals_on_resume(
    job: BillingJob, gateway: GatewayProcess, db: sa.Engine
) -> None:
    # Given a period whose 60 invoices the gateway charged under their keys while the
    # job's database recorded none of it: the state a worker that died after the
    # gateway's answers and before its own commit leaves behind
    job(context({"customers": 60, "period": "p0"}))
    with db.begin() as conn:
        conn.execute(sa.delete(charges))
    gateway_count = gateway.count().charges
    # When the resumed attempt runs from a checkpoint inside the charge phase
    result = job(
        context(
            {"customers": 60, "period": "p0"},
            checkpoint={"period": "p0", "phase": "charges", "last_invoice_id": 0},
            attempt=2,
        )
    )
    # Then it asked again with the same keys, got the first charges back, and recorded
    # them: no new charge at the gateway
    assert result["resumed"]
    assert result["gateway_replays"] == 60
    assert result["charges_recorded"] == 60
    assert gateway.count().charges == gateway_count == 60
    with db.connect() as conn:
        keys = conn.execute(
            sa.select(charges.c.invoice_id, charges.c.idempotency_key).order_by(
                charges.c.invoice_id
            )
        ).all()
    # the keys are the invoice's alone, the same in every process and attempt
    assert keys and all(key == f"inv-{invoice}" for invoice, key in keys)
    assert idempotency_key(42) == "inv-42"
    assert charged_twice(gateway.database_url) == []


def test_a_resumed_attempt_skips_what_its_checkpoint_says_is_done(
    job: BillingJob, db: sa.Engine
) -> None:
    # Given a first attempt that finished the invoices and charged invoices 1-40
    job(context({"customers": 40, "period": "p1"}))
    with db.begin() as conn:  # 20 more customers arrived before the retry
        conn.execute(
            customers.insert(),
            [{"id": i, "name": f"late-{i}", "monthly_cents": 500} for i in range(41, 61)],
        )
        conn.execute(
            sa.text(
                "INSERT INTO invoices (customer_id, period, amount_cents, currency, run_id, "
                "created_at) SELECT id, 'p1', monthly_cents, 'eur', 'run-1', :now "
                "FROM customers WHERE id > 40"
            ),
            {"now": datetime.now(UTC)},
        )
    # When the next attempt resumes from the checkpoint after invoice 40
    beats = Beats()
    result = job(
        context(
            {"customers": 60, "period": "p1"},
            beats,
            checkpoint={"period": "p1", "phase": "charges", "last_invoice_id": 40},
            attempt=2,
        )
    )
    # Then it charges only the invoices after it, without redoing the invoice phase
    assert result["charges_recorded"] == 20 and result["invoices_created"] == 0
    assert result["charges"] == 60
    assert beats.checkpoints[0]["phase"] == "charges"


def test_the_gateway_timing_out_after_committing_causes_no_second_charge(
    job: BillingJob, gateway: GatewayProcess
) -> None:
    # Given a gateway that commits the next batch and answers only after the deadline
    gateway.stub.SetFaults(gateway_pb.SetFaultsRequest(timeout_after_commit=1), timeout=10)
    # When the job runs with a short gateway deadline
    result = job(context({"customers": 30, "charge_batch": 10, "gateway_timeout": 0.5}))
    # Then the batch was asked again with the same keys: replayed, not charged twice
    assert result["gateway_retries"] == 1
    assert result["gateway_replays"] == 10
    assert result["charges"] == 30
    counts = gateway.count()
    assert (counts.charges, counts.invoices, counts.invoices_charged_twice) == (30, 30, 0)


def test_a_checkpoint_follows_every_batch_of_work(job: BillingJob) -> None:
    # Given 3,000 customers, invoiced in ranges of 1,000 and charged in batches of 200
    beats = Beats()
    # When the job runs
    job(context({"customers": 3000, "invoice_batch": 1000, "charge_batch": 200}, beats))
    # Then a checkpoint went out after each range and after each batch, so a resumed
    # attempt repeats at most one batch, however long a batch takes
    phases = [c["phase"] for c in beats.checkpoints]
    assert phases == ["invoices"] * 3 + ["charges"] * 16 + ["done"]
    ranges = [c["last_customer_id"] for c in beats.checkpoints[:3]]
    assert ranges == [1000, 2000, 3000]
    charged = [c["charged"] for c in beats.checkpoints if c["phase"] == "charges"]
    assert charged == list(range(0, 3001, 200))
    # (how far apart in time they came depends on the machine: printed, not asserted)
    gaps = [b - a for a, b in zip(beats.times, beats.times[1:], strict=False)]
    print(f"\n{len(beats.times)} beats, at most {max(gaps) * 1000:.0f} ms apart")


def test_an_unreachable_gateway_fails_the_attempt_with_what_to_do(billing_url: str) -> None:
    job = BillingJob(BillingSettings(database_url=billing_url, gateway_addr="127.0.0.1:9"))
    with pytest.raises(Unavailable) as caught:
        job(context({"customers": 5, "gateway_attempts": 2, "gateway_timeout": 1}))
    assert (
        "127.0.0.1:9" in caught.value.message and "cronwave_billing.gateway" in caught.value.message
    )


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"customers": 0}, "payload.customers"),
        ({"customers": "100"}, "payload.customers"),
        ({"charge_batch": 10_000}, "payload.charge_batch"),
        ({"period": ""}, "payload.period"),
        ({"currency": "EUR"}, "payload.currency"),
        ({"gateway_timeout": 0}, "payload.gateway_timeout"),
    ],
)
def test_bad_payload_names_the_field(job: BillingJob, payload: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        job(context(payload))
    assert caught.value.field == field


def test_a_database_of_an_older_layout_is_refused_with_what_to_do(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE charges (id INTEGER PRIMARY KEY, invoice_id INTEGER)"))
    engine.dispose()
    with pytest.raises(ConfigurationError) as caught:
        create_billing_engine(url)
    assert "CRONWAVE_BILLING_DATABASE_URL" in caught.value.message
    assert "gateway_charge_id" in caught.value.message


def test_the_job_type_is_financial_with_a_short_heartbeat_timeout(tmp_path: Any) -> None:
    settings = BillingSettings.from_env({"CRONWAVE_DATA_DIR": str(tmp_path)})
    job_type = billing_job_type(settings, queue="billing")
    assert (job_type.name, job_type.queue, job_type.financial) == (
        "billing.nightly",
        "billing",
        True,
    )
    assert job_type.heartbeat_timeout == timedelta(seconds=3)
    assert job_type.duration_limit > timedelta(0)
    tuned = billing_job_type(
        BillingSettings.from_env(
            {"CRONWAVE_DATA_DIR": str(tmp_path), "CRONWAVE_BILLING_HEARTBEAT_TIMEOUT": "1.5"}
        )
    )
    assert tuned.heartbeat_timeout == timedelta(seconds=1.5)
    with pytest.raises(ConfigurationError, match="CRONWAVE_BILLING_CRASH_AFTER_CHARGES: expected"):
        BillingSettings.from_env(
            {"CRONWAVE_TEST_HOOKS": "1", "CRONWAVE_BILLING_CRASH_AFTER_CHARGES": "soon"}
        )
