"""`make demo` ends saying how to put the `cronwave` it installed on the PATH: a
newcomer's next command (`cronwave status`) is not found otherwise. The Makefile's
recipe runs as written, with a stand-in for the demo (the real one takes a minute and
has its own tests)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def make_demo(tmp_path: Path, demo_exit: int) -> subprocess.CompletedProcess[str]:
    """`make demo` with BIN naming a stand-in `cronwave` that exits ``demo_exit``, and
    an installation stamp newer than what it depends on (so nothing is installed)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "cronwave"
    stand_in.write_text(f'#!/bin/sh\necho "demo: $*"\nexit {demo_exit}\n')
    stand_in.chmod(0o755)
    stamp = tmp_path / "installed"
    stamp.touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    return subprocess.run(
        ["make", "-s", "-C", str(REPO), "demo", f"BIN={bin_dir}", f"STAMP={stamp}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


@pytest.mark.parametrize("demo_exit", [0, 1])
def test_make_demo_ends_with_how_to_put_cronwave_on_the_path(
    tmp_path: Path, demo_exit: int
) -> None:
    # When `make demo` runs the demo, which succeeds or fails
    done = make_demo(tmp_path, demo_exit)

    # Then the demo ran, its exit status is make's, and the last lines say how to get
    # `cronwave` on the PATH
    assert done.stdout.startswith("demo: demo\n"), (done.stdout, done.stderr)
    assert (done.returncode != 0) == (demo_exit != 0), (done.stdout, done.stderr)
    tail = done.stdout.strip().splitlines()[-2:]
    assert "`. .venv/bin/activate`" in tail[0] and "PATH" in tail[0], tail
    assert "`cronwave status`" in tail[1], tail
