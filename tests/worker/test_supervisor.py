"""One attempt under supervision: heartbeats carry the newest checkpoint, the duration
limit stops the body, and a refused heartbeat means the attempt is no longer ours."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from cronwave import JobContext
from tests.harness.beats import Beats
from tests.helpers import eventually
from worker.jobs import builtin_job_types
from worker.supervisor import BeatResult, Outcome, Supervisor


def ctx_for(supervisor: Supervisor, payload: Mapping[str, Any] | None = None) -> JobContext:
    return JobContext(
        run_id="run-1",
        schedule_id="s",
        fire_time=datetime.now(UTC),
        attempt=1,
        payload=payload or {},
        on_heartbeat=supervisor.on_heartbeat,
    )


def job(name: str) -> Any:
    return next(t for t in builtin_job_types() if t.name == name).fn


def test_success_returns_the_result_and_when_the_body_started() -> None:
    supervisor = Supervisor(Beats(), timedelta(seconds=10), timedelta(seconds=10))
    before = time.time_ns()
    result = supervisor.run(job("cronwave.noop"), ctx_for(supervisor))
    assert result.outcome is Outcome.SUCCEEDED
    assert result.result == {}
    assert before <= result.body_started_ns <= time.time_ns()


def test_failure_is_recorded_as_type_and_message() -> None:
    supervisor = Supervisor(Beats(), timedelta(seconds=10), timedelta(seconds=10))
    result = supervisor.run(job("cronwave.fail"), ctx_for(supervisor, {"message": "card declined"}))
    assert result.outcome is Outcome.FAILED
    assert result.error == "RequestedFailure: card declined"


def test_heartbeats_carry_the_newest_checkpoint_and_the_last_one_is_flushed() -> None:
    beats = Beats()
    supervisor = Supervisor(beats, timedelta(milliseconds=20), timedelta(seconds=10))

    def body(ctx: JobContext) -> dict[str, Any]:
        ctx.heartbeat({"step": 1})
        eventually(lambda: '{"step": 1}' in beats.sent, timeout=5, what="step 1 sent")
        eventually(lambda: "" in beats.sent, timeout=5, what="a beat without change")
        ctx.heartbeat({"step": 2})  # returns before the next beat: must be flushed
        return {"done": True}

    result = supervisor.run(body, ctx_for(supervisor))
    assert result.outcome is Outcome.SUCCEEDED
    assert beats.sent[-1] == '{"step": 2}'
    assert beats.sent.count('{"step": 1}') == 1


def test_duration_limit_stops_the_body() -> None:
    supervisor = Supervisor(Beats(), timedelta(seconds=10), timedelta(milliseconds=200))
    steps: list[int] = []

    def body(ctx: JobContext) -> dict[str, Any]:
        for step in range(3000):  # 30 s of short sleeps, if nothing stops it
            steps.append(step)
            time.sleep(0.01)
        return {"done": True}

    result = supervisor.run(body, ctx_for(supervisor))
    assert result.outcome is Outcome.TIMED_OUT
    assert result.error.startswith("DurationLimitExceeded: exceeded the duration limit")
    assert 0 < len(steps) < 3000  # it was stopped on its way, not at its end


def test_a_refused_heartbeat_supersedes_the_attempt() -> None:
    beats = Beats(BeatResult.SUPERSEDED)
    supervisor = Supervisor(beats, timedelta(milliseconds=30), timedelta(seconds=30))
    stopped = threading.Event()

    def body(ctx: JobContext) -> dict[str, Any]:
        try:
            for _ in range(1000):
                time.sleep(0.01)
        finally:
            stopped.set()
        return {}

    result = supervisor.run(body, ctx_for(supervisor))
    assert result.outcome is Outcome.SUPERSEDED
    assert stopped.wait(5), "the superseded body kept running"
    # and a job that checkpoints learns it must stop
    late = ctx_for(supervisor)
    try:
        late.heartbeat({"step": 9})
    except Exception as exc:
        assert type(exc).__name__ == "AttemptSuperseded"
    else:
        raise AssertionError("heartbeat of a superseded attempt did not raise")


def test_a_result_that_is_not_json_fails_the_attempt() -> None:
    supervisor = Supervisor(Beats(), timedelta(seconds=10), timedelta(seconds=10))
    result = supervisor.run(lambda ctx: {"when": datetime.now(UTC)}, ctx_for(supervisor))
    assert result.outcome is Outcome.FAILED
    assert result.error.startswith("TypeError:")


def test_a_release_stops_the_body_at_its_next_checkpoint_and_keeps_it() -> None:
    # Given a job that checkpoints every step
    supervisor = Supervisor(Beats(), timedelta(seconds=10), timedelta(seconds=30))
    steps: list[int] = []
    seen: list[BaseException] = []

    def body(ctx: JobContext) -> dict[str, Any]:
        try:
            for step in range(1, 1000):
                steps.append(step)
                if step == 3:
                    supervisor.release()  # the worker's SIGTERM, mid-run
                ctx.heartbeat({"step": step})
                time.sleep(0.01)
        except BaseException as exc:
            seen.append(exc)
            raise
        return {}

    # When the worker asks for its run back
    result = supervisor.run(body, ctx_for(supervisor))

    # Then the body stops at that checkpoint, which goes with the released run
    assert result.outcome is Outcome.RELEASED
    assert steps == [1, 2, 3]
    assert [type(e).__name__ for e in seen] == ["WorkerStopping"]
    assert result.checkpoint_json == '{"step": 3}'
    assert result.body_started_ns > 0


def test_a_body_held_for_its_fire_time_is_released_without_starting() -> None:
    supervisor = Supervisor(Beats(), timedelta(seconds=10), timedelta(seconds=30))
    ran = threading.Event()
    fire_time = datetime.now(UTC) + timedelta(seconds=1)
    supervisor.release()

    result = supervisor.run(lambda ctx: ran.set() or {}, ctx_for(supervisor), fire_time)

    assert result.outcome is Outcome.RELEASED
    assert result.body_started_ns == 0
    assert not ran.wait(1.5), "the body ran after its release"  # past its fire time


def test_a_forced_release_stops_a_body_that_never_checkpoints() -> None:
    # Given a body that never heartbeats
    supervisor = Supervisor(Beats(), timedelta(seconds=10), timedelta(seconds=30))
    stopped = threading.Event()

    def body(ctx: JobContext) -> dict[str, Any]:
        try:
            for _ in range(3000):
                time.sleep(0.01)
        finally:
            stopped.set()
        return {}

    timer = threading.Timer(0.2, supervisor.force_release)  # the grace period is over
    timer.start()
    started = time.monotonic()
    result = supervisor.run(body, ctx_for(supervisor))

    # Then the attempt is released at once and the body is stopped
    assert result.outcome is Outcome.RELEASED
    assert result.checkpoint_json == ""
    assert time.monotonic() - started < 5
    assert stopped.wait(5), "the forced body kept running"
