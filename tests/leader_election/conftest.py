"""Real leader-election processes (and a real workflow-store when one is wanted) on
free loopback ports, stopped by pid when the test ends."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from cronwave_core.suite import Suite, SuiteConfig


@pytest.fixture
def services(tmp_path: Path, redis_url: str, namespace: str) -> Iterator[Suite]:
    """A suite whose services the test starts one by one (``start_service``)."""
    suite = Suite(
        SuiteConfig(
            data_dir=tmp_path / "suite",
            database_url=f"sqlite:///{tmp_path / 'cronwave.db'}",
            redis_url=redis_url,
            ports={},
            env={"CRONWAVE_NAMESPACE": namespace},
            grace=timedelta(seconds=2),
            start_timeout=timedelta(seconds=30),
        )
    )
    yield suite
    suite.stop()
    assert not suite.pids(), f"processes left running: {suite.pids()}"
