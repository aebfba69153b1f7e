"""Job type policies without processes: retry delays, the retry decision, job type
defaults, pools, and waiting for the fire time (with an injected clock)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronwave import NO_RETRY, JobType, RetryPolicy
from cronwave_core.domain.instants import epoch_ns, wait_until_fire_time
from cronwave_core.errors import ConfigurationError, InvalidArgument
from cronwave_core.settings import DispatcherSettings, WorkerSettings
from cronwave_core.suite import parse_worker_pools
from worker.jobs import Registry, default_registry
from worker.jobs.wire import retry_from_proto, retry_to_proto
from worker.outcome import Action, decide
from worker.supervisor import AttemptResult, Outcome


def noop(ctx: object) -> dict[str, object]:
    return {}


def test_default_retry_delays_are_1s_5s_25s_then_capped_at_2min() -> None:
    policy = RetryPolicy()
    delays = [policy.delay(n).total_seconds() for n in range(1, 7)]
    assert delays == [1, 5, 25, 120, 120, 120]
    assert policy.maximum_attempts == 5
    assert [policy.retry_after(n, ()) for n in (4, 5)] == [timedelta(minutes=2), None]
    # huge attempt numbers do not overflow
    assert policy.delay(10_000) == timedelta(minutes=2)


def test_scaled_policy_and_non_retryable_errors() -> None:
    policy = RetryPolicy(
        initial_interval=timedelta(seconds=0.2),
        backoff_coefficient=2,
        maximum_interval=timedelta(seconds=10),
        maximum_attempts=4,
        non_retryable_errors=("Declined",),
    )
    assert [policy.delay(n) for n in (1, 2, 3)] == [
        timedelta(seconds=0.2),
        timedelta(seconds=0.4),
        timedelta(seconds=0.8),
    ]
    assert policy.retry_after(1, ("Declined", "PaymentError")) is None
    assert policy.retry_after(1, ("Flaky",)) == timedelta(seconds=0.2)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"initial_interval": timedelta(0)}, "retry.initial_interval"),
        ({"backoff_coefficient": 0.5}, "retry.backoff_coefficient"),
        ({"backoff_coefficient": float("nan")}, "retry.backoff_coefficient"),
        ({"maximum_interval": timedelta(milliseconds=1)}, "retry.maximum_interval"),
        ({"maximum_attempts": 0}, "retry.maximum_attempts"),
        ({"maximum_attempts": 101}, "retry.maximum_attempts"),
        ({"non_retryable_errors": ("",)}, "retry.non_retryable_errors"),
    ],
)
def test_a_bad_policy_is_refused_naming_the_field(fields: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        RetryPolicy(**fields)  # type: ignore[arg-type]
    assert info.value.field == field


def test_policy_round_trips_through_its_proto_and_zero_fields_mean_defaults() -> None:
    policy = RetryPolicy(
        initial_interval=timedelta(seconds=3),
        backoff_coefficient=1.5,
        maximum_interval=timedelta(minutes=1),
        maximum_attempts=7,
        non_retryable_errors=("Declined",),
    )
    assert retry_from_proto(retry_to_proto(policy)) == policy
    assert retry_from_proto(retry_to_proto(NO_RETRY)) == NO_RETRY
    empty = retry_to_proto(RetryPolicy())
    empty.Clear()
    assert retry_from_proto(empty) == RetryPolicy()


def test_a_financial_job_type_does_not_retry_by_default_and_a_limit_is_required() -> None:
    assert (
        JobType("pay", noop, duration_limit=timedelta(minutes=1), financial=True).retry == NO_RETRY
    )
    assert JobType("etl", noop, duration_limit=timedelta(minutes=1)).retry == RetryPolicy()
    with pytest.raises(InvalidArgument) as info:
        JobType("pay", noop, duration_limit=timedelta(0))
    assert info.value.field == "job_type.duration_limit"


def failed(*types: str) -> AttemptResult:
    return AttemptResult(Outcome.FAILED, error="X: boom", error_types=types)


def test_the_decision_after_an_attempt() -> None:
    policy = RetryPolicy(maximum_attempts=3, non_retryable_errors=("Declined",))
    assert decide(failed("Flaky"), policy, 1).action is Action.RETRY
    assert decide(failed("Flaky"), policy, 2).retry_after == timedelta(seconds=5)
    spent = decide(failed("Flaky"), policy, 3)
    assert (spent.action, spent.detail) == (
        Action.DEAD_LETTER,
        "failed 3 of 3 allowed attempt(s)",
    )
    assert decide(failed("Declined"), policy, 1).action is Action.COMPLETE
    # a NonRetryable (or a subclass: its base names are matched) under any policy
    assert decide(failed("CardDeclined", "NonRetryable"), policy, 1).action is Action.COMPLETE
    assert decide(failed("Flaky"), NO_RETRY, 1).action is Action.DEAD_LETTER
    for outcome in (Outcome.SUCCEEDED, Outcome.TIMED_OUT):
        assert decide(AttemptResult(outcome), policy, 1).action is Action.COMPLETE
    assert decide(AttemptResult(Outcome.SUPERSEDED), policy, 1).action is Action.NOTHING


def test_a_worker_registers_the_job_types_of_the_pools_it_serves() -> None:
    def names(queues: str) -> list[str]:
        env = {"CRONWAVE_WORKER_QUEUES": queues}
        return default_registry(WorkerSettings.from_env(env)).names()

    assert "cronwave.noop.critical" not in names("default")
    assert names("critical") == ["cronwave.noop.critical"]
    assert names("bulk") == ["cronwave.sleep.bulk"]
    assert {"cronwave.noop", "cronwave.noop.critical"} <= set(names("default,critical"))
    registry = Registry([JobType("a", noop, duration_limit=timedelta(1), queue="x")])
    assert registry.serving(["y"]).names() == [] and registry.queues() == ["x"]


class FakeClock:
    def __init__(self, now_ns: int) -> None:
        self.now_ns = now_ns
        self.sleeps: list[float] = []

    def clock(self) -> int:
        return self.now_ns

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        # a real sleep overshoots a little
        self.now_ns += int(seconds * 1e9) + 100_000


def test_the_body_waits_for_its_fire_time_and_not_longer() -> None:
    fire = datetime(2030, 1, 1, 2, 0, tzinfo=UTC)
    fake = FakeClock(epoch_ns(fire) - 1_000_000_000)  # a second early
    started = wait_until_fire_time(fire, clock_ns=fake.clock, sleep=fake.sleep)
    assert epoch_ns(fire) <= started < epoch_ns(fire) + 1_000_000
    assert fake.sleeps[0] == pytest.approx(0.998)  # one long sleep, then short turns
    assert all(s == 0 for s in fake.sleeps[1:])
    # a late message does not wait at all
    late = FakeClock(epoch_ns(fire) + 5)
    assert wait_until_fire_time(fire, clock_ns=late.clock, sleep=late.sleep) == epoch_ns(fire) + 5
    assert late.sleeps == []


def test_settings_of_pools_workers_and_sweeper() -> None:
    assert parse_worker_pools("critical=1, default=2,bulk=1") == {
        "critical": 1,
        "default": 2,
        "bulk": 1,
    }
    assert parse_worker_pools("") == {}
    with pytest.raises(ConfigurationError, match="CRONWAVE_WORKER_POOLS"):
        parse_worker_pools("critical")
    options = WorkerSettings.from_env({"CRONWAVE_WORKER_THREADS": "8"})
    assert (options.isolation, options.kill_grace, options.warm_processes) == (
        "process",
        timedelta(seconds=2),
        2,
    )
    assert options.max_processes == 8
    capped = WorkerSettings.from_env(
        {"CRONWAVE_JOB_MAX_PROCESSES": "3", "CRONWAVE_JOB_WARM_PROCESSES": "5"}
    )
    assert (capped.max_processes, capped.warm_processes) == (3, 3)
    with pytest.raises(ConfigurationError, match="CRONWAVE_JOB_ISOLATION"):
        WorkerSettings.from_env({"CRONWAVE_JOB_ISOLATION": "fork", "CRONWAVE_WORKER_THREADS": "1"})
    sweep = DispatcherSettings.from_env({"CRONWAVE_SWEEP_PENDING_AFTER": "5"})
    assert (sweep.sweep_interval, sweep.sweep_pending_after) == (
        timedelta(seconds=0.5),
        timedelta(seconds=5),
    )
    with pytest.raises(ConfigurationError, match="CRONWAVE_SWEEP_INTERVAL"):
        DispatcherSettings.from_env({"CRONWAVE_SWEEP_INTERVAL": "soon"})
