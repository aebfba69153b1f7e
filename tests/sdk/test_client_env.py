"""``Client()`` with no arguments finds its suite in ``CRONWAVE_*_ADDR`` (and its
deadline in ``CRONWAVE_RPC_TIMEOUT``), else the ports ``cronwave up`` serves by
default; an argument given wins over its variable."""

from __future__ import annotations

from datetime import timedelta

import pytest

import cronwave
from cronwave_core.settings import DEFAULT_PORTS
from tests.helpers import fresh

pytestmark = pytest.mark.slow

ADDRS = ("STORE", "DISPATCHER", "PLANNER", "LEADER")


@pytest.fixture
def no_addr_env(monkeypatch):
    for name in ADDRS:
        monkeypatch.delenv(f"CRONWAVE_{name}_ADDR", raising=False)
    monkeypatch.delenv("CRONWAVE_RPC_TIMEOUT", raising=False)
    return monkeypatch


def test_a_client_with_no_arguments_reaches_the_suite_its_variables_name(make_suite, no_addr_env):
    suite = make_suite()
    no_addr_env.setenv("CRONWAVE_STORE_ADDR", suite.store_addr)
    no_addr_env.setenv("CRONWAVE_DISPATCHER_ADDR", suite.dispatcher_addr)
    no_addr_env.setenv("CRONWAVE_PLANNER_ADDR", suite.planner_addr)
    no_addr_env.setenv("CRONWAVE_LEADER_ADDR", suite.leader_addr)
    no_addr_env.setenv("CRONWAVE_RPC_TIMEOUT", "10")
    sid = fresh("env")

    with cronwave.Client() as client:
        client.create_schedule(sid, cron="0 2 * * *", job_type="cronwave.noop", paused=True)
        listed = [s.schedule_id for s in client.list_schedules()]
        leader = client.leader()

    assert sid in listed
    assert isinstance(leader, cronwave.Lease)  # leader-election's address came from its variable
    assert client.timeout == timedelta(seconds=10)


def test_without_variables_a_client_uses_the_default_ports(no_addr_env):
    with cronwave.Client() as client:
        assert repr(client) == f"Client(store_addr='127.0.0.1:{DEFAULT_PORTS['store']}', ...)"
        assert client.timeout == timedelta(seconds=5)


def test_an_argument_wins_over_its_variable(no_addr_env):
    no_addr_env.setenv("CRONWAVE_STORE_ADDR", "127.0.0.1:1")

    with cronwave.Client(store_addr="127.0.0.1:2", timeout=timedelta(seconds=3)) as client:
        assert repr(client) == "Client(store_addr='127.0.0.1:2', ...)"
        assert client.timeout == timedelta(seconds=3)


def test_a_malformed_variable_is_named(no_addr_env):
    no_addr_env.setenv("CRONWAVE_DISPATCHER_ADDR", "localhost")

    with pytest.raises(cronwave.ConfigurationError, match="CRONWAVE_DISPATCHER_ADDR"):
        cronwave.Client()
