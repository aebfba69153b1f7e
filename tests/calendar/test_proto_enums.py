"""Each policy, run state and trigger kind is one enum, mapped to its proto enum by
name: a value on one side without the other fails here."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from cronwave_proto.v1 import common_pb2 as pb

from cronwave_core.domain.runs import RUN_STATES, TRIGGERS, RunState, Trigger
from cronwave_core.domain.spec import (
    CATCHUPS,
    DST_GAPS,
    DST_REPEATS,
    OVERLAPS,
    Catchup,
    DstGap,
    DstRepeat,
    Interval,
    Overlap,
    Policy,
    ScheduleDef,
    Spec,
)
from cronwave_core.errors import InvalidArgument
from cronwave_core.proto_enum import ProtoEnum

TABLES: list[tuple[ProtoEnum[Any, Any], Any]] = [
    (DST_GAPS, pb.DstGapPolicy),
    (DST_REPEATS, pb.DstRepeatPolicy),
    (OVERLAPS, pb.OverlapPolicy),
    (CATCHUPS, pb.CatchupPolicy),
    (RUN_STATES, pb.RunState),
    (TRIGGERS, pb.TriggerKind),
]
IDS = [table.members.__name__ for table, _ in TABLES]


@pytest.mark.parametrize(("table", "wrapper"), TABLES, ids=IDS)
def test_every_proto_value_but_unspecified_is_one_member_and_back(table, wrapper):
    proto = {v.name: v.number for v in wrapper.DESCRIPTOR.values if v.number != 0}

    assert {table.names[m]: int(m.to_proto()) for m in table.members} == proto
    for member in table.members:
        assert table.members.from_proto(member.to_proto()) is member


@pytest.mark.parametrize(
    ("table", "default"),
    [
        (DST_GAPS, Spec().dst_gap),
        (DST_REPEATS, Spec().dst_repeat),
        (OVERLAPS, Policy().overlap),
        (CATCHUPS, Policy().catchup),
        (TRIGGERS, Trigger.SCHEDULED),
    ],
    ids=["DstGap", "DstRepeat", "Overlap", "Catchup", "Trigger"],
)
def test_unspecified_is_the_fields_default(table, default):
    assert table.members.from_proto(0) is default


def test_a_run_state_is_never_unspecified_and_unknown_values_name_the_field():
    with pytest.raises(InvalidArgument) as info:
        RunState.from_proto(0, "states[2]")
    assert str(info.value) == "states[2]: unknown value 0"
    with pytest.raises(InvalidArgument, match=r"^policy.overlap: unknown value 99$"):
        Overlap.from_proto(99)


def test_names_parse_in_any_case_and_a_wrong_one_lists_the_choices():
    assert Overlap.parse("Buffer-One") is Overlap.BUFFER_ONE
    assert RunState.parse("timed_out") is RunState.TIMED_OUT
    assert DstRepeat.parse(" TWICE ") is DstRepeat.TWICE

    with pytest.raises(InvalidArgument) as info:
        Catchup.parse("everything")
    assert str(info.value) == ("policy.catchup: 'everything' is not one of skip, latest, all")
    with pytest.raises(InvalidArgument, match=r"states\[0\]: 'DONE' is not one of PENDING, "):
        RunState.parse("DONE", "states[0]")


def test_a_spec_a_policy_and_a_schedule_convert_and_back_unchanged():
    spec = Spec(
        cron=("0 2 * * *",),
        time_zone="Europe/Berlin",
        dst_gap=DstGap.SKIP,
        dst_repeat=DstRepeat.LAST,
        exclude_dates=(date(2030, 12, 25),),
        start_at=datetime(2030, 1, 1, tzinfo=UTC),
        end_at=datetime(2031, 1, 1, tzinfo=UTC),
        max_runs=7,
        intervals=(Interval(timedelta(hours=6), timedelta(minutes=5)),),
        one_off=(datetime(2030, 6, 1, 12, tzinfo=UTC),),
        jitter=timedelta(seconds=30),
    )
    policy = Policy(Overlap.CANCEL_OTHER, Catchup.ALL, timedelta(minutes=3), 12)

    assert Spec.from_proto(spec.to_proto()) == spec
    assert Policy.from_proto(policy.to_proto()) == policy
    msg = pb.Schedule(schedule_id="s", spec=spec.to_proto(), policy=policy.to_proto())
    assert ScheduleDef.from_proto(msg) == ScheduleDef("s", spec, policy)
    assert Policy.from_proto(pb.SchedulePolicy()) == Policy()
    assert Spec.from_proto(pb.ScheduleSpec()) == Spec()
