"""Where a worker's job types come from, with real processes: a job module of the
test's own (``CRONWAVE_JOB_MODULES``, ``cronwave worker --jobs``) and an installed
package's entry point (a ``*.dist-info`` on PYTHONPATH, read by importlib.metadata)
run on a 1-second schedule to SUCCEEDED (and a job raising a NonRetryable fails at its
first attempt, not retried); a module that cannot be imported, and two
modules with one job name, stop the worker's start-up, named."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc

from cronwave import Interval, Run
from cronwave_core.rpc import open_channel
from cronwave_core.suite import Suite, free_port
from tests.harness.cli import user_env
from tests.harness.clients import client_for
from tests.harness.processes import ProcessTable
from tests.helpers import eventually, fresh

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
#: How long a refusing worker may take to exit.
START_BOUND_S = 60.0

JOB_MODULE = """
from datetime import timedelta

import cronwave


@cronwave.job({name!r}, duration_limit=timedelta(minutes=1), queue={queue!r})
def greet(ctx: cronwave.JobContext) -> dict:
    ctx.logger.info("greeting from %s", {name!r})
    return {{"job": {name!r}, "attempt": ctx.attempt}}
"""


DECLINING_JOB = """

class CardDeclined(cronwave.NonRetryable):
    pass


@cronwave.job({name!r}, duration_limit=timedelta(minutes=1))
def decline(ctx: cronwave.JobContext) -> dict:
    raise CardDeclined("card declined")
