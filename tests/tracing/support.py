"""What the tracing tests share: a suite whose spans are read back, runs driven
through it, and the spans and runs of what was driven."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cronwave_bench.load_drive import LoadReport, Target, drive
from cronwave_core.suite import Suite
from cronwave_waterfall import Run, RunFilter, Span, build_runs, load_spans, select_runs
from tests.harness.clients import client_for
from tests.helpers import eventually, fresh

WAIT = timedelta(seconds=60)
# The worker's idle poll: short, so that the broker's poll does not hide in a run's
# pickup time what a test wants to see there.
QUIET = {"CRONWAVE_WORKER_POLL_MS": "5"}


def traced_suite(
    make_suite: Callable[..., Suite], env: Mapping[str, str] | None = None, test_hooks: bool = False
) -> Suite:
    """A traced suite; ``test_hooks`` for one that injects faults (``CRONWAVE_FAULT``)."""
    return make_suite(env={**QUIET, **(env or {})}, test_hooks=test_hooks)


def target(suite: Suite, namespace: str) -> Target:
    return Target(suite.store_addr, suite.dispatcher_addr, suite.redis_url, namespace)


def load(suite: Suite, namespace: str, runs: int, **options: object) -> LoadReport:
    """``runs`` runs driven end to end; every one must have succeeded."""
    report = drive(target(suite, namespace), runs=runs, **options)  # type: ignore[arg-type]
    assert report.unfinished == 0 and report.refused == 0, report.summary()
    assert report.states == {"SUCCEEDED": runs}, report.summary()
    return report


def spans_of(suite: Suite) -> list[Span]:
    """Every span the suite wrote. The suite is stopped first: a stopped service has
    flushed all its spans."""
    suite.stop()
    return load_spans(Path(suite.config.data_dir))


def runs_since(spans: list[Span], since: datetime | None) -> list[Run]:
    return select_runs(build_runs(spans), RunFilter(since=since))


def scheduled_tick(suite: Suite, lead: timedelta = timedelta(seconds=2)) -> str:
    """The run id of one fire of a one-off no-op schedule, fired by the planner."""
    sid = fresh("tick")
    with client_for(suite) as client:
        client.create_schedule(sid, job_type="cronwave.noop", one_off=[datetime.now(UTC) + lead])
        runs = eventually(lambda: client.list_runs(sid, limit=1), timeout=30, what="the fire")
        run = client.wait_run(runs[0].run_id, timeout=WAIT)
    assert run.state == "SUCCEEDED", run
    return run.run_id


def triggered(suite: Suite, count: int = 1) -> list[str]:
    """Run ids of ``count`` manual runs of a new no-op schedule, all finished."""
    sid = fresh("manual")
    ids = []
    with client_for(suite) as client:
        client.create_schedule(sid, cron="0 2 * * *", job_type="cronwave.noop")
        for _ in range(count):
            run = client.wait_run(client.trigger(sid).run_id, timeout=WAIT)
            assert run.state == "SUCCEEDED", run
            ids.append(run.run_id)
    return ids
