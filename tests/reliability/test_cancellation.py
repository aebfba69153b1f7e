"""Cancelling runs on real workers: the job sees ``ctx.cancelled``, a body that does not
return is stopped once the grace has passed, the run ends CANCELLED and is never run
again; a run no worker holds ends at once and its message is dropped. The tests on a
rig of default settings share one (``shared_rig``): each reads only its own runs."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, timedelta

import pytest
from cronwave_proto.v1 import common_pb2
from typer.testing import CliRunner

from cronwave import InvalidArgument, RunNotFound
from cronwave.cli.main import app
from tests.harness.clients import client_for
from tests.harness.cluster import MakeRig, Rig
from tests.helpers import eventually
from tests.reliability.support import at, events_of, register_drill

pytestmark = [pytest.mark.slow, pytest.mark.both_backends]

#: cronwave.sleep's heartbeat timeout: past it, a run whose attempt stopped beating
#: would be handed out again by the sweeper.
SLEEP_HEARTBEAT_TIMEOUT = timedelta(seconds=15)
#: A cancel reaches a running body within the worker's cancel check interval (1 s by
#: default) plus a heartbeat call; the body is stopped at the grace, and a job process
#: gets CRONWAVE_JOB_KILL_GRACE (0.5 s in the rigs) to exit. Generous on a shared machine.
BOUND = 30.0


def running(rig: Rig, run_id: str) -> None:
    """Wait until the run's body has begun (its event ``started`` is recorded)."""

    def check() -> bool:
        assert rig.state(run_id) == "RUNNING"
        return "started" in rig.events(run_id)

    eventually(check, timeout=30, what=f"run {run_id} started")


def holds_for(check: Callable[[], None], seconds: float, interval: float = 0.5) -> None:
    """``check`` passes at every look for ``seconds`` (a bounded number of looks)."""
    deadline = time.monotonic() + seconds
    for _ in range(int(seconds / interval) + 2):
        check()
        if time.monotonic() >= deadline:
            return
        time.sleep(interval)


def test_a_running_sleep_is_stopped_after_its_grace_and_never_resumed(shared_rig: MakeRig) -> None:
    # Given a cronwave.sleep of ten minutes running on the only worker
    rig = shared_rig()
    run_id = rig.start(rig.schedule("cronwave.sleep", {"seconds": 600})).run.run_id
    running(rig, run_id)
    # (its body's start is recorded while it runs: the run shows started_at)
    live = rig.run(run_id)
    assert live.HasField("started_at") and live.HasField("claimed_at")
    assert live.claimed_at.ToDatetime() <= live.started_at.ToDatetime()

    # When it is cancelled with a 2 s grace
    with client_for(rig.suite) as client:
        asked = client.cancel_run(run_id, grace=timedelta(seconds=2), reason="operator test")
    assert asked.state == "RUNNING" and asked.cancelling
    assert asked.cancel_reason == "operator test"

    # Then it ends CANCELLED with the reason (its body, which never returns, was stopped)
    done = rig.wait_state(run_id, "CANCELLED", timeout=2 + BOUND)
    assert done.error == "operator test" and done.result_json == ""
    assert done.attempt == 1
    events = rig.run_events(run_id)
    kinds = [e.kind for e in events]
    assert kinds.index("started") < kinds.index("cancel_requested") < kinds.index("cancelled")
    (cancelled,) = events_of(events, "cancelled")
    assert at(cancelled) >= done.cancel_deadline.ToDatetime(tzinfo=UTC)

    # and the worker keeps serving: a next run succeeds
    next_id = rig.start(rig.schedule("cronwave.noop")).run.run_id
    assert rig.wait_state(next_id, "SUCCEEDED", timeout=30).attempt == 1

    # and the run is never resumed, re-queued or claimed again, past a heartbeat timeout
    def unchanged() -> None:
        now = rig.run(run_id)
        assert (now.state, now.attempt) == (done.state, 1)
        later = rig.events(run_id)
        assert later.count("claimed") == 1 and "requeued" not in later, later

    holds_for(unchanged, SLEEP_HEARTBEAT_TIMEOUT.total_seconds() + 3)


