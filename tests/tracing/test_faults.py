"""The latency fault hook: parsed from CRONWAVE_FAULT, off by default, deterministic per
run, and installed only in a process started for tests (CRONWAVE_TEST_HOOKS)."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from opentelemetry.sdk.trace import TracerProvider

from cronwave_core.errors import ConfigurationError
from cronwave_core.faults import (
    NO_FAULTS,
    POINTS,
    Faults,
    LatencyFault,
    fault_hooks,
    parse,
    run_key,
)
from cronwave_core.settings import TEST_HOOKS, TestHooks
from cronwave_core.telemetry.vocabulary import ATTR_FAULT

FIRE = datetime(2025, 3, 1, 2, 0, 0, 123456, tzinfo=UTC)


def test_no_variable_means_no_fault() -> None:
    faults = Faults.from_env_value("")
    assert not faults
    assert faults.inject("persist", "database", run_key("s", FIRE)) == timedelta(0)


def test_a_delay_item_is_read_and_other_items_are_left_alone() -> None:
    # Given the planner's own item next to a latency fault
    raw = "planner.hold_start=0.5, delay=persist:database:50ms:0.02"
    # When it is parsed
    faults = parse(raw)
    # Then only the latency fault is taken, exactly as written
    assert faults == [LatencyFault("persist", "database", timedelta(milliseconds=50), 0.02)]
    assert faults[0].label == "persist:database:+50ms"


@pytest.mark.parametrize(
    ("raw", "delay", "fraction"),
    [
        ("delay=pickup:queue:80ms:0.05", timedelta(milliseconds=80), 0.05),
        ("delay=pickup:queue:0.08s:5%", timedelta(milliseconds=80), 0.05),
        ("delay=pickup:queue:1:1", timedelta(seconds=1), 1.0),
    ],
)
def test_delays_and_fractions_in_every_spelling(
    raw: str, delay: timedelta, fraction: float
) -> None:
    (fault,) = parse(raw)
    assert (fault.delay, fault.fraction) == (delay, fraction)


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("delay=persist:database:50ms", "expected delay=<hop>:<kind>:<delay>:<fraction>"),
        ("delay=persist:network:50ms:0.1", "no fault point persist:network"),
        ("delay=persist:database:fast:0.1", "the delay must look like 50ms"),
        ("delay=persist:database:0ms:0.1", "above 0"),
        ("delay=persist:database:50ms:2", "from 0 to 1"),
        ("delay=persist:database:50ms:x", "a number from 0 to 1"),
        (
            "delay=persist:database:50ms:0.1,delay=persist:database:60ms:0.1",
            "named twice",
        ),
    ],
)
def test_a_malformed_fault_stops_start_up_naming_the_variable(raw: str, says: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse(raw)
    assert caught.value.message.startswith("CRONWAVE_FAULT: ")
    assert says in caught.value.message


def test_every_point_named_in_the_docs_is_accepted() -> None:
    for hop, kind in POINTS:
        assert parse(f"delay={hop}:{kind}:1ms:0.5")[0].hop == hop


def test_selection_is_deterministic_and_close_to_the_fraction() -> None:
    fault = LatencyFault("persist", "database", timedelta(milliseconds=50), 0.05)
    keys = [run_key(f"sched-{i % 7}", FIRE + timedelta(seconds=i)) for i in range(20_000)]
    chosen = [k for k in keys if fault.selected(k)]
    # The same keys are chosen every time, in every process (no per-process seed)
    assert chosen == [k for k in keys if fault.selected(k)]
    assert 0.045 < len(chosen) / len(keys) < 0.055
    # and another point picks other runs
    other = LatencyFault("pickup", "queue", timedelta(milliseconds=50), 0.05)
    overlap = {k for k in chosen} & {k for k in keys if other.selected(k)}
    assert len(overlap) < len(chosen) / 5


def test_run_key_is_the_schedule_and_the_fire_time_in_microseconds() -> None:
    assert run_key("nightly", FIRE) == "nightly@1740794400123456"
    assert run_key("nightly", FIRE.astimezone()) == run_key("nightly", FIRE)


def test_inject_sleeps_the_delay_and_marks_the_span() -> None:
    # Given a fault that hits every run
    faults = Faults([LatencyFault("execute", "app", timedelta(milliseconds=30), 1.0)])
    span = TracerProvider().get_tracer("test").start_span("execute")
    # When it is injected
    began = time.monotonic()
    slept = faults.inject("execute", "app", run_key("s", FIRE), span)
    span.end()
    # Then the delay was slept and the span says which fault it was
    assert slept == timedelta(milliseconds=30)
    assert time.monotonic() - began >= 0.03
    assert getattr(span, "attributes", {}).get(ATTR_FAULT) == "execute:app:+30ms"
    # and another point is untouched
    assert faults.inject("persist", "database", run_key("s", FIRE)) == timedelta(0)


def test_a_process_not_started_for_tests_gets_the_no_op_hooks() -> None:
    # Given the settings of a production process (no switch, no fault)
    settings = TestHooks.from_env({})
    # When its fault hooks are built
    hooks = fault_hooks(settings)
    # Then they are the shared no-op ones: nothing configured, nothing slept
    assert hooks is NO_FAULTS
    assert not settings.enabled
    assert hooks.get("execute", "app") is None
    assert hooks.inject("execute", "app", run_key("s", FIRE)) == timedelta(0)


def test_the_injector_is_installed_only_with_the_switch_and_a_fault() -> None:
    on = {TEST_HOOKS: "1"}
    assert fault_hooks(TestHooks.from_env(on)) is NO_FAULTS  # the switch alone: nothing to inject
    hooks = fault_hooks(TestHooks.from_env({**on, "CRONWAVE_FAULT": "delay=execute:app:1ms:1"}))
    assert isinstance(hooks, Faults)
    assert hooks.get("execute", "app") == LatencyFault(
        "execute", "app", timedelta(milliseconds=1), 1.0
    )


@pytest.mark.parametrize(
    "env",
    [
        {"CRONWAVE_FAULT": "delay=persist:database:50ms:0.05"},
        {"CRONWAVE_FAULT": "planner.hold_start=0.5", TEST_HOOKS: "off"},
        {"CRONWAVE_GATEWAY_TIMEOUT_AFTER_COMMIT": "1"},
        {"CRONWAVE_BILLING_CRASH_AFTER_CHARGES": "3"},
        {"CRONWAVE_MISSED_SLOTS_AHEAD": "100000h"},
    ],
)
def test_a_fault_without_the_switch_stops_start_up_naming_both(env: dict[str, str]) -> None:
    with pytest.raises(ConfigurationError) as caught:
        TestHooks.from_env(env)
    (variable,) = (name for name in env if name != TEST_HOOKS)
    assert caught.value.message.startswith(f"{variable} set, but {TEST_HOOKS} is not: ")
    assert "never in production" in caught.value.message


def test_settings_built_by_hand_refuse_a_fault_without_the_switch_too() -> None:
    on = TestHooks.from_env({TEST_HOOKS: "1", "CRONWAVE_FAULT": "delay=execute:app:1ms:1"})
    with pytest.raises(ConfigurationError, match=f"CRONWAVE_FAULT set, but {TEST_HOOKS} is not"):
        replace(on, enabled=False)


def test_a_malformed_switch_stops_start_up_naming_it() -> None:
    with pytest.raises(ConfigurationError) as caught:
        TestHooks.from_env({TEST_HOOKS: "yes please"})
    assert caught.value.message == f"{TEST_HOOKS}: expected on or off, got 'yes please'"
