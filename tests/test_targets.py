"""How a peer's address setting becomes what a channel dials (``cronwave_core.targets``),
and the settings' and the servers' refusals of a list where one address is needed."""

from __future__ import annotations

import json

import pytest

from cronwave_core.errors import ConfigurationError
from cronwave_core.settings import NetworkSettings
from cronwave_core.targets import ROUND_ROBIN, one_address, target


def test_one_address_is_dialled_as_it_is() -> None:
    assert target("127.0.0.1:7401").target == "127.0.0.1:7401"
    assert target("workflow-store:7401").options == ()


def test_a_list_of_replicas_is_one_round_robin_target_verified_by_its_first_host() -> None:
    dialled = target(" 10.0.0.5:7401 , 10.0.0.6:7401,")
    assert dialled.target == "ipv4:10.0.0.5:7401,10.0.0.6:7401"
    options = dict(dialled.options)
    assert json.loads(options["grpc.service_config"]) == {
        "loadBalancingConfig": [{"round_robin": {}}]
    }
    assert options["grpc.ssl_target_name_override"] == "10.0.0.5"
    assert dialled.replicas == 2
    six = target("[::1]:7401,[::1]:7402")
    assert six.target == "ipv6:[::1]:7401,[::1]:7402"
    assert dict(six.options)["grpc.ssl_target_name_override"] == "::1"


def test_a_dns_target_spreads_its_calls_over_every_address_of_the_name() -> None:
    dialled = target("dns:///workflow-store-headless:7401")
    assert dialled.target == "dns:///workflow-store-headless:7401"
    assert dict(dialled.options) == {"grpc.service_config": ROUND_ROBIN}


def test_the_targets_own_options_win_over_the_callers() -> None:
    merged = target("10.0.0.5:1,10.0.0.6:1").with_options(
        [("grpc.service_config", "{}"), ("grpc.keepalive_time_ms", 10_000)]
    )
    assert dict(merged)["grpc.service_config"] == ROUND_ROBIN
    assert dict(merged)["grpc.keepalive_time_ms"] == 10_000


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("store-a:7401,store-b:7401", "takes IP:PORT entries"),
        ("10.0.0.5:7401,10.0.0.6", "takes IP:PORT entries"),
        ("10.0.0.5:7401,10.0.0.6:70000", "takes IP:PORT entries"),
        ("10.0.0.5:7401,[::1]:7401", "all IPv4 or all IPv6"),
        ("::1:7401,::1:7402", "as [ADDRESS]:PORT"),
        (" , ", "empty value"),
    ],
)
def test_a_list_grpc_cannot_dial_is_refused_naming_the_variable(value: str, says: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        target(value, "CRONWAVE_STORE_ADDR")
    assert str(refused.value).startswith("CRONWAVE_STORE_ADDR: ")
    assert says in str(refused.value)


def test_settings_take_a_list_and_refuse_names_in_one() -> None:
    env = {"CRONWAVE_DISPATCHER_ADDR": "127.0.0.1:7403, 127.0.0.1:7413"}
    assert NetworkSettings.from_env(env).dispatcher_addr == "127.0.0.1:7403,127.0.0.1:7413"
    with pytest.raises(ConfigurationError) as refused:
        NetworkSettings.from_env({"CRONWAVE_STORE_ADDR": "a:7401,b:7401"})
    assert "CRONWAVE_STORE_ADDR: expected HOST:PORT" in str(refused.value)
    assert "IP:PORT,IP:PORT" in str(refused.value)


def test_a_process_listens_on_one_address_not_on_a_list() -> None:
    assert one_address(" 127.0.0.1:7401 ", "CRONWAVE_STORE_ADDR") == "127.0.0.1:7401"
    with pytest.raises(ConfigurationError) as refused:
        one_address("127.0.0.1:7401,127.0.0.1:7411", "CRONWAVE_STORE_ADDR")
    assert "CRONWAVE_STORE_ADDR: a process listens on one HOST:PORT" in str(refused.value)
