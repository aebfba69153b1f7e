"""The bench's scenario ``billing`` reaches the billing demo only through the entry point
``billing`` of the group ``cronwave.demos``: the demo an installed package declares
there is the one it drives, and without one the scenario is not available."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from cronwave_bench import billing
from cronwave_bench.context import BenchContext
from cronwave_bench.harness import Backend
from cronwave_bench.report import NOT_AVAILABLE
from cronwave_core.errors import ConfigurationError
from cronwave_core.suite import SuiteConfig


def test_the_scenario_drives_the_demo_the_billing_example_declares(tmp_path: Path) -> None:
    # Given the billing example, installed here (make setup)
    demo = billing.billing_demo()

    # When the scenario asks it for its suite, given a gateway address from outside
    config = demo.suite_config(
        SuiteConfig(data_dir=tmp_path, env={"CRONWAVE_GATEWAY_ADDR": "127.0.0.1:9"})
    )

    # Then the suite runs the demo's gateway at its own address, and the job's database
    # comes first among the demo's
    assert config.processes == ("payment-gateway",)
    assert "CRONWAVE_GATEWAY_ADDR" not in config.env
    assert next(iter(demo.databases)) == "CRONWAVE_BILLING_DATABASE_URL"


def _declared(monkeypatch: pytest.MonkeyPatch, points: list[EntryPoint]) -> None:
    def found(group: str, name: str) -> list[EntryPoint]:
        assert (group, name) == (billing.DEMOS, "billing")
        return points

    monkeypatch.setattr(billing, "entry_points", found)


def test_without_a_declared_demo_the_scenario_is_not_available(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an installation in which no package declares the demo
    _declared(monkeypatch, [])

    # When the scenario runs
    result = billing.run_billing(BenchContext(backend=Backend(), work_dir=tmp_path))

    # Then it measures nothing and says why, naming the group
    assert result.status == NOT_AVAILABLE and result.rows == []
    assert "cronwave.demos" in result.notes[0]
    assert not list(tmp_path.iterdir())  # no suite started


def test_an_entry_point_naming_something_else_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _declared(monkeypatch, [EntryPoint("billing", "cronwave_bench.billing:DEMOS", billing.DEMOS)])

    with pytest.raises(ConfigurationError, match=r"billing = cronwave_bench.billing:DEMOS.*str"):
        billing.billing_demo()
