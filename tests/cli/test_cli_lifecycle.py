"""The schedule lifecycle from the CLI against a real suite: apply, update,
create --if-absent, delete --force, and ``-o json`` on every list/show/describe
command."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cronwave.cli.main import app
from cronwave_core.suite import Suite
from tests.cli.test_cli_suite import env_for, ok
from tests.harness.clients import client_for
from tests.helpers import fresh

pytestmark = pytest.mark.slow

RFC3339_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def refused(args: list[str], env: dict[str, str | None]) -> str:
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 1, (args, result.stdout, result.stderr, result.exception)
    return " ".join(result.stderr.split())


def as_json(args: list[str], env: dict[str, str | None]) -> Any:
    return json.loads(ok([*args, "-o", "json"], env))


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def state(suite: Suite) -> list[tuple[str, int]]:
    """Every live schedule with its revision: what an apply may have changed."""
    with client_for(suite) as client:
        return [(s.schedule_id, s.revision) for s in client.list_schedules()]


def test_apply_creates_updates_prunes_its_own_and_is_idempotent(make_suite, tmp_path: Path):
    suite = make_suite()
    env = env_for(suite)
    a, b, by_hand = fresh("apply-a"), fresh("apply-b"), fresh("hand")
    ok(["schedule", "create", by_hand, "--cron", "0 3 * * *", "--job-type", "cronwave.noop"], env)
    # (and a schedule of manager "billing-eu", whose name "billing" prefixes)
    neighbour = fresh("apply-eu")
    neighbours = write(
        tmp_path / "eu.yaml",
        f"manager: billing-eu\nschedules:\n"
        f"  - {{id: {neighbour}, job_type: cronwave.noop, cron: '0 4 * * *'}}\n",
    )
    ok(["apply", "-f", str(neighbours)], env)
    file = write(
        tmp_path / "schedules.yaml",
        f"""
manager: billing
schedules:
  - id: {a}
    job_type: cronwave.noop
    cron: "0 2 * * *"
    time_zone: Europe/Berlin
    overlap: skip
    payload: {{customers: 100}}
  - id: {b}
    job_type: cronwave.noop
    intervals: [{{every: 15m, phase: 5m}}]
    catchup_window: 30m
""",
    )

    # When the file is applied: both are created, the hand-made one is left alone
    first = ok(["apply", "-f", str(file)], env)
    assert "created" in first and a in first and b in first
    with client_for(suite) as client:
        made = client.get_schedule(a)
        assert (made.cron, made.time_zone, made.payload) == (
            ("0 2 * * *",),
            "Europe/Berlin",
            {"customers": 100},
        )
        assert made.managed_by == "apply:billing"
        assert client.get_schedule(b).catchup_window is not None
        assert client.get_schedule(by_hand).managed_by == ""

    # When it is applied again, it changes nothing and says so
    before = state(suite)
    again = ok(["apply", "-f", str(file)], env)
    assert "no changes" in again
    assert state(suite) == before
    assert as_json(["apply", "-f", str(file)], env)["unchanged"] == [a, b]

    # When the file changes a's cron and drops b, a dry run shows it and changes nothing
    write(
        file,
        f"""
manager: billing
schedules:
  - id: {a}
    job_type: cronwave.noop
    cron: "30 2 * * *"
    time_zone: Europe/Berlin
    payload: {{customers: 100}}
