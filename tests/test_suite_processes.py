"""A package declares a server of its own to the suite by an entry point of the group
``cronwave.processes`` (``cronwave_core.suite_processes``), as the billing example
declares its payment gateway; the suite names no package itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from cronwave_core.errors import ConfigurationError
from cronwave_core.suite import Suite, SuiteConfig
from cronwave_core.suite_processes import SuiteProcess, installed_process, require_process
from tests.harness.gateway import GATEWAY

SUITE = Path(__file__).resolve().parents[1] / "libs" / "cronwave_core" / "suite.py"


def test_the_billing_example_declares_its_gateway() -> None:
    declared = require_process(GATEWAY)

    assert declared.module == "cronwave_billing.gateway"
    assert declared.grpc_service == "cronwave_billing.v1.PaymentGatewayService"
    assert "cronwave_billing" not in SUITE.read_text()  # the suite names no package


def test_a_suite_with_the_gateway_runs_what_the_declaration_says(tmp_path: Path) -> None:
    suite = Suite(SuiteConfig(data_dir=tmp_path, processes=(GATEWAY,), ports={}))

    assert suite.extra == {GATEWAY: require_process(GATEWAY)}
    assert suite.base_env()["CRONWAVE_GATEWAY_ADDR"] == suite.address(GATEWAY)
    assert suite.address(GATEWAY) == f"127.0.0.1:{suite.ports['gateway']}"


def test_a_process_no_package_declares_is_refused_by_name() -> None:
    assert installed_process("no-such-process") is None
    with pytest.raises(ConfigurationError, match=r"'no-such-process'.*cronwave\.processes"):
        require_process("no-such-process")


def test_a_declaration_is_checked() -> None:
    with pytest.raises(ValueError, match="addr_var must end in _ADDR"):
        SuiteProcess("m", "cronwave.v1.X", "GATEWAY", "gateway", 7406)
    with pytest.raises(ValueError, match="default_port be from 1024 to 65535"):
        SuiteProcess("m", "cronwave.v1.X", "GATEWAY_ADDR", "gateway", 80)
