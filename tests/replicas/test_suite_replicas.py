"""How a suite is told to run replicas (``SuiteConfig.replicas``), checked before any
process starts: every caller is given every replica, and what cannot be replicated is
refused with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from cronwave_core.errors import ConfigurationError
from cronwave_core.suite import Suite, SuiteConfig

PG = "postgresql+psycopg://postgres@127.0.0.1:5432/unused"


def test_every_caller_is_given_every_replica_and_each_replica_its_own_port(
    tmp_path: Path,
) -> None:
    suite = Suite(
        SuiteConfig(
            data_dir=tmp_path,
            database_url=PG,
            redis_url="redis://127.0.0.1:6379/0",
            ports={},
            replicas={"workflow-store": 2, "dispatcher": 3},
        )
    )
    stores = suite.addresses("workflow-store")
    assert len(stores) == 2 and len(set(stores)) == 2
    assert len(suite.addresses("dispatcher")) == 3
    assert suite.addresses("leader-election") == [suite.address("leader-election")]
    env = suite.base_env()
    assert env["CRONWAVE_STORE_ADDR"] == ",".join(stores) == suite.store_addr
    assert env["CRONWAVE_DISPATCHER_ADDR"] == suite.dispatcher_addr


@pytest.mark.parametrize(
    ("replicas", "database_url", "says"),
    [
        ({"workflow-store": 2}, None, "a SQLite file is one process's"),
        ({"cron-planner": 2}, PG, "for workflow-store, leader-election, dispatcher"),
        ({"dispatcher": 0}, PG, "got dispatcher=0"),
    ],
)
def test_what_cannot_be_replicated_is_refused(
    tmp_path: Path, replicas: dict[str, int], database_url: str | None, says: str
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        Suite(
            SuiteConfig(data_dir=tmp_path, database_url=database_url, ports={}, replicas=replicas)
        )
    assert str(refused.value).startswith("replicas: ")
    assert says in str(refused.value)
