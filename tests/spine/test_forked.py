"""A service forked from the fork server (cronwave_core.forked) gets what a new
interpreter started by subprocess.Popen([python, -P, -m, module], env=..., stdout=log,
stdin=DEVNULL, start_new_session=True) gets, and is tracked the same way."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cronwave_core.forked import fork_module, fork_server_on
from tests.harness.processes import ProcessTable

REPO = Path(__file__).resolve().parents[2]
MODULE = "tests.spine.forked_probe"


def _started(tmp_path: Path, forked: bool, **env: str) -> tuple[object, Path]:
    log = tmp_path / ("forked.log" if forked else "popen.log")
    full = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), **env}
    argv = [sys.executable, "-P", "-m", MODULE]
    if forked:
        return fork_module(MODULE, argv, full, log), log
    with log.open("ab") as out:
        popen = subprocess.Popen(
            argv, env=full, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True, cwd=tmp_path,
        )  # fmt: skip
    return popen, log


def test_the_tests_fork_their_services() -> None:
    assert fork_server_on()  # tests/conftest.py turns it on


@pytest.mark.parametrize("forked", [True, False], ids=["forked", "popen"])
def test_a_forked_module_gets_what_a_new_interpreter_gets(
    tmp_path: Path, forked: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a working directory holding a module that would shadow one of the probe's
    (tmp_path / "shadow_me.py").write_text("raise SystemExit('shadowed')\n")
    monkeypatch.chdir(tmp_path)
    table = ProcessTable("the probe")
    try:
        process, log = _started(tmp_path, forked, PROBE_VALUE="given", PROBE_EXIT="3")
        table.track(process)  # type: ignore[arg-type]

        # Then it exits with its own code, and its log says what it was given
        assert process.wait(timeout=60) == 3  # type: ignore[attr-defined]
        seen = json.loads(log.read_text().strip().splitlines()[-1])
        assert seen == {
            "env": "given",
            "cwd": str(tmp_path),
            "sid": True,
            "stdin": "",
            "argv0": str(REPO / "tests" / "spine" / "forked_probe.py"),
            "name": "__main__",
            "shadowed": False,
        }
    finally:
        table.close()


def test_a_forked_process_is_signalled_and_reaped_by_pid(tmp_path: Path) -> None:
    table = ProcessTable("the probe")
    try:
        process, _ = _started(tmp_path, True, PROBE_SLEEP="60")
        table.track(process)  # type: ignore[arg-type]
        assert process.poll() is None  # type: ignore[attr-defined]
        with pytest.raises(subprocess.TimeoutExpired):
            process.wait(timeout=0.2)  # type: ignore[attr-defined]
        process.send_signal(signal.SIGKILL)  # type: ignore[attr-defined]
        assert process.wait(timeout=30) == -signal.SIGKILL  # type: ignore[attr-defined]
        assert process.poll() == -signal.SIGKILL  # type: ignore[attr-defined]
        process.kill()  # type: ignore[attr-defined]  # gone: nothing to do
    finally:
        table.close()
