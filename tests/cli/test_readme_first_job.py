"""README's "Write your first job", run as written: its Python block is the job
module, its shell block's commands run against a real suite started with that module.

The one line not run as written is ``cronwave up --jobs MODULE``: it takes the fixed
ports, so the test's own suite (on free ports) stands in for it, started with the
environment that line gives its suite (``PYTHONPATH`` and ``--jobs``)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cronwave.cli.main import app
from cronwave_server.cli._jobs_option import with_job_modules
from tests.harness.cli import user_env
from tests.harness.clients import client_for
from tests.helpers import REPO, eventually

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
SECTION = "## Write your first job"


def first_job_blocks() -> tuple[str, str, list[str]]:
    """The section's module name (``In `NAME.py`:``), Python block and shell lines."""
    text = (REPO / "README.md").read_text()
    section = text[text.index(SECTION) :].split("\n## ", 1)[0]
    module = re.search(r"In `(\w+)\.py`", section)
    python = re.search(r"```python\n(.*?)```", section, re.S)
    shell = re.search(r"```sh\n(.*?)```", section, re.S)
    assert module and python and shell, "the README's first-job section lost a block"
    lines = [line for line in shell.group(1).splitlines() if line.strip()]
    assert len(python.group(1).strip().splitlines()) <= 15  # "15 lines of code"
    return module.group(1), python.group(1), lines


def test_the_readme_first_job_runs_as_written(make_suite, tmp_path: Path) -> None:
    # Given the README's job module, written where its shell block runs
    module, code, lines = first_job_blocks()
    (tmp_path / f"{module}.py").write_text(code)

    # and the suite its first command starts: `PYTHONPATH=. cronwave up --jobs ...`
    up = shlex.split(lines[0], comments=True)
    assert up[:3] == ["PYTHONPATH=.", "cronwave", "up"], lines[0]
    jobs = up[up.index("--jobs") + 1]
    suite_env = with_job_modules({"PYTHONPATH": str(tmp_path)}, jobs)
    suite = make_suite(env=suite_env)
    env = {
        **user_env(),
        "CRONWAVE_STORE_ADDR": suite.store_addr,
        "CRONWAVE_DISPATCHER_ADDR": suite.dispatcher_addr,
        "CRONWAVE_PLANNER_ADDR": suite.planner_addr,
        "CRONWAVE_LEADER_ADDR": suite.leader_addr,
        "CRONWAVE_RPC_TIMEOUT": "10",
        "CRONWAVE_TLS_DIR": str(suite.tls_dir),
    }

    # When the other commands run, each as written, in that directory
    outputs = []
    for line in lines[1:]:
        argv = shlex.split(line, comments=True)
        assert argv[0] == "cronwave", line
        done = subprocess.run(
            [str(BIN / "cronwave"), *argv[1:]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, (line, done.stdout, done.stderr)
        outputs.append(done.stdout)

    # Then the schedule's runs succeed with the job's result, as the last one shows
    with client_for(suite) as client:
        schedule_id = client.list_schedules()[0].schedule_id

        def succeeded() -> object:
            runs = client.list_runs(schedule_id, states=["SUCCEEDED"], limit=1)
            return runs[0] if runs else None

        run = eventually(succeeded, timeout=60, interval=0.2, what="a SUCCEEDED run")
    assert run.result == {"greeting": "hello, cron"}

    def listed() -> bool:
        done = subprocess.run(
            [str(BIN / "cronwave"), *shlex.split(lines[-1], comments=True)[1:]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return done.returncode == 0 and "SUCCEEDED" in done.stdout

    eventually(listed, timeout=30, interval=0.5, what="`runs list` showing SUCCEEDED")


def test_up_refuses_a_jobs_value_that_names_no_module_before_starting(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["up", "--data-dir", str(tmp_path), "--jobs", "acme jobs"], env={}
    )
    assert result.exit_code == 1
    assert "--jobs: 'acme jobs' is not a module name" in result.stderr
    assert not (tmp_path / "logs").exists()  # nothing started
