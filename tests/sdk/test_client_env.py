"""``Client()`` with no arguments finds its suite in ``CRONWAVE_*_ADDR`` (and its
deadline in ``CRONWAVE_RPC_TIMEOUT``), else in the record of the running suite of the
data dir (``CRONWAVE_DATA_DIR``, else the per-user default); an argument given wins
over its variable. (A real ``cronwave up`` reached so:
``tests/cli/test_suite_from_anywhere.py``.)"""

from __future__ import annotations

from datetime import timedelta

import pytest

import cronwave
from cronwave import _suite_record
from tests.helpers import fresh

pytestmark = pytest.mark.slow

ADDRS = ("STORE", "DISPATCHER", "PLANNER", "LEADER")


@pytest.fixture
def no_addr_env(monkeypatch):
    for name in ADDRS:
        monkeypatch.delenv(f"CRONWAVE_{name}_ADDR", raising=False)
    monkeypatch.delenv("CRONWAVE_RPC_TIMEOUT", raising=False)
    monkeypatch.delenv("CRONWAVE_DATA_DIR", raising=False)
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


def test_without_variables_a_client_uses_the_suite_of_the_default_data_dir(no_addr_env, tmp_path):
    # Given a running suite recorded in the per-user data dir (this process stands in)
    no_addr_env.setenv("XDG_STATE_HOME", str(tmp_path))
    data_dir = tmp_path / "cronwave"
    data_dir.mkdir()
    addrs = {name: f"127.0.0.1:{7601 + i}" for i, name in enumerate(_suite_record.SERVICES)}
    _suite_record.started(data_dir, addrs, tls_dir=str(tmp_path / "tls"))

    with cronwave.Client() as client:
        assert repr(client) == "Client(store_addr='127.0.0.1:7601', ...)"
        assert client.timeout == timedelta(seconds=5)


def test_an_argument_wins_over_its_variable(no_addr_env):
    for name in ADDRS:
        no_addr_env.setenv(f"CRONWAVE_{name}_ADDR", "127.0.0.1:1")

    with cronwave.Client(store_addr="127.0.0.1:2", timeout=timedelta(seconds=3)) as client:
        assert repr(client) == "Client(store_addr='127.0.0.1:2', ...)"
        assert client.timeout == timedelta(seconds=3)


def test_a_malformed_variable_is_named(no_addr_env):
    no_addr_env.setenv("CRONWAVE_DISPATCHER_ADDR", "localhost")

    with pytest.raises(cronwave.ConfigurationError, match="CRONWAVE_DISPATCHER_ADDR"):
        cronwave.Client()
