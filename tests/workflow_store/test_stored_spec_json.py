"""Specs and policies are stored as the proto's canonical JSON: the direct conversion
gives exactly what ``json_format`` gives, both ways."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from cronwave_proto.v1 import common_pb2 as pb
from google.protobuf import json_format

from cronwave_core.domain.spec import Catchup, DstGap, DstRepeat, Interval, Overlap, Policy, Spec
from cronwave_core.errors import InvalidArgument
from workflow_store.stored_json import (
    policy_from_dict,
    policy_to_dict,
    spec_from_dict,
    spec_to_dict,
)

AT = datetime(2026, 3, 29, 1, 30, 15, tzinfo=UTC)
SPECS = [
    Spec(cron=("0 2 * * *",)),
    Spec(cron=("17 5 12 5 *",), time_zone="Europe/Berlin"),
    Spec(cron=("0 0 * * *", "5 * * * * *"), time_zone="America/New_York"),
    Spec(cron=("0 2 * * *",), dst_gap=DstGap.SKIP, dst_repeat=DstRepeat.TWICE),
    Spec(cron=("0 2 * * *",), dst_repeat=DstRepeat.LAST, exclude_dates=(date(2026, 12, 25),)),
    Spec(cron=("0 2 * * *",), start_at=AT, end_at=AT + timedelta(days=3), max_runs=5),
    Spec(start_at=AT.replace(microsecond=120_000), max_runs=1, one_off=(AT,)),
    Spec(intervals=(Interval(timedelta(seconds=90), timedelta(seconds=3)),)),
    Spec(intervals=(Interval(timedelta(minutes=15)),), jitter=timedelta(seconds=1.5)),
    Spec(one_off=(AT, AT.replace(microsecond=123_456), AT + timedelta(days=400))),
    Spec(cron=("@daily",), jitter=timedelta(microseconds=7)),
]
POLICIES = [
    Policy(),
    Policy(overlap=Overlap.ALLOW_ALL),
    Policy(overlap=Overlap.BUFFER_ALL, catchup=Catchup.ALL, catchup_max_runs=7),
    Policy(catchup=Catchup.SKIP, catchup_window=timedelta(seconds=0)),
    Policy(overlap=Overlap.CANCEL_OTHER, catchup_window=timedelta(hours=2, microseconds=5)),
]


def proto_spec_dict(spec: Spec) -> dict[str, object]:
    return json_format.MessageToDict(spec.to_proto(), preserving_proto_field_name=True)


@pytest.mark.parametrize("spec", SPECS)
def test_specs_are_stored_and_read_as_json_format_does(spec: Spec) -> None:
    stored = spec_to_dict(spec)
    assert stored == proto_spec_dict(spec)
    read = spec_from_dict(stored)
    assert read == Spec.from_proto(json_format.ParseDict(stored, pb.ScheduleSpec()))
    assert read == spec


@pytest.mark.parametrize("policy", POLICIES)
def test_policies_are_stored_and_read_as_json_format_does(policy: Policy) -> None:
    stored = policy_to_dict(policy)
    assert stored == json_format.MessageToDict(policy.to_proto(), preserving_proto_field_name=True)
    assert policy_from_dict(stored) == Policy.from_proto(
        json_format.ParseDict(stored, pb.SchedulePolicy())
    )
    assert policy_from_dict(stored) == policy


@pytest.mark.parametrize(
    "stored",
    [
        {"cron": ["0 2 * * *"], "dst_gap": 2, "max_runs": 3},
        {"cron": ["0 2 * * *"], "jitter": "0.000000001s", "start_at": "2026-01-01T00:00:00.5Z"},
        {"one_off": ["2026-01-01T10:00:00+01:00"]},
        {"cron": [" 0 2 * * * "], "time_zone": ""},
        {"intervals": [{"every": "60s"}], "exclude_dates": ["2026-01-01"]},
    ],
)
def test_other_stored_forms_read_as_json_format_reads_them(stored: dict[str, object]) -> None:
    assert spec_from_dict(stored) == Spec.from_proto(
        json_format.ParseDict(stored, pb.ScheduleSpec())
    )


def test_a_stored_form_the_proto_refuses_is_refused_the_same_way() -> None:
    stored = {"cron": ["0 2 * * *"], "jitter": "-1s"}
    with pytest.raises(InvalidArgument) as direct:
        spec_from_dict(stored)
    with pytest.raises(InvalidArgument) as reference:
        Spec.from_proto(json_format.ParseDict(stored, pb.ScheduleSpec()))
    assert str(direct.value) == str(reference.value)


def test_the_direct_conversion_knows_every_field_of_spec_and_policy() -> None:
    """A field added to ``Spec`` or ``Policy`` is stored correctly through
    ``json_format`` until the direct path knows it; this says when it does not."""
    from tests.schedules.field_samples import every_field_set
    from workflow_store.stored_json import POLICY_DIRECT, SPEC_DIRECT

    assert SPEC_DIRECT and POLICY_DIRECT
    spec, policy = every_field_set()
    assert (
        spec_to_dict(spec) == proto_spec_dict(spec) and spec_from_dict(spec_to_dict(spec)) == spec
    )
    assert policy_from_dict(policy_to_dict(policy)) == policy