@pytest.mark.parametrize("isolation", ["process", "thread"])
def test_a_job_that_polls_cancelled_returns_and_the_run_ends_cancelled_before_the_grace(
    make_rig: MakeRig, isolation: str
) -> None:
    # Given a job that works until ctx.cancelled, in a job process or a worker thread
    rig = make_rig(env={"CRONWAVE_JOB_ISOLATION": isolation})
    run_id = rig.start(rig.schedule("drill.polite")).run.run_id
    running(rig, run_id)

    # When its run is cancelled with a grace of two minutes, from the command line
    shown = CliRunner().invoke(
        app,
        ["runs", "cancel", run_id, "--grace", "2m", "--reason", "polite stop"],
        env={"CRONWAVE_STORE_ADDR": rig.suite.store_addr},
    )
    assert shown.exit_code == 0, (shown.stdout, shown.stderr)
    assert "cancel requested" in shown.stdout and "RUNNING (cancelling)" in shown.stdout

    # Then the job returns on its own and the run ends CANCELLED before the grace ran out
    done = rig.wait_state(run_id, "CANCELLED", timeout=BOUND)
    (cancelled,) = events_of(rig.run_events(run_id), "cancelled")
    assert at(cancelled) < done.cancel_deadline.ToDatetime(tzinfo=UTC)
    # and what the job returned ({"saw_cancel": true}) is not kept
    assert done.error == "polite stop" and done.result_json == ""
    assert "cancel requested: polite stop" in rig.log("worker-default")


def test_a_queued_run_is_cancelled_at_once_and_its_message_dropped(make_rig: MakeRig) -> None:
    # Given a run queued on the bulk pool, which no worker serves yet
    rig = make_rig(pools={"default": 1})
    register_drill(rig.store, "drill.bulk")
    schedule_id = rig.schedule("drill.bulk", {"seconds": 0})
    run_id = rig.start(schedule_id).run.run_id
    assert rig.state(run_id) == "PENDING"

    # When it is cancelled before any worker claimed it
    with client_for(rig.suite) as client:
        cancelled = client.cancel_run(run_id, reason="not tonight")

    # Then it is CANCELLED at once
    assert cancelled.state == "CANCELLED" and cancelled.error == "not tonight"

    # When a bulk worker starts and takes that message, then one queued after it
    rig.suite.start_service(
        "worker",
        index=5,
        name="worker-bulk",
        extra_env={"CRONWAVE_WORKER_QUEUES": "bulk", "CRONWAVE_WORKER_ID": "worker-bulk"},
    )
    later = rig.start(schedule_id).run.run_id
    rig.wait_state(later, "SUCCEEDED", timeout=30)

    # Then the cancelled run's message was dropped: never claimed, still CANCELLED
    after = rig.run(run_id)
    assert (after.state, after.attempt) == (common_pb2.RUN_STATE_CANCELLED, 0)
    assert "claimed" not in rig.events(run_id)


def test_cancel_of_a_finished_or_unknown_run_and_a_bad_grace(shared_rig: MakeRig) -> None:
    # Given a run that succeeded
    rig = shared_rig()
    run_id = rig.start(rig.schedule("cronwave.noop")).run.run_id
    done = rig.wait_state(run_id, "SUCCEEDED", timeout=30)
    with client_for(rig.suite) as client:
        # When it is cancelled, then it is returned unchanged
        again = client.cancel_run(run_id)
        assert again.state == "SUCCEEDED" and again.error == ""
        assert again.finished_at == done.finished_at.ToDatetime(tzinfo=UTC)
        assert rig.events(run_id)[-1] == "succeeded"
        # An unknown run is not found
        with pytest.raises(RunNotFound):
            client.cancel_run("no-such-run")
        # A grace outside 0 .. 1 h is refused naming the field
        for grace in (timedelta(seconds=-1), timedelta(hours=2)):
            with pytest.raises(InvalidArgument) as info:
                client.cancel_run(run_id, grace=grace)
            assert info.value.field == "grace"
