"""Issue-level tests of the spine: the five services carry a run end to end, on
SQLite and on PostgreSQL, as real processes on loopback."""

from __future__ import annotations

import signal
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cronwave_proto.v1 import dispatcher_service_pb2 as dispatcher_pb
from cronwave_proto.v1 import dispatcher_service_pb2_grpc as dispatcher_grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc

import cronwave
from cronwave_core.convert import dt_to_ts
from cronwave_core.suite import SERVICES
from tests.harness.clients import client_for
from tests.harness.leases import leading_token
from tests.harness.tls import hop_channel
from tests.helpers import eventually, fresh, only

pytestmark = pytest.mark.slow

WAIT = timedelta(seconds=30)


def test_a_scheduled_fire_started_eight_times_at_once_is_one_run(make_suite) -> None:
    # Given a suite, a schedule that fires once a year (the planner stays out: a paused
    # schedule's fires the store refuses) and a past fire time
    suite = make_suite()
    with client_for(suite) as client:
        schedule = client.create_schedule(
            fresh("spine"), cron="0 0 1 1 *", job_type="cronwave.noop"
        )
    # the lease's own token, as the leader reports it: the store accepts only tokens
    # it issued
    token = leading_token(suite)
    fire = datetime(2021, 1, 1, tzinfo=UTC)
    barrier = threading.Barrier(8)
    answers: list[dispatcher_pb.StartRunResponse] = []
    lock = threading.Lock()

    def start() -> None:
        with hop_channel(suite, "dispatcher") as channel:
            stub = dispatcher_grpc.DispatcherServiceStub(channel)
            barrier.wait(timeout=10)
            reply = stub.StartRuns(
                dispatcher_pb.StartRunsRequest(
                    starts=[
                        dispatcher_pb.StartRunRequest(
                            schedule_id=schedule.schedule_id,
                            fire_time=dt_to_ts(fire),
                            fencing_token=token,
                        )
                    ]
                ),
                timeout=15,
            )
            resp = only(reply.results, "started")
            with lock:
                answers.append(resp)

    # When eight dispatch requests for that fire arrive concurrently
    threads = [threading.Thread(target=start) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)

    # Then exactly one created the run, all got the same run, and its job ran once
    assert len(answers) == 8
    assert sum(a.created for a in answers) == 1
    assert len({a.run.run_id for a in answers}) == 1
    with client_for(suite) as client:
        run = client.wait_run(answers[0].run.run_id, timeout=WAIT)
        assert run.state == "SUCCEEDED"
        runs = client.list_runs(schedule.schedule_id)
        assert [r.run_id for r in runs] == [run.run_id]
        claims = [e for e in client.run_events(run.run_id) if e.kind == "claimed"]
        assert len(claims) == 1


@pytest.mark.parametrize("victim", SERVICES)
def test_kill_9_and_restart_loses_no_schedule_or_run(make_suite, victim: str) -> None:
    # Given a schedule with a finished run
    suite = make_suite()
    with client_for(suite) as client:
        schedule = client.create_schedule(
            fresh("spine"), cron="0 2 * * *", time_zone="Europe/Berlin", job_type="cronwave.noop"
        )
        before = client.wait_run(client.trigger(schedule.schedule_id).run_id, timeout=WAIT)
        assert before.state == "SUCCEEDED"

    # When one service is killed with SIGKILL and started again
    suite.signal(victim, signal.SIGKILL)
    eventually(lambda: not suite.procs[victim].alive(), timeout=10, what=f"{victim} died")
    suite.restart(victim)

    # Then the schedule and the run are still there, and a new run goes end to end
    with client_for(suite) as client:

        def new_run_succeeds() -> cronwave.Run:
            try:
                run = client.trigger(schedule.schedule_id)
            except cronwave.Unavailable as exc:  # channels still reconnecting
                raise AssertionError(str(exc)) from exc
            return client.wait_run(run.run_id, timeout=WAIT)

        after = eventually(
            new_run_succeeds, timeout=60, what="a run after the restart"
        )  # the trigger may meet a channel still reconnecting
        assert after.state == "SUCCEEDED"
        assert client.get_schedule(schedule.schedule_id).cron == ("0 2 * * *",)
        kept = client.get_run(before.run_id)
        assert kept.state == "SUCCEEDED" and kept.finished_at == before.finished_at
        assert {r.run_id for r in client.list_runs(schedule.schedule_id)} == {
            before.run_id,
            after.run_id,
        }


def test_bad_input_names_the_field_and_stores_nothing(make_suite) -> None:
    suite = make_suite()
    with hop_channel(suite, "workflow-store") as channel:
        store = store_grpc.WorkflowStoreServiceStub(channel)
        before = store.ListSchedules(store_pb.ListSchedulesRequest(), timeout=5)
    with client_for(suite) as client:
        cases = [
            ({"cron": "61 * * * *"}, "spec.cron[0]"),
            ({"cron": "0 2 * * *", "time_zone": "Mars/Olympus"}, "spec.time_zone"),
            ({"cron": "0 2 * * *", "job_type": "no.such.job"}, "job_type"),
        ]
        for overrides, field in cases:
            kwargs: dict[str, Any] = {"cron": "0 2 * * *", "job_type": "cronwave.noop", **overrides}
            with pytest.raises(cronwave.InvalidArgument) as info:
                client.create_schedule(fresh("bad"), **kwargs)
            assert info.value.field == field, info.value
        # When a dispatch names a schedule that does not exist
        with pytest.raises(cronwave.NotFound):
            client.trigger("no-such-schedule")
    with hop_channel(suite, "workflow-store") as channel:
        store = store_grpc.WorkflowStoreServiceStub(channel)
        after = store.ListSchedules(store_pb.ListSchedulesRequest(), timeout=5)
        runs = store.ListRuns(store_pb.ListRunsRequest(), timeout=5)
    # Then nothing was written: same schedules, same revision, no runs
    assert after.revision == before.revision
    assert list(after.schedules) == list(before.schedules)
    assert len(runs.runs) == 0