""",
    )
    dry = as_json(["apply", "-f", str(file), "--dry-run", "--prune"], env)
    assert dry["dry_run"] and not dry["changed"]
    assert dry["updated"] == [{"schedule_id": a, "fields": ["spec.cron"]}]
    assert dry["pruned"] == [b] and dry["created"] == []
    assert "would update" in ok(["apply", "-f", str(file), "--dry-run"], env)
    assert state(suite) == before

    # When it is applied with --prune: a is updated in place, b pruned, the
    # hand-made schedule and billing-eu's (not the file's) kept
    applied = as_json(["apply", "-f", str(file), "--prune"], env)
    assert applied["changed"] and applied["pruned"] == [b]
    with client_for(suite) as client:
        updated = client.get_schedule(a)
        assert updated.cron == ("30 2 * * *",) and updated.created_at == made.created_at
        live = {s.schedule_id for s in client.list_schedules()}
    assert a in live and by_hand in live and neighbour in live and b not in live


BAD_ENTRIES = [
    ("    crn: '0 2 * * *'\n", "crn", "unknown field"),
    ("    cron: '61 2 * * *'\n", "cron[0]", ""),
    ("    cron: '0 2 * * *'\n    time_zone: Mars/Olympus\n", "time_zone", "unknown time zone"),
    ("    cron: '0 2 * * *'\n    overlap: sometimes\n", "overlap", "'sometimes' is not one of"),
    ("    cron: '0 2 * * *'\n    payload: [1, 2]\n", "payload", "must be a mapping"),
    ("    cron: '0 2 * * *'\n    jitter: soon\n", "jitter", "'soon' is not a duration"),
    ("    cron: '0 2 * * *'\n    max_runs: many\n", "max_runs", "must be a whole number"),
]


def test_apply_refuses_bad_files_and_unknown_job_types_changing_nothing(make_suite, tmp_path: Path):
    suite = make_suite()
    env = env_for(suite)
    sid = fresh("one")
    cases = {
        "dup.yaml": (
            f"schedules:\n  - {{id: {sid}, job_type: cronwave.noop, cron: '0 1 * * *'}}\n"
            f"  - {{id: {sid}, job_type: cronwave.noop, cron: '0 2 * * *'}}\n",
            f"schedules[1] (id '{sid}'): id: duplicate: schedules[0] has the same id",
        ),
        "job.yaml": (
            f"schedules:\n  - {{id: {sid}, job_type: no.such.job, cron: '0 1 * * *'}}\n",
            f"schedules[0] (id '{sid}'): job_type: unknown job type 'no.such.job'; registered:",
        ),
        "top.yaml": (
            "schedule:\n  - {}\n",
            "schedule: unknown field; a file has manager, schedules",
        ),
        "yaml.yaml": ("schedules: [\n", "not valid YAML at line"),
        "noid.yaml": ("schedules:\n  - {job_type: cronwave.noop}\n", "schedules[0]: id: required"),
    }
    for name, (text, expected) in cases.items():
        file = write(tmp_path / name, text)
        message = refused(["apply", "-f", str(file)], env)
        assert str(file) in message and expected in message, (name, message)
    # An entry with a bad field: the file, the entry (index and id) and the field
    good, bad = fresh("good"), fresh("bad")
    for i, (entry, field, rule) in enumerate(BAD_ENTRIES):
        file = write(
            tmp_path / f"entry{i}.yaml",
            f"schedules:\n  - id: {good}\n    job_type: cronwave.noop\n    cron: '0 1 * * *'\n"
            f"  - id: {bad}\n    job_type: cronwave.noop\n{entry}",
        )
        message = refused(["apply", "-f", str(file)], env)
        assert f"{file}: schedules[1] (id '{bad}'): {field}: {rule}" in message, message
    missing = refused(["apply", "-f", str(tmp_path / "absent.yaml")], env)
    assert "absent.yaml: cannot be read" in missing
    assert state(suite) == []  # not even the good entries were created


def test_update_if_absent_force_and_json_output(make_suite):
    suite = make_suite()
    env = env_for(suite)
    sid = fresh("life")
    ok(["schedule", "create", sid, "--cron", "0 2 * * *", "--tz", "Europe/Berlin",
        "--job-type", "cronwave.noop", "--payload", '{"n": 1}'], env)  # fmt: skip

    # create --if-absent keeps the existing schedule and says so
    kept = ok(["schedule", "create", sid, "--cron", "* * * * *", "--job-type", "cronwave.noop",
               "--if-absent"], env)  # fmt: skip
    assert "already exists" in kept and "left unchanged" in kept
    assert as_json(["schedule", "show", sid], env)["cron"] == ["0 2 * * *"]
    assert "already exists" in refused(
        ["schedule", "create", sid, "--cron", "0 2 * * *", "--job-type", "cronwave.noop"], env
    )

    # schedule update changes only what it is given
    updated = ok(
        ["schedule", "update", sid, "--payload", '{"n": 2}', "--overlap", "allow_all"], env
    )
    assert "updated" in updated and "payload_json" in updated
    shown = as_json(["schedule", "show", sid], env)
    assert (shown["payload"], shown["overlap"], shown["cron"], shown["time_zone"]) == (
        {"n": 2},
        "allow_all",
        ["0 2 * * *"],
        "Europe/Berlin",
    )
    assert "unchanged" in ok(["schedule", "update", sid, "--payload", '{"n": 2}'], env)
    # bad input: a bad cron leaves it as it was; an unknown schedule is not found
    bad = refused(["schedule", "update", sid, "--cron", "61 * * * *"], env)
    assert bad.startswith("error: spec.cron[0]:")
    assert as_json(["schedule", "show", sid], env) == shown
    unknown = fresh("nope")
    assert f"schedule_id: no schedule '{unknown}'" in refused(
        ["schedule", "update", unknown, "--payload", "{}"], env
    )
    nothing = refused(["schedule", "update", sid], env)
    assert "give at least one option to change, e.g. --cron" in nothing, nothing

    # -o json on every list/show/describe command: one document each, stable names
    triggered = ok(["schedule", "trigger", sid], env)
    run_id = re.search(r"cronwave runs wait (\S+)", triggered).group(1)  # type: ignore[union-attr]
    waited = as_json(["runs", "wait", run_id, "--timeout", "60"], env)
    assert waited["state"] == "SUCCEEDED" and waited["run_id"] == run_id
    assert isinstance(waited["duration_seconds"], float)
    assert RFC3339_UTC.fullmatch(waited["fire_time"]) and RFC3339_UTC.fullmatch(
        waited["finished_at"]
    )

    listed = as_json(["schedule", "list"], env)
    assert [s["schedule_id"] for s in listed] == [sid]
    assert RFC3339_UTC.fullmatch(listed[0]["created_at"])
    assert listed[0]["catchup_window_seconds"] == 600.0 and listed[0]["jitter_seconds"] == 0.0
    described = as_json(["schedule", "describe", sid], env)
    assert described["schedule"] == shown | {
        "updated_at": described["schedule"]["updated_at"],
        "revision": described["schedule"]["revision"],
    }
    assert len(described["next_fire_times"]) == 5
    assert all(RFC3339_UTC.fullmatch(t) for t in described["next_fire_times"])
    assert [r["run_id"] for r in described["runs"]] == [run_id]
    assert [r["run_id"] for r in as_json(["runs", "list", "--schedule", sid], env)] == [run_id]
    run_doc = as_json(["runs", "show", run_id], env)
    assert run_doc["run"]["state"] == "SUCCEEDED"
    kinds = [e["kind"] for e in run_doc["events"]]
    assert kinds[0] == "recorded" and kinds[-1] == "succeeded"
    events = as_json(["runs", "events", run_id], env)
    assert [e["kind"] for e in events] == kinds and all(
        RFC3339_UTC.fullmatch(e["at"]) for e in events
    )
    assert as_json(["dlq", "list"], env) == []
    lease = as_json(["leader"], env)
    assert lease["held"] is True and lease["scope"] == "planner"
    assert "fencing_token" not in lease
    assert isinstance(lease["ttl_seconds"], float) and RFC3339_UTC.fullmatch(lease["expires_at"])
    assert (
        "'yaml' is not one of"
        in " ".join(
            CliRunner().invoke(app, ["schedule", "list", "-o", "yaml"], env=env).stderr.split()
        )
        or CliRunner().invoke(app, ["schedule", "list", "-o", "yaml"], env=env).exit_code == 2
    )

    # delete --force cancels the runs in flight
    ok(
        [
            "schedule",
            "update",
            sid,
            "--job-type",
            "cronwave.sleep",
            "--payload",
            '{"seconds": 120}',
        ],
        env,
    )
    busy = ok(["schedule", "trigger", sid], env)
    busy_id = re.search(r"cronwave runs wait (\S+)", busy).group(1)  # type: ignore[union-attr]
    message = refused(["schedule", "delete", sid], env)
    assert f"{busy_id} (" in message and "--force" in message
    forced = ok(["schedule", "delete", sid, "--force"], env)
    assert f"cancelled run {busy_id}" in forced and "deleted" in forced
    assert as_json(["runs", "show", busy_id], env)["run"]["state"] == "CANCELLED"
