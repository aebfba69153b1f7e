"""Forced failovers (30 in `make test`) against a 1-second schedule: no slot fired twice, none lost.

Three planners; the leader is ended again and again -- a quarter of the time by
kill -9 (its lease must run out), otherwise by SIGTERM (it stops firing and resigns)
-- and restarted in the background. ``CRONWAVE_TEST_FAILOVERS`` sets the count (30 by
default) on the production backend (CI: PostgreSQL); on SQLite, when PostgreSQL is
configured too, a quarter of it keeps the suite in its budget (the planner's side of
the guarantee does not depend on the backend; the store's fencing on SQLite is proved
by ``workflow_store`` on both). The figures are printed (``pytest -s``) and kept as
the test's properties. ``make bench`` runs the long drill (``cronwave bench failover``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cronwave_bench.failover import run_failover
from tests.conftest import BACKENDS

pytestmark = pytest.mark.slow

FAILOVERS = int(os.environ.get("CRONWAVE_TEST_FAILOVERS", "30"))
FAILOVERS_SECOND_BACKEND = max(FAILOVERS // 4, 1)


@pytest.mark.timeout(900)
def test_forced_failovers_fire_every_slot_exactly_once(
    backend: str,
    database_url: str,
    redis_url: str,
    tmp_path: Path,
    record_property: pytest.RecordProperty,
) -> None:
    # Given three planners and a 1-second schedule, when the leader is ended `failovers` times
    failovers = FAILOVERS if backend == BACKENDS[-1] else FAILOVERS_SECOND_BACKEND
    figures = run_failover(
        failovers,
        planners=3,
        graceful_share=0.75,
        database_url=database_url,
        redis_url=redis_url,
        data_dir=tmp_path / "drill",
    )
    summary = {k: v for k, v in figures.items() if k != "trial_log"}
    print(json.dumps(summary, indent=1))
    for key, value in summary.items():
        record_property(key, json.dumps(value))

    # Then every failover handed over to a newer token
    log = figures["trial_log"]
    assert len(log) == failovers
    assert all(t["new_token"] > t["old_token"] for t in log)
    assert figures["crashes"] == failovers - round(failovers * 0.75)

    # And every slot of the drill fired exactly once: no job body twice, no start
    # refused as stale, no slot without a run or a MISSED record
    audit = figures["audit"]
    assert audit["slots"] >= failovers
    assert figures["job_body_ran_twice"] == 0
    assert figures["refused_stale"] == 0
    assert audit["duplicate_runs"] == 0
    assert figures["duplicate_fires"] == 0
    assert figures["missed_fires"] == 0
    assert audit["unfinished"] == 0
    assert audit["tokens_in_order"]
    assert figures["executions"] == figures["started_runs"]
