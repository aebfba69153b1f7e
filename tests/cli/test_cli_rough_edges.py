"""The CLI's small promises, each run as a user types it against one real suite: a
payload from a file or stdin, a long payload summed up rather than echoed, a trigger
as JSON, refusals in the CLI's own words (flags, the cron field and its range), the
reason of a MISSED run, a paused schedule in `status`, and an audit trail whose
changes stay readable beside a run id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cronwave.cli.main import app
from cronwave_core.suite import Suite
from tests.cli.test_cli_suite import env_for, ok
from tests.harness.suites import SuiteFactory, shared_suite  # noqa: F401  (fixture)
from tests.helpers import eventually, fresh

pytestmark = pytest.mark.slow

#: A payload of some 100 KB: one key holding many values.
BIG = {"customers": list(range(20_000)), "period": "2030-01"}


@pytest.fixture
def suite(shared_suite: SuiteFactory) -> Suite:  # noqa: F811
    return shared_suite()


def refused(args: list[str], env: dict[str, str | None], stdin: str | None = None) -> str:
    """The one-line refusal of ``args`` (exit 1), whitespace folded."""
    result = CliRunner().invoke(app, args, env=env, input=stdin)
    assert result.exit_code == 1, (args, result.stdout, result.stderr, result.exception)
    return " ".join(result.stderr.split())


def ok_with(args: list[str], env: dict[str, str | None], stdin: str) -> str:
    result = CliRunner().invoke(app, args, env=env, input=stdin)
    assert result.exit_code == 0, (args, result.stdout, result.stderr, result.exception)
    return result.stdout


def create(sid: str, *more: str) -> list[str]:
    return ["schedule", "create", sid, "--job-type", "cronwave.noop", *more]


def test_a_payload_comes_from_a_file_or_stdin_and_a_long_one_is_summed_up(
    suite: Suite, tmp_path: Path
) -> None:
    env = env_for(suite)
    from_file, from_stdin = fresh("payload-file"), fresh("payload-stdin")
    path = tmp_path / "payload.json"
    path.write_text(json.dumps(BIG), encoding="utf-8")

    # When schedules are created with a 100 KB payload from a file and from stdin
    by_file = ok(create(from_file, "--cron", "0 2 * * *", "--payload", f"@{path}"), env)
    by_stdin = ok_with(
        create(from_stdin, "--cron", "0 2 * * *", "--payload", "-"), env, path.read_text()
    )

    # Then each holds the whole payload, and what create printed is a summary of it,
    # its size and keys, not the payload (it printed some 700 lines before)
    for sid, printed in ((from_file, by_file), (from_stdin, by_stdin)):
        shown = json.loads(ok(["schedule", "show", sid, "-o", "json"], env))
        assert shown["payload"] == BIG
        size = len(json.dumps(BIG).encode())
        assert f"{size:,} bytes, 2 key(s): customers, period" in printed, printed
        assert f"cronwave schedule show {sid} -o json" in printed
        assert "19999" not in printed and len(printed.splitlines()) < 40

    # And an update takes a payload the same way; a small one is shown as it is
    small = tmp_path / "small.json"
    small.write_text('{"customers": 7}', encoding="utf-8")
    updated = ok(["schedule", "update", from_file, "--payload", f"@{small}"], env)
    assert '{"customers": 7}' in updated

    # And a file that cannot be read is refused naming the option and the file
    missing = tmp_path / "missing.json"
    said = refused(create(fresh("payload"), "--cron", "0 2 * * *", "--payload", f"@{missing}"), env)
    assert f"--payload: cannot read the payload file '{missing}'" in said, said


def test_refusals_name_the_flag_and_the_cron_field(suite: Suite) -> None:
    env = env_for(suite)
    sid = fresh("refusal")
    ok(create(sid, "--cron", "0 2 * * *"), env)

    # When an id is created twice, a cron names hour 25, and an update names nothing
    twice = refused(create(sid, "--cron", "0 2 * * *"), env)
    hour = refused(create(fresh("refusal"), "--cron", "0 25 * * *"), env)
    nothing = refused(["schedule", "update", sid], env)

    # Then each refusal speaks the CLI's words: its flags, the cron field and its range
    assert "already exists" in twice and "--if-absent" in twice, twice
    assert "if_absent=True" not in twice
    assert "hour 25 is out of range 0-23" in hour and "not acceptable" not in hour, hour
    assert "--cron" in nothing and "--payload" in nothing, nothing
    assert "cron=" not in nothing and "update_schedule" not in nothing, nothing


def test_a_trigger_prints_its_run_as_json(suite: Suite) -> None:
    env = env_for(suite)
    sid = fresh("trigger")
    ok(create(sid, "--cron", "0 2 1 1 *", "--payload", '{"customers": 3}'), env)

    # When it is triggered with -o json
    run = json.loads(ok(["schedule", "trigger", sid, "-o", "json"], env))

    # Then the output is the run, which a script can wait on
    assert run["schedule_id"] == sid and run["trigger"] == "MANUAL"
    assert run["payload"] == {"customers": 3}
    assert json.loads(ok(["runs", "wait", run["run_id"], "-o", "json"], env))["state"] == (
        "SUCCEEDED"
    )


def test_a_trigger_gives_its_run_a_payload_of_its_own(suite: Suite, tmp_path: Path) -> None:
    env = env_for(suite)
    sid = fresh("trigger")
    ok(create(sid, "--cron", "0 2 1 1 *", "--payload", '{"customers": 3}'), env)
    path = tmp_path / "once.json"
    path.write_text('{"customers": 1, "note": "by hand"}', encoding="utf-8")

    # When it is triggered with a payload from a file, and with one on stdin
    from_file = json.loads(
        ok(["schedule", "trigger", sid, "--payload", f"@{path}", "-o", "json"], env)
    )
    from_stdin = json.loads(
        ok_with(["schedule", "trigger", sid, "--payload", "-", "-o", "json"], env, '{"n": 2}')
    )

    # Then each run has its own, the schedule keeps its payload, and the run succeeds
    assert from_file["payload"] == {"customers": 1, "note": "by hand"}
    assert from_stdin["payload"] == {"n": 2}
    shown = json.loads(ok(["runs", "show", from_file["run_id"], "-o", "json"], env))
    assert shown["run"]["payload"] == {"customers": 1, "note": "by hand"}
    assert json.loads(ok(["schedule", "show", sid, "-o", "json"], env))["payload"] == {
        "customers": 3
    }
    waited = json.loads(ok(["runs", "wait", from_file["run_id"], "-o", "json"], env))
    assert waited["state"] == "SUCCEEDED"

    # And a payload that is no JSON object is refused naming the option
    said = refused(["schedule", "trigger", sid, "--payload", "[1]"], env)
    assert "--payload: must be a JSON object" in said, said


def test_runs_list_shows_why_a_slot_was_missed(suite: Suite) -> None:
    # Given a schedule due every second whose runs take longer, with overlap skip
    env = env_for(suite)
    sid = fresh("missed")
    ok(["schedule", "create", sid, "--every", "1s", "--job-type", "cronwave.sleep",
        "--payload", '{"seconds": 4}', "--overlap", "skip"], env)  # fmt: skip
    try:
        # When slots come while a run is still going
        def missed() -> str:
            listed = ok(["runs", "list", "--schedule", sid, "--state", "MISSED"], env)
            return listed if "MISSED" in listed else ""

        listed = eventually(missed, timeout=60, interval=0.5, what="a slot recorded MISSED")
    finally:
        ok(["schedule", "delete", sid, "--force"], env)

    # Then `runs list` says why, in its own column
    assert "reason" in listed.splitlines()[2], listed
    assert "overlap_skip" in listed, listed


def test_status_shows_a_paused_schedule(suite: Suite) -> None:
    env = env_for(suite)
    paused, active = fresh("paused"), fresh("active")
    ok(create(paused, "--cron", "0 2 * * *", "--paused"), env)
    ok(create(active, "--cron", "0 2 * * *"), env)

    # When the status of both is asked for
    shown = ok(["status", "--schedule", paused, "--schedule", active], env)

    # Then the paused one says so, and the active one too
    rows = {line.split("│")[1].strip(): line for line in shown.splitlines() if "│" in line}
    assert "paused" in rows[paused] and "active" not in rows[paused], shown
    assert "active" in rows[active] and "paused" not in rows[active], shown


def test_audit_list_keeps_each_change_on_a_line_beside_a_run_id(suite: Suite) -> None:
    # Given a schedule triggered by hand: its audit trail names a run
    env = env_for(suite)
    sid = fresh("audit")
    ok(create(sid, "--cron", "0 2 1 1 *", "--overlap", "skip"), env)
    run = json.loads(ok(["schedule", "trigger", sid, "-o", "json"], env))

    # When the trail is listed as a table (160 columns, as when piped)
    listed = ok(["audit", "list", "--schedule", sid], env)

    # Then the run id and each change are whole, each change on one line
    lines = listed.splitlines()
    assert any(run["run_id"] in line for line in lines), listed
    assert any('trigger: "manual"' in line for line in lines), listed
    assert any('spec.cron: ["0 2 1 1 *"]' in line for line in lines), listed
    assert any('job_type: "cronwave.noop"' in line for line in lines), listed


def test_labels_from_the_command_line_and_an_apply_file(suite: Suite, tmp_path: Path) -> None:
    env = env_for(suite)
    sid, applied = fresh("labelled"), fresh("applied")

    # When a schedule is created with labels, then relabelled, then cleared
    ok(create(sid, "--cron", "0 2 * * *", "--label", "critical=true", "--label", "team=billing"),
       env)  # fmt: skip
    shown = ok(["schedule", "describe", sid], env)
    as_json = json.loads(ok(["schedule", "show", sid, "-o", "json"], env))
    ok(["schedule", "update", sid, "--label", "team=ops"], env)
    relabelled = json.loads(ok(["schedule", "show", sid, "-o", "json"], env))["labels"]
    ok(["schedule", "update", sid, "--no-labels"], env)
    cleared = json.loads(ok(["schedule", "show", sid, "-o", "json"], env))["labels"]

    # Then each shows as given, an update replacing them whole
    assert "critical=true, team=billing" in shown, shown
    assert as_json["labels"] == {"critical": "true", "team": "billing"}
    assert relabelled == {"team": "ops"} and cleared == {}

    # And a malformed one is refused naming it
    said = refused(["schedule", "update", sid, "--label", "Team=x"], env)
    assert "labels['Team']: a label key is" in said, said
    assert "--label: 'team' is not KEY=VALUE" in refused(
        ["schedule", "update", sid, "--label", "team"], env
    )

    # When an apply file declares labels, then changes them
    file = tmp_path / "labels.yaml"
    entry = f"manager: labels\nschedules:\n  - id: {applied}\n    job_type: cronwave.noop\n"
    file.write_text(entry + '    cron: "0 3 * * *"\n    labels: {critical: "true"}\n')
    ok(["apply", "-f", str(file)], env)
    again = json.loads(ok(["apply", "-f", str(file), "-o", "json"], env))
    file.write_text(entry + '    cron: "0 3 * * *"\n    labels: {team: ops}\n')
    changed = json.loads(ok(["apply", "-f", str(file), "-o", "json"], env))

    # Then the schedule carries them, an unchanged file changes nothing, and a change
    # of labels is an update of that field alone
    assert again["unchanged"] == [applied]
    assert changed["updated"] == [{"schedule_id": applied, "fields": ["labels"]}]
    shown_applied = json.loads(ok(["schedule", "show", applied, "-o", "json"], env))
    assert shown_applied["labels"] == {"team": "ops"}
