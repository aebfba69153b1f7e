"""A package declares a server of its own to the suite by an entry point of the group
``cronwave.processes`` (``cronwave_core.suite_processes``), as the billing example
declares its payment gateway; the suite names no package itself, and ``cronwave up``
runs every declared one."""

from __future__ import annotations

from pathlib import Path

import pytest

from cronwave_core.errors import ConfigurationError
from cronwave_core.suite import Suite, SuiteConfig
from cronwave_core.suite_processes import (
    SuiteProcess,
    declared_processes,
    installed_process,
    require_process,
)
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


def test_cronwave_up_finds_every_declared_process() -> None:
    assert GATEWAY in declared_processes()


def test_an_added_process_runs_once_at_the_suite_s_own_address(tmp_path: Path) -> None:
    # Given a suite config that runs the gateway already, with an address from outside
    config = SuiteConfig(
        data_dir=tmp_path,
        processes=(GATEWAY,),
        env={"CRONWAVE_GATEWAY_ADDR": "10.0.0.1:7406", "CRONWAVE_RPC_TIMEOUT": "5"},
    )

    # When the gateway is added again
    added = config.with_processes([GATEWAY])

    # Then it runs once, and the suite's own address is the one its processes get
    assert added.processes == (GATEWAY,)
    assert added.env == {"CRONWAVE_RPC_TIMEOUT": "5"}
    suite = Suite(added)
    assert suite.base_env()["CRONWAVE_GATEWAY_ADDR"] == suite.address(GATEWAY)


def test_adding_a_process_no_package_declares_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"'no-such-process'.*cronwave\.processes"):
        SuiteConfig(data_dir=tmp_path).with_processes(["no-such-process"])
