"""The audit trail on a real workflow-store process: each mutation a caller asks for
writes exactly one audit row (who, what, when, from where) in its own transaction; a
refused or failed one writes none; ``ListAuditEvents`` pages newest first; and
``cronwave audit list --schedule X`` shows them."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from cronwave_proto.v1 import api_key_service_pb2 as keys_pb
from cronwave_proto.v1 import api_key_service_pb2_grpc as keys_grpc
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as api_grpc
from google.protobuf.field_mask_pb2 import FieldMask

from cronwave_core.convert import dt_to_ts, ts_to_dt
from cronwave_core.security.keys import parse_token
from tests.harness.cli import cronwave_argv
from tests.harness.store import (
    PAST_FIRE,
    StoreProcess,
    create_schedule,
    record_missed,
    record_run,
    register_job_type,
    schedule_msg,
)
from tests.harness.tls import caller_for, hop_channel
from tests.helpers import claim_one, fresh


def who(rpc: str) -> str:
    """The audit name of the identity the harness calls ``rpc`` as (``caller_for``):
    the local administrator's certificate where a role may call it, else a service's."""
    caller = caller_for(f"/cronwave.v1.WorkflowStoreService/{rpc}")
    return "user:local-admin" if caller == "local-admin" else f"service:{caller}"


def run_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The ``cronwave`` CLI as a process of its own, a wide terminal's table."""
    return subprocess.run(
        [*cronwave_argv(), *args],
        env={**os.environ, "COLUMNS": "300", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def audit(stub: api_grpc.WorkflowStoreServiceStub, schedule_id: str = "") -> list[api.AuditEvent]:
    return list(stub.ListAuditEvents(api.ListAuditEventsRequest(schedule_id=schedule_id)).events)


def changes(event: api.AuditEvent) -> dict:
    return json.loads(event.changes_json)


def assert_who_when_where(event: api.AuditEvent, before: datetime, after: datetime) -> None:
    assert event.actor == who(event.rpc)
    assert event.peer.startswith(("ipv4:127.0.0.1:", "ipv6:[::1]:")), event.peer
    assert before <= ts_to_dt(event.at, "at") <= after


def test_each_schedule_mutation_writes_one_audit_row_with_who_what_when_where(
    stub: api_grpc.WorkflowStoreServiceStub,
) -> None:
    # Given a job type (its registration is audited with no schedule)
    job = register_job_type(stub)
    before = datetime.now(UTC) - timedelta(seconds=1)

    # When a schedule is created, updated, paused, resumed and deleted
    schedule_id = fresh("audited")
    created = stub.CreateSchedule(
        api.CreateScheduleRequest(schedule=schedule_msg(schedule_id, job))
    ).schedule
    changed = api.UpdateScheduleRequest(
        schedule=pb.Schedule(
            schedule_id=schedule_id,
            spec=pb.ScheduleSpec(cron=["30 3 * * *"]),
            payload_json='{"customers": 5, "secret": "hunter2"}',
        ),
        update_mask=FieldMask(paths=["spec.cron", "payload_json"]),
    )
    stub.UpdateSchedule(changed)
    stub.PauseSchedule(api.PauseScheduleRequest(schedule_id=schedule_id, note="maintenance"))
    stub.ResumeSchedule(api.ResumeScheduleRequest(schedule_id=schedule_id))
    stub.DeleteSchedule(api.DeleteScheduleRequest(schedule_id=schedule_id))
    after = datetime.now(UTC) + timedelta(seconds=1)

    # Then each wrote exactly one row, newest first, naming who, what, when and where
    events = audit(stub, schedule_id)
    assert [e.rpc for e in events] == [
        "DeleteSchedule",
        "ResumeSchedule",
        "PauseSchedule",
        "UpdateSchedule",
        "CreateSchedule",
    ]
    for event in events:
        assert event.schedule_id == schedule_id
        assert_who_when_where(event, before, after)
    delete, resume, pause, update, create = (changes(e) for e in events)
    assert create["job_type"] == {"old": None, "new": job}
    assert create["payload_json"] == {"old_bytes": 0, "new_bytes": len(created.payload_json)}
    assert update == {
        "spec.cron": {"old": ["0 2 * * *"], "new": ["30 3 * * *"]},
        "payload_json": {
            "old_bytes": len(created.payload_json),
            "new_bytes": len(changed.schedule.payload_json),
        },
    }
    assert "hunter2" not in events[3].changes_json  # a payload only ever by its size
    assert pause == {
        "paused": {"old": False, "new": True},
        "pause_note": {"old": "", "new": "maintenance"},
    }
    assert resume["paused"] == {"old": True, "new": False}
    assert delete["deleted"] == {"old": False, "new": True}
    assert delete["cancelled_count"] == 0
    # and the job type's registration is listed among all events, with no schedule
    [registered] = [e for e in audit(stub) if e.rpc == "RegisterJobType"]
    assert registered.schedule_id == "" and changes(registered)["name"] == job


def test_refused_conflicting_and_unchanged_mutations_write_no_audit_row(
    stub: api_grpc.WorkflowStoreServiceStub,
) -> None:
    # Given a schedule and its one audit row
    schedule = create_schedule(stub)
    schedule_id = schedule.schedule_id
    assert len(audit(stub, schedule_id)) == 1

    # When bad input is refused, a create conflicts (its transaction rolls back), an
    # update changes nothing, if_absent finds the schedule, and an update names an
    # unknown job type
    refusals = [
        lambda: stub.PauseSchedule(
            api.PauseScheduleRequest(schedule_id=schedule_id, note="n" * 2000)
        ),
        lambda: stub.CreateSchedule(api.CreateScheduleRequest(schedule=schedule)),
        lambda: stub.UpdateSchedule(
            api.UpdateScheduleRequest(
                schedule=pb.Schedule(schedule_id=schedule_id, job_type="no.such.job"),
                update_mask=FieldMask(paths=["job_type"]),
            )
        ),
    ]
    codes = []
    for refuse in refusals:
        with pytest.raises(grpc.RpcError) as caught:
            refuse()
        codes.append(caught.value.code())
    unchanged = stub.UpdateSchedule(
        api.UpdateScheduleRequest(schedule=schedule, update_mask=FieldMask(paths=["spec"]))
    )
    absent = stub.CreateSchedule(api.CreateScheduleRequest(schedule=schedule, if_absent=True))

    # Then none of them wrote an audit row
    assert codes == [
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.INVALID_ARGUMENT,
    ]
    assert not unchanged.changed and not absent.created
    assert [e.rpc for e in audit(stub, schedule_id)] == ["CreateSchedule"]


def test_manual_runs_cancels_and_replays_are_audited_and_scheduled_fires_are_not(
    stub: api_grpc.WorkflowStoreServiceStub,
) -> None:
    # Given a schedule
    schedule_id = create_schedule(stub).schedule_id

    # When the planner records a scheduled fire, a caller triggers a manual run and
    # cancels it
    record_run(stub, schedule_id)  # scheduled: the planner's routine
    manual = record_run(
        stub, schedule_id, datetime(2030, 1, 2, tzinfo=UTC), 0, pb.TRIGGER_KIND_MANUAL
    )
    stub.CancelRun(api.CancelRunRequest(run_id=manual.run.run_id, reason="wrong day"))
    # and cancels a run that is already cancelled (nothing changes)
    stub.CancelRun(api.CancelRunRequest(run_id=manual.run.run_id, reason="again"))

    # Then the manual run and the cancel are audited, once each, naming the run
    events = audit(stub, schedule_id)
    assert [(e.rpc, e.run_id) for e in events] == [
        ("CancelRun", manual.run.run_id),
        ("RecordRuns", manual.run.run_id),
        ("CreateSchedule", ""),
    ]
    assert changes(events[1]) == {"trigger": "manual", "fire_time": "2030-01-02T00:00:00+00:00"}
    # the run was recorded for the person who triggered it, relayed by the hop that
    # records runs; the cancel was asked by a person
    assert events[1].actor == "user:local-admin via service:dispatcher"
    assert events[0].actor == "user:local-admin"
    assert changes(events[0])["state"] == {"old": "PENDING", "new": "CANCELLED"}
    assert changes(events[0])["reason"] == "wrong day"


def test_backfill_runs_revived_placeholders_and_replays_are_audited(
    stub: api_grpc.WorkflowStoreServiceStub,
) -> None:
    # Given a schedule with a backfill placeholder (recorded MISSED by the planner) and
    # a run its worker claimed and dead-lettered (no worker has its job type)
    schedule_id = create_schedule(stub).schedule_id
    placeholder_at = PAST_FIRE
    written, _ = record_missed(stub, schedule_id, placeholder_at, reason="pending:backfill")
    poisoned = record_run(
        stub, schedule_id, datetime(2030, 1, 5, tzinfo=UTC), 0, pb.TRIGGER_KIND_MANUAL
    ).run.run_id
    claim = claim_one(stub, api.ClaimRunRequest(run_id=poisoned, worker_id="w1"))
    stub.DeadLetterRun(
        api.DeadLetterRunRequest(
            run_id=poisoned,
            attempt_token=claim.attempt_token,
            reason="unknown_job_type",
            error="no job type",
        )
    )

    # When a backfill records a new slot and the placeholder's, and the run is replayed
    fresh_run = record_run(
        stub, schedule_id, datetime(2030, 1, 4, tzinfo=UTC), 1, pb.TRIGGER_KIND_BACKFILL
    )
    revived = record_run(stub, schedule_id, placeholder_at, 1, pb.TRIGGER_KIND_BACKFILL)
    stub.ReplayDeadLetter(api.ReplayDeadLetterRequest(run_id=poisoned))

    # Then each backfill run and the replay wrote one row; the placeholder and the
    # dead-lettering (the services' own work) wrote none
    assert written == 1 and fresh_run.created and revived.created
    events = audit(stub, schedule_id)
    assert [(e.rpc, e.run_id) for e in events] == [
        ("ReplayDeadLetter", poisoned),
        ("RecordRuns", revived.run.run_id),
        ("RecordRuns", fresh_run.run.run_id),
        ("RecordRuns", poisoned),
        ("CreateSchedule", ""),
    ]
    assert changes(events[1])["trigger"] == changes(events[2])["trigger"] == "backfill"
    assert changes(events[0]) == {"state": {"old": "DEAD_LETTERED", "new": "PENDING"}}


def test_api_key_creation_and_revocation_are_audited_without_the_secret(
    store: StoreProcess,
) -> None:
    # Given the store's API key service, called by the local administrator
    with hop_channel(None, store.address) as channel:
        keys = keys_grpc.ApiKeyServiceStub(channel)

        # When a key is created, revoked, and revoked again (nothing changes)
        created = keys.CreateApiKey(keys_pb.CreateApiKeyRequest(name="ci-bot", role="viewer"))
        keys.RevokeApiKey(keys_pb.RevokeApiKeyRequest(key_id=created.key.key_id))
        keys.RevokeApiKey(keys_pb.RevokeApiKeyRequest(key_id=created.key.key_id))

    # Then one row each for the creation and the revocation, naming the key, never
    # its token
    events = [e for e in audit(store.stub()) if e.rpc.endswith("ApiKey")]
    assert [e.rpc for e in events] == ["RevokeApiKey", "CreateApiKey"]
    assert all(e.actor == "user:local-admin" for e in events)
    assert changes(events[1]) == {"key_id": created.key.key_id, "name": "ci-bot", "role": "viewer"}
    assert changes(events[0])["revoked"] == {"old": False, "new": True}
    parsed = parse_token(created.token)
    assert parsed is not None
    assert all(parsed[1] not in e.changes_json for e in events)


def test_audit_events_page_newest_first(stub: api_grpc.WorkflowStoreServiceStub) -> None:
    # Given a schedule with five audited changes
    schedule_id = create_schedule(stub).schedule_id
    for i in range(2):
        stub.PauseSchedule(api.PauseScheduleRequest(schedule_id=schedule_id, note=f"p{i}"))
        stub.ResumeSchedule(api.ResumeScheduleRequest(schedule_id=schedule_id))

    # When they are read two at a time
    pages: list[list[int]] = []
    before = 0
    for _ in range(10):  # bounded: five events in pages of two
        reply = stub.ListAuditEvents(
            api.ListAuditEventsRequest(schedule_id=schedule_id, limit=2, before_id=before)
        )
        pages.append([e.id for e in reply.events])
        before = reply.next_before_id
        if not before:
            break

    # Then every event comes once, newest first, and the last page says it is the last
    ids = [i for page in pages for i in page]
    assert len(ids) == 5 and ids == sorted(ids, reverse=True)
    assert [len(page) for page in pages] in ([2, 2, 1], [2, 2, 1, 0])


def test_cronwave_audit_list_shows_a_schedules_events(store: StoreProcess) -> None:
    # Given a schedule that was created and paused
    stub = store.stub()
    schedule_id = create_schedule(stub).schedule_id
    stub.PauseSchedule(api.PauseScheduleRequest(schedule_id=schedule_id, note="why not"))
    env = {"CRONWAVE_STORE_ADDR": store.address}

    # When the CLI lists its audit trail, as JSON and as a table
    as_json = run_cli(["audit", "list", "--schedule", schedule_id, "-o", "json"], env=env)
    as_table = run_cli(["audit", "list", "--schedule", schedule_id], env=env)

    # Then both show the two events, newest first, with who and what
    assert as_json.returncode == 0, as_json.stderr
    listed = json.loads(as_json.stdout)
    assert [e["rpc"] for e in listed] == ["PauseSchedule", "CreateSchedule"]
    assert listed[0]["actor"] == "user:local-admin" and listed[0]["schedule_id"] == schedule_id
    assert listed[0]["changes"]["paused"] == {"old": False, "new": True}
    assert as_table.returncode == 0, as_table.stderr
    assert "PauseSchedule" in as_table.stdout and "CreateSchedule" in as_table.stdout
    assert "paused: false -> true" in as_table.stdout, as_table.stdout


def test_audit_rows_are_kept_in_the_change_transaction_across_a_restart(
    store: StoreProcess,
) -> None:
    # Given a schedule created, its audit row written with it
    stub = store.stub()
    schedule_id = create_schedule(stub).schedule_id
    first = audit(stub, schedule_id)

    # When the store stops and starts again on the same database
    store.stop()
    store.start()

    # Then the row is there as it was
    assert audit(store.stub(), schedule_id) == first
    assert dt_to_ts(ts_to_dt(first[0].at, "at")) == first[0].at
