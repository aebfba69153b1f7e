"""A worker's pool of job processes without the worker: the fixture and the run
specs the job-process tests share."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.harness.beats import Beats
from tests.harness.cli import user_env
from tests.harness.processes import job_processes
from tests.helpers import REPO, eventually
from worker.isolation import ProcessSupervisor
from worker.job_process import JobProcessPool

__all__ = ["open_pool", "pool", "spec", "supervised"]


@pytest.fixture
def pool(tmp_path: Path, namespace: str) -> Iterator[JobProcessPool]:
    """Two warm job processes, at most two."""
    with open_pool(tmp_path, namespace, processes=2) as two:
        yield two


@contextlib.contextmanager
def open_pool(
    tmp_path: Path, namespace: str, processes: int, warm: int | None = None
) -> Iterator[JobProcessPool]:
    """At most ``processes`` job processes, ``warm`` of them (default: all) started
    ahead, running the drills' jobs; all of them gone when it closes."""
    env = user_env()
    env.update(
        CRONWAVE_DATA_DIR=str(tmp_path),
        CRONWAVE_TRACING="off",
        CRONWAVE_NAMESPACE=namespace,
        CRONWAVE_JOB_MODULES="tests.reliability.jobs",
        PYTHONPATH=str(REPO),
    )
    pool = JobProcessPool(
        warm=processes if warm is None else warm, max_processes=processes, env=env
    )
    pool.start(wait=True)
    try:
        yield pool
    finally:
        pool.close()
    eventually(lambda: not job_processes(namespace), timeout=10, what="job processes gone")


def spec(job_type: str, fire_time: datetime | None = None, **payload: Any) -> dict[str, Any]:
    return {
        "run_id": "run-1",
        "schedule_id": "s",
        "fire_time": (fire_time or datetime.now(UTC)).isoformat(),
        "attempt": 1,
        "job_type": job_type,
        "payload": payload,
        "checkpoint": {},
        "trace": {},
    }


def supervised(
    pool: JobProcessPool,
    beats: Beats | None = None,
    interval: float = 10,
    watch: Callable[[Callable[[], None] | None], None] | None = None,
) -> ProcessSupervisor:
    return ProcessSupervisor(
        pool,
        beats or Beats(),
        heartbeat_interval=timedelta(seconds=interval),
        duration_limit=timedelta(seconds=30),
        kill_grace=timedelta(seconds=0.5),
        watch=watch,
    )
