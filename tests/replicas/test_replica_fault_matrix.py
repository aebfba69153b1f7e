"""The fault matrix (``tests/fault_matrix``) with every service in replicas: two
workflow-stores, leader-elections, dispatchers, workers and cron-planners. Each kill -9
hits a service's first replica while the others serve; the same audit holds: every
slot of every window has exactly one run or a MISSED record its facts bear out, none
is stuck, no job body started twice. PostgreSQL only (two stores share its database).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cronwave_bench.fault_matrix import run_fault_matrix
from cronwave_bench.matrix_faults import FAULTS, SEED_VAR, MatrixConfig, seed_from_env
from tests.conftest import PG_URL

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not PG_URL,
        reason="two store replicas share one database: PostgreSQL (CRONWAVE_TEST_DATABASE_URL)",
    ),
]


@pytest.mark.timeout(600)
def test_every_slot_under_every_fault_runs_once_with_every_service_in_replicas(
    database_url: str, tmp_path: Path, record_property: pytest.RecordProperty
) -> None:
    seed = seed_from_env()
    print(f"fault matrix in replicas, seed {seed} (set {SEED_VAR}={seed} to replay)")

    # Given two of every service under 10 one-second schedules, when every fault is
    # applied in turn
    figures = run_fault_matrix(
        MatrixConfig(schedules=10, seed=seed, replicas=True),
        database_url=database_url,
        data_dir=tmp_path / "matrix",
        say=lambda line: print(f"{datetime.now(UTC):%H:%M:%S} {line}", flush=True),
    )
    print(figures["table"])
    summary = {k: v for k, v in figures.items() if k != "table"}
    record_property("fault_matrix_replicas", json.dumps(summary))
    context = f"seed {seed}, logs in {tmp_path / 'matrix' / 'logs'}\n{figures['table']}"

    # Then every fault was applied
    assert [w["name"] for w in figures["windows"]] == list(FAULTS), context
    assert all(w["slots"] > 0 for w in figures["windows"]), context

    # And in every window each slot has one run or a true MISSED record, nothing is
    # stuck, and no job body started twice
    for window in figures["windows"]:
        where = f"{window['name']} {window['contradicted_records']}: {context}"
        assert window["missing"] == 0, where
        assert window["duplicate"] == 0, where
        assert window["stuck"] == 0, where
        assert window["unsettled"] == 0, where

    # And every worker alive at the end began exactly one attempt per run it holds
    assert len(figures["worker_check"]) == 2, context
    for worker in figures["worker_check"]:
        assert worker["excess"] == 0, f"{worker}: {context}"
