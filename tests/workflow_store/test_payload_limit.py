"""Payload size limit and byte-bounded listings, against a real store process.

A payload over 256 KiB is refused before anything is written. A listing never sends
a message near gRPC's 4 MiB limit: pages end by bytes, and a row the store cannot list
whole (planted by hand, or written before the limit) is listed without the part left
out, saying why in ``withheld``.
"""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import grpc
import pytest
from cronwave_proto.v1 import workflow_store_service_pb2 as api
from typer.testing import CliRunner

import cronwave
from cronwave.cli.main import app
from tests.harness.store import (
    StoreProcess,
    register_job_type,
    rpc_error,
    schedule_msg,
)
from tests.helpers import eventually, fresh, plant_schedule_row

LIMIT = 256 * 1024
MIB = 1024 * 1024


def payload_of(size: int, fill: str = "x", **extra: object) -> str:
    """A JSON object of exactly ``size`` UTF-8 bytes (``fill`` is one character)."""
    head = json.dumps({**extra, "blob": ""}, ensure_ascii=False)
    room = size - len(head.encode())
    width = len(fill.encode())
    assert room >= 0 and room % width == 0, (size, fill)
    text = head[:-2] + fill * (room // width) + head[-2:]
    assert len(text.encode()) == size
    return text


def create(stub, schedule_id: str, job: str, payload: str):
    msg = schedule_msg(schedule_id, job)
    msg.payload_json = payload
    return stub.CreateSchedule(api.CreateScheduleRequest(schedule=msg), timeout=30).schedule


def test_a_payload_one_byte_over_the_limit_is_refused_and_nothing_is_written(stub):
    # Given a store with a job type
    job = register_job_type(stub)
    revision = stub.ListSchedules(api.ListSchedulesRequest(limit=1)).revision
    over = fresh("over")

    # When a schedule with a payload of 256 KiB + 1 byte is created
    msg = schedule_msg(over, job)
    msg.payload_json = payload_of(LIMIT + 1)
    err = rpc_error(stub.CreateSchedule, api.CreateScheduleRequest(schedule=msg))

    # Then it is refused, naming the field and the rule, and nothing is written
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details() == f"schedule.payload_json: at most {LIMIT} bytes, got {LIMIT + 1}"
    missing = rpc_error(stub.GetSchedule, api.GetScheduleRequest(schedule_id=over))
    assert missing.code() == grpc.StatusCode.NOT_FOUND
    assert stub.ListSchedules(api.ListSchedulesRequest(limit=1)).revision == revision

    # And a payload of exactly 256 KiB is accepted, and read back whole
    exact = payload_of(LIMIT)
    at_limit = create(stub, fresh("exact"), job, exact)
    got = stub.GetSchedule(api.GetScheduleRequest(schedule_id=at_limit.schedule_id)).schedule
    assert got.payload_json == exact and got.withheld == ""


def test_the_limit_counts_utf8_bytes_not_characters(stub):
    job = register_job_type(stub)
    # 2 bytes a character: fewer characters than the limit, more bytes
    text = payload_of(LIMIT + 2, fill="é")
    assert len(text) < LIMIT

    msg = schedule_msg(fresh("wide"), job)
    msg.payload_json = text
    err = rpc_error(stub.CreateSchedule, api.CreateScheduleRequest(schedule=msg))

    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details() == f"schedule.payload_json: at most {LIMIT} bytes, got {LIMIT + 2}"


def cli(store: StoreProcess, *args: str):
    env = {"CRONWAVE_STORE_ADDR": store.address, "CRONWAVE_RPC_TIMEOUT": "30"}
    return CliRunner().invoke(app, list(args), env=env)


def test_a_payload_with_a_lone_surrogate_is_refused_and_nothing_is_written(stub):
    # Given a store with a job type, and a payload whose escape is half a UTF-16 pair
    job = register_job_type(stub)
    revision = stub.ListSchedules(api.ListSchedulesRequest(limit=1)).revision
    lone = fresh("lone")
    msg = schedule_msg(lone, job)
    msg.payload_json = '{"a": "\\udc00"}'

    # When a schedule with it is created
    err = rpc_error(stub.CreateSchedule, api.CreateScheduleRequest(schedule=msg))

    # Then it is refused, naming the field and the rule, and nothing is written
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details() == (
        "payload_json: must be valid UTF-8: the string at $.a holds a lone surrogate U+DC00 "
        "(a \\ud800-\\udbff escape must be followed by a \\udc00-\\udfff one)"
    )
    missing = rpc_error(stub.GetSchedule, api.GetScheduleRequest(schedule_id=lone))
    assert missing.code() == grpc.StatusCode.NOT_FOUND
    assert stub.ListSchedules(api.ListSchedulesRequest(limit=1)).revision == revision

    # And a whole pair is one character, accepted and read back as sent
    paired = create(stub, fresh("pair"), job, '{"a": "\\ud83d\\ude00"}')
    got = stub.GetSchedule(api.GetScheduleRequest(schedule_id=paired.schedule_id)).schedule
    assert json.loads(got.payload_json) == {"a": "\U0001f600"}


def test_the_sdk_and_the_cli_report_the_stores_refusal_as_it_is(store, stub):
    job = register_job_type(stub)
    blob = "x" * LIMIT  # json.dumps({"blob": blob}) is LIMIT + 12 bytes
    rule = f"schedule.payload_json: at most {LIMIT} bytes, got {LIMIT + 12}"

    # The SDK raises InvalidArgument with the store's field and rule
    with cronwave.Client(store_addr=store.address, timeout=timedelta(seconds=30)) as client:
        with pytest.raises(cronwave.InvalidArgument) as info:
            client.create_schedule(
                "sdk-big", cron="0 2 * * *", job_type=job, payload={"blob": blob}
            )
        assert str(info.value) == rule
        assert info.value.field == "schedule.payload_json"

    # The CLI prints it, without a traceback
    args = ["schedule", "create", "cli-big", "--cron", "0 2 * * *", "--job-type", job]
    result = cli(store, *args, "--payload", json.dumps({"blob": blob}))
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert result.stderr.startswith("error: ") and rule in result.stderr
    assert "Traceback" not in result.stdout + result.stderr

    # And neither wrote anything
    for schedule_id in ("sdk-big", "cli-big"):
        err = rpc_error(stub.GetSchedule, api.GetScheduleRequest(schedule_id=schedule_id))
        assert err.code() == grpc.StatusCode.NOT_FOUND


def all_pages(stub, limit: int) -> tuple[list, list[int]]:
    """Every schedule, paging after the last id until an empty page; and each page's
    encoded size."""
    schedules, sizes, after = [], [], ""
    for _ in range(1_000):
        reply = stub.ListSchedules(
            api.ListSchedulesRequest(limit=limit, after_schedule_id=after), timeout=30
        )
        if not reply.schedules:
            return schedules, sizes
        schedules.extend(reply.schedules)
        sizes.append(reply.ByteSize())
        after = reply.schedules[-1].schedule_id
    raise AssertionError("the listing did not end")


def test_schedules_near_the_limit_list_in_pages_under_the_message_limit(store, stub):
    # Given 30 schedules with 250 KiB payloads: 7.5 MB, over gRPC's 4 MiB message
    # limit in one page of the planner's 1,000
    job = register_job_type(stub)
    payloads = {f"big-{i:02d}": payload_of(250 * 1024, i=i) for i in range(30)}
    for schedule_id, payload in payloads.items():
        create(stub, schedule_id, job, payload)

    # When they are listed in pages of 1,000, as the planner's feed asks
    schedules, sizes = all_pages(stub, limit=1_000)

    # Then every page stays within the 1 MiB page budget, and all come back whole
    assert all(size <= MIB + 64 for size in sizes), sizes
    assert len(sizes) > 1
    assert [s.schedule_id for s in schedules] == sorted(payloads)
    assert {s.schedule_id: s.payload_json for s in schedules} == payloads
    assert not any(s.withheld for s in schedules)

    # And a listing without a count bound ("all") is bounded by bytes too
    everything = stub.ListSchedules(api.ListSchedulesRequest(), timeout=30)
    assert 0 < len(everything.schedules) < 30 and everything.ByteSize() <= MIB + 64

    # And the SDK and the CLI, which page on, list them all
    with cronwave.Client(store_addr=store.address, timeout=timedelta(seconds=30)) as client:
        assert [s.schedule_id for s in client.list_schedules()] == sorted(payloads)
        assert len(client.list_schedules(limit=7)) == 7
    listed = cli(store, "schedule", "list")
    assert listed.exit_code == 0, (listed.stdout, listed.stderr)
    assert "30 schedule(s)" in listed.stdout


def test_a_planted_oversized_row_is_listed_without_its_payload(stub, database_url):
    # Given three schedules, one of them given a 5 MiB payload in the database
    job = register_job_type(stub)
    ids = ["a-" + fresh("s"), "b-" + fresh("s"), "c-" + fresh("s")]
    for schedule_id in ids:
        create(stub, schedule_id, job, '{"n": 1}')
    secret = "do-not-echo-"
    plant_schedule_row(database_url, ids[1], payload_json=payload_of(5 * MIB, **{secret: 1}))

    # When they are listed
    reply = stub.ListSchedules(api.ListSchedulesRequest(limit=1_000), timeout=30)

    # Then all three come, the planted one without its payload, saying why
    by_id = {s.schedule_id: s for s in reply.schedules}
    assert list(by_id) == ids
    planted = by_id[ids[1]]
    assert planted.payload_json == ""
    assert planted.withheld == f"payload_json: {5 * MIB} bytes, over the limit of {LIMIT}"
    assert planted.job_type == job and list(planted.spec.cron) == ["0 2 * * *"]
    assert [by_id[i].payload_json for i in (ids[0], ids[2])] == ['{"n": 1}'] * 2
    assert secret not in str(reply)


def test_a_planted_unreadable_row_is_listed_by_its_identity(stub, database_url):
    # Given a schedule whose stored spec this version cannot read
    job = register_job_type(stub)
    good, bad = "a-" + fresh("s"), "b-" + fresh("s")
    create(stub, good, job, "{}")
    create(stub, bad, job, "{}")
    plant_schedule_row(database_url, bad, spec={"cron": 5, "time_zone": ["no"]})

    # When the schedules are listed
    reply = stub.ListSchedules(api.ListSchedulesRequest(limit=1_000), timeout=30)

    # Then the listing does not fail: the row comes by its identity, saying why
    by_id = {s.schedule_id: s for s in reply.schedules}
    assert list(by_id) == [good, bad]
    assert by_id[bad].withheld == "spec: the stored spec or policy cannot be read"
    assert not by_id[bad].HasField("spec") and by_id[bad].revision > 0
    assert by_id[good].withheld == ""


def test_one_oversized_change_does_not_stop_a_watch(stub, database_url):
    # Given a watch
    job = register_job_type(stub)
    big = fresh("big")
    create(stub, big, job, "{}")
    since = stub.ListSchedules(api.ListSchedulesRequest(limit=1)).revision
    call = stub.WatchSchedules(api.WatchSchedulesRequest(since_revision=since), timeout=60)
    received: list = []
    ended: list[BaseException] = []

    def consume() -> None:
        try:
            for reply in call:
                received.append(reply.schedule)
        except grpc.RpcError as exc:
            ended.append(exc)

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    try:
        # When a schedule is changed straight in the database to a 5 MiB payload (under
        # a new revision, so the watch sends it on), and another is created after it
        plant_schedule_row(
            database_url, big, as_change=True, payload_json=payload_of(5 * MIB), paused=True
        )
        after = fresh("after")
        create(stub, after, job, "{}")

        # Then both changes arrive on the same stream, the big one without its payload
        eventually(lambda: [s.schedule_id for s in received] == [big, after], timeout=30)
        assert received[0].withheld.startswith(f"payload_json: {5 * MIB} bytes")
        assert received[0].paused and received[0].payload_json == ""
        assert ended == []
        # And a reply about it that would be too large whole names it alone
        resumed = stub.ResumeSchedule(api.ResumeScheduleRequest(schedule_id=big)).schedule
        assert resumed.withheld.startswith("schedule: ") and resumed.payload_json == ""
        assert not resumed.HasField("spec")
    finally:
        call.cancel()
        thread.join(timeout=10)
