"""A run dispatched ahead of its fire time is WAITING, not RUNNING, until its body
starts: claimed and held by a worker, but nothing of the job has run yet. Seen the same
through the store, the CLI and the store's gauges, on real processes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cronwave_proto.v1 import common_pb2
from typer.testing import CliRunner

from cronwave.cli.main import app
from cronwave_core.suite import Suite
from tests.harness.clients import client_for
from tests.harness.cluster import Cluster
from tests.harness.suites import SuiteFactory
from tests.helpers import eventually, fresh
from tests.metrics.test_metrics_endpoints import scrape, value

pytestmark = pytest.mark.slow

#: How far ahead the planner dispatches (CRONWAVE_DISPATCH_LEAD): longer than the
#: default 5 s, so the run is seen held well before its fire time on a loaded machine.
LEAD = timedelta(seconds=10)
#: How long the body runs: long enough to be seen RUNNING past the gauges' 5-s cache.
BODY = timedelta(seconds=12)


def cli_runs(suite: Suite, schedule_id: str) -> list[dict[str, Any]]:
    """``cronwave runs list --schedule ID -o json`` against ``suite``."""
    env = {
        "CRONWAVE_STORE_ADDR": suite.store_addr,
        "CRONWAVE_DISPATCHER_ADDR": suite.dispatcher_addr,
        "CRONWAVE_PLANNER_ADDR": suite.planner_addr,
        "CRONWAVE_LEADER_ADDR": suite.leader_addr,
        "CRONWAVE_RPC_TIMEOUT": "10",
    }
    args = ["runs", "list", "--schedule", schedule_id, "-o", "json"]
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    runs: list[dict[str, Any]] = json.loads(result.stdout)
    return runs


def gauges(suite: Suite) -> tuple[float, float]:
    """The store's ``cronwave_runs_waiting`` and ``cronwave_runs_running``."""
    store = scrape(suite, "workflow-store")
    assert "cronwave_runs_waiting" in store, "the store exports no cronwave_runs_waiting"
    return value(store, "cronwave_runs_waiting"), value(store, "cronwave_runs_running")


def test_a_run_claimed_ahead_is_waiting_until_its_body_starts(make_suite: SuiteFactory):
    # Given a whole suite that dispatches 10 s ahead, and a 12-s sleep due in 22 s
    suite = make_suite(env={"CRONWAVE_DISPATCH_LEAD": f"{LEAD.total_seconds():g}s"})
    cluster = Cluster(suite)
    try:
        sid = fresh("waiting")
        fire = (datetime.now(UTC) + LEAD + timedelta(seconds=12)).replace(microsecond=0)

        with client_for(suite) as client:
            client.create_schedule(
                sid,
                job_type="cronwave.sleep",
                payload={"seconds": BODY.total_seconds()},
                one_off=[fire],
            )

            # When a worker has claimed its run, ahead of the fire time
            def claimed() -> str:
                runs = client.list_runs(sid)
                assert runs and runs[0].claimed_at is not None, [r.state for r in runs]
                return runs[0].run_id

            run_id = eventually(claimed, timeout=30, interval=0.2, what="the run claimed")
            assert datetime.now(UTC) < fire - timedelta(seconds=2), "claimed too late to see"

            # Then, before its fire time, the store holds it WAITING, not RUNNING
            held = cluster.run(run_id)
            assert common_pb2.RunState.Name(held.state) == "RUN_STATE_WAITING"
            assert held.worker_id and not held.HasField("started_at")
            # and the CLI's runs list says so
            assert [r["state"] for r in cli_runs(suite, sid)] == ["WAITING"]
            # and the store counts it waiting, not running
            eventually(lambda: gauges(suite) == (1, 0), timeout=8, interval=0.5, what="gauges 1, 0")
            assert datetime.now(UTC) < fire, "the checks must see the run before its slot"

            # When its body has started, at its fire time
            def running() -> Any:
                run = client.get_run(run_id)
                assert run.state == "RUNNING", run.state
                return run

            started = eventually(running, timeout=30, interval=0.2, what="the run RUNNING")

        # Then it is RUNNING everywhere, its body begun at or after its fire time
        assert started.started_at is not None and started.started_at >= fire
        assert common_pb2.RunState.Name(cluster.run(run_id).state) == "RUN_STATE_RUNNING"
        assert [r["state"] for r in cli_runs(suite, sid)] == ["RUNNING"]
        eventually(lambda: gauges(suite) == (0, 1), timeout=8, interval=0.5, what="gauges 0, 1")
        assert datetime.now(UTC) < fire + BODY, "the checks must see the body still running"
    finally:
        cluster.close()
