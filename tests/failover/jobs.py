"""The job type of the worker partition test, loaded by its workers through
``CRONWAVE_JOB_MODULES=tests.failover.jobs``: a body that waits for its attempt's gate
file, so the test decides when each attempt returns."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from cronwave import JobContext, JobType
from cronwave_core.settings import WorkerSettings

#: Long enough that a loaded machine's heartbeats do not lapse, short enough that the
#: cut worker's attempt is taken over within seconds.
HEARTBEAT_TIMEOUT = timedelta(seconds=3)


def gate_of(gate: str, attempt: int) -> Path:
    """The file that lets attempt ``attempt`` of a run with ``payload["gate"]`` return."""
    return Path(f"{gate}.{attempt}")


def returned_of(gate: str, attempt: int) -> Path:
    """The file attempt ``attempt`` writes as its body returns."""
    return Path(f"{gate}.{attempt}.returned")


def gated(ctx: JobContext) -> Mapping[str, Any]:
    """Checkpoints its attempt, waits (two minutes at most) for its attempt's gate
    file, says it returns (``returned_of``) and returns its attempt."""
    ctx.heartbeat({"attempt": ctx.attempt})
    gate = gate_of(str(ctx.payload["gate"]), ctx.attempt)
    for _ in range(12_000):
        if gate.exists():
            returned_of(str(ctx.payload["gate"]), ctx.attempt).touch()
            return {"attempt": ctx.attempt}
        time.sleep(0.01)
    raise TimeoutError(f"the gate {gate} was not opened within two minutes")


def job_types(settings: WorkerSettings) -> list[JobType]:
    return [
        JobType(
            "partition.gated",
            gated,
            duration_limit=timedelta(minutes=5),
            heartbeat_timeout=HEARTBEAT_TIMEOUT,
        )
    ]
