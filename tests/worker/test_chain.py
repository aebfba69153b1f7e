"""The worker's middleware chain: hooks in the declared order (after-hooks in reverse),
the execute step between them, and a hook that ends the delivery (Skip, Poison)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest

from cronwave_core.errors import ConfigurationError
from cronwave_core.queueing import RunMessage
from worker.attempts import Attempts
from worker.chain import Chain, Delivery, Poison, RunMiddleware, Skip
from worker.draining import AttemptStop
from worker.jobs import Registry, builtin_job_types
from worker.middleware import ORDER, standard
from worker.supervisor import AttemptResult, BeatResult, Outcome

FIRE = datetime(2025, 3, 1, 2, 0, tzinfo=UTC)


def delivery() -> Delivery:
    message = RunMessage(
        run_id="run-1", schedule_id="nightly", fire_time=FIRE, job_type="cronwave.noop",
        queue="default",
    )  # fmt: skip
    return Delivery(message, AttemptStop("run-1"))


class Recorder(RunMiddleware):
    """Writes each hook it is called with to ``log``; ``ends`` maps a hook to what it
    raises there."""

    def __init__(self, name: str, log: list[str], ends: dict[str, Exception] | None = None):
        self.name, self.log, self.ends = name, log, ends or {}

    def _hook(self, hook: str, delivery: Delivery) -> None:
        self.log.append(f"{self.name}.{hook}")
        if hook in self.ends:
            raise self.ends[hook]

    def before_pickup(self, delivery: Delivery) -> None:
        self._hook("before_pickup", delivery)

    def after_pickup(self, delivery: Delivery) -> None:
        self._hook("after_pickup", delivery)

    def before_claim(self, delivery: Delivery) -> None:
        self._hook("before_claim", delivery)

    def after_claim(self, delivery: Delivery) -> None:
        self._hook("after_claim", delivery)

    def before_execute(self, delivery: Delivery) -> None:
        self._hook("before_execute", delivery)

    def after_execute(self, delivery: Delivery) -> None:
        self._hook("after_execute", delivery)

    def before_complete(self, delivery: Delivery) -> None:
        self._hook("before_complete", delivery)

    def after_complete(self, delivery: Delivery) -> None:
        self._hook("after_complete", delivery)

    def on_poison(self, poison: Poison) -> None:
        self.log.append(f"{self.name}.on_poison:{poison.reason}")


def test_before_hooks_run_in_order_and_after_hooks_in_reverse_around_the_step() -> None:
    # Given a chain of two middleware
    log: list[str] = []

    def step(_: Delivery) -> AttemptResult:
        log.append("step")
        return AttemptResult(Outcome.SUCCEEDED)

    chain = Chain([Recorder("outer", log), Recorder("inner", log)], step)
    # When a delivery goes all the way through
    d = delivery()
    assert chain.take(d)
    chain.attempt(d)
    # Then each phase wraps the inner middleware in the outer one, the step inside
    assert log == [
        "outer.before_pickup", "inner.before_pickup", "inner.after_pickup", "outer.after_pickup",
        "outer.before_claim", "inner.before_claim", "inner.after_claim", "outer.after_claim",
        "outer.before_execute", "inner.before_execute", "step",
        "inner.after_execute", "outer.after_execute",
        "outer.before_complete", "inner.before_complete",
        "inner.after_complete", "outer.after_complete",
    ]  # fmt: skip
    assert d.result == AttemptResult(Outcome.SUCCEEDED)


def test_a_skip_ends_the_delivery_and_closes_what_the_phase_opened() -> None:
    # Given an outer middleware that opens a context in the claim phase, and an inner
    # one that finds nothing to do there
    log: list[str] = []

    @contextmanager
    def span() -> Iterator[None]:
        log.append("open")
        yield
        log.append("closed")

    class Opens(RunMiddleware):
        def before_claim(self, delivery: Delivery) -> None:
            delivery.phase.enter_context(span())

    chain = Chain([Opens(), Recorder("inner", log, {"before_claim": Skip()})], _never)
    # When a delivery is taken
    taken = chain.take(delivery())
    # Then it is not, no after-hook ran, and the context was closed
    assert not taken
    assert log == [
        "inner.before_pickup",
        "inner.after_pickup",
        "open",
        "inner.before_claim",
        "closed",
    ]


def test_poison_reaches_every_on_poison_hook_and_ends_the_delivery() -> None:
    log: list[str] = []
    poison = Poison("unknown_job_type", "no such job type", run_id="run-1")
    chain = Chain([Recorder("a", log), Recorder("b", log, {"after_claim": poison})], _never)
    assert not chain.take(delivery())
    assert log[-3:] == [
        "b.after_claim",
        "a.on_poison:unknown_job_type",
        "b.on_poison:unknown_job_type",
    ]


def test_an_error_propagates_and_the_phase_context_sees_it() -> None:
    seen: list[BaseException | None] = []

    @contextmanager
    def span() -> Iterator[None]:
        try:
            yield
        except BaseException as exc:
            seen.append(exc)
            raise

    class Opens(RunMiddleware):
        def before_execute(self, delivery: Delivery) -> None:
            delivery.phase.enter_context(span())

    def step(_: Delivery) -> AttemptResult:
        raise RuntimeError("the store is gone")

    chain = Chain([Opens()], step)
    with pytest.raises(RuntimeError):
        chain.attempt(delivery())
    assert [str(e) for e in seen] == ["the store is gone"]


def test_the_base_middleware_does_nothing() -> None:
    # A chain of middleware that override nothing just runs the step
    chain = Chain([RunMiddleware(), RunMiddleware()], lambda d: AttemptResult(Outcome.FAILED))
    d = delivery()
    assert chain.take(d)
    chain.attempt(d)
    assert d.result == AttemptResult(Outcome.FAILED)
    chain.poisoned(Poison("undecodable", "x"))
    chain.close()


def test_the_standard_chain_is_in_the_declared_order_with_test_hooks_last() -> None:
    hook = RunMiddleware()
    middleware = standard(
        StoreNotCalled(),
        Registry(builtin_job_types()),
        "w-1",
        queues=["default"],
        test_hooks=[hook],
    )
    try:
        assert tuple(type(m) for m in middleware[: len(ORDER)]) == ORDER
        assert middleware[len(ORDER) :] == [hook]
    finally:
        Chain(middleware, _never).close()


def test_an_attempt_without_a_time_limit_says_which_middleware_is_missing() -> None:
    # Given a claimed run whose chain set its heartbeat but no duration limit
    d = delivery()
    d.job_type = builtin_job_types()[0]
    d.beat = lambda _: BeatResult.OK
    d.report_progress = lambda _: None
    d.heartbeat_interval = timedelta(seconds=1)
    # When its body is to run, Then the error names the middleware to add
    with pytest.raises(ConfigurationError, match="TimeLimit middleware"):
        Attempts(pool=None)(d)


def _never(_: Delivery) -> AttemptResult:
    raise AssertionError("the step must not run")


class StoreNotCalled:
    """A store for a chain that is built and closed, never used."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the store's {name} was called")
