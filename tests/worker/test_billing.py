"""billing.nightly over its own database: one invoice and one charge per customer and
period, however many times the period is run."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa

from cronwave_core.errors import InvalidArgument
from worker.jobs import JobContext
from worker.jobs.billing import BillingJob, billing_job_type, charges, customers, invoices


class Recorder:
    """Collects what a job reports through ctx.heartbeat."""

    def __init__(self) -> None:
        self.checkpoints: list[dict[str, Any] | None] = []

    def __call__(self, checkpoint: dict[str, Any] | None) -> None:
        self.checkpoints.append(checkpoint)


def context(
    payload: dict[str, Any],
    recorder: Recorder,
    *,
    run_id: str = "run-1",
    fire_time: datetime = datetime(2024, 5, 1, 2, 0, tzinfo=UTC),
    checkpoint: dict[str, Any] | None = None,
) -> JobContext:
    return JobContext(
        run_id=run_id,
        schedule_id="nightly-billing",
        fire_time=fire_time,
        attempt=1,
        payload=payload,
        checkpoint=checkpoint or {},
        job_type="billing.nightly",
        on_heartbeat=recorder,
    )


def counts(job: BillingJob) -> tuple[int, int, int]:
    with job.engine.connect() as conn:
        return tuple(  # type: ignore[return-value]
            conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
            for t in (customers, invoices, charges)
        )


@pytest.fixture
def job(database_url: str) -> Any:
    billing = BillingJob(database_url)
    yield billing
    billing.dispose()


def test_a_period_is_billed_once_however_often_it_runs(job: BillingJob) -> None:
    # Given a fresh billing database
    first = Recorder()
    # When the nightly run for 2024-05-01 runs
    result = job(context({"customers": 120, "batch_size": 50}, first))
    # Then every seeded customer has one invoice and one charge for the period
    assert result == {"customers": 120, "invoices": 120, "charges": 120, "period": "2024-05-01"}
    assert counts(job) == (120, 120, 120)
    # and progress was checkpointed after each committed batch
    assert first.checkpoints == [
        {"period": "2024-05-01", "last_customer_id": 50},
        {"period": "2024-05-01", "last_customer_id": 100},
        {"period": "2024-05-01", "last_customer_id": 120},
    ]

    # When the same period runs again (a duplicate or a retried run)
    again = job(context({"customers": 120, "batch_size": 50}, Recorder(), run_id="run-2"))
    # Then nothing new is created
    assert again == {"customers": 120, "invoices": 0, "charges": 0, "period": "2024-05-01"}
    assert counts(job) == (120, 120, 120)

    # When the next night runs
    next_night = job(
        context({"customers": 120}, Recorder(), fire_time=datetime(2024, 5, 2, 2, tzinfo=UTC))
    )
    # Then it bills the new period only
    assert next_night["invoices"] == 120 and next_night["charges"] == 120
    assert counts(job) == (120, 240, 240)


def test_each_invoice_matches_its_charge(job: BillingJob) -> None:
    job(context({"customers": 10}, Recorder()))
    with job.engine.connect() as conn:
        rows = conn.execute(
            sa.select(invoices.c.customer_id, invoices.c.amount_cents, charges.c.amount_cents)
            .join(charges, charges.c.invoice_id == invoices.c.id)
            .order_by(invoices.c.customer_id)
        ).all()
    assert [r[0] for r in rows] == list(range(1, 11))
    assert all(r[1] == r[2] > 0 for r in rows)


def test_database_refuses_a_second_invoice_or_charge(job: BillingJob) -> None:
    job(context({"customers": 3}, Recorder()))
    with job.engine.connect() as conn:
        invoice_id = conn.execute(sa.select(invoices.c.id).limit(1)).scalar_one()
    now = datetime.now(UTC)
    with pytest.raises(sa.exc.IntegrityError), job.engine.begin() as conn:
        conn.execute(
            invoices.insert().values(
                customer_id=1, period="2024-05-01", amount_cents=1, run_id="x", created_at=now
            )
        )
    with pytest.raises(sa.exc.IntegrityError), job.engine.begin() as conn:
        conn.execute(
            charges.insert().values(
                invoice_id=invoice_id, amount_cents=1, status="captured", created_at=now
            )
        )


def test_a_retried_attempt_resumes_from_its_checkpoint(job: BillingJob) -> None:
    # Given a first attempt that stopped after billing customers 1..40
    job(context({"customers": 40}, Recorder()))
    with job.engine.begin() as conn:
        conn.execute(
            customers.insert(),
            [{"id": i, "name": f"late-{i}", "monthly_cents": 500} for i in range(41, 61)],
        )
    # When the retry starts from that checkpoint
    retry = Recorder()
    result = job(
        context(
            {"customers": 60},
            retry,
            checkpoint={"period": "2024-05-01", "last_customer_id": 40},
        )
    )
    # Then it bills only the customers after it
    assert result["invoices"] == 20 and result["charges"] == 20
    assert retry.checkpoints == [{"period": "2024-05-01", "last_customer_id": 60}]
    assert counts(job) == (60, 60, 60)


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"customers": 0}, "payload.customers"),
        ({"customers": "100"}, "payload.customers"),
        ({"batch_size": 10_000}, "payload.batch_size"),
        ({"period": ""}, "payload.period"),
    ],
)
def test_bad_payload_names_the_field(job: BillingJob, payload: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        job(context(payload, Recorder()))
    assert caught.value.field == field


def test_job_type_is_financial_and_bounded(tmp_path: Any) -> None:
    job_type = billing_job_type(f"sqlite:///{tmp_path / 'billing.db'}", queue="billing")
    assert job_type.name == "billing.nightly"
    assert job_type.financial
    assert job_type.queue == "billing"
    assert job_type.duration_limit.total_seconds() > 0
