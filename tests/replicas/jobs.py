"""The job type of the replica tests, loaded by their workers through
``CRONWAVE_JOB_MODULES=tests.replicas.jobs``: a body that leaves one file per
execution, so a test counts how often each run's body ran."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from cronwave import JobContext, JobType
from cronwave_core.settings import WorkerSettings

MARK = "replicas.mark"


def executions(marks: Path, run_id: str) -> int:
    """How many times a body of ``run_id`` ran (``mark``'s files)."""
    return len(list(marks.glob(f"{run_id}.*")))


def mark(ctx: JobContext) -> Mapping[str, Any]:
    """Leaves ``<marks>/<run id>.<attempt>.<random>``: one file per execution."""
    marks = Path(str(ctx.payload["marks"]))
    (marks / f"{ctx.run_id}.{ctx.attempt}.{uuid.uuid4().hex}").touch()
    return {"attempt": ctx.attempt}


def job_types(settings: WorkerSettings) -> list[JobType]:
    return [JobType(MARK, mark, duration_limit=timedelta(minutes=1))]
