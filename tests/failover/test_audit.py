"""The drill's slot audit and the planner's fault setting, without processes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from cronwave_proto.v1 import common_pb2

from cron_planner.faults import HOLD_START, hold_start, parse
from cronwave_bench.audit import audit
from cronwave_bench.lease_timing import LeaseTiming
from cronwave_core.convert import dt_to_ts
from cronwave_core.errors import ConfigurationError

T0 = datetime(2030, 1, 1, tzinfo=UTC)
SLOTS = [T0 + timedelta(seconds=i) for i in range(1, 7)]


def run(
    second: int,
    token: int = 1,
    state: common_pb2.RunState = common_pb2.RUN_STATE_SUCCEEDED,
    attempt: int = 1,
    error: str = "",
    late: float = 0.0,
    trigger: common_pb2.TriggerKind = common_pb2.TRIGGER_KIND_SCHEDULED,
) -> common_pb2.Run:
    fire = T0 + timedelta(seconds=second)
    return common_pb2.Run(
        run_id=f"run-{second}-{token}",
        fire_time=dt_to_ts(fire),
        created_at=dt_to_ts(fire + timedelta(seconds=late)),
        state=state,
        trigger=trigger,
        attempt=attempt,
        fencing_token=token,
        error=error,
    )


def test_every_slot_fired_once_is_clean() -> None:
    result = audit([run(i, token=1 + i // 3, late=0.1 * i) for i in range(1, 7)], SLOTS)
    assert result.clean and result.tokens_in_order
    assert (result.slots, result.fired, result.missed) == (6, 6, 0)
    assert result.max_lateness_s == 0.6


def test_each_kind_of_trouble_is_counted_where_it_belongs() -> None:
    runs = [
        run(1),
        run(2, state=common_pb2.RUN_STATE_MISSED, attempt=0, error="outside_catchup_window"),
        # slot 3: nothing at all
        run(4, attempt=2),  # its job body started twice
        run(5, token=3),
        run(5, token=2),  # a second run of one slot: the store's constraint forbids it
        run(6, token=2, state=common_pb2.RUN_STATE_MISSED, error="pending:catchup"),
        run(7, token=9),  # outside the window
        run(3, trigger=common_pb2.TRIGGER_KIND_MANUAL),  # a manual run is no fire
    ]
    result = audit(runs, SLOTS)
    assert result.missed == 1
    assert result.recorded_missed == 1
    assert result.executed_twice == 1
    assert result.duplicate_runs == 1
    assert result.unfinished == 1  # the placeholder of slot 6 is work not done yet
    assert not result.tokens_in_order  # slot 6 (token 2) after slot 5 (token 3)
    assert not result.clean


def test_the_drill_lease_timing_matches_the_planner_margin_rule() -> None:
    assert LeaseTiming().figures() == {
        "ttl_s": 1.5,
        "renew_interval_s": 0.3,
        "retry_interval_s": 0.2,
        "safety_margin_s": 0.3,
    }
    # The drills run the production defaults.
    assert LeaseTiming.defaults() == LeaseTiming()
    long = LeaseTiming(ttl=timedelta(seconds=15), renew_interval=timedelta(seconds=3))
    assert long.safety_margin == timedelta(seconds=3)
    assert long.env()["CRONWAVE_LEASE_TTL"] == "15.0"
    with pytest.raises(ValueError):
        LeaseTiming(ttl=timedelta(seconds=1), renew_interval=timedelta(seconds=1))


def test_the_hold_fault_is_read_from_its_item_and_other_items_are_left_alone() -> None:
    assert hold_start(parse("")) is None
    assert hold_start(parse("delay=persist:database:50ms:0.05")) is None
    assert hold_start(parse(f"delay=plan:cache:1ms:1, {HOLD_START}=0.6")) == timedelta(seconds=0.6)
    for bad in (f"{HOLD_START}=soon", f"{HOLD_START}=0", f"{HOLD_START}=61", "hold"):
        with pytest.raises(ConfigurationError, match="CRONWAVE_FAULT"):
            hold_start(parse(bad))
