"""A deadline and its webhooks declared in a ``cronwave apply`` file: created, left
alone when unchanged, updated in place, and refused naming the entry and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from cronwave.cli.main import app
from tests.cli.test_cli_suite import env_for, ok
from tests.harness.clients import client_for
from tests.harness.suites import SuiteFactory, make_suite  # noqa: F401  (fixture)
from tests.helpers import fresh


def applied(path: Path, env: dict[str, str | None]) -> Any:
    return json.loads(ok(["apply", "-f", str(path), "-o", "json"], env))


def declare(path: Path, schedule_id: str, deadline: str, url: str, fmt: str) -> Path:
    path.write_text(
        f"""
schedules:
  - id: {schedule_id}
    job_type: cronwave.noop
    cron: "0 2 * * *"
    deadline: {deadline}
    notify: [{url}]
    notify_format: {fmt}
""",
        encoding="utf-8",
    )
    return path


def test_apply_declares_deadlines_and_webhooks(
    make_suite: SuiteFactory,  # noqa: F811
    tmp_path: Path,
) -> None:
    suite = make_suite(planners=0)
    env = env_for(suite)
    schedule_id = fresh("declared")
    file = tmp_path / "schedules.yaml"

    # When a file declares a deadline and a Slack webhook, and is applied twice
    declare(file, schedule_id, "45m", "https://hooks.example/a", "slack")
    first = applied(file, env)
    second = applied(file, env)

    # Then the first creates it with both, the second changes nothing
    assert first["created"] == [schedule_id]
    assert second["unchanged"] == [schedule_id]
    with client_for(suite) as client:
        made = client.get_schedule(schedule_id)
    assert made.deadline is not None and made.deadline.total_seconds() == 45 * 60
    assert [(n.url, str(n.format)) for n in made.notifiers] == [
        ("https://hooks.example/a", "slack")
    ]
    shown = json.loads(ok(["schedule", "show", schedule_id, "-o", "json"], env))
    assert shown["deadline_seconds"] == 2700
    assert shown["notifiers"] == [{"url": "https://hooks.example/a", "format": "slack"}]

    # When the deadline and the webhook change, only those fields are updated
    declare(file, schedule_id, "1h", "https://hooks.example/b", "json")
    third = applied(file, env)
    (update,) = third["updated"]
    assert update["schedule_id"] == schedule_id
    assert set(update["fields"]) == {"policy.deadline", "policy.notifiers"}

    # And a bad deadline or webhook is refused, naming the entry and the field, and
    # nothing changes
    for deadline, url, message in (
        ("0s", "https://hooks.example/b", "deadline: must be a positive duration"),
        ("1h", "ftp://hooks.example/b", "notify[0]: must be an http:// or https:// URL"),
    ):
        declare(file, schedule_id, deadline, url, "json")
        result = CliRunner().invoke(app, ["apply", "-f", str(file)], env=env)
        assert result.exit_code == 1, result.output
        assert f"schedules[0] (id '{schedule_id}')" in result.stderr
        assert message in " ".join(result.stderr.split())
    with client_for(suite) as client:
        kept = client.get_schedule(schedule_id)
    assert kept.deadline is not None and kept.deadline.total_seconds() == 3600
    assert [n.url for n in kept.notifiers] == ["https://hooks.example/b"]
