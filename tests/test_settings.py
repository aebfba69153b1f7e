"""The settings classes (cronwave_core.settings), their one parser (cronwave_core.config)
and the configuration table generated from them (tools/config_table.py)."""

from __future__ import annotations

import importlib.util
import re
from datetime import timedelta
from pathlib import Path
from types import ModuleType

import pytest

from cronwave_core import config
from cronwave_core.errors import ConfigurationError
from cronwave_core.settings import (
    LeaseSettings,
    NetworkSettings,
    PlannerSettings,
    TestHooks,
    WorkerSettings,
    check_env,
    components,
)

ROOT = Path(__file__).resolve().parent.parent
#: Variables the test harness reads (never a process): see docs/operations/configure.md.
HARNESS_ONLY = {"CRONWAVE_WORKER_POOLS", "CRONWAVE_FAULT_MATRIX_SEED"}


def _load_tool() -> ModuleType:
    path = ROOT / "tools" / "config_table.py"
    spec = importlib.util.spec_from_file_location("config_table", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_configuration_table_is_fresh() -> None:
    # Given the generator and docs/operations/configure.md as committed
    tool = _load_tool()
    page = tool.DOC.read_text(encoding="utf-8")
    # When the table is generated from the settings classes as they are
    fresh = tool.render(page)
    # Then the page already has it
    stale = "docs/operations/configure.md is stale: run `python tools/config_table.py`"
    assert fresh == page, stale


def test_every_variable_the_code_names_is_a_setting_of_one_class() -> None:
    declared = [var.name for cls in components() for _, var in config.variables(cls)]
    assert len(declared) == len(set(declared)), "a variable is declared by two classes"
    named: set[str] = set()
    for folder in ("libs", "services"):
        for path in (ROOT / folder).rglob("*.py"):
            if "/v1/" not in str(path):
                named |= set(re.findall(r"\bCRONWAVE_[A-Z][A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
    assert named - set(declared) - HARNESS_ONLY == set()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("500ms", timedelta(milliseconds=500)),
        ("5s", timedelta(seconds=5)),
        ("2m", timedelta(minutes=2)),
        ("1h", timedelta(hours=1)),
        ("2.5", timedelta(seconds=2.5)),  # bare: the seconds the variable always had
        ("1.5s", timedelta(seconds=1.5)),
        ("0", timedelta(0)),
    ],
)
def test_a_duration_takes_a_unit_and_a_bare_number_keeps_its_old_one(
    raw: str, expected: timedelta
) -> None:
    assert PlannerSettings.from_env({"CRONWAVE_DISPATCH_LEAD": raw}).dispatch_lead == expected


def test_a_bare_number_of_a_milliseconds_variable_is_milliseconds() -> None:
    poll = WorkerSettings.from_env({"CRONWAVE_WORKER_POLL_MS": "5"}).poll
    assert poll == timedelta(milliseconds=5)
    assert WorkerSettings.from_env({"CRONWAVE_WORKER_POLL_MS": "0.25s"}).poll == poll * 50
    with pytest.raises(ConfigurationError, match=r"CRONWAVE_WORKER_POLL_MS: .* from 1ms to 10s"):
        WorkerSettings.from_env({"CRONWAVE_WORKER_POLL_MS": "0"})


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"CRONWAVE_RPC_TIMEOUT": "soon"},
            "CRONWAVE_RPC_TIMEOUT: expected a duration such as 500ms, 5s or 2m (a bare "
            "number is seconds), got 'soon'",
        ),
        (
            {"CRONWAVE_RPC_TIMEOUT": "-1s"},
            "CRONWAVE_RPC_TIMEOUT: expected a duration such as 500ms, 5s or 2m (a bare "
            "number is seconds), got '-1s'",
        ),
        (
            {"CRONWAVE_STORE_ADDR": "nowhere"},
            "CRONWAVE_STORE_ADDR: expected HOST:PORT, dns:///NAME:PORT, or replicas as "
            "IP:PORT,IP:PORT,..., got 'nowhere'",
        ),
        (
            {"CRONWAVE_SWEEP_LIMIT": "0"},
            "CRONWAVE_SWEEP_LIMIT: expected a whole number from 1 to 10000, got '0'",
        ),
        (
            {"CRONWAVE_JOB_ISOLATION": "fork"},
            "CRONWAVE_JOB_ISOLATION: expected process or thread, got 'fork'",
        ),
        ({"CRONWAVE_DATABASE_URL": "cronwave.db"}, "CRONWAVE_DATABASE_URL: expected a SQLAlchemy"),
        (
            {"CRONWAVE_LEASE_TTL": "2s", "CRONWAVE_LEASE_RENEW_INTERVAL": "2s"},
            "CRONWAVE_LEASE_RENEW_INTERVAL: must be shorter than CRONWAVE_LEASE_TTL",
        ),
        (
            {"CRONWAVE_LEASE_TTL": "20s", "CRONWAVE_LEASE_MAX_TTL": "19s"},
            "CRONWAVE_LEASE_MAX_TTL: must be at least CRONWAVE_LEASE_TTL",
        ),
    ],
)
def test_a_bad_value_stops_start_up_naming_the_variable_and_the_rule(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        check_env(env)
    assert caught.value.message.startswith(message)


def test_defaults_derived_from_other_settings() -> None:
    lease = LeaseSettings.from_env({"CRONWAVE_LEASE_TTL": "10s"})
    assert lease.renew_interval == timedelta(seconds=2)  # TTL / 5
    assert lease.max_ttl == timedelta(seconds=40)  # TTL * 4
    assert LeaseSettings.from_env({}).max_ttl == timedelta(seconds=6)
    worker = WorkerSettings.from_env({"CRONWAVE_WORKER_THREADS": "1"})
    assert (worker.max_processes, worker.warm_processes) == (1, 1)
    assert NetworkSettings.from_env({"CRONWAVE_RPC_TIMEOUT": ""}).rpc_timeout == timedelta(
        seconds=5
    )  # empty is unset


def test_test_only_settings_are_apart_from_the_production_classes() -> None:
    test_only = {var.name for _, var in config.variables(TestHooks)}
    assert "CRONWAVE_FAULT" in test_only and "CRONWAVE_TEST_HOOKS" in test_only
    for cls in components():
        if cls is not TestHooks:
            assert not test_only & {var.name for _, var in config.variables(cls)}
