"""ListRecentRuns: each schedule's newest runs, for many schedules in one call
(``workflow_store.recent_runs``), on both databases."""

from __future__ import annotations

from datetime import timedelta

import grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from tests.harness.store import FIRE, create_schedule, record_run, register_job_type, rpc_error
from workflow_store.recent_runs import fit


def test_each_schedule_gets_its_newest_runs_newest_first_in_the_order_asked(stub):
    # Given a schedule with five runs, one with one run, and one with none
    job = register_job_type(stub)
    five, one, none = (create_schedule(stub, job).schedule_id for _ in range(3))
    fives = [record_run(stub, five, FIRE + timedelta(days=d)).run for d in range(5)]
    only = record_run(stub, one, FIRE).run

    # When the newest three of each are asked for in one call
    reply = stub.ListRecentRuns(
        api.ListRecentRunsRequest(schedule_ids=[one, five, none], per_schedule=3), timeout=10
    )

    # Then the answer holds the one run, then the three newest of five, newest first,
    # without their payloads, and nothing was left out
    assert [r.run_id for r in reply.runs] == [
        only.run_id,
        fives[4].run_id,
        fives[3].run_id,
        fives[2].run_id,
    ]
    assert all(r.payload_json == "" for r in reply.runs)
    assert fives[4].payload_json != ""
    assert list(reply.left_out) == []


def test_a_count_per_schedule_outside_1_to_200_is_refused_naming_it(stub):
    schedule_id = create_schedule(stub).schedule_id
    for per in (0, 201):
        error = rpc_error(
            stub.ListRecentRuns,
            api.ListRecentRunsRequest(schedule_ids=[schedule_id], per_schedule=per),
            timeout=10,
        )
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "per_schedule" in (error.details() or "")


def test_an_answer_ends_before_the_schedule_that_would_pass_its_budget() -> None:
    # Given three schedules whose runs weigh 4, 5 and 1 units
    runs = {"a": [2, 2], "b": [5], "c": [1]}

    # When they must fit in 7 units
    kept, left_out = fit(["a", "b", "c"], runs, size=lambda run: run, budget=7)

    # Then whole schedules are kept in order while they fit, and b is named for later
    assert (kept, left_out) == ([2, 2, 1], ["b"])
    # and the first schedule is always sent, however large
    assert fit(["b"], runs, size=lambda run: run, budget=1) == ([5], [])