"""


def module_name(prefix: str) -> str:
    """A module name no other test uses (an identifier, unlike ``fresh``'s)."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def write_job_module(code: Path, module: str, job: str, queue: str = "default") -> None:
    (code / f"{module}.py").write_text(JOB_MODULE.format(name=job, queue=queue))


def write_entry_point(code: Path, dist: str, entry: str, module: str) -> None:
    """What installing a distribution with ``[project.entry-points."cronwave.jobs"]``
    leaves in site-packages, enough for importlib.metadata."""
    info = code / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[cronwave.jobs]\n{entry} = {module}\n")


def python_path(*dirs: Path) -> str:
    return os.pathsep.join([*map(str, dirs), *filter(None, [os.environ.get("PYTHONPATH")])])


@pytest.fixture
def table() -> Iterator[ProcessTable]:
    """The processes a test starts itself (beside its suite's); all gone at its end."""
    procs = ProcessTable("the test's worker processes")
    yield procs
    procs.close([procs.kill])


def stop(popen: subprocess.Popen[str]) -> None:
    if popen.poll() is None:
        popen.send_signal(signal.SIGTERM)
        popen.wait(timeout=30)


def succeeded(suite: Suite, schedule_id: str) -> Run:
    """A SUCCEEDED run of ``schedule_id`` (waiting for one), failing at once on a run
    that ended otherwise."""

    def look() -> Run | None:
        with client_for(suite) as client:
            runs = client.list_runs(schedule_id, limit=20)
        ended = [r for r in runs if r.terminal]
        wrong = [r for r in ended if r.state != "SUCCEEDED"]
        assert not wrong, f"{schedule_id}: {[(r.state, r.error) for r in wrong]}"
        return next((r for r in ended if r.state == "SUCCEEDED"), None)

    return eventually(look, timeout=60, interval=0.2, what=f"a SUCCEEDED run of {schedule_id}")


def test_jobs_of_a_module_an_entry_point_and_worker_jobs_run_to_succeeded_a_non_retryable_once(
    make_suite, tmp_path: Path, table: ProcessTable
) -> None:
    # Given three job modules of the test's own in a directory on PYTHONPATH: one named
    # by CRONWAVE_JOB_MODULES, one by an installed package's entry point, one for a
    # worker started with `cronwave worker --jobs`, on a queue only that worker serves
    code = tmp_path / "code"
    code.mkdir()
    by_env, by_entry_point, by_cli = (module_name(p) for p in ("by_env", "by_ep", "by_cli"))
    jobs = {module: f"test.{module}" for module in (by_env, by_entry_point, by_cli)}
    cli_queue = module_name("cli_pool")
    write_job_module(code, by_env, jobs[by_env])
    # (the first module also has a job that raises a NonRetryable, under the default
    # policy of five attempts)
    declining = f"test.{by_env}.declined"
    with (code / f"{by_env}.py").open("a") as module:
        module.write(DECLINING_JOB.format(name=declining))
    write_job_module(code, by_entry_point, jobs[by_entry_point])
    write_job_module(code, by_cli, jobs[by_cli], queue=cli_queue)
    write_entry_point(code, module_name("acme_jobs"), "acme", by_entry_point)

    # When a suite starts with the first module, and a worker joins with --jobs
    suite = make_suite(env={"PYTHONPATH": python_path(code), "CRONWAVE_JOB_MODULES": by_env})
    cli_log = (tmp_path / "cli-worker.log").open("w")
    cli_env = {
        **suite.base_env(),
        "PYTHONPATH": python_path(code),
        "CRONWAVE_WORKER_ADDR": f"127.0.0.1:{free_port()}",
        "CRONWAVE_WORKER_ID": "cli-worker",
    }
    cli_worker = table.spawn(
        [str(BIN / "cronwave"), "worker", "--jobs", by_cli, "--queues", cli_queue],
        env=cli_env,
        stdout=cli_log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    with client_for(suite) as client:
        eventually(
            lambda: jobs[by_cli] in {t.name for t in job_types_of(suite)},
            timeout=60,
            what="the --jobs worker's job type registered",
        )
        for module, job in jobs.items():
            client.create_schedule(module, job_type=job, intervals=[Interval(timedelta(seconds=1))])
        declined_schedule = client.create_schedule(
            fresh("declined"), job_type=declining, cron="0 0 1 1 *"
        )
        declined_run = client.trigger(declined_schedule.schedule_id)

    # Then each job type's schedule has a run that SUCCEEDED with the job's result
    runs = {module: succeeded(suite, module) for module in jobs}
    for module, run in runs.items():
        assert run.result == {"job": jobs[module], "attempt": 1}

    # and the lines the job wrote through ctx.logger name their run, schedule and trace
    run = runs[by_env]
    log = suite.log_dir / "worker.log"

    def logged() -> dict[str, str]:
        lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
        return next(
            (
                line
                for line in lines
                if line.get("run_id") == run.run_id and "greeting from" in line["message"]
            ),
            {},
        )

    line = eventually(logged, timeout=20, what="the job's log line in the worker's log")
    assert line["schedule_id"] == by_env and line["trace_id"] and line["service"] == "worker"

    # and the run whose job raised a NonRetryable ended FAILED at its first attempt
    with client_for(suite) as client:
        declined = client.wait_run(declined_run.run_id, timeout=timedelta(seconds=60))
        kinds = [event.kind for event in client.run_events(declined.run_id)]
    assert (declined.state, declined.attempt) == ("FAILED", 1)
    assert declined.error.startswith("CardDeclined: card declined")
    assert "retry_scheduled" not in kinds

    stop(cli_worker)
    assert cli_worker.returncode == 0
    cli_log.close()


def job_types_of(suite: Suite) -> list[common_pb2.JobType]:
    channel = open_channel(suite.store_addr, timedelta(seconds=10))
    try:
        stub = store_grpc.WorkflowStoreServiceStub(channel)
        return list(stub.ListJobTypes(store_pb.ListJobTypesRequest(), timeout=10).job_types)
    finally:
        channel.close()


def worker_env(tmp_path: Path, code: Path, **extra: str) -> dict[str, str]:
    """No CRONWAVE_* setting but a private data dir and addresses nobody listens on:
    a worker that did start would touch nothing shared."""
    env = user_env()
    env.update(
        CRONWAVE_DATA_DIR=str(tmp_path),
        CRONWAVE_TRACING="off",
        CRONWAVE_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",
        CRONWAVE_STORE_ADDR=f"127.0.0.1:{free_port()}",
        CRONWAVE_WORKER_ADDR=f"127.0.0.1:{free_port()}",
        PYTHONPATH=python_path(code),
        **extra,
    )
    return env


def refused_start(table: ProcessTable, argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Start a worker that must refuse to start: its exit code and its output."""
    popen = table.spawn(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output, _ = popen.communicate(timeout=START_BOUND_S)
    except subprocess.TimeoutExpired:
        stop(popen)
        raise AssertionError(f"{argv} started instead of refusing") from None
    return popen.returncode, output


def test_a_job_module_that_raises_at_import_stops_the_start_naming_module_and_error(
    tmp_path: Path, table: ProcessTable
) -> None:
    # Given a job module that raises when imported
    code = tmp_path / "code"
    code.mkdir()
    broken = module_name("broken_jobs")
    (code / f"{broken}.py").write_text("raise RuntimeError('the ledger is closed')\n")

    # When a worker starts with it, directly or through `cronwave worker --jobs`
    direct = refused_start(
        table,
        [sys.executable, "-P", "-m", "worker"],
        worker_env(tmp_path, code, CRONWAVE_JOB_MODULES=broken),
    )
    through_cli = refused_start(
        table, [str(BIN / "cronwave"), "worker", "--jobs", broken], worker_env(tmp_path, code)
    )

    # Then it exits 2, naming the module and its error
    for code_, output in (direct, through_cli):
        assert code_ == 2, output
        assert f"importing '{broken}' failed: RuntimeError: the ledger is closed" in output
        assert "Traceback" not in output


def test_a_job_module_that_is_missing_is_named_with_what_to_do(
    tmp_path: Path, table: ProcessTable
) -> None:
    missing = module_name("no_such_jobs")
    code_, output = refused_start(
        table,
        [str(BIN / "cronwave"), "worker", "--jobs", missing],
        worker_env(tmp_path, tmp_path),
    )
    assert code_ == 2, output
    assert f"cannot import '{missing}'" in output and "PYTHONPATH" in output


def test_two_modules_with_one_job_name_are_refused_naming_both(
    tmp_path: Path, table: ProcessTable
) -> None:
    # Given two job modules that each define the job type "acme.report"
    code = tmp_path / "code"
    code.mkdir()
    first, second = module_name("reports_a"), module_name("reports_b")
    write_job_module(code, first, "acme.report")
    write_job_module(code, second, "acme.report")

    # When a worker starts with both
    code_, output = refused_start(
        table,
        [sys.executable, "-P", "-m", "worker"],
        worker_env(tmp_path, code, CRONWAVE_JOB_MODULES=f"{first},{second}"),
    )

    # Then it refuses, naming the job type and both modules
    assert code_ == 2, output
    assert "job type 'acme.report' is defined twice" in output
    assert f"job module '{first}'" in output and f"job module '{second}'" in output


def test_a_module_and_an_entry_point_with_one_job_name_are_refused_naming_both(
    tmp_path: Path, table: ProcessTable
) -> None:
    code = tmp_path / "code"
    code.mkdir()
    mine, theirs = module_name("mine"), module_name("theirs")
    write_job_module(code, mine, "cronwave.noop")  # a built-in's name
    write_job_module(code, theirs, "acme.sync")
    (code / f"{mine}_b.py").write_text(JOB_MODULE.format(name="acme.sync", queue="default"))
    dist = module_name("acme_sync")
    write_entry_point(code, dist, "sync", theirs)

    builtin_clash = refused_start(
        table,
        [sys.executable, "-P", "-m", "worker"],
        worker_env(tmp_path, code, CRONWAVE_JOB_MODULES=mine),
    )
    entry_point_clash = refused_start(
        table,
        [sys.executable, "-P", "-m", "worker"],
        worker_env(tmp_path, code, CRONWAVE_JOB_MODULES=f"{mine}_b"),
    )

    assert builtin_clash[0] == 2 and entry_point_clash[0] == 2
    assert "the worker's built-in jobs" in builtin_clash[1]
    assert f"entry point 'sync = {theirs}' of {dist}" in entry_point_clash[1]
    assert f"job module '{mine}_b'" in entry_point_clash[1]
