"""Job bodies in job processes, without the other services: what the process adds to
a run, a process that dies under its job, checkpoints on their way, the start at the
fire time, and the worker's stop reaching the body."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronwave_core.domain.instants import epoch_ns
from tests.harness.beats import Beats
from tests.harness.cli import user_env
from tests.harness.processes import job_processes, read_stat
from tests.helpers import eventually
from tests.reliability.jobs import SCALED_RETRY
from tests.reliability.pools import spec, supervised
from worker.job_process import JobProcessPool
from worker.outcome import Action, decide
from worker.supervisor import AttemptResult, Outcome

pytestmark = pytest.mark.slow


def run(pool: JobProcessPool, job_type: str, **payload: Any) -> AttemptResult:
    fire = datetime.now(UTC)
    return supervised(pool).run(spec(job_type, fire, **payload), fire)


def test_runs_go_to_the_warm_job_processes_and_report_what_the_process_added(
    pool: JobProcessPool, namespace: str
) -> None:
    # Given warm job processes that have run a job each
    for _ in range(4):
        assert run(pool, "cronwave.noop").outcome is Outcome.SUCCEEDED
    warm = set(job_processes(namespace))
    assert len(warm) == 2
    # When 100 runs of a job that does nothing go through them
    results = [run(pool, "cronwave.noop") for _ in range(100)]
    # Then every one ran in one of those processes (no process was started for a run)
    # and reported the time the hand-over and hand-back cost it
    assert {r.outcome for r in results} == {Outcome.SUCCEEDED}
    assert set(job_processes(namespace)) == warm
    overhead = [r.overhead_ns / 1e6 for r in results]
    assert all(ms > 0 for ms in overhead)
    # (how much that is, is a figure of `make bench`'s single scenario, not a bound here)
    q = statistics.quantiles(overhead, n=100)
    print(f"\njob process hand-over + hand-back: median {q[49]:.2f} ms, p95 {q[94]:.2f} ms")


def test_a_job_process_that_dies_fails_the_attempt_and_is_replaced(
    pool: JobProcessPool,
) -> None:
    result = run(pool, "drill.crash")
    assert result.outcome is Outcome.FAILED
    assert result.error.startswith("JobProcessDied: job process ") and "exited with code 3" in (
        result.error
    )
    assert result.error_types == ("JobProcessDied",)
    # the pool goes on with a fresh process
    assert run(pool, "cronwave.noop").outcome is Outcome.SUCCEEDED


def test_a_jobs_error_carries_its_type_names_for_the_retry_policy(pool: JobProcessPool) -> None:
    result = run(pool, "drill.flaky", declined=True)
    assert (result.outcome, result.error) == (Outcome.FAILED, "Declined: card declined")
    assert result.error_types == ("Declined",)


def test_a_subclass_of_non_retryable_raised_in_a_job_process_fails_the_run_at_once(
    pool: JobProcessPool,
) -> None:
    # Given a job type whose policy retries four times and lists no error as
    # non-retryable but "Declined"
    policy = SCALED_RETRY
    assert "CardRefused" not in policy.non_retryable_errors

    # When its body, in a job process, raises a subclass of cronwave.NonRetryable
    result = run(pool, "drill.flaky", refused=True)

    # Then the attempt failed with that error, its base type names carried back from
    # the process, and the run ends FAILED at its first attempt: no retry, no dead letter
    assert (result.outcome, result.error) == (Outcome.FAILED, "CardRefused: card refused")
    assert "NonRetryable" in result.error_types
    decision = decide(result, policy, failed_attempt=1)
    assert (decision.action, decision.outcome) == (Action.COMPLETE, Outcome.FAILED)


def test_a_checkpoint_reaches_the_store_while_the_body_runs_however_long_the_beat(
    pool: JobProcessPool, tmp_path: Path
) -> None:
    # Given a heartbeat interval of an hour and a job that checkpoints step 1, then
    # waits for its gate
    beats = Beats()
    gate = tmp_path / "gate"
    attempt: list[AttemptResult] = []
    fire = datetime.now(UTC)
    body = spec("drill.gated", fire, gate=str(gate))
    runner = threading.Thread(
        target=lambda: attempt.append(supervised(pool, beats, interval=3600).run(body, fire))
    )
    runner.start()
    try:
        # Then step 1 reaches the store while the body is still waiting: checkpoints
        # follow the job, not the heartbeat interval
        eventually(
            lambda: [c["step"] for c in beats.checkpoints] == [1],
            timeout=30,
            what="step 1's checkpoint sent while the body runs",
        )
        assert not attempt
    finally:
        gate.touch()
        runner.join(60)
    # And the last one goes out before the outcome
    [result] = attempt
    assert result.outcome is Outcome.SUCCEEDED
    assert [c["step"] for c in beats.checkpoints] == [1, 2]


def test_the_body_starts_at_its_fire_time_not_before(pool: JobProcessPool) -> None:
    beats = Beats()
    fire = datetime.now(UTC) + timedelta(seconds=0.3)
    result = supervised(pool, beats, interval=3600).run(spec("cronwave.noop", fire), fire)
    assert result.outcome is Outcome.SUCCEEDED
    # Never before the instant
    assert result.body_started_ns >= epoch_ns(fire)
    # and not at a heartbeat either: the run was over before its first beat was due.
    # (How close after the instant it starts is a figure of `make bench`, not a bound.)
    assert beats.sent == []


def test_a_release_stops_the_body_at_its_next_checkpoint(pool: JobProcessPool) -> None:
    # Given a job checkpointing every 0.1 s for 10 s
    beats = Beats()
    supervisor = supervised(pool, beats)
    fire = datetime.now(UTC)
    threading.Timer(0.5, supervisor.release).start()  # the worker's SIGTERM
    began = time.monotonic()
    # When the worker asks for the run back
    result = supervisor.run(spec("drill.steps", fire, steps=100, step_seconds=0.1), fire)
    # Then the body stops at its next checkpoint, which the release carries (or which
    # already went out with a beat)
    assert result.outcome is Outcome.RELEASED
    assert time.monotonic() - began < 5
    newest = result.checkpoint_json or [body for body in beats.sent if body][-1]
    assert 1 <= json.loads(newest)["step"] < 100
    assert result.body_started_ns > 0


def test_a_forced_release_kills_a_body_that_never_checkpoints(pool: JobProcessPool) -> None:
    supervisor = supervised(pool)
    fire = datetime.now(UTC)
    threading.Timer(0.3, supervisor.release).start()
    threading.Timer(0.6, supervisor.force_release).start()  # the grace period is over
    began = time.monotonic()

    result = supervisor.run(spec("cronwave.sleep", fire, seconds=30), fire)

    assert result.outcome is Outcome.RELEASED
    assert result.checkpoint_json == ""
    assert time.monotonic() - began < 10  # SIGTERM, then SIGKILL after the kill grace


def test_a_body_waiting_for_its_fire_time_is_released_without_starting(
    pool: JobProcessPool,
) -> None:
    supervisor = supervised(pool)
    fire = datetime.now(UTC) + timedelta(seconds=30)
    threading.Timer(0.3, supervisor.release).start()
    began = time.monotonic()

    result = supervisor.run(spec("drill.steps", fire, steps=5), fire)

    assert result.outcome is Outcome.RELEASED
    assert result.body_started_ns == 0
    assert time.monotonic() - began < 10  # not held until the fire time


def test_runs_beyond_the_process_cap_wait_heartbeating_for_a_process(
    pool: JobProcessPool, tmp_path: Path
) -> None:
    # Given a pool of two processes, both busy with jobs that wait for their gate
    gate = tmp_path / "gate"
    results: list[AttemptResult] = []

    def busy() -> None:
        fire = datetime.now(UTC)
        results.append(supervised(pool).run(spec("drill.gated", fire, gate=str(gate)), fire))

    threads = [threading.Thread(target=busy) for _ in range(2)]
    third: list[AttemptResult] = []
    beats = Beats()
    try:
        for thread in threads:
            thread.start()
        eventually(lambda: pool.idle_count() == 0, timeout=30, what="both processes busy")
        # When a third run comes
        fire = datetime.now(UTC)
        waiting = threading.Thread(
            target=lambda: third.append(
                supervised(pool, beats, interval=0.2).run(spec("cronwave.noop", fire), fire)
            )
        )
        waiting.start()
        threads.append(waiting)
        # Then it waits for a process, heartbeating meanwhile
        eventually(lambda: len(beats.sent) >= 2, timeout=30, what="beats while waiting")
        assert not third and not results
    finally:
        opened_ns = time.time_ns()
        gate.touch()
        for thread in threads:
            thread.join(60)
    # and runs once one is free: after the gate let a busy one end
    assert [r.outcome for r in results] == [Outcome.SUCCEEDED, Outcome.SUCCEEDED]
    [late] = third
    assert late.outcome is Outcome.SUCCEEDED
    assert late.body_started_ns > opened_ns


def test_a_job_process_dies_with_its_worker_even_while_starting(tmp_path: Path) -> None:
    # Given a parent that starts a job process and is killed at once
    script = (
        "import os, subprocess, sys, time\n"
        "env = dict(os.environ, CRONWAVE_JOB_PARENT_PID=str(os.getpid()))\n"
        "p = subprocess.Popen([sys.executable, '-P', '-m', 'worker.job_runner'], env=env,\n"
        "                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    # whose job modules take a minute to import: the job process is still starting
    # whenever it dies in the next minute
    (tmp_path / "slow_job_module.py").write_text("import time\ntime.sleep(60)\n")
    env = user_env()
    env.update(
        CRONWAVE_DATA_DIR=str(tmp_path),
        CRONWAVE_TRACING="off",
        CRONWAVE_JOB_MODULES="slow_job_module",
        PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")])),
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait(10)

    # Then the job process is gone, though it was still importing its job modules
    def gone() -> bool:
        try:
            status = Path(f"/proc/{child}/status").read_text()
        except OSError:
            return True
        return "State:\tZ" in status

    eventually(gone, timeout=30, what="the orphaned job process gone")


def test_job_processes_are_forked_import_their_job_modules_themselves_and_die_with_their_worker(
    tmp_path: Path, namespace: str
) -> None:
    # Given a worker's pool of two warm job processes, forked from its fork server,
    # whose job module notes each process that imports it
    script = (
        "import time\n"
        "from worker.job_process import JobProcessPool\n"
        "pool = JobProcessPool(warm=2, max_processes=2)\n"
        "pool.start(wait=True)\n"
        "procs = [pool.acquire(wait=10) for _ in range(2)]\n"
        "print(' '.join(str(proc.pid) for proc in procs), flush=True)\n"
        "time.sleep(60)\n"
    )
    imports = tmp_path / "imported-in"
    (tmp_path / "noting_job_module.py").write_text(
        "import os\n"
        "from datetime import timedelta\n"
        "from cronwave import JobType\n"
        f"with open({str(imports)!r}, 'a') as f:\n"
        "    f.write(f'{os.getpid()}\\n')\n"
        "def job_types(settings):\n"
        "    return [JobType('noting.noop', lambda ctx: {}, timedelta(minutes=1))]\n"
    )
    env = user_env()
    env.update(
        CRONWAVE_DATA_DIR=str(tmp_path),
        CRONWAVE_TRACING="off",
        CRONWAVE_NAMESPACE=namespace,
        CRONWAVE_JOB_MODULES="noting_job_module",
        PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")])),
    )
    worker = subprocess.Popen(
        [sys.executable, "-P", "-c", script], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert worker.stdout is not None
        pids = [int(pid) for pid in worker.stdout.readline().split()]
        assert len(pids) == 2, "the pool's two processes"
        parents = {stat.ppid for stat in map(read_stat, pids) if stat is not None}
        [server] = parents
        # Then each is a child of the fork server, itself the worker's child, and
        # names itself
        server_stat = read_stat(server)
        assert server != worker.pid and server_stat is not None
        assert server_stat.ppid == worker.pid
        for pid in pids:
            assert Path(f"/proc/{pid}/comm").read_text().strip() == "cronwave-job"
        assert sorted(job_processes(namespace)) == sorted(pids)
        # and the job module was imported by each job process, never by the server
        assert sorted(int(line) for line in imports.read_text().split()) == sorted(pids)
    finally:
        worker.kill()
        worker.wait(10)

    # When the worker was killed, its job processes and their fork server are gone
    def gone(pid: int) -> bool:
        try:
            return "State:\tZ" in Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return True

    eventually(lambda: all(gone(pid) for pid in [*pids, server]), timeout=30, what="all gone")
