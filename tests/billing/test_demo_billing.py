"""``cronwave demo billing`` as a user runs it: a private suite and gateway, a progress
bar, a kill -9 of the worker mid-run, and the reconciliation it ends with."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cronwave.cli.main import app
from tests.billing.conftest import NewDatabase

pytestmark = pytest.mark.slow


def test_demo_billing_survives_a_kill_and_reconciles_to_zero(
    tmp_path: Path, database_url: str, new_database: NewDatabase
) -> None:
    env = {
        "CRONWAVE_DATABASE_URL": database_url,
        "CRONWAVE_BILLING_DATABASE_URL": new_database("billing"),
        "CRONWAVE_GATEWAY_DATABASE_URL": new_database("gateway"),
        "CRONWAVE_REDIS_URL": None,  # the demo's own embedded redis
        "CRONWAVE_TRACING": "off",
    }
    args = [
        "demo", "billing", "--customers", "30000", "--kill-worker-after", "1s",
        "--data-dir", str(tmp_path / "demo"), "--timeout", "3m",
    ]  # fmt: skip

    result = CliRunner().invoke(app, args, env=env)

    out = result.stdout
    assert result.exit_code == 0, (out, result.stderr)
    assert re.search(r"kill -9 \S+ \(pid \d+\)", out)
    assert re.search(r"attempt \d+ resumed from the checkpoint", out)
    for row, value in (
        ("customers", "30,000"),
        ("invoices", "30,000"),
        ("charges", "30,000"),
        ("duplicate charges", "0"),
        ("missing charges", "0"),
    ):
        assert re.search(rf"│ {row}\s+│\s+{value} │", out), row
    assert re.search(r"│ kill -9 to resumed\s+│\s+[\d.]+s │", out)
    assert "billed every invoice exactly once" in out


def test_demo_billing_refuses_a_bad_duration_before_starting_anything(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["demo", "billing", "--kill-worker-after", "soon", "--data-dir", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert "expected a duration" in result.stderr
    assert not (tmp_path / "logs").exists()
