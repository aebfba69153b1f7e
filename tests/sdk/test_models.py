"""Protos become friendly values; bad client-side input is refused before any call."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import leader_election_service_pb2 as leader_pb

import cronwave
from cronwave_core.convert import dt_to_ts, td_to_duration
from cronwave_core.suite import free_port

FIRE = datetime(2026, 3, 1, 1, 0, tzinfo=UTC)


def test_run_from_proto_has_aware_times_state_names_and_derived_durations():
    msg = pb.Run(
        run_id="r1",
        schedule_id="s1",
        fire_time=dt_to_ts(FIRE),
        state=pb.RUN_STATE_SUCCEEDED,
        trigger=pb.TRIGGER_KIND_MANUAL,
        attempt=2,
        started_at=dt_to_ts(FIRE + timedelta(milliseconds=40)),
        finished_at=dt_to_ts(FIRE + timedelta(seconds=3)),
        result_json='{"invoices": 5}',
    )

    run = cronwave.Run.from_proto(msg)

    assert run.state == "SUCCEEDED" and run.trigger == "MANUAL" and run.terminal
    assert run.fire_time == FIRE and run.fire_time.tzinfo is not None
    assert run.lateness == timedelta(milliseconds=40)
    assert run.duration == timedelta(seconds=2, milliseconds=960)
    assert run.result == {"invoices": 5}
    assert run.created_at is None and run.heartbeat_at is None


def test_a_pending_run_is_not_terminal_and_has_no_lateness_yet():
    run = cronwave.Run.from_proto(
        pb.Run(run_id="r", fire_time=dt_to_ts(FIRE), state=pb.RUN_STATE_PENDING)
    )

    assert run.state == "PENDING" and not run.terminal
    assert run.lateness is None and run.duration is None and run.result is None
    assert "PENDING" not in cronwave.TERMINAL_STATES


def test_schedule_from_proto_names_policies_and_treats_unspecified_as_the_default():
    msg = pb.Schedule(
        schedule_id="s",
        spec=pb.ScheduleSpec(
            cron=["0 2 * * *"], time_zone="Europe/Berlin", dst_repeat=pb.DST_REPEAT_POLICY_TWICE
        ),
        policy=pb.SchedulePolicy(overlap=pb.OVERLAP_POLICY_BUFFER_ONE),
        job_type="billing.nightly",
        payload_json='{"customers": 3}',
        paused=True,
        pause_note="audit",
    )

    s = cronwave.Schedule.from_proto(msg)

    assert (s.dst_gap, s.dst_repeat, s.overlap, s.catchup) == (
        "shift",
        "twice",
        "buffer_one",
        "latest",
    )
    assert s.cron == ("0 2 * * *",) and s.payload == {"customers": 3}
    assert s.paused and s.pause_note == "audit" and s.catchup_window is None
    assert s.start_at is None and s.created_at is None


def test_lease_from_proto():
    msg = leader_pb.Lease(
        scope="planner",
        holder="planner-1",
        fencing_token=7,
        ttl=td_to_duration(timedelta(seconds=15)),
        expires_at=dt_to_ts(FIRE),
    )

    lease = cronwave.Lease.from_proto(msg)

    assert lease.held and lease.ttl == timedelta(seconds=15)
    assert not hasattr(lease, "fencing_token")  # the holder's alone; Observe shows none
    assert lease.expires_at == FIRE
    assert not cronwave.Lease.from_proto(leader_pb.Lease(scope="planner")).held


@pytest.fixture
def nowhere_client():
    """A client whose services are all a port nobody listens on."""
    addr = f"127.0.0.1:{free_port()}"
    with cronwave.Client(
        store_addr=addr,
        dispatcher_addr=addr,
        planner_addr=addr,
        leader_addr=addr,
        timeout=timedelta(seconds=2),
    ) as client:
        yield client, addr


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"dst_gap": "sideways"}, "spec.dst_gap"),
        ({"dst_repeat": "thrice"}, "spec.dst_repeat"),
        ({"overlap": "pile_up"}, "policy.overlap"),
        ({"catchup": "everything"}, "policy.catchup"),
        ({"start_at": datetime(2026, 1, 1)}, "spec.start_at"),
        ({"payload": {"when": datetime(2026, 1, 1)}}, "payload"),
    ],
)
def test_bad_options_are_refused_naming_the_field_before_any_call(nowhere_client, kwargs, field):
    client, _ = nowhere_client

    with pytest.raises(cronwave.InvalidArgument) as info:
        client.create_schedule("s", cron="0 2 * * *", job_type="cronwave.noop", **kwargs)

    assert info.value.field == field
    assert str(info.value).startswith(field + ": ")


def test_an_unreachable_service_is_unavailable_naming_it_and_its_address(nowhere_client):
    client, addr = nowhere_client

    with pytest.raises(cronwave.Unavailable) as info:
        client.get_schedule("s")

    assert f"workflow-store at {addr}" in str(info.value)
    with pytest.raises(cronwave.Unavailable, match="dispatcher"):
        client.trigger("s")


def test_list_runs_refuses_unknown_states_and_bad_limits(nowhere_client):
    client, _ = nowhere_client

    with pytest.raises(cronwave.InvalidArgument, match=r"states\[1\]: 'DONE' is not one of"):
        client.list_runs(states=["FAILED", "DONE"])
    with pytest.raises(cronwave.InvalidArgument, match="limit"):
        client.list_runs(limit=0)


def test_client_from_settings_uses_the_settings_addresses():
    settings = cronwave_settings(CRONWAVE_STORE_ADDR="127.0.0.1:9", CRONWAVE_RPC_TIMEOUT="1.5")

    with cronwave.Client.from_settings(settings) as client:
        assert client.timeout == timedelta(seconds=1.5)
        assert "127.0.0.1:9" in repr(client)


def cronwave_settings(**env: str):
    from cronwave_core.settings import NetworkSettings

    return NetworkSettings.from_env(env)


def test_a_schedule_gives_its_spec_and_policy_whole():
    spec = cronwave.Spec(cron=("0 2 * * *",), time_zone="Europe/Berlin", max_runs=3)
    policy = cronwave.Policy(overlap=cronwave.Overlap.BUFFER_ALL, catchup_max_runs=9)
    msg = pb.Schedule(schedule_id="s", spec=spec.to_proto(), policy=policy.to_proto())

    s = cronwave.Schedule.from_proto(msg)

    assert s.spec == spec and s.policy == policy
    assert s.overlap is cronwave.Overlap.BUFFER_ALL and s.overlap == "buffer_all"


def test_the_keywords_build_the_same_spec_and_policy_as_given_whole():
    from cronwave._spec_input import policy_of, spec_of

    assert spec_of("0 2 * * *", dst_repeat="twice", exclude_dates=["2030-12-25"]) == (
        cronwave.Spec(
            cron=("0 2 * * *",),
            dst_repeat=cronwave.DstRepeat.TWICE,
            exclude_dates=(date(2030, 12, 25),),
        )
    )
    assert spec_of() == cronwave.Spec()
    assert policy_of(overlap="allow_all") == cronwave.Policy(overlap=cronwave.Overlap.ALLOW_ALL)
    assert policy_of() == cronwave.Policy()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"spec": cronwave.Spec(cron=("0 2 * * *",)), "cron": "0 3 * * *"}, "spec"),
        ({"policy": cronwave.Policy(), "overlap": "skip"}, "policy"),
        ({"exclude_dates": ["2030-02-30"]}, "spec.exclude_dates[0]"),
    ],
)
def test_a_spec_or_policy_is_given_whole_or_by_keywords_not_both(nowhere_client, kwargs, field):
    client, _ = nowhere_client

    with pytest.raises(cronwave.InvalidArgument) as info:
        client.create_schedule("s", job_type="cronwave.noop", **kwargs)

    assert info.value.field == field
