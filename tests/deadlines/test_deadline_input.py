"""Bad deadlines and notifiers are refused with a status naming the field and the rule,
by the store over gRPC and by the CLI, and nothing is written."""

from __future__ import annotations

import grpc
import pytest
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from google.protobuf.duration_pb2 import Duration
from google.protobuf.field_mask_pb2 import FieldMask
from typer.testing import CliRunner

from cronwave.cli.main import app
from tests.deadlines.support import cli_env
from tests.harness.cluster import Cluster, cluster  # noqa: F401  (fixture)
from tests.helpers import fresh

INTERNALS = ("Traceback", "SELECT", "INSERT", "sqlalchemy", "/work/", ".py")


def schedule(schedule_id: str, policy: common_pb2.SchedulePolicy) -> common_pb2.Schedule:
    return common_pb2.Schedule(
        schedule_id=schedule_id,
        spec=common_pb2.ScheduleSpec(cron=["0 2 * * *"], time_zone="UTC"),
        policy=policy,
        job_type="cronwave.noop",
        payload_json="{}",
    )


def refused(call: object) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call()  # type: ignore[operator]
    error = caught.value
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT, error
    assert not any(word in error.details() for word in INTERNALS), error.details()
    return error


_P = common_pb2.SchedulePolicy
_N = common_pb2.Notifier
_POSITIVE = "policy.deadline: must be a positive duration"
BAD_POLICIES = [
    (_P(deadline=Duration(seconds=0)), _POSITIVE),
    (_P(deadline=Duration(seconds=-60)), _POSITIVE),
    (_P(deadline=Duration(seconds=40 * 86400)), "policy.deadline: must be at most 31 days"),
    (
        _P(notifiers=[_N(url="ftp://hooks.example/x")]),
        "policy.notifiers[0].url: must be an http:// or https:// URL",
    ),
    (_P(notifiers=[_N(url="")]), "policy.notifiers[0].url: required"),
    (
        _P(notifiers=[_N(url="https://ok.example/"), _N(url="https:///no-host")]),
        "policy.notifiers[1].url",
    ),
    (
        _P(notifiers=[_N(url="https://a.example/", format=9)]),  # type: ignore[arg-type]
        "policy.notifiers[0].format: unknown value 9",
    ),
]


@pytest.mark.both_backends
def test_the_store_refuses_a_bad_deadline_or_notifier_and_writes_nothing(
    cluster: Cluster,  # noqa: F811
) -> None:
    # Given a schedule with a good deadline
    kept = fresh("kept")
    good = common_pb2.SchedulePolicy(deadline=Duration(seconds=2700))
    cluster.store.CreateSchedule(
        store_pb.CreateScheduleRequest(schedule=schedule(kept, good)), timeout=10
    )
    for policy, message in BAD_POLICIES:
        check_refused(cluster, kept, policy, message)


def check_refused(
    cluster: Cluster,  # noqa: F811
    kept: str,
    policy: common_pb2.SchedulePolicy,
    message: str,
) -> None:
    # When a create and an update carry the bad value
    new = fresh("new")
    created = refused(
        lambda: cluster.store.CreateSchedule(
            store_pb.CreateScheduleRequest(schedule=schedule(new, policy)), timeout=10
        )
    )
    updated = refused(
        lambda: cluster.store.UpdateSchedule(
            store_pb.UpdateScheduleRequest(
                schedule=schedule(kept, policy), update_mask=FieldMask(paths=["policy"])
            ),
            timeout=10,
        )
    )

    # Then both are refused naming the field and the rule
    assert message in created.details()
    assert message in updated.details()
    # and nothing was written: no new schedule, the old one as it was
    with pytest.raises(grpc.RpcError) as missing:
        cluster.store.GetSchedule(store_pb.GetScheduleRequest(schedule_id=new), timeout=10)
    assert missing.value.code() is grpc.StatusCode.NOT_FOUND
    current = cluster.store.GetSchedule(
        store_pb.GetScheduleRequest(schedule_id=kept), timeout=10
    ).schedule
    assert current.policy.deadline.seconds == 2700
    assert list(current.policy.notifiers) == []


def test_a_bad_breach_listing_is_refused_naming_the_field(
    cluster: Cluster,  # noqa: F811
) -> None:
    for request, message in (
        (store_pb.ListDeadlineBreachesRequest(limit=5000), "limit: must be from 0 to 1000"),
        (store_pb.ListDeadlineBreachesRequest(limit=-1), "limit: must be from 0 to 1000"),
        (store_pb.ListDeadlineBreachesRequest(before_id=-5), "before_id: must not be negative"),
        (
            store_pb.ListDeadlineBreachesRequest(schedule_id="a\x00b"),
            "schedule_id: 'a\\x00b' must be 1-63 characters of a-z, 0-9",
        ),
    ):
        error = refused(lambda r=request: cluster.store.ListDeadlineBreaches(r, timeout=10))
        assert message in error.details()
    empty = cluster.store.ListDeadlineBreaches(store_pb.ListDeadlineBreachesRequest(), timeout=10)
    assert list(empty.breaches) == []


BAD_OPTIONS = [
    (["--deadline", "0s"], "policy.deadline: must be a positive duration"),
    (["--deadline", "-5m"], "--deadline: '-5m' is not a duration"),
    (["--deadline", "soon"], "--deadline: 'soon' is not a duration"),
    (["--notify", "ftp://hooks.example/x"], "policy.notifiers[0].url: must be an http"),
    (["--notify", "not a url"], "policy.notifiers[0].url: must not contain spaces"),
    (
        ["--notify", "https://hooks.example/x", "--notify-format", "xml"],
        "notify_format: 'xml' is not one of json, slack",
    ),
    (["--notify-format", "slack"], "--notify-format: give it with --notify"),
]


def test_the_cli_refuses_a_bad_deadline_or_notifier_and_creates_nothing(
    cluster: Cluster,  # noqa: F811
) -> None:
    for options, message in BAD_OPTIONS:
        check_cli_refused(cluster, options, message)


def check_cli_refused(
    cluster: Cluster,  # noqa: F811
    options: list[str],
    message: str,
) -> None:
    # When a schedule is created, and then updated, with the bad option
    schedule_id = fresh("cli")
    env = cli_env(cluster.suite)
    runner = CliRunner()
    base = ["schedule", "create", schedule_id, "--job-type", "cronwave.noop"]
    created = runner.invoke(app, [*base, "--cron", "0 2 * * *", *options], env=env)
    runner.invoke(app, [*base, "--cron", "0 3 * * *", "--deadline", "45m"], env=env)
    updated = runner.invoke(app, ["schedule", "update", schedule_id, *options], env=env)

    # Then each exits 1 with one line naming the option or field, and no traceback
    for result in (created, updated):
        assert result.exit_code == 1, result.output
        assert message in result.stderr, result.stderr
        assert "Traceback" not in result.output
    # and the schedule is the one the good create made, unchanged by the update
    shown = cluster.store.GetSchedule(
        store_pb.GetScheduleRequest(schedule_id=schedule_id), timeout=10
    ).schedule
    assert list(shown.spec.cron) == ["0 3 * * *"]
    assert shown.policy.deadline.seconds == 45 * 60
