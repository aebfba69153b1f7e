"""Every service of a real suite writes JSON lines (its stderr is a file, not a
terminal), each naming its service; every line of a run in the worker's log, the
job's own ``ctx.logger`` lines included, names the run, its schedule and its trace."""

from __future__ import annotations

import json
import os
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from cronwave_core.suite import Suite
from tests.harness.clients import client_for
from tests.harness.suites import SuiteFactory, make_suite  # noqa: F401  (fixture)
from tests.helpers import eventually

pytestmark = pytest.mark.slow

SERVICES = ("workflow-store", "leader-election", "dispatcher", "worker", "cron-planner")

JOB_MODULE = """
from datetime import timedelta

import cronwave


@cronwave.job({name!r}, duration_limit=timedelta(minutes=1))
def chatty(ctx: cronwave.JobContext) -> dict:
    ctx.logger.info("billing %d customers", 3)
    ctx.logger.warning("customer %s: card \\"expired\\"", "c-2")
    return {{"ok": True}}
"""


def lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def parsed(path: Path) -> list[dict[str, Any]]:
    """Every line of ``path`` as JSON; a line that is not fails the test, naming it."""
    out = []
    for number, line in enumerate(lines(path), 1):
        try:
            out.append(json.loads(line))
        except ValueError:
            pytest.fail(f"{path.name}:{number} is not a JSON line: {line!r}")
    return out


def mentions(record: dict[str, Any], run_id: str) -> bool:
    return record.get("run_id") == run_id or run_id in record.get("message", "")


def test_a_runs_lines_are_json_with_its_ids_and_each_service_names_itself(
    make_suite: SuiteFactory,  # noqa: F811
    tmp_path: Path,
) -> None:
    # Given a job module whose job logs through ctx.logger, and a suite running it
    code = tmp_path / "code"
    code.mkdir()
    module = f"chatty_{uuid.uuid4().hex[:10]}"
    job_type = f"test.{module}"
    (code / f"{module}.py").write_text(JOB_MODULE.format(name=job_type))
    path = os.pathsep.join(filter(None, [str(code), os.environ.get("PYTHONPATH")]))
    suite: Suite = make_suite(env={"PYTHONPATH": path, "CRONWAVE_JOB_MODULES": module})
    schedule_id = f"logs-{uuid.uuid4().hex[:8]}"

    # When a run of it is triggered and succeeds
    with client_for(suite) as client:
        client.create_schedule(schedule_id, cron="0 2 * * *", job_type=job_type)
        run = client.trigger(schedule_id)
        run = client.wait_run(run.run_id, timeout=timedelta(seconds=60))
    assert run.state == "SUCCEEDED", run.error

    # Then the worker's log has the job's two lines, as JSON, with the run's ids
    worker_log = suite.log_dir / "worker.log"

    def job_lines() -> list[dict[str, Any]]:
        found = [r for r in parsed(worker_log) if r.get("logger") == f"cronwave.job.{job_type}"]
        assert len(found) == 2, found
        return found

    own = eventually(job_lines, timeout=20, what="the job's lines in the worker's log")
    assert [r["message"] for r in own] == ["billing 3 customers", 'customer c-2: card "expired"']
    assert [r["level"] for r in own] == ["INFO", "WARNING"]
    # and every line of the run names the run, its schedule and its trace
    of_run = [r for r in parsed(worker_log) if mentions(r, run.run_id)]
    assert len(of_run) >= 2
    for record in of_run:
        assert record["run_id"] == run.run_id, record
        assert record["schedule_id"] == schedule_id, record
        assert len(record["trace_id"]) == 32 and int(record["trace_id"], 16), record
        assert record["service"] == "worker", record
    assert {r["trace_id"] for r in own} == {run.trace_id}
    assert all(len(r["span_id"]) == 16 for r in own)
    # and every service's log is JSON lines that name the service
    for name in SERVICES:
        records = parsed(suite.log_dir / f"{name}.log")
        assert records, name
        assert {r["service"] for r in records} == {name}, name
        assert all({"time", "level", "logger", "message"} <= r.keys() for r in records)
        assert any(r["message"].startswith(f"{name} listening on") for r in records), name
