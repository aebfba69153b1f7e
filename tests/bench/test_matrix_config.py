"""The fault matrix's settings, seed and table, without processes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronwave_bench.matrix_faults import (
    FAULTS,
    SEED_VAR,
    Applied,
    MatrixConfig,
    seed_from_env,
)
from cronwave_bench.matrix_table import table
from cronwave_bench.slot_audit import WindowAudit

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def test_the_settings_refuse_what_cannot_run() -> None:
    with pytest.raises(ValueError, match="schedules"):
        MatrixConfig(schedules=0)
    with pytest.raises(ValueError, match="quiet must be positive"):
        MatrixConfig(quiet=timedelta(0))
    with pytest.raises(ValueError, match="choose from"):
        MatrixConfig(faults=("kill-everything",))
    assert MatrixConfig().faults == FAULTS


def test_the_planner_is_stopped_past_its_lease_whatever_the_hold() -> None:
    config = MatrixConfig(hold=timedelta(seconds=1))

    assert config.stop_for > config.lease.ttl + config.lease.retry_interval
    assert MatrixConfig(hold=timedelta(seconds=10)).stop_for == timedelta(seconds=10)


def test_the_seed_comes_from_its_variable_or_is_fresh() -> None:
    assert seed_from_env({SEED_VAR: "42"}) == 42
    assert seed_from_env({}) > 0
    with pytest.raises(ValueError, match=SEED_VAR):
        seed_from_env({SEED_VAR: "soon"})


def _audit(name: str, **changes: object) -> WindowAudit:
    values: dict[str, object] = {
        "name": name,
        "slots": 100,
        "fired": 100,
        "missing": 0,
        "contradicted": 0,
        "duplicate": 0,
        "body_started_twice": 0,
        "reruns": 0,
        "reruns_possible": 0,
        "reruns_not_begun": 0,
        "stuck": 0,
        "unsettled": 0,
        "late": 0,
        "resumed": 0,
        "tokens_in_order": True,
        **changes,
    }
    return WindowAudit(**values)  # type: ignore[arg-type]


def test_the_table_has_a_row_per_fault_with_its_trouble_and_recovery() -> None:
    stop = Applied("stop-planner", "SIGSTOP leading cron-planner 3 s", T0, T0, held=True)
    kill = Applied("kill-dispatcher", "kill -9 dispatcher", T0, T0)
    audits = [
        _audit(
            "stop-planner",
            missed_by_reason={"overlap_skip": 7},
            recovery_from_injection_s=2.0,
            recovery_from_end_s=-1.0,
        ),
        _audit("kill-dispatcher", duplicate=2, reruns=2, missing=1, contradicted=1),
    ]

    text = table(audits, [stop, kill], {"blackhole-database": "no link to cut"})

    rows = text.splitlines()[2:]
    assert rows[0].startswith("| SIGSTOP leading cron-planner 3 s | 100 | 0 | 0 | 0 |")
    assert "overlap_skip 7" in rows[0] and "2.00 s (1.00 s before its end)" in rows[0]
    assert "| 1 (1 MISSED with a reason their record contradicts) |" in rows[1]
    assert "2 (2 bodies re-run after a lost completion)" in rows[1]
    assert "not recovered in the window" in rows[1]
    assert rows[2] == "| blackhole-database | left out: no link to cut | | | | | | |"
