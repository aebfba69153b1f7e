"""The job author's API without processes: the decorator and its refusals, the
context's checkpoint, cancellation flag and run-bound logger, and ``NonRetryable``."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import cronwave
from cronwave import Checkpoint, JobContext, JobType, NonRetryable, RetryPolicy

FIRE = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)


class Declined(NonRetryable):
    """A card declined: no retry helps."""


def context(**fields: Any) -> JobContext:
    return JobContext(run_id="run-1", schedule_id="s-1", fire_time=FIRE, attempt=1, **fields)


def test_the_decorator_makes_a_job_type_that_still_runs_the_function() -> None:
    # Given a function decorated with every option
    @cronwave.job(
        "acme.invoices",
        duration_limit=timedelta(minutes=30),
        retry=RetryPolicy(maximum_attempts=3),
        queue="critical",
        heartbeat_timeout=timedelta(seconds=9),
        non_retryable=(Declined, "LedgerClosed"),
    )
    def invoices(ctx: JobContext) -> dict[str, Any]:
        return {"run": ctx.run_id}

    # Then it is a JobType carrying them, and calling it runs the function
    assert isinstance(invoices, JobType)
    assert (invoices.name, invoices.queue) == ("acme.invoices", "critical")
    assert invoices.duration_limit == timedelta(minutes=30)
    assert invoices.heartbeat_interval == timedelta(seconds=3)
    assert invoices.retry_policy.maximum_attempts == 3
    assert invoices.retry_policy.non_retryable_errors == ("Declined", "LedgerClosed")
    assert invoices(context()) == {"run": "run-1"}


def test_a_financial_job_is_not_retried_and_non_retryable_adds_to_its_policy() -> None:
    @cronwave.job("acme.charge", duration_limit=timedelta(minutes=5), financial=True)
    def charge(ctx: JobContext) -> None:
        return None

    @cronwave.job(
        "acme.refund", duration_limit=timedelta(minutes=5), financial=True, non_retryable=[Declined]
    )
    def refund(ctx: JobContext) -> None:
        return None

    assert charge.retry == cronwave.NO_RETRY
    assert refund.retry_policy.maximum_attempts == 1
    assert refund.retry_policy.non_retryable_errors == ("Declined",)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({}, "job_type.duration_limit"),
        ({"duration_limit": None}, "job_type.duration_limit"),
        ({"duration_limit": timedelta(0)}, "job_type.duration_limit"),
        ({"duration_limit": timedelta(seconds=-1)}, "job_type.duration_limit"),
        ({"duration_limit": 30}, "job_type.duration_limit"),
        (
            {"duration_limit": timedelta(1), "heartbeat_timeout": timedelta(0)},
            "job_type.heartbeat_timeout",
        ),
        ({"duration_limit": timedelta(1), "queue": "no spaces"}, "job_type.queue"),
        ({"duration_limit": timedelta(1), "retry": 3}, "job_type.retry"),
        ({"duration_limit": timedelta(1), "non_retryable": [42]}, "job.non_retryable[0]"),
        ({"duration_limit": timedelta(1), "priority": "high"}, "job_type.priority"),
    ],
)
def test_bad_decorator_arguments_are_refused_at_decoration_naming_the_field(
    arguments: dict[str, Any], field: str
) -> None:
    with pytest.raises(cronwave.InvalidArgument) as caught:
        cronwave.job("acme.bad", **arguments)
    assert caught.value.field == field
    assert caught.value.message.startswith(f"{field}: ")


@pytest.mark.parametrize(("name", "field"), [("", "job_type.name"), (" x", "job_type.name")])
def test_a_bad_name_is_refused(name: str, field: str) -> None:
    with pytest.raises(cronwave.InvalidArgument) as caught:
        cronwave.job(name, duration_limit=timedelta(minutes=1))
    assert caught.value.field == field


def test_a_retry_policy_refuses_a_duration_that_is_not_a_timedelta() -> None:
    with pytest.raises(cronwave.InvalidArgument) as caught:
        RetryPolicy(initial_interval=5)  # type: ignore[arg-type]
    assert caught.value.field == "retry.initial_interval"


def test_a_non_retryable_error_is_never_retried_whatever_the_policy() -> None:
    policy = RetryPolicy(maximum_attempts=10)
    names = [cls.__name__ for cls in Declined.__mro__]
    assert not policy.retryable(names)
    assert policy.retry_after(1, names) is None
    assert policy.retryable(["Flaky"])


def test_the_checkpoint_loads_and_saves_through_the_heartbeat() -> None:
    # Given a context resumed from a checkpoint, whose heartbeats are recorded
    sent: list[dict[str, Any] | None] = []
    ctx = context(checkpoint=Checkpoint({"step": 2}), on_heartbeat=sent.append)

    # When the job loads it, changes its copy and saves a new one
    state = ctx.checkpoint.load()
    state["step"] += 1
    assert ctx.checkpoint["step"] == 2  # the copy is the job's own
    ctx.checkpoint.save(state)
    ctx.heartbeat()
    ctx.heartbeat({"step": 4})

    # Then each save went out with a beat, and the newest is what it reads
    assert sent == [{"step": 3}, None, {"step": 4}]
    assert ctx.checkpoint.load() == {"step": 4} and ctx.checkpoint.get("step") == 4


def test_a_checkpoint_that_is_not_json_is_refused_and_not_sent() -> None:
    sent: list[Any] = []
    ctx = context(on_heartbeat=sent.append)
    with pytest.raises(cronwave.InvalidArgument) as caught:
        ctx.checkpoint.save({"when": datetime.now(UTC)})
    assert caught.value.field == "checkpoint"
    with pytest.raises(cronwave.InvalidArgument):
        ctx.checkpoint.save({"ratio": float("nan")})
    assert sent == [] and ctx.checkpoint.load() == {}


def test_cancelled_reads_the_hook_and_defaults_to_false() -> None:
    flag = {"cancelled": False}
    ctx = context(is_cancelled=lambda: flag["cancelled"])
    assert context().cancelled is False
    assert ctx.cancelled is False
    flag["cancelled"] = True
    assert ctx.cancelled is True


def test_the_logger_binds_run_schedule_and_trace(caplog: pytest.LogCaptureFixture) -> None:
    ctx = context(job_type="acme.invoices", trace_id="ab" * 16)
    with caplog.at_level(logging.INFO, logger="cronwave.job.acme.invoices"):
        ctx.logger.info("invoiced %d", 3, extra={"customer": "c1"})
    (record,) = caplog.records
    assert record.getMessage() == "invoiced 3"
    assert (record.run_id, record.schedule_id, record.trace_id) == ("run-1", "s-1", "ab" * 16)  # type: ignore[attr-defined]
    assert record.customer == "c1"  # type: ignore[attr-defined]


def test_a_context_needs_an_aware_fire_time() -> None:
    with pytest.raises(cronwave.InvalidArgument) as caught:
        JobContext(run_id="r", schedule_id="s", fire_time=datetime(2026, 1, 1), attempt=1)
    assert caught.value.field == "fire_time"
